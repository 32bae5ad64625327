"""In-process MCP tools that let the agent read and write its memory without Bash.

Tool names as the model sees them: `mcp__memory__memory_search`, `..._get`, `..._save`,
`..._update`, `..._deprecate`. Results are compact text; store calls run in a thread. Each tool
is a module-level function of a session's `ToolContext` and its checked arguments, listed in
`TOOLS` (as the SDK's `create_sdk_mcp_server(tools=[...])` takes them); `build_memory_tools`
binds the list to one session.

Whose notes a call reaches is the running turn's `reader` (`memory.model.Reader`,
docs/memory-format.md "Whose a note is"): in a Feishu member's turn only their own notes and
their group's team notes, whatever scope or id the model names; saves go to the member's own
scope.

The agent's reach is limited (`memory.loop.reach`, docs/permissions.md "Memory"): a pin, a change of
the person's own files, of a pinned note or of a note the person wrote, and more than
`CHANGE_LIMIT` changes of existing notes in one turn wait for the person as pending changes,
and the tool says plainly that nothing was done. Every change made or proposed is listed with
the turn (`TurnLedger`), with the one request that undoes it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Generic, Literal, Protocol, TypeVar

from claude_agent_sdk import SdkMcpTool, create_sdk_mcp_server, tool
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from errors import ClaudeMemoryError, InvalidInputError, NotFoundError
from memory.backend import MemoryBackend
from memory.history.store import HistoryStore
from memory.inputs import SearchText, Text, between, describe
from memory.loop.entities import ChangeAction, PendingEntity, PendingStore
from memory.loop.reach import (
    ChangeBudget,
    Waits,
    person_made,
    propose_change,
    propose_save,
    refused_answer,
    review_change,
    review_save,
    waiting_answer,
)
from memory.model import OWNER, Note, NoteDraft, Reader, normalize_scope
from memory.notes.changes import ChangeSource, acting_as, conversation_source
from memory.search.ranking import check_updatable, clean_changes

logger = logging.getLogger(__name__)

SERVER_NAME = "memory"
BODY_LIMIT = 8000
A = TypeVar("A", bound=BaseModel)


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchArgs(_Args):
    query: SearchText
    limit: Annotated[int, between(1, 30), Field(description="How many results (1-30).")] = 8
    type: str | None = Field(default=None, description="Only this note type.")
    scope: str | None = Field(
        default=None, description="Only this scope: user, project:<key>, chat:<id>."
    )


class GetArgs(_Args):
    ids: list[Text] = Field(
        min_length=1, max_length=10, description="1-10 note ids as shown in [brackets]."
    )


class SaveArgs(_Args):
    content: Text = Field(description="The fact, self-contained, 1-5 sentences.")
    title: str | None = None
    summary: str | None = Field(default=None, description="One line.")
    type: str = Field(
        default="general",
        description="identity, preference, decision, architecture, project, research, "
        "code, bug, conversation or general.",
    )
    scope: str | None = Field(
        default=None,
        description="Leave it out for this conversation's own (user; in a Feishu member's "
        "conversation, theirs), or project:<key> or chat:<id>.",
    )
    tags: list[str] = Field(default_factory=list)
    importance: float = Field(default=0.5, ge=0, le=1)
    relation: Literal["new", "updates", "repeats"] = Field(
        default="new",
        description="What the note does to the memory, after you searched it for the subject: "
        "new (nothing on it yet), updates (it replaces an older note that is no longer true: "
        "give that note's id in `about`; the old note is kept, marked replaced) or repeats (a "
        "note already says it: give its id in `about`; nothing new is written).",
    )
    about: Text | None = Field(
        default=None, description="The note this one updates or repeats (its [id])."
    )
    supersedes: str | None = Field(
        default=None, description="Same as relation=updates with about=<id>."
    )


class UpdateArgs(_Args):
    id: Text
    content: Text | None = Field(default=None, description="New body (replaces the old one).")
    title: str | None = None
    summary: str | None = None
    type: str | None = None
    scope: str | None = None
    tags: list[str] | None = None
    importance: float | None = Field(default=None, ge=0, le=1)


class DeprecateArgs(_Args):
    id: Text
    reason: str | None = None
    superseded_by: Text | None = Field(default=None, description="Id of the note that replaces it.")


class TurnLedger(Protocol):
    """The running turn (agent/_turn.py `TurnState`): where its memory changes are listed, and
    whose memory it reads and saves to (`memory.model.Reader`)."""

    reader: Reader

    def record_memory_change(self, change: dict[str, Any]) -> None: ...


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    """The tool's JSON schema, limits included, from the same model that checks the call."""
    return model.model_json_schema()


def _text(value: str, *, error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": value}]}
    if error:
        result["is_error"] = True
    return result


class ToolContext:
    """What every tool call of one session shares: the memory, where changes that wait for the
    person go, the running turn, and the bookkeeping around a change (its reach, the turn's
    budget of changes, its listing with the request that undoes it)."""

    def __init__(
        self,
        store: MemoryBackend,
        *,
        default_scope: str = "user",
        source: str = "agent",
        conversation_id: str | None = None,
        pending: PendingStore | None = None,
        current_turn: Callable[[], TurnLedger | None] | None = None,
    ) -> None:
        self.store = store
        self.default_scope = default_scope
        self.source = source
        self.pending = pending
        self._current_turn = current_turn
        # the notes' history names this door and conversation (web chat or Feishu)
        self.who = conversation_source(conversation_id) if conversation_id else ChangeSource("chat")
        self.proposer = f"conversation:{conversation_id}" if conversation_id else source
        self.budget = ChangeBudget()
        self.history = HistoryStore(pending.db) if pending is not None else None

    def turn(self) -> TurnLedger | None:
        return self._current_turn() if self._current_turn is not None else None

    def reader(self) -> Reader:
        """Whose memory this call reads and saves to: the running turn's (a Feishu member's own
        and their group's team notes), else the machine owner's."""
        turn = self.turn()
        return turn.reader if turn is not None else OWNER

    def save_scope(self, asked: str | None) -> str:
        """Where a save goes: the scope asked for (normalized), else this turn's own (a
        member's `person:` scope; the owner's `default_scope`). A scope the turn may not write
        is refused in the same words as any other the model gets wrong."""
        reader = self.reader()
        default = self.default_scope if reader.owner else reader.saves_to
        scope = normalize_scope(asked) if asked else default
        if scope is None or not reader.writes(scope):
            mine = f" save to {default} (leave scope out)" if default else " not save notes"
            raise InvalidInputError(f"scope {scope!r} is not this conversation's: it may{mine}")
        return scope

    def get(self, note_id: str) -> Note:
        """A note this turn may read (blocking): one outside its reader's scopes is "not found",
        as a missing one, so a member's turn cannot learn that it exists."""
        note = self.store.get(note_id)
        if not self.reader().reads(note.scope):
            raise NotFoundError("note", note_id)
        return note

    def listed(self, change: dict[str, Any]) -> None:
        ledger = self.turn()
        if ledger is not None:
            ledger.record_memory_change(change)

    def undo_of(self, note_id: str) -> dict[str, str] | None:
        """The request that puts the note back as it was before the change just made: a
        restore of the version before it."""
        latest = self.history.latest(note_id) if self.history is not None else None
        if latest is None or latest.number < 2:
            return None
        path = f"/api/memories/{note_id}/history/{latest.number - 1}/restore"
        return {"method": "POST", "path": path}

    def made(self, action: ChangeAction, note_id: str, title: str) -> dict[str, Any]:
        undo = (
            {"method": "DELETE", "path": f"/api/memories/{note_id}"}
            if action == "save"
            else self.undo_of(note_id)
        )
        return {
            "action": action,
            "note_id": note_id,
            "title": title or self.store.get(note_id).title,
            "status": "done",
            "undo": undo,
        }

    async def wait(
        self, propose: Callable[[PendingStore], PendingEntity], waits: Waits
    ) -> dict[str, Any]:
        """A change for the person: pending, listed, and the model told plainly."""
        if self.pending is None:
            return _text(refused_answer(waits), error=True)
        entity = await asyncio.to_thread(propose, self.pending)
        self.listed(_waiting(entity))
        return _text(waiting_answer(entity))

    async def list_made(self, action: ChangeAction, note_id: str, title: str) -> None:
        self.listed(await asyncio.to_thread(self.made, action, note_id, title))

    def read_target(self, note_id: str) -> tuple[Note, bool]:
        """The note a change is about, and whether the person wrote or confirmed it. A note
        the turn may read but not change (a group's team note in a member's turn) is refused."""
        note = self.get(note_id)
        if not self.reader().writes(note.scope):
            raise InvalidInputError(
                f"[{note.id}] is a team note ({note.scope}): the group's owner or an admin "
                "changes it in the chat (/team-remember, /forget); it cannot be changed here"
            )
        latest = self.history.latest(note.id) if self.history is not None else None
        return note, person_made(note, latest)

    async def change_existing(
        self,
        action: ChangeAction,
        note_id: str,
        change: dict[str, Any],
        apply: Callable[[], Note],
    ) -> dict[str, Any] | Note:
        """Make a change of an existing note, or have it wait; the changed note, or the
        answer that it waits."""
        note, persons = await asyncio.to_thread(self.read_target, note_id)
        waits = review_change(note, change if action == "update" else None, persons=persons)
        waits = self.budget.review(waits, self.turn())
        if waits is not None:
            held = waits
            return await self.wait(
                lambda p: propose_change(p, action, note, change, held, source=self.proposer),
                held,
            )
        try:
            changed = await asyncio.to_thread(apply)
        except BaseException:
            self.budget.give_back()
            raise
        await self.list_made(action, changed.id, changed.title)
        return changed


def _waiting(entity: PendingEntity) -> dict[str, Any]:
    return {
        "action": entity.action,
        "note_id": entity.target,
        "title": entity.title,
        "status": "waiting",
        "pending_id": entity.id,
        "why": entity.why,
        "confirm": {"method": "POST", "path": f"/api/memories/pending/{entity.id}/confirm"},
        "undo": {"method": "POST", "path": f"/api/memories/pending/{entity.id}/reject"},
    }


# --- the tools ------------------------------------------------------------------------------------


async def memory_search(ctx: ToolContext, args: SearchArgs) -> dict[str, Any]:
    hits = await asyncio.to_thread(
        ctx.store.search,
        args.query,
        limit=args.limit,
        type=args.type or None,
        scope=args.scope or None,
        reader=ctx.reader(),  # any scope asked for, within the turn's own
    )
    if not hits:
        return _text("No memories found.")
    lines = [f"[{h.id}] {h.type} · {h.title} — {h.summary} (score {h.score:.2f})" for h in hits]
    return _text("\n".join(lines) + "\nUse memory_get with ids for full text.")


async def memory_get(ctx: ToolContext, args: GetArgs) -> dict[str, Any]:
    parts, read = [], []
    for note_id in args.ids:
        try:
            note = await asyncio.to_thread(ctx.get, note_id)
        except ClaudeMemoryError as exc:
            parts.append(f"[{note_id}] {exc.message}")
            continue
        parts.append(note.detail_text(BODY_LIMIT))
        read.append(note.id)
    await asyncio.to_thread(ctx.store.record_access, read)  # a full read is a use of the note
    return _text("\n\n---\n\n".join(parts))


async def memory_save(ctx: ToolContext, args: SaveArgs) -> dict[str, Any]:
    store = ctx.store
    relation, about = args.relation, args.about
    if args.supersedes and relation == "new":
        relation, about = "updates", args.supersedes
    scope = ctx.save_scope(args.scope)
    if relation != "new":
        checked = await asyncio.to_thread(
            _check_decision, ctx.get, relation, about, args.content, scope
        )
        if checked is not None:
            return _text(checked, error=True)
    if relation == "repeats" and about:
        # nothing new: the note it repeats counts one more use (mem0's NONE)
        await asyncio.to_thread(store.record_access, [about])
        return _text(f"Already remembered as [{about}]; nothing new was written.")
    draft = NoteDraft(
        content=args.content,
        title=args.title,
        summary=args.summary,
        type=args.type or "general",
        scope=scope,
        tags=tuple(args.tags),
        importance=args.importance,
        source=ctx.source,
        supersedes=about if relation == "updates" else None,
    )
    waits = review_save(draft.tags)
    old: Note | None = None
    if waits is None and relation == "updates" and about:
        # replacing a note changes it: the same reach as an edit
        target, persons = await asyncio.to_thread(ctx.read_target, about)
        old = target
        waits = review_change(target, persons=persons)
        waits = ctx.budget.review(waits, ctx.turn())
    if waits is not None:
        held = waits
        return await ctx.wait(lambda p: propose_save(p, draft, held, source=ctx.proposer), held)
    try:
        result = await asyncio.to_thread(store.save, draft)
    except BaseException:
        if old is not None:
            ctx.budget.give_back()
        raise
    if result.deduplicated:
        return _text(f"Already remembered as [{result.id}] (updated its access count).")
    await ctx.list_made("save", result.id, draft.title or "")
    if old is not None:
        await ctx.list_made("supersede", old.id, old.title)
    if result.conflicts_with or result.replaced:  # the old note is kept either way
        return _text(result.notice())
    if relation == "updates":
        return _text(f"Saved as [{result.id}] ({result.path}); [{about}] is marked replaced.")
    return _text(f"Saved as [{result.id}] ({result.path}).")


async def memory_update(ctx: ToolContext, args: UpdateArgs) -> dict[str, Any]:
    store = ctx.store
    # only the fields sent; none at all is refused by the store ("nothing to change")
    changes = args.model_dump(exclude_unset=True, exclude={"id", "content"})
    if args.content is not None:
        changes["body"] = args.content
    if args.scope is not None:  # a note moves only into a scope this turn writes
        changes["scope"] = ctx.save_scope(args.scope)
    # the store's own checks first (nothing to change, a credential left, too long): a change
    # that cannot be made is refused, not proposed
    check_updatable(changes)
    await asyncio.to_thread(
        clean_changes, dict(changes), max_note_bytes=store.config.max_note_bytes
    )
    done = await ctx.change_existing(
        "update", args.id, changes, lambda: store.update(args.id, **changes)
    )
    if isinstance(done, dict):
        return done
    return _text(f"Updated [{done.id}] {done.title}.")


async def memory_deprecate(ctx: ToolContext, args: DeprecateArgs) -> dict[str, Any]:
    store = ctx.store
    if args.superseded_by:
        by = args.superseded_by
        done = await ctx.change_existing(
            "supersede", args.id, {"by": by}, lambda: store.supersede(args.id, by)
        )
        if isinstance(done, dict):
            return done
        return _text(f"[{done.id}] is now superseded by [{by}].")
    reason = args.reason
    done = await ctx.change_existing(
        "deprecate", args.id, {"reason": reason}, lambda: store.deprecate(args.id, reason)
    )
    if isinstance(done, dict):
        return done
    return _text(f"[{done.id}] is deprecated; search leaves it out from now on.")


@dataclass(frozen=True, slots=True)
class MemoryTool(Generic[A]):
    """One tool as the model sees it (name, description, the schema of `args`) and its
    function."""

    name: str
    description: str
    args: type[A]
    run: Callable[[ToolContext, A], Awaitable[dict[str, Any]]]


TOOLS: tuple[MemoryTool[Any], ...] = (
    MemoryTool(
        "memory_search",
        "Search long-term memory (Chinese or English). Returns ids, titles and one-line "
        "summaries; fetch full text with memory_get.",
        SearchArgs,
        memory_search,
    ),
    MemoryTool("memory_get", "Read memories in full by id.", GetArgs, memory_get),
    MemoryTool(
        "memory_save",
        "Save a lasting fact, preference, decision or lesson. First search the memory for its "
        "subject (memory_search), then say with `relation` whether it is new, updates an older "
        "note (which one: `about`) or repeats one. Nothing is ever deleted.",
        SaveArgs,
        memory_save,
    ),
    MemoryTool(
        "memory_update",
        "Change a memory's text or fields, keeping its id.",
        UpdateArgs,
        memory_update,
    ),
    MemoryTool(
        "memory_deprecate",
        "Retire an outdated memory (optionally superseded by a newer note).",
        DeprecateArgs,
        memory_deprecate,
    ),
)


async def call_tool(
    ctx: ToolContext, spec: MemoryTool[Any], args: dict[str, Any]
) -> dict[str, Any]:
    """One call: the arguments checked by the shared rules (memory/inputs.py: a blank query, a
    limit out of range, no ids are refused before anything runs), the function run as this
    session's door of the notes' history; our errors and those become readable tool errors the
    model can act on."""
    with acting_as(ctx.who):  # asyncio.to_thread carries it to the store call
        try:
            return await spec.run(ctx, spec.args.model_validate(args))
        except ValidationError as exc:
            return _text(describe(exc), error=True)
        except ClaudeMemoryError as exc:
            return _text(exc.message, error=True)


def build_memory_tools(
    store: MemoryBackend,
    *,
    default_scope: str = "user",
    source: str = "agent",
    conversation_id: str | None = None,
    pending: PendingStore | None = None,
    current_turn: Callable[[], TurnLedger | None] | None = None,
) -> list[SdkMcpTool[Any]]:
    """`TOOLS` for one session, as the SDK takes them. `pending`: where changes that wait for
    the person go (None: they are refused); `current_turn`: the running turn, which lists the
    changes and bounds how many existing notes one turn changes."""
    ctx = ToolContext(
        store,
        default_scope=default_scope,
        source=source,
        conversation_id=conversation_id,
        pending=pending,
        current_turn=current_turn,
    )
    return [
        tool(spec.name, spec.description, _schema(spec.args))(
            functools.partial(call_tool, ctx, spec)
        )
        for spec in TOOLS
    ]


def _check_decision(
    get: Callable[[str], Note], relation: str, about: str | None, content: str, scope: str
) -> str | None:
    """Why the model's decision cannot stand (None: it can). An update must name an active
    note of the same scope; a repeat must name one that says what the new text says: a number,
    a negation or a name that differs is an update (`memory.notes.facts.changed_value`)."""
    from memory.notes.facts import changed_value

    if not about:
        return f"relation={relation} needs `about`: the id of the note it {relation[:-1]}s."
    try:
        old = get(about)  # within the turn's reach (`ToolContext.get`)
    except ClaudeMemoryError as exc:
        return f"[{about}]: {exc.message}"
    if old.status != "active":
        return f"[{about}] is {old.status}, not a current note: search again."
    if old.scope != scope:
        return f"[{about}] is in scope {old.scope}, the new note in {scope}: not the same fact."
    if relation == "repeats":
        differs = changed_value(old.body, content)
        if differs:
            return (
                f"[{about}] does not say the same ({differs}): save it with relation=updates "
                "if the new text is what holds now."
            )
    return None


def memory_mcp_server(
    store: MemoryBackend,
    *,
    default_scope: str = "user",
    conversation_id: str | None = None,
    pending: PendingStore | None = None,
    current_turn: Callable[[], TurnLedger | None] | None = None,
) -> Any:
    return create_sdk_mcp_server(
        SERVER_NAME,
        tools=build_memory_tools(
            store,
            default_scope=default_scope,
            conversation_id=conversation_id,
            pending=pending,
            current_turn=current_turn,
        ),
    )
