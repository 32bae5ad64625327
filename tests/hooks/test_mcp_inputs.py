"""Every MCP tool refuses nonsense with an error saying what is wrong, and changes nothing
(issue #19: an empty query, a negative limit, an update with no fields, `confirm="yes"` were
taken silently). Driven through the official MCP client against a real `claude-memory mcp`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory.loop.entities import EntityCandidate, PendingStore
from memory.sqlite.state import StateDB
from tests.helpers import home_fingerprint
from tests.hooks.conftest import run_hook_process
from tests.hooks.test_mcp_server import call, ids_in, mcp_session

NO_ARGUMENTS = {"memory_stats", "memory_encoder_status", "memory_get_current_episode"}
"""Tools that take no argument, so no input of theirs can be wrong."""

# (tool, arguments, a piece of the error it must give). Ids in <angle brackets> are filled in
# from the memory the test sets up.
BAD_INPUTS: list[tuple[str, dict[str, Any], str]] = [
    ("memory_recall", {"query": ""}, "at least 1 character"),
    ("memory_recall", {"query": "   "}, "query"),
    ("memory_recall", {"query": "pool", "limit": -1}, "greater than or equal to 1"),
    ("memory_recall", {"query": "pool", "limit": 31}, "less than or equal to 30"),
    ("memory_search", {"query": ""}, "at least 1 character"),
    ("memory_search", {"query": "\n\t"}, "query"),
    ("memory_search", {"query": "pool", "limit": 0}, "greater than or equal to 1"),
    ("memory_search", {"query": "pool", "limit": 500}, "less than or equal to 30"),
    ("memory_search", {"query": "pool", "type": "wizard"}, "unknown type 'wizard'"),
    ("memory_search", {"query": "pool", "all_projects": "maybe"}, "all_projects"),
    ("memory_get", {"ids": []}, "at least 1 item"),
    ("memory_get", {"ids": [""]}, "at least 1 character"),
    ("memory_get", {"ids": [f"mem_{n}" for n in range(11)]}, "at most 10 items"),
    ("search_observations", {"query": ""}, "at least 1 character"),
    ("search_observations", {"query": "？！"}, "no word to look for"),
    ("search_observations", {"query": "pytest", "limit": 0}, "greater than or equal to 1"),
    ("search_observations", {"query": "pytest", "all_projects": "yes"}, "valid boolean"),
    ("observation_timeline", {"id": 0}, "greater than or equal to 1"),
    ("observation_timeline", {"id": 999999}, "observation '999999' not found"),
    ("observation_timeline", {"id": "<obs>", "before": -1}, "greater than or equal to 0"),
    ("observation_timeline", {"id": "<obs>", "after": 21}, "less than or equal to 20"),
    ("get_observations", {"ids": []}, "at least 1 item"),
    ("get_observations", {"ids": [-3]}, "greater than or equal to 1"),
    ("get_observations", {"ids": list(range(1, 52))}, "at most 50 items"),
    # an argument the tool does not take is named, not dropped (was "nothing to change")
    ("memory_update", {"id": "<note>", "status": "deprecated"}, "unknown argument(s) status"),
    ("memory_recall", {"query": "pool", "colour": "red"}, "unknown argument(s) colour"),
    # past a database integer: refused, not an overflow from the driver
    ("observation_timeline", {"id": 2**63}, "less than or equal to 9223372036854775807"),
    ("get_observations", {"ids": [1, 10**23]}, "less than or equal to 9223372036854775807"),
    ("memory_search_by_type", {"type": ""}, "at least 1 character"),
    ("memory_search_by_type", {"type": "wizard"}, "unknown type"),
    ("memory_search_by_type", {"type": "decision", "query": " "}, "query"),
    ("memory_search_by_type", {"type": "decision", "limit": 101}, "less than or equal to 100"),
    ("memory_save", {"content": ""}, "at least 1 character"),
    ("memory_save", {"content": "   "}, "content"),
    ("memory_save", {"content": "a fact", "importance": 2}, "less than or equal to 1"),
    ("memory_save", {"content": "a fact", "type": "wizard"}, "unknown type"),
    ("memory_update", {"id": "<note>"}, "nothing to change"),
    ("memory_update", {"id": ""}, "at least 1 character"),
    ("memory_update", {"id": "<note>", "content": " "}, "content"),
    ("memory_update", {"id": "<note>", "importance": -0.5}, "greater than or equal to 0"),
    ("memory_update", {"id": "mem_nope", "title": "x"}, "not found"),
    ("memory_add_entity", {"content": ""}, "at least 1 character"),
    ("memory_add_entity", {"content": "x", "type": "wizard"}, "unknown type"),
    ("memory_confirm_entity", {"pending_id": ""}, "at least 1 character"),
    ("memory_confirm_entity", {"pending_id": "pend_nope"}, "not found"),
    ("memory_confirm_entity", {"pending_id": "<rejected>"}, "was already rejected"),
    ("memory_reject_candidate", {"pending_id": ""}, "at least 1 character"),
    ("memory_reject_candidate", {"pending_id": "<confirmed>"}, "was already confirmed"),
    ("memory_deprecate_entity", {"id": ""}, "at least 1 character"),
    ("memory_deprecate_entity", {"id": "mem_nope"}, "not found"),
    ("memory_get_supersessions", {"status": "maybe"}, "status must be pending, resolved or all"),
    ("memory_get_supersessions", {"limit": 0}, "greater than or equal to 1"),
    ("memory_resolve_supersession", {"id": "", "keep": "new"}, "at least 1 character"),
    ("memory_resolve_supersession", {"id": "sup_nope", "keep": "maybe"}, "keep must be"),
    ("memory_resolve_supersession", {"id": "sup_nope", "keep": "new"}, "not found"),
    ("memory_get_pending", {"status": "maybe"}, "status must be"),
    ("memory_get_pending", {"limit": 0}, "greater than or equal to 1"),
    ("memory_get_pending", {"limit": 201}, "less than or equal to 200"),
    ("memory_start_episode", {"title": " "}, "title"),
    ("memory_close_episode", {"episode_id": ""}, "at least 1 character"),
    ("memory_close_episode", {"episode_id": "ep_nope"}, "not found"),
    ("memory_list_episodes", {"limit": -5}, "greater than or equal to 1"),
    ("memory_list_episodes", {"status": "done"}, "status must be active or completed"),
    ("memory_get_episode_detail", {"episode_id": ""}, "at least 1 character"),
    ("memory_get_episode_detail", {"episode_id": "<episode>", "max_messages": 0}, "greater"),
    ("memory_cache_message", {"content": ""}, "at least 1 character"),
    ("memory_cache_message", {"content": "hi", "role": "bot"}, "role must be user or assistant"),
    ("memory_clear_cache", {"confirm": "yes"}, "valid boolean"),
    ("memory_clear_cache", {"confirm": "true"}, "valid boolean"),
    ("memory_clear_cache", {"confirm": 1}, "valid boolean"),
    ("memory_clear_cache", {"confirm": True, "episode_id": ""}, "at least 1 character"),
    ("memory_cleanup_messages", {"older_than_days": -1}, "greater than or equal to 0"),
    ("memory_cleanup_messages", {"older_than_days": "soon"}, "valid number"),
]


def fill(arguments: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    return {
        k: known[v[1:-1]] if isinstance(v, str) and v.startswith("<") and v.endswith(">") else v
        for k, v in arguments.items()
    }


async def test_every_tool_refuses_bad_input_with_a_clear_error_and_changes_nothing(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    project = make_project("app")
    run_hook_process(
        "post-tool-use",
        json.dumps(
            {
                "session_id": "s1",
                "cwd": str(project),
                "tool_name": "Bash",
                "tool_input": {"command": "pytest -q tests/api"},
                "tool_response": {"stdout": "7 passed"},
            }
        ),
    )
    state = StateDB(mem_home / "state.db")
    try:
        pending = PendingStore(state)
        keep = pending.add(EntityCandidate("decision", "we use uv for envs", 0.6, "use uv"))
        drop = pending.add(EntityCandidate("preference", "vim is fine I guess", 0.5, "vim"))
        (obs,) = state.read("SELECT id FROM mem_episode_messages WHERE role = 'observation'")
        (episode,) = state.read("SELECT id FROM mem_episodes")
    finally:
        state.close()

    async with mcp_session(mem_home, project) as session:
        (note,) = ids_in(await call(session, "memory_save", content="The pool holds 20."))
        await call(session, "memory_confirm_entity", pending_id=keep.id)
        await call(session, "memory_reject_candidate", pending_id=drop.id)
        known = {
            "note": note,
            "obs": obs["id"],
            "episode": episode["id"],
            "confirmed": keep.id,
            "rejected": drop.id,
        }
        tools = {t.name for t in (await session.list_tools()).tools}
        covered = {tool for tool, _, _ in BAD_INPUTS}
        assert tools - NO_ARGUMENTS == covered, "every tool with arguments has rows"

        before = home_fingerprint(mem_home)
        wrong = []
        for tool, arguments, expected in BAD_INPUTS:
            result = await session.call_tool(tool, fill(arguments, known))
            text = "\n".join(getattr(b, "text", "") for b in result.content)
            if not result.isError or expected.lower() not in text.lower():
                wrong.append(f"{tool}({arguments}) -> error={result.isError}: {text[:300]}")
        assert not wrong, "\n".join(wrong)
        assert home_fingerprint(mem_home) == before

        # the same tools still work when asked properly
        assert "Cleared" in await call(session, "memory_clear_cache", confirm=True)
        assert "Updated" in await call(session, "memory_update", id=note, title="pool size")
