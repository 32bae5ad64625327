"""What a model may change in memory by itself, and what waits for the person
(docs/permissions.md, "Memory: what the agent may write").

A model's memory tools (the chat agent's, the MCP server's) are called like any other tool, so
a prompt-injected turn can call them too. What reaches every later session or speaks for the
person therefore stays the person's to make:

* a pin (tag `pinned`): a pinned note starts every session;
* changing or retiring the person's own files (`user/`: the profile), pinned notes, and notes
  the person wrote or confirmed (`person_made`: by the note's history);
* more than `CHANGE_LIMIT` changes of existing notes (edit, deprecate, supersede) in one chat
  turn, or in one hour of an MCP session (the server does not see turns): a model tidies its
  own notes a few at a time.

`review_save` and `review_change` are pure: None (the change may go ahead) or `Waits(reason)`.
What waits becomes a pending change (`memory.loop.entities.PendingStore.propose`), listed with
the captures on the memory page and sent as a Feishu card; confirming it applies it as the
person (`confirm_pending`).

`person_made` is the other half: what a session-start brief may present as the person's own
(the `user/` files and the pins) must have been written or confirmed by the person, by the
note's history (`memory.notes.changes.PERSON_DOORS`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from memory._record import record
from memory._text import one_line
from memory.loop.recall import PIN_TAG, PROFILE_FOLDER
from memory.notes.changes import by_person, infer_source, snapshot_of

if TYPE_CHECKING:
    from memory.loop.entities import ChangeAction, PendingEntity, PendingStore
    from memory.model import Note, NoteDraft
    from memory.notes.changes import Version

CHANGE_LIMIT: Final = 3
"""Changes of existing notes a model makes without the person, per chat turn (or MCP hour)."""
MCP_WINDOW_SECONDS: Final = 3600.0


@record
class Waits:
    """The change waits for the person; `reason` finishes "it ..." ("pins a note ...")."""

    reason: str


def _pins(tags: Iterable[str] | None) -> bool:
    return any(str(t).strip().casefold() == PIN_TAG for t in tags or ())


def review_save(tags: Iterable[str] | None) -> Waits | None:
    """A new note from a model: a pin waits."""
    if _pins(tags):
        return Waits("pins a note (tag `pinned`), and a pinned note starts every session")
    return None


def review_change(
    note: Note, changes: Mapping[str, Any] | None = None, *, persons: bool = False
) -> Waits | None:
    """A model's edit, deprecation or supersession of `note` (`changes`: an edit's fields;
    `persons`: the person wrote or confirmed the note as it is, `person_made`)."""
    if note.path.startswith(PROFILE_FOLDER):
        return Waits(f"changes {note.path}, one of the person's own files")
    if _pins(note.tags):
        return Waits("changes a pinned note, which starts every session")
    if changes is not None and _pins(changes.get("tags")):
        return Waits("pins a note (tag `pinned`), and a pinned note starts every session")
    if persons:
        return Waits("changes a note the person wrote or confirmed")
    return None


def over_limit(limit: int = CHANGE_LIMIT, *, per: str = "turn") -> Waits:
    return Waits(
        f"would change more than {limit} existing notes in one {per}; more than that needs "
        "the person"
    )


class ChangeBudget:
    """Changes of existing notes one model has made in its current window: a chat turn (the
    `turn` object changes at each turn) or, without turns, the last `window_seconds`."""

    def __init__(
        self,
        limit: int = CHANGE_LIMIT,
        *,
        window_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window_seconds = window_seconds
        self._clock = clock
        self._turn: object = None
        self._spent: list[float] = []

    def review(self, waits: Waits | None, turn: object = None) -> Waits | None:
        """What a change that `review_change` or `review_save` let through needs now: nothing
        while the window has room (one change spent), else the person (`over_limit`)."""
        if waits is None and not self.take(turn):
            return over_limit(self.limit, per="turn" if self.window_seconds is None else "hour")
        return waits

    def take(self, turn: object = None) -> bool:
        """Spend one change if the window has room (False: it is full). Synchronous, so two
        concurrent tool calls on one event loop cannot both take the last one."""
        now = self._clock()
        if turn is not self._turn:
            self._turn, self._spent = turn, []
        if self.window_seconds is not None:
            self._spent = [t for t in self._spent if now - t < self.window_seconds]
        if len(self._spent) >= self.limit:
            return False
        self._spent.append(now)
        return True

    def give_back(self) -> None:
        """The change was not made after all (it failed)."""
        if self._spent:
            self._spent.pop()


def person_made(note: Note, latest: Version | None) -> bool:
    """Whether the person wrote or confirmed the note as it is now: its newest version was
    made through a person's door (the page, the CLI, a hand edit, their Feishu tap), or the
    note changed on disk since that version (a hand edit no history saw yet). A note with no
    history counts as the person's unless its `source` names a model's or a hook's door."""
    if latest is None:
        source = (note.source or "").strip()
        return not source or source == "web" or by_person(infer_source(source))
    if latest.snapshot.digest() != snapshot_of(note).digest():
        return True
    return by_person(latest.source)


# --- what waits: a pending entry the person confirms ---------------------------------------


def propose_save(
    pending: PendingStore, draft: NoteDraft, waits: Waits, *, source: str
) -> PendingEntity:
    """A model's new note that waits (a pin): confirmed, it is saved as the model wrote it."""
    change = {
        "content": draft.content,
        "title": draft.title,
        "summary": draft.summary,
        "type": draft.type,
        "scope": draft.scope,
        "tags": list(draft.tags),
        "importance": draft.importance,
        "source": draft.source,
        "supersedes": draft.supersedes,
    }
    return pending.propose(
        "save",
        title=draft.title or one_line(draft.content, 60),
        content=draft.content,
        change=change,
        why=waits.reason,
        source=source,
        type=draft.type,
        scope=draft.scope,
    )


def propose_change(
    pending: PendingStore,
    action: ChangeAction,
    note: Note,
    change: dict[str, Any],
    waits: Waits,
    *,
    source: str,
) -> PendingEntity:
    """A model's edit (`change`: its fields), deprecation (`reason`) or supersession (`by`) of
    `note` that waits; `content` tells the person what it would do."""
    match action:
        case "update":
            title = f"Edit [{note.id}] {note.title}"
            said = [f"{k}: {v}" for k, v in sorted(change.items()) if k != "body"]
            content = "\n".join([*said, *([str(change["body"])] if "body" in change else [])])
        case "deprecate":
            title = f"Retire [{note.id}] {note.title}"
            reason = change.get("reason")
            content = f"Deprecate: {note.summary or note.title}" + (
                f" (reason: {reason})" if reason else ""
            )
        case _:
            title = f"Replace [{note.id}] {note.title}"
            content = f"Mark as superseded by [{change.get('by')}]: {note.summary or note.title}"
    return pending.propose(
        action,
        title=title,
        content=content,
        change=change,
        why=waits.reason,
        source=source,
        target=note.id,
        type=note.type,
        scope=note.scope,
    )


def waiting_answer(entity: PendingEntity) -> str:
    """The tool's answer to the model: plainly not done, and why."""
    return (
        f"NOT DONE: this change waits for the person's confirmation (pending change "
        f"{entity.id}): it {entity.why}. Nothing was changed. The person confirms or discards "
        "it on the memory page (Pending) or its Feishu card; tell them it is waiting for them "
        "and do not say it was done."
    )


def refused_answer(waits: Waits) -> str:
    """Where no pending list is at hand: refused, and why."""
    return (
        f"NOT DONE: it {waits.reason}, which only the person can do (the memory page, or the "
        "claude-memory CLI). Nothing was changed; tell them so and do not say it was done."
    )
