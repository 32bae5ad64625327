"""What a memory is: note types, scopes, statuses, the `Note` record and its front matter schema.

Pure data and validation; no I/O. Everything that reaches the store from outside (HTTP, CLI,
hand-edited files) passes through the `normalize_*` helpers here, which raise
`InvalidInputError` with a message that says what is accepted.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import field
from datetime import UTC, date, datetime
from typing import Any, Final, Literal, get_args

from errors import InvalidInputError
from memory._record import record

NoteType = Literal[
    "identity",
    "preference",
    "decision",
    "architecture",
    "project",
    "research",
    "code",
    "bug",
    "conversation",
    "general",
]
NoteStatus = Literal["active", "deprecated", "superseded"]
SortKey = Literal["updated", "created", "importance", "access"]

NOTE_TYPES: Final[tuple[NoteType, ...]] = get_args(NoteType)
NOTE_STATUSES: Final[tuple[NoteStatus, ...]] = get_args(NoteStatus)
SORT_KEYS: Final[tuple[SortKey, ...]] = get_args(SortKey)

DAY = 86_400.0


@record
class TypeProfile:
    """How much a type counts in ranking and how fast its notes age."""

    weight: float
    half_life_days: float


TYPE_PROFILES: Final[dict[NoteType, TypeProfile]] = {
    "identity": TypeProfile(1.0, 3650.0),
    "preference": TypeProfile(0.9, 365.0),
    "decision": TypeProfile(0.9, 180.0),
    "architecture": TypeProfile(0.8, 180.0),
    "project": TypeProfile(0.8, 90.0),
    "research": TypeProfile(0.8, 365.0),
    "code": TypeProfile(0.6, 90.0),
    "bug": TypeProfile(0.6, 90.0),
    "conversation": TypeProfile(0.3, 30.0),
    "general": TypeProfile(0.5, 60.0),
}

# Entity names used by knowledge-graph style memory tools, mapped onto our types.
ENTITY_TYPE_MAP: Final[dict[str, NoteType]] = {
    "decision": "decision",
    "architecture": "architecture",
    "file": "code",
    "preference": "preference",
    "concept": "research",
    "habit": "preference",
}

DEFAULT_TYPE: Final[NoteType] = "general"
DEFAULT_SCOPE: Final = "user"
DEFAULT_IMPORTANCE: Final = 0.5

# Keys of the front matter, in the order they are written.
FRONT_MATTER_KEYS: Final[tuple[str, ...]] = (
    "id",
    "title",
    "type",
    "scope",
    "tags",
    "created",
    "updated",
    "summary",
    "importance",
    "status",
    "superseded_by",
    "expires_at",
    "source",
    "access_count",
)

_SCOPE_RE = re.compile(
    r"^(?:user|project:[\w.\-]{1,100}|chat:[^\s/\\]{1,200}|(?:person|team):[\w.\-]{1,100})$"
)
_ID_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,100}$")
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def normalize_type(value: object) -> NoteType:
    """A note type from its name or an entity name (`Decision`, `File`, `Habit`, ...)."""
    if value is None or value == "":
        return DEFAULT_TYPE
    if not isinstance(value, str):
        raise InvalidInputError(f"type must be a string, got {type(value).__name__}")
    key = value.strip().lower()
    if key in TYPE_PROFILES:
        return key
    if key in ENTITY_TYPE_MAP:
        return ENTITY_TYPE_MAP[key]
    allowed = ", ".join(NOTE_TYPES)
    raise InvalidInputError(
        f"unknown type {value!r}: use one of {allowed} "
        "(or an entity name: Decision, Architecture, File, Preference, Concept, Habit)"
    )


def normalize_scope(value: object) -> str:
    """`user`, `project:<key>`, `chat:<id>`, `person:<id>` or `team:<id>` (docs/memory-format.md,
    "Whose a note is")."""
    if value is None or value == "":
        return DEFAULT_SCOPE
    if not isinstance(value, str) or not _SCOPE_RE.match(value.strip()):
        raise InvalidInputError(
            f"invalid scope {value!r}: use 'user', 'project:<key>' (letters, digits, . _ -), "
            "'chat:<id>', 'person:<id>' or 'team:<id>' (ids: letters, digits, . _ -)"
        )
    return value.strip()


PRIVATE_SCOPE_PREFIXES: Final = ("person:", "team:")
"""Scopes that are not the machine owner's: a chat member's own notes (`person:<open_id>`) and a
group's team notes (`team:<chat_id>`). Only the readers named in them read them."""


def is_private_scope(scope: str) -> bool:
    """A member's or a team's scope, not the machine owner's (`PRIVATE_SCOPE_PREFIXES`)."""
    return scope.startswith(PRIVATE_SCOPE_PREFIXES)


def person_scope(open_id: str) -> str:
    """The scope of one chat member's own notes."""
    return normalize_scope(f"person:{open_id}")


def team_scope(chat_id: str) -> str:
    """The scope of one group's team notes."""
    return normalize_scope(f"team:{chat_id}")


@record
class Reader:
    """Whose notes one turn reads and where its saves go (docs/memory-format.md, "Whose a note
    is"). The machine owner (`owner`) reads their own scopes, every scope but members' and
    teams' (`user`, `project:<key>`, `chat:<id>`: what Claude Code and Codex share); a chat
    member reads only `scopes` (their `person:<open_id>`, and in a group its `team:<chat_id>`);
    the owner reads `scopes` besides their own (a group's team). `saves_to`: where a note saved
    without a scope goes (None: nowhere, a save is refused)."""

    owner: bool
    scopes: tuple[str, ...] = ()
    saves_to: str | None = DEFAULT_SCOPE

    def reads(self, scope: str) -> bool:
        """Whether a note of `scope` is this reader's to read."""
        return (self.owner and not is_private_scope(scope)) or scope in self.scopes

    def writes(self, scope: str) -> bool:
        """Whether this reader's turn may save into or change notes of `scope`: the owner
        their own scopes, a member their own `person:` scope. A team's notes are saved on
        purpose only (Feishu's `/team-remember`), never by a turn."""
        return (self.owner and not is_private_scope(scope)) or scope == self.saves_to


OWNER: Final = Reader(owner=True)
"""The machine owner anywhere outside a group: their own scopes, saves to `user`."""


def normalize_status(value: object) -> NoteStatus:
    if value is None or value == "":
        return "active"
    status = value.strip().lower() if isinstance(value, str) else None
    if status in NOTE_STATUSES:
        return status
    raise InvalidInputError(f"invalid status {value!r}: use one of {', '.join(NOTE_STATUSES)}")


def normalize_sort(value: object) -> SortKey:
    if value is None or value == "":
        return "updated"
    if isinstance(value, str) and value in SORT_KEYS:
        return value
    raise InvalidInputError(f"invalid sort {value!r}: use one of {', '.join(SORT_KEYS)}")


def normalize_importance(value: object) -> float:
    if value is None or value == "":
        return DEFAULT_IMPORTANCE
    if isinstance(value, bool):
        raise InvalidInputError("importance must be a number between 0 and 1")
    try:
        number = float(value)  # type: ignore[arg-type]  # any object: what float() refuses is caught
    except (TypeError, ValueError):
        raise InvalidInputError(
            f"importance must be a number between 0 and 1, got {value!r}"
        ) from None
    if not 0.0 <= number <= 1.0:
        raise InvalidInputError(f"importance must be between 0 and 1, got {number}")
    return number


def normalize_tags(value: object) -> tuple[str, ...]:
    """Tags from a list or a comma-separated string; trimmed, `#` dropped, duplicates removed."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        items: list[object] = list(value.split(","))
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise InvalidInputError("tags must be a list of strings or a comma-separated string")
    seen: dict[str, str] = {}
    for item in items:
        if not isinstance(item, str | int | float) or isinstance(item, bool):
            raise InvalidInputError(f"tag {item!r} is not a string")
        tag = str(item).strip().lstrip("#").strip()
        if not tag:
            continue
        if len(tag) > 100 or "\n" in tag:
            raise InvalidInputError(f"tag {tag[:40]!r}... is too long or spans lines")
        seen.setdefault(tag.casefold(), tag)
    return tuple(seen.values())


def normalize_id(value: object) -> str:
    if not isinstance(value, str) or not _ID_RE.match(value.strip()):
        raise InvalidInputError(
            f"invalid note id {value!r}: ids use letters, digits, '_', '.', '-' (max 100)"
        )
    return value.strip()


def parse_datetime(value: object, field_name: str = "date") -> datetime | None:
    """ISO 8601 text, a `date` or a `datetime` -> an aware UTC datetime (naive means UTC)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        text = value.strip()
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidInputError(
                f"{field_name} {value!r} is not an ISO 8601 date or datetime "
                "(e.g. 2025-06-30 or 2025-06-30T12:00:00+08:00)"
            ) from None
    else:
        raise InvalidInputError(f"{field_name} must be an ISO 8601 string, got {value!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def format_datetime(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def utcnow() -> datetime:
    """Now, in UTC, to the second (what the front matter can hold)."""
    return datetime.now(UTC).replace(microsecond=0)


def _b32(number: int, width: int) -> str:
    chars = []
    for _ in range(width):
        chars.append(_CROCKFORD[number & 31])
        number >>= 5
    return "".join(reversed(chars))


_id_lock = threading.Lock()
_last_id: list[int] = [0, 0]  # (millis, random part) of the newest id made by this process


def new_note_id(now: float | None = None) -> str:
    """`mem_` + 10 base32 chars of milliseconds + 6 random chars: short, sortable, unique.

    Within one process ids only grow: a second id in the same millisecond increments the
    random part of the previous one (like monotonic ULIDs)."""
    millis = int((time.time() if now is None else now) * 1000)
    random_part = int.from_bytes(os.urandom(4), "big") >> 2  # 30 bits = 6 chars
    with _id_lock:
        last_millis, last_random = _last_id
        if millis <= last_millis and now is None and last_random < (1 << 30) - 1:
            millis, random_part = last_millis, last_random + 1
        if now is None:
            _last_id[:] = [millis, random_part]
    return f"mem_{_b32(millis, 10)}{_b32(random_part, 6)}"


def path_note_id(relpath: str) -> str:
    """The id of a hand-written note without one: derived from its path, so stable per path."""
    import base64
    import hashlib  # here: its OpenSSL load costs every hook process ~2 ms

    digest = hashlib.blake2b(relpath.encode("utf-8"), digest_size=10).digest()
    return "mem_f" + base64.b32encode(digest).decode("ascii").lower().rstrip("=")[:15]


@record(slots=False)
class Note:
    """One memory: a markdown file's front matter and body."""

    id: str
    title: str
    type: NoteType
    scope: str
    tags: tuple[str, ...]
    created: datetime
    updated: datetime
    summary: str
    importance: float
    status: NoteStatus
    superseded_by: str | None
    expires_at: datetime | None
    source: str | None
    access_count: int
    body: str
    path: str
    """Relative POSIX path inside the memory root."""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    """Front matter keys we do not know; kept as they are when the note is rewritten."""

    def is_expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def front_matter(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "title": self.title,
            "type": self.type,
            "scope": self.scope,
            "tags": list(self.tags),
            "created": format_datetime(self.created),
            "updated": format_datetime(self.updated),
            "summary": self.summary,
            "importance": self.importance,
            "status": self.status,
            "superseded_by": self.superseded_by,
            "expires_at": format_datetime(self.expires_at) if self.expires_at else None,
            "source": self.source,
            "access_count": self.access_count,
        }
        for key, value in self.extra.items():
            if key not in data:
                data[key] = value
        return data

    def detail_text(self, body_limit: int = 8000) -> str:
        """The note as a tool result: header line, fields, then the body (cut at `body_limit`)."""
        body = self.body if len(self.body) <= body_limit else self.body[:body_limit] + "…"
        return (
            f"[{self.id}] {self.title}\ntype: {self.type} · scope: {self.scope} · "
            f"status: {self.status} · tags: {', '.join(self.tags)} · updated: "
            f"{self.updated:%Y-%m-%d}\n\n{body}"
        )

    def to_dict(self, *, body: bool = True) -> dict[str, Any]:
        """JSON-ready form (used by the API, export and `_index.json`)."""
        data = self.front_matter()
        data["path"] = self.path
        if body:
            data["body"] = self.body
        return data


@record(slots=False)
class NoteDraft:
    """What a caller hands to `MemoryStore.save`; the store fills in the rest."""

    content: str
    title: str | None = None
    summary: str | None = None
    type: str = DEFAULT_TYPE
    """A note type or an entity name (`Decision`, `File`, ...)."""
    scope: str = DEFAULT_SCOPE
    tags: tuple[str, ...] | list[str] = ()
    importance: float = DEFAULT_IMPORTANCE
    expires_at: datetime | str | None = None
    source: str | None = None
    supersedes: str | None = None
    """Id of a note this one replaces; the old note is marked `superseded`."""
    # The fields below are for import; normal callers leave them unset.
    id: str | None = None
    created: datetime | str | None = None
    updated: datetime | str | None = None
    status: str = "active"
    superseded_by: str | None = None
    access_count: int = 0
    path: str | None = None
    """Preferred relative path inside the memory root (used when free)."""
    extra: dict[str, Any] = field(default_factory=dict)


@record
class SaveResult:
    """What a save did: the note's id and path, whether it was a duplicate, any conflict."""

    id: str
    deduplicated: bool
    path: str
    """Relative POSIX path of the note inside the memory root."""
    conflicts_with: str | None = None
    """A new note that makes a different claim (a negation, a number) about what an older
    active note of its scope and type says: that note's id. Both stay active until the user
    chooses (`memory.history.conflicts`)."""
    conflict_reason: str = ""
    pending: str | None = None
    """The pending supersession recorded for the conflict (None when the store keeps no
    state database: a process without history)."""
    replaced: str | None = None
    """An older active note the new one updates and said so ("现在", "now", "改成"): it is
    marked superseded by the new note at once (kept, restorable; `conflict_reason` says what
    changed)."""

    def notice(self) -> str:
        """What the caller (a person, a model) is told about the save."""
        if self.deduplicated:
            return f"Already remembered as [{self.id}] (refreshed it)."
        text = f"Saved as [{self.id}] ({self.path})."
        if self.replaced:
            text += (
                f" It replaces [{self.replaced}] ({self.conflict_reason}); the older note is"
                " kept, marked replaced."
            )
        if self.conflicts_with:
            text += f" It conflicts with [{self.conflicts_with}]: {self.conflict_reason}."
            if self.pending:
                text += (
                    f" Pending your choice ({self.pending}): keep new, keep old or keep both;"
                    " both stay active until then."
                )
        return text


@record
class ScoreParts:
    """The inputs of a search score, each in 0..1 (`RankingWeights` weighs them)."""

    relevance: float
    type_weight: float
    recency: float
    importance: float
    usage: float = 0.0
    """How often the note was found, injected or read (`memory.search.keyword.usage`)."""


@record
class SearchHit:
    """One note of a search's results, with its score and the parts of it."""

    id: str
    title: str
    type: NoteType
    scope: str
    summary: str
    path: str
    tags: tuple[str, ...]
    status: NoteStatus
    updated: datetime
    score: float
    parts: ScoreParts
    snippet: str = ""
    relevance: float = 0.0
    """Calibrated relevance in 0..1 from the hit's own evidence (`memory.search.relevance`):
    unlike `parts.relevance`, which ranks hits against each other, it means the same in any
    result list."""
    superseded_by: str | None = None
    """The note that replaced this one (status `superseded`)."""
    created: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "type": self.type,
            "scope": self.scope,
            "summary": self.summary,
            "path": self.path,
            "tags": list(self.tags),
            "status": self.status,
            "superseded_by": self.superseded_by,
            "created": format_datetime(self.created) if self.created else None,
            "updated": format_datetime(self.updated),
            "score": round(self.score, 6),
            "relevance": round(self.relevance, 6),
            "score_parts": {
                "relevance": round(self.parts.relevance, 6),
                "type_weight": round(self.parts.type_weight, 6),
                "recency": round(self.parts.recency, 6),
                "importance": round(self.parts.importance, 6),
                "usage": round(self.parts.usage, 6),
            },
            "snippet": self.snippet,
        }


@record
class SyncIssue:
    """A note file a sync could not read, and why."""

    path: str
    message: str


@record
class SyncReport:
    """What a sync or rebuild found."""

    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    issues: tuple[SyncIssue, ...] = ()
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "updated": self.updated,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "issues": [{"path": i.path, "message": i.message} for i in self.issues],
            "seconds": round(self.seconds, 3),
        }
