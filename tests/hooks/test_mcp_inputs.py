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

NO_ARGUMENTS = {"memory_status"}
"""Tools that take no argument, so no input of theirs can be wrong."""

# (tool, arguments, a piece of the error it must give). Ids in <angle brackets> are filled in
# from the memory the test sets up.
BAD_INPUTS: list[tuple[str, dict[str, Any], str]] = [
    ("memory_search", {"query": ""}, "at least 1 character"),
    ("memory_search", {"query": "\n\t"}, "query"),
    ("memory_search", {"query": "pool", "limit": 0}, "greater than or equal to 1"),
    ("memory_search", {"query": "pool", "limit": 500}, "less than or equal to 30"),
    ("memory_search", {"query": "pool", "limit": 2.5}, "valid integer"),
    ("memory_search", {"query": "pool", "type": "wizard"}, "unknown type 'wizard'"),
    ("memory_search", {"query": "pool", "all_projects": "maybe"}, "all_projects"),
    ("memory_search", {"query": "x" * 2001}, "at most 2000 characters"),
    ("memory_search", {"limit": 3}, "query: Field required"),
    # an argument the tool does not take is named, not dropped (was "nothing to change")
    ("memory_search", {"query": "pool", "colour": "red"}, "unknown argument(s) colour"),
    ("memory_get", {"ids": []}, "at least 1 item"),
    ("memory_get", {"ids": [""]}, "at least 1 character"),
    ("memory_get", {"ids": [f"mem_{n}" for n in range(11)]}, "at most 10 items"),
    ("memory_get", {"ids": "mem_x"}, "valid list"),
    ("search_observations", {"query": ""}, "at least 1 character"),
    ("search_observations", {"query": "？！"}, "no word to look for"),
    ("search_observations", {"query": "pytest", "limit": 0}, "greater than or equal to 1"),
    ("search_observations", {"query": "pytest", "all_projects": "yes"}, "valid boolean"),
    ("observation_timeline", {"id": 0}, "greater than or equal to 1"),
    ("observation_timeline", {"id": 999999}, "observation '999999' not found"),
    ("observation_timeline", {"id": "<obs>", "before": -1}, "greater than or equal to 0"),
    ("observation_timeline", {"id": "<obs>", "after": 21}, "less than or equal to 20"),
    # past a database integer: refused, not an overflow from the driver
    ("observation_timeline", {"id": 2**63}, "less than or equal to 9223372036854775807"),
    ("get_observations", {"ids": []}, "at least 1 item"),
    ("get_observations", {"ids": [-3]}, "greater than or equal to 1"),
    ("get_observations", {"ids": list(range(1, 52))}, "at most 50 items"),
    ("get_observations", {"ids": [1, 10**23]}, "less than or equal to 9223372036854775807"),
    ("memory_save", {"content": ""}, "at least 1 character"),
    ("memory_save", {"content": "   "}, "content"),
    ("memory_save", {"title": "no content"}, "content: Field required"),
    ("memory_save", {"content": "a fact", "importance": 2}, "less than or equal to 1"),
    ("memory_save", {"content": "a fact", "type": "wizard"}, "unknown type"),
    ("memory_save", {"content": "a fact", "tags": "one"}, "valid list"),
    ("memory_save", {"id": "<note>"}, "nothing to change"),
    ("memory_save", {"id": ""}, "at least 1 character"),
    ("memory_save", {"id": "<note>", "content": " "}, "content"),
    ("memory_save", {"id": "<note>", "importance": -0.5}, "greater than or equal to 0"),
    ("memory_save", {"id": "mem_nope", "title": "x"}, "not found"),
    ("memory_save", {"id": "<note>", "status": "deprecated"}, "unknown argument(s) status"),
    ("memory_save", {"id": "<note>", "supersedes": "<note>"}, "only for a new note"),
    ("memory_deprecate", {"id": ""}, "at least 1 character"),
    ("memory_deprecate", {"id": "mem_nope"}, "not found"),
    ("memory_review", {"status": "maybe"}, "Input should be 'pending' or 'all'"),
    ("memory_review", {"limit": 0}, "greater than or equal to 1"),
    ("memory_review", {"limit": 201}, "less than or equal to 200"),
    ("memory_resolve", {"id": "", "choice": "confirm"}, "at least 1 character"),
    ("memory_resolve", {"id": "pend_nope", "choice": "maybe"}, "Input should be 'confirm'"),
    ("memory_resolve", {"id": "pend_nope", "choice": "confirm"}, "not found"),
    ("memory_resolve", {"id": "<rejected>", "choice": "confirm"}, "was already rejected"),
    ("memory_resolve", {"id": "<confirmed>", "choice": "reject"}, "was already confirmed"),
    ("memory_resolve", {"id": "<confirmed>", "choice": "new"}, "confirm or reject"),
    ("memory_resolve", {"id": "sup_nope", "choice": "reject"}, "new, old or both"),
    ("memory_resolve", {"id": "sup_nope", "choice": "new"}, "not found"),
    ("memory_cleanup", {}, "confirm: Field required"),
    ("memory_cleanup", {"confirm": "yes"}, "valid boolean"),
    ("memory_cleanup", {"confirm": "true"}, "valid boolean"),
    ("memory_cleanup", {"confirm": 1}, "valid boolean"),
    ("memory_cleanup", {"confirm": True, "episode_id": ""}, "at least 1 character"),
    ("memory_cleanup", {"confirm": True, "episode_id": "ep_nope"}, "not found"),
    ("memory_cleanup", {"confirm": True, "older_than_days": -1}, "greater than or equal to 0"),
    ("memory_cleanup", {"confirm": True, "older_than_days": "soon"}, "valid number"),
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
        await call(session, "memory_resolve", id=keep.id, choice="confirm")
        await call(session, "memory_resolve", id=drop.id, choice="reject")
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
        assert "Deleted" in await call(session, "memory_cleanup", confirm=True)
        assert "Updated" in await call(session, "memory_save", id=note, title="pool size")


GOOD_INPUTS: list[tuple[str, dict[str, Any]]] = [
    ("memory_search", {"query": "pool", "limit": 30, "all_projects": True, "type": "bug"}),
    ("memory_get", {"ids": ["mem_a", "ep_b"]}),
    ("memory_save", {"content": "a fact", "tags": [], "importance": 0}),
    ("memory_save", {"id": "mem_a", "title": ""}),
    ("observation_timeline", {"id": 2**63 - 1, "before": 0, "after": 20}),
    ("memory_review", {"status": "all"}),
    ("memory_resolve", {"id": "sup_a", "choice": "both"}),
    ("memory_status", {}),
    ("memory_cleanup", {"confirm": False, "older_than_days": 0.5}),
]


def test_the_schemas_say_exactly_what_is_checked() -> None:
    """What a client checks against the listed schema (JSON Schema 2020-12) and what the
    server refuses before running the tool agree, on every row above."""
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

    from errors import InvalidInputError
    from memory.clients.mcp_tools.catalog import SPECS
    from memory.clients.mcp_tools.schema import check

    schemas = {spec.name: spec.input_schema for spec in SPECS}
    for schema in schemas.values():
        Draft202012Validator.check_schema(schema)
    placeholders = {"note": "mem_x", "obs": 1, "confirmed": "pend_a", "rejected": "pend_b"}
    rows = [(tool, fill(args, placeholders)) for tool, args, _ in BAD_INPUTS]
    disagree = []
    for tool, arguments in [*rows, *GOOD_INPUTS]:
        by_schema = not Draft202012Validator(schemas[tool]).is_valid(arguments)
        try:
            check(tool, schemas[tool], arguments)
            by_server = False
        except InvalidInputError:
            by_server = True
        if by_schema != by_server:
            disagree.append(f"{tool}({arguments}): schema {by_schema}, server {by_server}")
    assert not disagree, "\n".join(disagree)
