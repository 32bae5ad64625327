"""Claude Code's and Codex's memory tools are the machine owner's (issue #33, docs/memory-format.md
"Whose a note is"): a search across every project finds the owner's notes and never a Feishu
member's or a group's, unless the scope names them. A real `claude-memory mcp` over the official
MCP client."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memory.config import MemoryConfig
from memory.model import NoteDraft
from memory.sqlite.store import MemoryStore
from tests.hooks.test_mcp_server import call, ids_in, mcp_session

ALICE = "ou_alice0000000000000000000000000"


async def test_a_search_across_projects_finds_the_owners_notes_and_no_members(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    with MemoryStore.open(MemoryConfig.for_home(mem_home)) as store:
        mine = store.save(NoteDraft(content="I deploy the billing service on Fridays.")).id
        alices = store.save(
            NoteDraft(
                content="Alice deploys the billing service on Mondays.", scope=f"person:{ALICE}"
            )
        ).id
        team = store.save(
            NoteDraft(content="The team deploys billing after standup.", scope="team:oc_team")
        ).id
    async with mcp_session(mem_home, make_project("app")) as session:
        everywhere = ids_in(
            await call(session, "memory_search", query="deploy billing", all_projects=True)
        )
        named = ids_in(
            await call(session, "memory_search", query="deploy billing", scope=f"person:{ALICE}")
        )
    assert mine in everywhere and alices not in everywhere and team not in everywhere
    assert alices in named
