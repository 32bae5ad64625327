"""Each tool's function beside its listing, and the one way a call runs: arguments checked
against the schema the client was shown, the function run as the `mcp` door of the client
session, our errors turned into a result the model can act on.

Imported on the first tool call (or in the background once the tool list went out): it brings
in the memory itself, which `initialize` and `tools/list` never wait for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from errors import ClaudeMemoryError
from memory._record import record
from memory.clients.mcp_stdio import NoSuchTool, ToolText
from memory.clients.mcp_tools import catalog, notes, observations, review, status
from memory.clients.mcp_tools.catalog import RETIRED, ToolSpec
from memory.clients.mcp_tools.context import ToolContext
from memory.clients.mcp_tools.schema import Arguments, check
from memory.notes.changes import ChangeSource, acting_as

Handler = Callable[[ToolContext, Arguments], str]


@record
class Tool:
    spec: ToolSpec
    run: Handler


TOOLS: Final[tuple[Tool, ...]] = (
    Tool(catalog.SEARCH, notes.memory_search),
    Tool(catalog.GET, notes.memory_get),
    Tool(catalog.SAVE, notes.memory_save),
    Tool(catalog.DEPRECATE, notes.memory_deprecate),
    Tool(catalog.SEARCH_OBSERVATIONS, observations.search_observations),
    Tool(catalog.TIMELINE, observations.observation_timeline),
    Tool(catalog.GET_OBSERVATIONS, observations.get_observations),
    Tool(catalog.REVIEW, review.memory_review),
    Tool(catalog.RESOLVE, review.memory_resolve),
    Tool(catalog.STATUS, status.memory_status),
    Tool(catalog.CLEANUP, status.memory_cleanup),
)
BY_NAME: Final = {tool.spec.name: tool for tool in TOOLS}


def run_tool(ctx: ToolContext, name: str, arguments: object) -> ToolText | NoSuchTool:
    """One tool call, blocking (the server runs it in a worker thread)."""
    tool = BY_NAME.get(name)
    if tool is None:
        if name in RETIRED:
            return ToolText(f"{name} was retired; use {RETIRED[name]} (see tools/list)", error=True)
        return NoSuchTool(name)
    try:
        args = Arguments(check(name, tool.spec.input_schema, arguments))
        with acting_as(ChangeSource("mcp", ctx.client_session)):  # the notes' history
            return ToolText(tool.run(ctx, args))
    except ClaudeMemoryError as exc:
        return ToolText(exc.message, error=True)


def note_session(ctx: ToolContext, meta: Mapping[str, object] | None) -> None:
    """`codex:<thread id>` from a tool call's `_meta.threadId` (Codex 0.169 adds it to every
    MCP tool call; its thread id is the session id its hooks get), when no session is known."""
    from memory.clients.conventions import normalize_session_id

    thread = (meta or {}).get("threadId")
    if ctx.client_session is None and isinstance(thread, str) and thread.strip():
        ctx.client_session = f"codex:{normalize_session_id(thread)}"
