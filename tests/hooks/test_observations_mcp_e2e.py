"""Seed 004's progressive disclosure over MCP, on what a real Claude Code session recorded:
search_observations -> observation_timeline -> get_observations.

The bundled Claude Code CLI runs one session with our hooks installed against the fake model
(two Bash calls); then the official MCP client drives `claude-memory mcp` over stdio in the
same project and walks the three steps."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from tests.fakes.anthropic_api import FakeMessagesAPI, text, tool
from tests.hooks.claude_code import run_claude
from tests.hooks.test_mcp_server import call, mcp_session

pytestmark = pytest.mark.e2e


def record_a_session(fake_model: FakeMessagesAPI, env: dict[str, str], project: Path) -> None:
    """One `claude -p` session with our hooks installed: two Bash calls, then a reply."""
    fake_model.on(
        "why does the pool time out",
        tool("Bash", {"command": "echo PoolTimeout after 30s in db/pool.py"}),
        tool("Bash", {"command": "echo raised pool_size from 5 to 20"}),
        text("The pool was too small; it holds 20 connections now."),
    )
    run_claude("why does the pool time out under load?", cwd=project, env=env)


async def test_search_timeline_and_details_of_a_real_sessions_observations(
    fake_model: FakeMessagesAPI,
    mem_home: Path,
    make_project: Callable[..., Path],
    claude_code: Callable[..., dict[str, str]],
) -> None:
    project = make_project("shop/api")
    env = await anyio.to_thread.run_sync(claude_code)
    await anyio.to_thread.run_sync(record_a_session, fake_model, env, project)

    async with mcp_session(mem_home, project) as session:
        found = await call(session, "search_observations", query="PoolTimeout pool.py")
        ids = [int(n) for n in re.findall(r"^#(\d+) ", found, re.MULTILINE)]
        assert len(ids) == 1, found
        assert "执行: echo PoolTimeout after 30s in db/pool.py" in found

        timeline = await call(session, "observation_timeline", id=ids[0], after=3)
        lines = timeline.splitlines()
        assert "api 开发会话" in lines[0]  # the session it belongs to
        prompt = next(i for i, x in enumerate(lines) if "why does the pool time out" in x)
        anchor = next(i for i, x in enumerate(lines) if x.startswith(f">#{ids[0]} "))
        later = next(i for i, x in enumerate(lines) if "raised pool_size from 5 to 20" in x)
        assert prompt < anchor < later  # what was asked, the hit, what happened next

        details = await call(session, "get_observations", ids=ids)
        assert details.startswith(f"#{ids[0]} ") and "PoolTimeout after 30s" in details

        elsewhere = await call(session, "search_observations", query="pool_size")
        assert "raised pool_size" in elsewhere
    async with mcp_session(mem_home, make_project("other")) as session:
        # another project's sessions stay out unless asked for
        alone = await call(session, "search_observations", query="PoolTimeout")
        assert alone == "No observations found."
        everywhere = await call(
            session, "search_observations", query="PoolTimeout", all_projects=True
        )
        assert f"#{ids[0]} " in everywhere
