"""A note's history, the vocabulary and the pure parts (docs/history.md).

Every change to a note (saved, edited through a front door or by hand, superseded, deprecated,
deleted, restored) becomes a *version*: a snapshot of the note after the change (the last
content before a delete), what kind of change it was and who made it (`ChangeSource`: which
front door, which session). The versions live in the state database, not in the derived
SQLite index nor in a git repository over the notes folder: the state database is there on
both backends (SQLite `state.db`, or the shared PostgreSQL), while the PostgreSQL backend has
no notes folder a git repository could cover. `memory.history.store.HistoryStore` stores them;
`memory.core.StoreCore` records them at its one write path, through `HistoryRecorder`.

Who made a change travels in a context variable rather than through every call: each front
door says who it is once (`acting_as(...)` around its store calls; `asyncio.to_thread` carries
the variable into the worker thread), and the HTTP, CLI and MCP contracts stay as they are.
When no door said, the note's own `source` field names where it came from (`infer_source`).
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime
from typing import Any, Final, Literal, Protocol, get_args

from memory._digest import sha256
from memory._record import record
from memory.model import Note
from memory.notes.capture import sanitize

ChangeKind = Literal["create", "edit", "supersede", "deprecate", "delete", "restore", "baseline"]
"""`baseline`: the note as history first saw it (it was written before history was kept)."""
CHANGE_KINDS: Final = frozenset(get_args(ChangeKind))

KEEP_VERSIONS: Final = 50
"""Versions kept per note; older ones are dropped as new ones come (docs/history.md)."""


@record
class ChangeSource:
    """Who changed a note: a front door (`DOORS`) and, when known, its session (a Claude Code
    or Codex session id, a chat conversation id)."""

    door: str
    session: str | None = None

    def label(self) -> str:
        return f"{self.door} · {self.session}" if self.session else self.door


DOORS: Final = (
    "web",  # the web page and the HTTP API (/api/memories)
    "chat",  # the chat agent's memory tools (web chat)
    "feishu",  # the chat agent's memory tools in a Feishu conversation
    "claude-code",  # hooks and summaries of a Claude Code session
    "codex",  # hooks and summaries of a Codex session
    "mcp",  # the MCP server's tools (Claude Code, Codex or any MCP client)
    "cli",  # claude-memory memory ...
    "import",  # claude-memory memory import / import-native
    "hand edit",  # a note file changed on disk by a person or another program
    "feishu-user",  # the person's own Feishu command or card choice (/remember, Keep)
    "unknown",
)

PERSON_DOORS: Final = frozenset({"web", "cli", "import", "hand edit", "feishu-user"})
"""Doors where the person acts (the page, the CLI, their files, their own Feishu taps); the
others are a model's tools and the hooks, whose text a prompt can steer (docs/permissions.md,
"Memory")."""

HAND_EDIT: Final = ChangeSource("hand edit")

_SOURCE: contextvars.ContextVar[ChangeSource | None] = contextvars.ContextVar(
    "memory_change_source", default=None
)


@contextmanager
def acting_as(source: ChangeSource) -> Iterator[ChangeSource]:
    """Store calls inside are recorded as made by `source` (the calling front door)."""
    token = _SOURCE.set(source)
    try:
        yield source
    finally:
        _SOURCE.reset(token)


def current_source() -> ChangeSource | None:
    return _SOURCE.get()


def by_person(source: ChangeSource) -> bool:
    """Whether `source` is the person acting, not a model or a hook."""
    return source.door in PERSON_DOORS


def conversation_source(conversation_id: str) -> ChangeSource:
    """The chat agent in one conversation: Feishu's ids start with `feishu:`."""
    door = "feishu" if conversation_id.startswith("feishu:") else "chat"
    return ChangeSource(door, conversation_id)


_CLIENT_DOORS: Final = ("claude-code", "codex")


def infer_source(note_source: str | None) -> ChangeSource:
    """Who wrote a note, from its `source` front matter field, when no front door said:
    `claude-code:<session>`, `codex:<session>`, `episode:<key>` (a session summary),
    `conversation:<id>`, `mcp:<project>`, `feishu`; anything else is `unknown`."""
    text = (note_source or "").strip()
    head, _, rest = text.partition(":")
    head = head.strip().lower()
    rest = rest.strip()
    if head in _CLIENT_DOORS:
        return ChangeSource(head, rest or None)
    if head == "episode" and rest:
        inner = infer_source(rest)
        return inner if inner.door != "unknown" else ChangeSource("unknown", rest)
    if head == "conversation" and rest:
        return conversation_source(rest)
    if head in ("mcp", "feishu", "cli", "import"):
        return ChangeSource(head)
    return ChangeSource("unknown")


def kind_of_update(changes: dict[str, Any]) -> ChangeKind:
    """An update that retires a note is a supersede or a deprecate; any other an edit."""
    status = changes.get("status")
    if status == "superseded" or changes.get("superseded_by"):
        return "supersede"
    if status == "deprecated":
        return "deprecate"
    return "edit"


@record
class Snapshot:
    """What a version keeps of a note: the fields a person reads and edits (not `updated`
    nor the access count, which move on every use). Text is redacted as notes are."""

    title: str
    summary: str
    body: str
    tags: tuple[str, ...]
    type: str
    scope: str
    importance: float
    status: str
    superseded_by: str | None
    expires_at: str | None
    source: str | None
    path: str
    created: str | None = None
    """When the note was first saved (ISO 8601), so a deleted note comes back with its date;
    None in versions recorded before 26 Nov. Not part of the digest, like the path."""

    def digest(self) -> str:
        """Equal for two snapshots a reader could not tell apart (the path and the creation
        date left out: a moved file is the same note, and older versions have no date)."""
        fields = asdict(self)
        fields.pop("path")
        fields.pop("created")
        data = json.dumps(fields, ensure_ascii=False, sort_keys=True)
        return str(sha256(data.encode("utf-8")).hexdigest())

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Snapshot:
        data = json.loads(text)
        return cls(
            title=str(data.get("title") or ""),
            summary=str(data.get("summary") or ""),
            body=str(data.get("body") or ""),
            tags=tuple(str(t) for t in data.get("tags") or ()),
            type=str(data.get("type") or "general"),
            scope=str(data.get("scope") or "user"),
            importance=float(data.get("importance") or 0.0),
            status=str(data.get("status") or "active"),
            superseded_by=data.get("superseded_by"),
            expires_at=data.get("expires_at"),
            source=data.get("source"),
            path=str(data.get("path") or ""),
            created=data.get("created"),
        )

    def text(self) -> str:
        """The version as one diff-friendly text: the fields a person edits, then the body."""
        lines = [
            f"title: {self.title}",
            f"summary: {self.summary}",
            f"tags: {', '.join(self.tags)}",
            f"type: {self.type} · scope: {self.scope} · importance: {self.importance:g}",
            f"status: {self.status}"
            + (f" (superseded by {self.superseded_by})" if self.superseded_by else ""),
        ]
        if self.expires_at:
            lines.append(f"expires: {self.expires_at}")
        return "\n".join(lines) + "\n\n" + self.body


def snapshot_of(note: Note) -> Snapshot:
    """A note's snapshot; its text goes through the notes' redaction (a hand-edited file may
    hold a secret the store never sanitized)."""
    return Snapshot(
        title=sanitize(note.title),
        summary=sanitize(note.summary),
        # a file ends with a newline its parsed body keeps, a note being written may not
        body=sanitize(note.body).rstrip(),
        tags=tuple(sanitize(t) for t in note.tags),
        type=note.type,
        scope=note.scope,
        importance=float(note.importance),
        status=note.status,
        superseded_by=note.superseded_by,
        expires_at=note.expires_at.isoformat() if note.expires_at else None,
        source=sanitize(note.source) if note.source else None,
        path=note.path,
        created=note.created.isoformat(),
    )


@record
class Version:
    """One recorded change of a note."""

    note_id: str
    number: int
    kind: ChangeKind
    source: ChangeSource
    at: datetime
    snapshot: Snapshot
    restored_from: int | None = None
    """For a `restore`: the version whose content came back."""

    def to_dict(self, *, full: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "note_id": self.note_id,
            "version": self.number,
            "kind": self.kind,
            "source": {"door": self.source.door, "session": self.source.session},
            "source_label": self.source.label(),
            "at": self.at.isoformat(),
            "restored_from": self.restored_from,
            "title": self.snapshot.title,
            "summary": self.snapshot.summary,
            "status": self.snapshot.status,
            "path": self.snapshot.path,
        }
        if full:
            data["tags"] = list(self.snapshot.tags)
            data["body"] = self.snapshot.body
            data["text"] = self.snapshot.text()
        return data


def versions_to_drop(newest: int, keep: int = KEEP_VERSIONS) -> int:
    """Versions numbered up to this one are dropped once `newest` is written (0: none)."""
    return max(newest - keep, 0)


class HistoryRecorder(Protocol):
    """Where `memory.core.StoreCore` records versions (`memory.history.store.HistoryStore`)."""

    def append(
        self,
        note_id: str,
        kind: ChangeKind,
        source: ChangeSource,
        snapshot: Snapshot,
        *,
        restored_from: int | None = None,
        if_changed: bool = False,
    ) -> int | None:
        """Record a version; its number, or None when `if_changed` and the newest version
        already holds this content."""
        ...

    def latest_digest(self, note_id: str) -> str | None:
        """The newest version's `Snapshot.digest()`, None when the note has no history."""
        ...

    def version(self, note_id: str, number: int) -> Version:
        """One version (NotFoundError when unknown)."""
        ...

    def record_gone(self, note_id: str, source: ChangeSource) -> int | None:
        """A note that vanished without its content at hand (a file deleted by hand): its
        newest version again, as a `delete`; None when it has no history."""
        ...

    def propose_supersession(self, new_id: str, old_id: str, reason: str) -> str:
        """A new note contradicts an older one: record the pending supersession (the user
        chooses, `memory.history.conflicts`); its id."""
        ...

    def pending_successors(self, note_ids: Sequence[str]) -> dict[str, str]:
        """Among `note_ids`, each note a newer one of them may update (a pending supersession
        between the two): old id -> new id. A search lists the newer first."""
        ...
