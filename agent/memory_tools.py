"""In-process MCP tools that let the agent read and write its memory without Bash.

Tool names as the model sees them: `mcp__memory__memory_search`, `..._get`, `..._save`,
`..._update`, `..._deprecate`. Results are compact text; store calls run in a thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from claude_agent_sdk import SdkMcpTool, create_sdk_mcp_server, tool

from errors import ClaudeMemoryError
from memory.backend import MemoryBackend
from memory.history import ChangeSource, acting_as, conversation_source
from memory.model import NoteDraft

logger = logging.getLogger(__name__)

SERVER_NAME = "memory"
BODY_LIMIT = 8000

_SEARCH_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Keywords or a question, any language."},
        "limit": {"type": "integer", "description": "How many results (default 8, max 30)."},
        "type": {"type": "string", "description": "Only this note type."},
        "scope": {
            "type": "string",
            "description": "Only this scope: user, project:<key>, chat:<id>.",
        },
    },
    "required": ["query"],
}
_GET_SCHEMA = {
    "type": "object",
    "properties": {
        "ids": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Note ids as shown in [brackets] in listings.",
        }
    },
    "required": ["ids"],
}
_SAVE_SCHEMA = {
    "type": "object",
    "properties": {
        "content": {"type": "string", "description": "The fact, self-contained, 1-5 sentences."},
        "title": {"type": "string"},
        "summary": {"type": "string", "description": "One line."},
        "type": {
            "type": "string",
            "description": "identity, preference, decision, architecture, project, research, "
            "code, bug, conversation or general.",
        },
        "scope": {"type": "string", "description": "user (default), project:<key> or chat:<id>."},
        "tags": {"type": "array", "items": {"type": "string"}},
        "importance": {"type": "number", "description": "0.0-1.0, default 0.5."},
        "supersedes": {"type": "string", "description": "Id of a note this one replaces."},
    },
    "required": ["content"],
}
_UPDATE_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "content": {"type": "string", "description": "New body (replaces the old one)."},
        "title": {"type": "string"},
        "summary": {"type": "string"},
        "type": {"type": "string"},
        "scope": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "importance": {"type": "number"},
    },
    "required": ["id"],
}
_DEPRECATE_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "reason": {"type": "string"},
        "superseded_by": {"type": "string", "description": "Id of the note that replaces it."},
    },
    "required": ["id"],
}


def _text(value: str, *, error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": value}]}
    if error:
        result["is_error"] = True
    return result


def _guarded_errors(
    fn: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
    """Our errors become readable tool errors the model can act on."""

    async def run(args: dict[str, Any]) -> dict[str, Any]:
        try:
            return await fn(args)
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
        fn: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
    ) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
        inner = _guarded_errors(fn)

        async def run(args: dict[str, Any]) -> dict[str, Any]:
            with acting_as(who):  # asyncio.to_thread carries it to the store call
                return await inner(args)

        return run

    async def search(args: dict[str, Any]) -> dict[str, Any]:
        limit = max(1, min(int(args.get("limit") or 8), 30))
        hits = await asyncio.to_thread(
            store.search,
            str(args["query"]),
            limit=limit,
            type=args.get("type") or None,
            scope=args.get("scope") or None,
        )
        if not hits:
            return _text("No memories found.")
        lines = [f"[{h.id}] {h.type} · {h.title} — {h.summary} (score {h.score:.2f})" for h in hits]
        return _text("\n".join(lines) + "\nUse memory_get with ids for full text.")

    async def get(args: dict[str, Any]) -> dict[str, Any]:
        ids = [str(i) for i in args.get("ids") or []][:10]
        parts = []
        for note_id in ids:
            try:
                note = await asyncio.to_thread(store.get, note_id)
            except ClaudeMemoryError as exc:
                parts.append(f"[{note_id}] {exc.message}")
                continue
            parts.append(note.detail_text(BODY_LIMIT))
        return _text("\n\n---\n\n".join(parts) or "No ids given.")

    async def save(args: dict[str, Any]) -> dict[str, Any]:
        draft = NoteDraft(
            content=str(args["content"]),
            title=args.get("title"),
            summary=args.get("summary"),
            type=str(args.get("type") or "general"),
            scope=str(args.get("scope") or default_scope),
            tags=tuple(args.get("tags") or ()),
            importance=float(args.get("importance", 0.5)),
            source=source,
            supersedes=args.get("supersedes"),
        )
        result = await asyncio.to_thread(store.save, draft)
        if result.deduplicated:
            return _text(f"Already remembered as [{result.id}] (updated its access count).")
        if result.conflicts_with:  # saved; the old note stays until the user chooses
            return _text(result.notice())
        return _text(f"Saved as [{result.id}] ({result.path}).")

    async def update(args: dict[str, Any]) -> dict[str, Any]:
        changes: dict[str, Any] = {
            key: args[key]
            for key in ("title", "summary", "type", "scope", "tags", "importance")
            if key in args
        }
        if "content" in args:
            changes["body"] = args["content"]
        note = await asyncio.to_thread(store.update, str(args["id"]), **changes)
        return _text(f"Updated [{note.id}] {note.title}.")

    async def deprecate(args: dict[str, Any]) -> dict[str, Any]:
        note_id = str(args["id"])
        if args.get("superseded_by"):
            note = await asyncio.to_thread(store.supersede, note_id, str(args["superseded_by"]))
            return _text(f"[{note.id}] is now superseded by [{args['superseded_by']}].")
        note = await asyncio.to_thread(store.deprecate, note_id, args.get("reason"))
        return _text(f"[{note.id}] is deprecated; search leaves it out from now on.")

    return [
        tool(
            "memory_search",
            "Search long-term memory (Chinese or English). Returns ids, titles and one-line "
            "summaries; fetch full text with memory_get.",
            _SEARCH_SCHEMA,
        )(_guarded(search)),
        tool("memory_get", "Read memories in full by id.", _GET_SCHEMA)(_guarded(get)),
        tool(
            "memory_save",
            "Save a lasting fact, preference, decision or lesson. Duplicates are detected.",
            _SAVE_SCHEMA,
        )(_guarded(save)),
        tool("memory_update", "Change a memory's text or fields, keeping its id.", _UPDATE_SCHEMA)(
            _guarded(update)
        ),
        tool(
            "memory_deprecate",
            "Retire an outdated memory (optionally superseded by a newer note).",
            _DEPRECATE_SCHEMA,
        )(_guarded(deprecate)),
    ]


def memory_mcp_server(
    store: MemoryBackend, *, default_scope: str = "user", conversation_id: str | None = None
) -> Any:
    return create_sdk_mcp_server(
        SERVER_NAME,
        tools=build_memory_tools(
            store, default_scope=default_scope, conversation_id=conversation_id
        ),
    )
