"""Changes made through the MCP server (a real `claude-memory mcp` process) land in the note's
history as the `mcp` door with the client session that started the server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memory.history.store import HistoryStore
from memory.sqlite.state import StateDB
from tests.hooks.test_mcp_server import call, ids_in, mcp_session


async def test_mcp_changes_carry_the_door_and_the_client_session(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    project = make_project("app")
    env = {"CLAUDE_CODE_SESSION_ID": "sess-42"}
    async with mcp_session(mem_home, project, env) as session:
        [note_id] = ids_in(await call(session, "memory_save", content="Releases are tagged vX.Y."))
        await call(session, "memory_save", id=note_id, content="Releases are tagged X.Y.Z.")
    state = StateDB(mem_home / "state.db")
    try:
        versions = HistoryStore(state).versions(note_id)
    finally:
        state.close()
    assert [(v.kind, v.source.door, v.source.session) for v in versions] == [
        ("edit", "mcp", "claude-code:sess-42"),
        ("create", "mcp", "claude-code:sess-42"),
    ]
    assert versions[1].snapshot.body == "Releases are tagged vX.Y."
