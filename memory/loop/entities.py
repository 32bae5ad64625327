"""Entity capture: decisions, preferences, habits and architecture choices stated by the user.

`detect_entities` is pure and bilingual: pattern hits and keyword hits give a confidence; at
`AUTO_SAVE_CONFIDENCE` or above the caller saves a note at once, below it the candidate waits in
the pending list (`PendingStore`) for the user to confirm or reject.
Only user messages are scanned: the assistant's words are never the user's decisions.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from errors import ConflictError, InvalidInputError, NotFoundError
from memory import _text
from memory._record import record
from memory.backend import StateBackend
from memory.model import NoteDraft
from memory.notes.capture import clean_message, sanitize, sanitize_data, without_credentials

if TYPE_CHECKING:
    from memory.backend import MemoryBackend

AUTO_SAVE_CONFIDENCE = 0.85
MIN_CONFIDENCE = 0.5
MAX_SCAN_CHARS = 4000

EntityType = Literal["decision", "preference", "architecture"]
PendingStatus = Literal["pending", "confirmed", "rejected"]
ChangeAction = Literal["save", "update", "deprecate", "supersede"]
"""What a pending entry does when confirmed: `save` a new note (a capture, or a model's note
that waits, such as a pin), or change an existing one (`target`) as a model asked
(memory.loop.reach)."""


def pending_filter(status: str) -> PendingStatus | None:
    """A listing's status filter from outside: `all` -> None (InvalidInputError if unknown)."""
    match status:
        case "pending" | "confirmed" | "rejected":
            return status
        case "all":
            return None
    raise InvalidInputError("status must be pending, confirmed, rejected or all")


@record
class _Rule:
    """A pattern that marks a sentence as a statement of one entity type."""

    type: EntityType
    pattern: re.Pattern[str]
    confidence: float


def _rules(*rules: tuple[EntityType, str, float]) -> tuple[_Rule, ...]:
    return tuple(_Rule(t, re.compile(p, re.IGNORECASE), c) for t, p, c in rules)


# Strong, explicit statements score 0.7-0.8; hedged ones 0.5-0.6. Keywords add the rest.
RULES: tuple[_Rule, ...] = _rules(
    ("decision", r"(我|我们|咱们)(已经)?(决定|确定|选定)(了)?", 0.8),
    ("decision", r"(最终|最后)(决定|选择|采用)", 0.75),
    ("decision", r"\b(we|i)\s+(have\s+)?(decided|agreed|chose|settled)\b", 0.8),
    ("decision", r"\blet'?s\s+go\s+with\b", 0.7),
    ("preference", r"以后(都|就|一律|统一)?(用|使用|采用|写)", 0.8),
    ("preference", r"(我|我们)(更|比较|一直)?(喜欢|偏好|倾向于?)(用|使用)?", 0.7),
    ("preference", r"(不要|别)(再)?(用|使用)", 0.7),
    ("preference", r"(我|我们)(习惯|通常|一般|总是)(用|使用|在)", 0.7),
    ("preference", r"\bi\s+(prefer|like\s+to\s+use|always\s+use|never\s+use)\b", 0.8),
    ("preference", r"\bfrom\s+now\s+on\b", 0.75),
    ("preference", r"\b(please\s+)?(always|never)\s+(use|write|answer|reply)\b", 0.75),
    ("preference", r"\bi\s+(usually|normally|tend\s+to)\b", 0.6),
    ("architecture", r"(架构|技术栈|数据库|后端|前端|部署)(采用|选用|用的是|基于|改为|换成)", 0.75),
    (
        "architecture",
        r"\b(our|the)\s+(architecture|stack|database|backend|frontend)\s+(is|uses|will\s+use|runs\s+on)\b",
        0.75,
    ),
    ("decision", r"(也许|可能|考虑|要不)(用|换|改)", 0.5),
    ("decision", r"\b(maybe|might|should)\s+(we\s+)?(use|switch|move)\b", 0.5),
    ("preference", r"(觉得|感觉).{0,12}(不错|挺好|好用)", 0.5),
)

# Words that make a statement more likely to be a lasting choice.
_KEYWORDS = re.compile(
    r"以后|一律|统一|都用|总是|永远|默认|always|never|from now on|default|所有|every",
    re.IGNORECASE,
)
# A concrete thing chosen: an identifier-like word (pytest, PostgreSQL, uv, JWT).
_CONCRETE = re.compile(r"[A-Za-z][A-Za-z0-9_.+-]{1,}")
_SENTENCE = re.compile(r"[^。！？!?\n.;；]+[。！？!?.;；]?")


@record
class EntityCandidate:
    """A sentence of a user message that reads as a decision, a preference, ..."""

    type: EntityType
    content: str
    confidence: float
    title: str


def detect_entities(text: str) -> list[EntityCandidate]:
    """Candidates found in one user message, strongest first, one per sentence."""
    found: list[EntityCandidate] = []
    # Code is never the user's statement: blocks and inline code are dropped before matching.
    for sentence in _SENTENCE.findall(clean_message(text, limit=MAX_SCAN_CHARS)):
        sentence = sentence.strip()
        if len(sentence) < 4:
            continue
        hits = [rule for rule in RULES if rule.pattern.search(sentence)]
        if not hits:
            continue
        best = max(hits, key=lambda r: r.confidence)
        confidence = best.confidence
        confidence += 0.05 * (len({r.type for r in hits}) - 1 + len(hits) - 1)
        if _KEYWORDS.search(sentence):
            confidence += 0.1
        if _CONCRETE.search(sentence):
            confidence += 0.05
        confidence = round(min(confidence, 0.99), 2)
        if confidence < MIN_CONFIDENCE:
            continue
        entity_type = _preferred_type(hits)
        found.append(
            EntityCandidate(entity_type, sentence, confidence, _text.shorten(sentence, 60))
        )
    return sorted(found, key=lambda c: c.confidence, reverse=True)


def _preferred_type(hits: list[_Rule]) -> EntityType:
    # "我决定以后都用 pytest" is a decision that sets a preference: the decision wins.
    strongest = max(r.confidence for r in hits)
    for kind in ("decision", "architecture", "preference"):
        if any(r.type == kind and r.confidence >= strongest - 0.05 for r in hits):
            return kind
    return hits[0].type


@record
class PendingEntity:
    """A captured memory waiting for the user's decision (or decided)."""

    id: str
    type: str
    title: str
    content: str
    confidence: float
    scope: str
    source: str
    status: PendingStatus
    created: float
    note_id: str | None
    action: ChangeAction = "save"
    target: str | None = None
    """The note an `update`, `deprecate` or `supersede` changes."""
    change: str = ""
    """JSON: a model's note (`save`) or the change's fields, as the model asked for them."""
    why: str = ""
    """Why a model's change waits for the person ("pins a note ..."); "" for a capture."""

    @property
    def proposed(self) -> bool:
        """A model's change waiting for the person, not a capture of their own words."""
        return bool(self.why)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "title": self.title,
            "content": self.content,
            "confidence": self.confidence,
            "scope": self.scope,
            "source": self.source,
            "status": self.status,
            "created": self.created,
            "note_id": self.note_id,
            "action": self.action,
            "target": self.target,
            "why": self.why,
        }

    def draft(self) -> NoteDraft:
        if self.action == "save" and self.change:
            return NoteDraft(**json.loads(self.change))
        return entity_draft(
            self.content, self.title, self.type, scope=self.scope, source=self.source
        )


def entity_draft(
    content: str, title: str, entity_type: str, *, scope: str, source: str
) -> NoteDraft:
    """The note a captured entity becomes (at once, or when its pending entry is confirmed)."""
    return NoteDraft(
        content=content,
        title=title,
        type=entity_type,
        scope=scope,
        tags=("captured",),
        importance=0.7,
        source=source or "entity-capture",
    )


class PendingStore:
    """Candidates below the auto-save confidence, waiting for confirm or reject."""

    def __init__(self, db: StateBackend) -> None:
        self.db = db

    def add(
        self, candidate: EntityCandidate, *, scope: str = "user", source: str = ""
    ) -> PendingEntity:
        entity = PendingEntity(
            id=f"pend_{os.urandom(6).hex()}",  # `secrets.token_hex` without importing `secrets`
            type=candidate.type,
            title=candidate.title,
            content=candidate.content,
            confidence=candidate.confidence,
            scope=scope,
            source=source,
            status="pending",
            created=time.time(),
            note_id=None,
        )
        with self.db.write() as db:
            # Read inside the transaction: on PostgreSQL `self.get` would take a second
            # pooled connection while this one holds the writers' lock.
            duplicate = db.execute(
                "SELECT * FROM mem_pending WHERE content = ? AND status = 'pending'",
                (entity.content,),
            ).fetchone()
            if duplicate is not None:
                return _pending(duplicate)
            db.execute(
                "INSERT INTO mem_pending(id, type, title, content, confidence, scope, source,"
                " status, created) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?)",
                (
                    entity.id,
                    entity.type,
                    entity.title,
                    entity.content,
                    entity.confidence,
                    entity.scope,
                    entity.source,
                    entity.created,
                ),
            )
        return entity

    def propose(
        self,
        action: ChangeAction,
        *,
        title: str,
        content: str,
        change: dict[str, Any],
        why: str,
        source: str,
        target: str | None = None,
        type: str = "general",
        scope: str = "user",
    ) -> PendingEntity:
        """A model's change that waits for the person (memory.loop.reach): `content` says what it
        does in words a person reads, `change` holds it (JSON) to apply on confirm. The same
        change already pending is that entry. Its text is kept as a note's is: redacted, and
        refused while a credential is left in it (`CredentialError`)."""
        content = without_credentials("content", sanitize(content))
        title = sanitize(title)
        change = sanitize_data(change)
        entity = PendingEntity(
            id=f"pend_{os.urandom(6).hex()}",
            type=type,
            title=title,
            content=content,
            confidence=1.0,
            scope=scope,
            source=source,
            status="pending",
            created=time.time(),
            note_id=None,
            action=action,
            target=target,
            change=json.dumps(change, ensure_ascii=False, sort_keys=True),
            why=why,
        )
        with self.db.write() as db:
            duplicate = db.execute(
                "SELECT * FROM mem_pending WHERE status = 'pending' AND action = ?"
                " AND change = ? AND content = ?",
                (entity.action, entity.change, entity.content),
            ).fetchone()
            if duplicate is not None and duplicate["target"] == target:
                return _pending(duplicate)
            db.execute(
                "INSERT INTO mem_pending(id, type, title, content, confidence, scope, source,"
                " status, created, action, target, change, why)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)",
                (
                    entity.id,
                    entity.type,
                    entity.title,
                    entity.content,
                    entity.confidence,
                    entity.scope,
                    entity.source,
                    entity.created,
                    entity.action,
                    entity.target,
                    entity.change,
                    entity.why,
                ),
            )
        return entity

    def unclaim(self, pending_id: str) -> None:
        """A confirmed change that could not be applied is pending again."""
        with self.db.write() as db:
            db.execute(
                "UPDATE mem_pending SET status = 'pending', note_id = NULL"
                " WHERE id = ? AND status = 'confirmed'",
                (pending_id,),
            )

    def list(
        self, status: PendingStatus | None = "pending", limit: int = 100
    ) -> list[PendingEntity]:
        if status is None:
            rows = self.db.read("SELECT * FROM mem_pending ORDER BY created DESC LIMIT ?", (limit,))
        else:
            rows = self.db.read(
                "SELECT * FROM mem_pending WHERE status = ? ORDER BY created DESC LIMIT ?",
                (status, limit),
            )
        return [_pending(r) for r in rows]

    def get(self, pending_id: str) -> PendingEntity:
        rows = self.db.read("SELECT * FROM mem_pending WHERE id = ?", (pending_id,))
        if not rows:
            raise NotFoundError("pending entity", pending_id)
        return _pending(rows[0])

    def resolve(
        self, pending_id: str, status: PendingStatus, note_id: str | None = None
    ) -> PendingEntity:
        """Confirm or reject a pending memory. The decision is final: deciding the same way
        again returns the entity as it is; the other way raises ConflictError."""
        if status == "pending":
            raise InvalidInputError("a pending memory is resolved as confirmed or rejected")
        self.get(pending_id)  # unknown id: NotFoundError
        with self.db.write() as db:
            # Only a pending row changes, inside the writers' lock: a confirm and a reject
            # racing each other cannot both win.
            changed = db.execute(
                "UPDATE mem_pending SET status = ?, note_id = ?"
                " WHERE id = ? AND status = 'pending'",
                (status, note_id, pending_id),
            ).rowcount
        entity = self.get(pending_id)
        if not changed and entity.status != status:
            raise ConflictError(
                f"pending memory {pending_id!r} was already {entity.status}; that decision is "
                + (
                    "final: delete or edit the note instead"
                    if entity.status == "confirmed"
                    else "final: save the memory again if you want it kept"
                )
            )
        return entity


def confirm_pending(
    store: MemoryBackend, pending: PendingStore, pending_id: str, *, content: str | None = None
) -> tuple[PendingEntity, str, bool]:
    """Keep a pending capture: save its note (through the store's one save: redaction and
    dedup apply) and mark it confirmed. Returns (entity, note id, deduplicated). Confirming
    again returns the same note; a rejected one raises ConflictError, also when the rejection
    lands between the read and the save (the note then does not outlive it). `content`: the
    user's corrected wording, saved instead of the captured one."""
    entity = pending.get(pending_id)
    if entity.status == "confirmed" and entity.note_id:
        return entity, entity.note_id, True
    if entity.status == "rejected":
        pending.resolve(pending_id, "confirmed")  # raises the ConflictError
    if entity.action != "save":
        if content is not None:
            raise InvalidInputError("only a new note can be reworded; discard this change")
        return _apply_change(store, pending, entity)
    draft = entity.draft()
    if content is not None:
        if not content.strip():
            raise InvalidInputError("the corrected text is empty")
        draft = replace(draft, content=content.strip())
    saved = store.save(draft)
    try:
        resolved = pending.resolve(pending_id, "confirmed", saved.id)
    except ConflictError:
        if not saved.deduplicated:
            store.delete(saved.id)
        raise
    return resolved, saved.id, saved.deduplicated


def _apply_change(
    store: MemoryBackend, pending: PendingStore, entity: PendingEntity
) -> tuple[PendingEntity, str, bool]:
    """A model's change of an existing note, confirmed: claimed first (a reject racing it
    cannot win too), then made through the store (its history records who confirmed); if it
    cannot be made (the note was deleted since) the claim is undone and the error raised."""
    target = entity.target or ""
    claimed = pending.resolve(entity.id, "confirmed", target)
    fields = json.loads(entity.change or "{}")
    try:
        match entity.action:
            case "update":
                store.update(target, **fields)
            case "deprecate":
                store.deprecate(target, fields.get("reason"))
            case "supersede":
                store.supersede(target, str(fields["by"]))
    except BaseException:
        pending.unclaim(entity.id)
        raise
    return claimed, target, False


def _pending(row: Any) -> PendingEntity:
    return PendingEntity(
        id=row["id"],
        type=row["type"],
        title=row["title"],
        content=row["content"],
        confidence=row["confidence"],
        scope=row["scope"],
        source=row["source"],
        status=row["status"],
        created=row["created"],
        note_id=row["note_id"],
        action=row["action"] or "save",
        target=row["target"],
        change=row["change"] or "",
        why=row["why"] or "",
    )


@record
class CaptureResult:
    """The ids of the notes a capture saved and of the candidates it left pending."""

    saved: tuple[str, ...]
    pending: tuple[str, ...]


def capture_entities(
    store: MemoryBackend,
    pending: PendingStore,
    text: str,
    *,
    source: str,
    scope: str | Callable[[EntityCandidate], str] = "user",
) -> CaptureResult:
    """Save confident entities of a user message at once; queue the rest for confirmation."""
    saved: list[str] = []
    queued: list[str] = []
    for candidate in detect_entities(text):
        where = scope(candidate) if callable(scope) else scope
        if candidate.confidence >= AUTO_SAVE_CONFIDENCE:
            draft = entity_draft(
                candidate.content, candidate.title, candidate.type, scope=where, source=source
            )
            saved.append(store.save(draft).id)
        else:
            queued.append(pending.add(candidate, scope=where, source=source).id)
    return CaptureResult(tuple(saved), tuple(queued))
