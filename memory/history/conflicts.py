"""Pending supersessions: a new note that contradicts or updates an older one, waiting for the
user's choice (docs/history.md, "Near duplicates and conflicts").

`memory.core.find_duplicate` finds them at save: the same scope and type, the same subject,
a negation or a number that differs (`memory._text.contradicts`). The new note is saved, the
older one stays active, and a pending supersession links them here, in the state database
(`mem_supersessions`, SQLite `state.db` or the shared PostgreSQL, the portable SQL of
`memory.sqlite.state`). Nothing is overwritten until the user chooses:

* `new`: keep the new note; the old one is marked superseded by it (`supersede`);
* `old`: keep the old note; the new one is deprecated (not deleted: its history and file stay,
  and it can be brought back like any deprecated note), with the reason in its front matter;
* `both`: both stay active; the link is dismissed.

Every change goes through the store, so both notes' histories record it. The choice is final,
like a pending capture's (`memory.loop.entities`): the same choice again returns the
supersession as it is, another one raises `ConflictError` (HTTP 409).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

from errors import ConflictError, InvalidInputError, NotFoundError
from memory._record import record
from memory.backend import StateBackend

if TYPE_CHECKING:
    from memory.backend import MemoryBackend
    from memory.model import Note

Keep = Literal["new", "old", "both"]
KEEPS: Final = frozenset(get_args(Keep))
SupersessionStatus = Literal["pending", "resolved"]

_COLUMNS = "id, new_id, old_id, reason, status, keep, created, resolved"


def keep_choice(value: str) -> Keep:
    """A choice from outside (InvalidInputError, HTTP 422, when unknown)."""
    match value:
        case "new" | "old" | "both":
            return value
    raise InvalidInputError("keep must be new, old or both")


def status_filter(value: str) -> SupersessionStatus | None:
    """A listing's status filter from outside: `all` -> None."""
    match value:
        case "pending" | "resolved":
            return value
        case "all":
            return None
    raise InvalidInputError("status must be pending, resolved or all")


@record
class Supersession:
    """A new note (`new_id`) that may supersede an older one (`old_id`)."""

    id: str
    new_id: str
    old_id: str
    reason: str
    status: SupersessionStatus
    keep: Keep | None
    """The user's choice once resolved."""
    created: float
    resolved: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "new_id": self.new_id,
            "old_id": self.old_id,
            "reason": self.reason,
            "status": self.status,
            "keep": self.keep,
            "created": self.created,
            "resolved": self.resolved,
        }


class ConflictStore:
    """Pending supersessions over a `StateBackend`; `memory.history.store.HistoryStore`
    records new ones for the store (`propose`), the API, the MCP server and the web page
    list and resolve them."""

    def __init__(self, state: StateBackend, *, clock: Callable[[], float] = time.time) -> None:
        self.state = state
        self._clock = clock

    def propose(self, new_id: str, old_id: str, reason: str) -> Supersession:
        """Record that `new_id` may supersede `old_id` (the same pair pending: that one)."""
        created = self._clock()
        with self.state.write() as tx:
            found = tx.execute(
                f"SELECT {_COLUMNS} FROM mem_supersessions"
                " WHERE new_id = ? AND old_id = ? AND status = 'pending'",
                (new_id, old_id),
            ).fetchone()
            if found is not None:
                return _supersession(found)
            sup_id = f"sup_{os.urandom(6).hex()}"  # `secrets.token_hex`, without `secrets`
            tx.execute(
                "INSERT INTO mem_supersessions (id, new_id, old_id, reason, status, created)"
                " VALUES (?, ?, ?, ?, 'pending', ?)",
                (sup_id, new_id, old_id, reason, created),
            )
        return Supersession(sup_id, new_id, old_id, reason, "pending", None, created, None)

    def list(
        self, status: SupersessionStatus | None = "pending", limit: int = 100
    ) -> list[Supersession]:
        """Newest first."""
        if status is None:
            rows = self.state.read(
                f"SELECT {_COLUMNS} FROM mem_supersessions ORDER BY created DESC, id LIMIT ?",
                (limit,),
            )
        else:
            rows = self.state.read(
                f"SELECT {_COLUMNS} FROM mem_supersessions WHERE status = ?"
                " ORDER BY created DESC, id LIMIT ?",
                (status, limit),
            )
        return [_supersession(r) for r in rows]

    def get(self, sup_id: str) -> Supersession:
        rows = self.state.read(f"SELECT {_COLUMNS} FROM mem_supersessions WHERE id = ?", (sup_id,))
        if not rows:
            raise NotFoundError("pending supersession", sup_id)
        return _supersession(rows[0])

    def resolve(self, store: MemoryBackend, sup_id: str, keep: Keep) -> Supersession:
        """Apply the user's choice through `store` (so both notes' histories record it) and
        mark the supersession resolved. The choice is claimed first, inside the writers'
        lock, so two different choices racing cannot both apply; when applying fails (a note
        was deleted meanwhile) the claim is undone and the error raised."""
        keep = keep_choice(keep)
        current = self.get(sup_id)
        if current.status == "resolved":
            return _same_or_conflict(current, keep)
        with self.state.write() as tx:
            claimed = tx.execute(
                "UPDATE mem_supersessions SET status = 'resolved', keep = ?, resolved = ?"
                " WHERE id = ? AND status = 'pending'",
                (keep, self._clock(), sup_id),
            ).rowcount
        if not claimed:
            return _same_or_conflict(self.get(sup_id), keep)
        try:
            _apply(store, current, keep)
        except BaseException:
            with self.state.write() as tx:
                tx.execute(
                    "UPDATE mem_supersessions SET status = 'pending', keep = NULL,"
                    " resolved = NULL WHERE id = ? AND keep = ?",
                    (sup_id, keep),
                )
            raise
        return self.get(sup_id)


def _apply(store: MemoryBackend, sup: Supersession, keep: Keep) -> None:
    """The note kept must exist (NotFoundError: a deleted note cannot be kept); the other one
    may be gone, and then there is nothing left to change."""
    match keep:
        case "new":
            store.get(sup.new_id)
            other = _existing(store, sup.old_id)
            if other is not None and other.superseded_by != sup.new_id:
                store.supersede(sup.old_id, sup.new_id)
        case "old":
            store.get(sup.old_id)
            other = _existing(store, sup.new_id)
            reason = f"conflicted with {sup.old_id}; the older note was kept"
            if other is not None and other.status != "deprecated":
                store.deprecate(sup.new_id, reason=reason)
        case "both":
            pass


def _existing(store: MemoryBackend, note_id: str) -> Note | None:
    try:
        return store.get(note_id)
    except NotFoundError:
        return None


def _same_or_conflict(current: Supersession, keep: Keep) -> Supersession:
    if current.keep == keep:
        return current
    raise ConflictError(
        f"pending supersession {current.id!r} was already resolved (keep {current.keep}); "
        "that choice is final: edit, supersede or restore the notes instead"
    )


def _supersession(row: Any) -> Supersession:
    keep = row["keep"]
    resolved = row["resolved"]
    return Supersession(
        id=str(row["id"]),
        new_id=str(row["new_id"]),
        old_id=str(row["old_id"]),
        reason=str(row["reason"] or ""),
        status="resolved" if row["status"] == "resolved" else "pending",
        keep=keep if keep in KEEPS else None,
        created=float(row["created"]),
        resolved=None if resolved is None else float(resolved),
    )
