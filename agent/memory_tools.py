"""In-process MCP tools that let the agent read and write its memory without Bash.

Tool names as the model sees them: `mcp__memory__memory_search`, `..._get`, `..._save`,
`..._update`, `..._deprecate`. Results are compact text; store calls run in a thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

from claude_agent_sdk import SdkMcpTool, create_sdk_mcp_server, tool
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from errors import ClaudeMemoryError
from memory.backend import MemoryBackend
from memory.history import ChangeSource, acting_as, conversation_source
from memory.inputs import SearchText, Text, between, describe
from memory.model import NoteDraft

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
        default=None, description="user (default), project:<key> or chat:<id>."
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


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    """The tool's JSON schema, limits included, from the same model that checks the call."""
    return model.model_json_schema()


def _text(value: str, *, error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": value}]}
    if error:
        result["is_error"] = True
    return result


def _guarded_errors(
    model: type[A], fn: Callable[[A], Awaitable[dict[str, Any]]]
) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
    """The arguments checked by the shared rules (memory/inputs.py: a blank query, a limit out
    of range, no ids are refused before anything runs); our errors and those become readable
    tool errors the model can act on."""

    async def run(args: dict[str, Any]) -> dict[str, Any]:
        try:
            return await fn(model.model_validate(args))
        except ValidationError as exc:
            return _text(describe(exc), error=True)
        except ClaudeMemoryError as exc:
            return _text(exc.message, error=True)

    return run


def build_memory_tools(
    store: MemoryBackend,
    *,
    default_scope: str = "user",
    source: str = "agent",
    conversation_id: str | None = None,
) -> list[SdkMcpTool[Any]]:
    # the notes' history names this door and conversation (web chat or Feishu)
    who = conversation_source(conversation_id) if conversation_id else ChangeSource("chat")

    def _guarded(
        model: type[A], fn: Callable[[A], Awaitable[dict[str, Any]]]
    ) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
        inner = _guarded_errors(model, fn)

        async def run(args: dict[str, Any]) -> dict[str, Any]:
            with acting_as(who):  # asyncio.to_thread carries it to the store call
                return await inner(args)

        return run

    async def search(args: SearchArgs) -> dict[str, Any]:
        hits = await asyncio.to_thread(
            store.search,
            args.query,
            limit=args.limit,
            type=args.type or None,
            scope=args.scope or None,
        )
        if not hits:
            return _text("No memories found.")
        lines = [f"[{h.id}] {h.type} · {h.title} — {h.summary} (score {h.score:.2f})" for h in hits]
        return _text("\n".join(lines) + "\nUse memory_get with ids for full text.")

    async def get(args: GetArgs) -> dict[str, Any]:
        parts, read = [], []
        for note_id in args.ids:
            try:
                note = await asyncio.to_thread(store.get, note_id)
            except ClaudeMemoryError as exc:
                parts.append(f"[{note_id}] {exc.message}")
                continue
            parts.append(note.detail_text(BODY_LIMIT))
            read.append(note.id)
        await asyncio.to_thread(store.record_access, read)  # a full read is a use of the note
        return _text("\n\n---\n\n".join(parts))

    async def save(args: SaveArgs) -> dict[str, Any]:
        relation, about = args.relation, args.about
        if args.supersedes and relation == "new":
            relation, about = "updates", args.supersedes
        if relation != "new":
            scope = args.scope or default_scope
            checked = await asyncio.to_thread(
                _check_decision, store, relation, about, args.content, scope
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
            scope=args.scope or default_scope,
            tags=tuple(args.tags),
            importance=args.importance,
            source=source,
            supersedes=about if relation == "updates" else None,
        )
        result = await asyncio.to_thread(store.save, draft)
        if result.deduplicated:
            return _text(f"Already remembered as [{result.id}] (updated its access count).")
        if result.conflicts_with or result.replaced:  # the old note is kept either way
            return _text(result.notice())
        if relation == "updates":
            return _text(f"Saved as [{result.id}] ({result.path}); [{about}] is marked replaced.")
        return _text(f"Saved as [{result.id}] ({result.path}).")

    async def update(args: UpdateArgs) -> dict[str, Any]:
        # only the fields sent; none at all is refused by the store ("nothing to change")
        changes = args.model_dump(exclude_unset=True, exclude={"id", "content"})
        if args.content is not None:
            changes["body"] = args.content
        note = await asyncio.to_thread(store.update, args.id, **changes)
        return _text(f"Updated [{note.id}] {note.title}.")

    async def deprecate(args: DeprecateArgs) -> dict[str, Any]:
        if args.superseded_by:
            note = await asyncio.to_thread(store.supersede, args.id, args.superseded_by)
            return _text(f"[{note.id}] is now superseded by [{args.superseded_by}].")
        note = await asyncio.to_thread(store.deprecate, args.id, args.reason)
        return _text(f"[{note.id}] is deprecated; search leaves it out from now on.")

    return [
        tool(
            "memory_search",
            "Search long-term memory (Chinese or English). Returns ids, titles and one-line "
            "summaries; fetch full text with memory_get.",
            _schema(SearchArgs),
        )(_guarded(SearchArgs, search)),
        tool("memory_get", "Read memories in full by id.", _schema(GetArgs))(
            _guarded(GetArgs, get)
        ),
        tool(
            "memory_save",
            "Save a lasting fact, preference, decision or lesson. First search the memory for "
            "its subject (memory_search), then say with `relation` whether it is new, updates "
            "an older note (which one: `about`) or repeats one. Nothing is ever deleted.",
            _schema(SaveArgs),
        )(_guarded(SaveArgs, save)),
        tool(
            "memory_update",
            "Change a memory's text or fields, keeping its id.",
            _schema(UpdateArgs),
        )(_guarded(UpdateArgs, update)),
        tool(
            "memory_deprecate",
            "Retire an outdated memory (optionally superseded by a newer note).",
            _schema(DeprecateArgs),
        )(_guarded(DeprecateArgs, deprecate)),
    ]


def _check_decision(
    store: MemoryBackend, relation: str, about: str | None, content: str, scope: str
) -> str | None:
    """Why the model's decision cannot stand (None: it can). An update must name an active
    note of the same scope; a repeat must name one that says what the new text says: a number,
    a negation or a name that differs is an update (`memory.notes.facts.changed_value`)."""
    from memory.notes.facts import changed_value

    if not about:
        return f"relation={relation} needs `about`: the id of the note it {relation[:-1]}s."
    try:
        old = store.get(about)
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
    store: MemoryBackend, *, default_scope: str = "user", conversation_id: str | None = None
) -> Any:
    return create_sdk_mcp_server(
        SERVER_NAME,
        tools=build_memory_tools(
            store, default_scope=default_scope, conversation_id=conversation_id
        ),
    )
