"""A contradicting note through `claude-memory mcp` (the official MCP client over stdio): the
save says it conflicts and with which note, the pending supersession is listed with both notes,
and the user's choice resolves it once."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from tests.hooks.test_mcp_server import call, ids_in, mcp_session


async def test_a_contradicting_save_is_pending_until_the_user_chooses(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    async with mcp_session(mem_home, make_project("app")) as session:
        first = await call(
            session, "memory_save", content="Keep logs for 14 days.", type="decision"
        )
        (old_id,) = ids_in(first)
        same = await call(session, "memory_save", content="keep logs for 14 days", type="decision")
        assert same.startswith(f"Already remembered as [{old_id}]")
        saved = await call(
            session, "memory_save", content="Keep logs for 30 days.", type="decision"
        )
        new_id = ids_in(saved)[0]
        assert f"conflicts with [{old_id}]" in saved and "14 -> 30" in saved
        match = re.search(r"Pending your choice \((sup_\w+)\)", saved)
        assert match is not None, saved
        sup_id = match.group(1)

        listing = await call(session, "memory_review")
        assert sup_id in listing and "Keep logs for 30 days." in listing
        assert "Keep logs for 14 days." in listing

        refused = await session.call_tool("memory_resolve", {"id": sup_id, "choice": "confirm"})
        assert refused.isError
        resolved = await call(session, "memory_resolve", id=sup_id, choice="old")
        assert resolved.startswith(f"Resolved {sup_id}: kept old")
        assert "status: deprecated" in await call(session, "memory_get", ids=[new_id])
        assert "status: active" in await call(session, "memory_get", ids=[old_id])
        again = await session.call_tool("memory_resolve", {"id": sup_id, "choice": "new"})
        assert again.isError  # final
        assert await call(session, "memory_review") == "Nothing pending."
        assert "kept old" in await call(session, "memory_review", status="all")
