"""The agent searches its workspace with the real CLI: grep runs inside, find of `/` is refused.

The bundled Claude Code has no Glob or Grep tool and tells the model to use `grep`, `rg` or
`find` in Bash, so these have to work through the PreToolUse gate.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from settings import Settings
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI, text, tool

pytestmark = pytest.mark.e2e


async def test_grep_finds_the_line_inside_and_find_of_the_disk_root_is_refused(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    settings = make_settings()
    notes = settings.workspace_dir / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    (notes / "todo.md").write_text("first line\nthe needle is here\nlast line\n")
    fake_model.on(
        "search my notes",
        tool("Bash", {"command": "grep -rn needle ."}),
        tool("Bash", {"command": "find / -name passwd"}),
        text("Found it in notes/todo.md."),
    )
    async with running_app(settings) as client:
        await client.post("/api/chat", json={"message": "search my notes"})

    results = [r for req in fake_model.message_requests() for r in req.tool_results]
    grep_result, find_result = results
    assert grep_result.get("is_error") is not True
    assert "notes/todo.md:2:the needle is here" in json.dumps(grep_result["content"])
    assert find_result["is_error"] is True
    refusal = json.dumps(find_result["content"])
    assert "outside the workspace" in refusal
    assert "/etc/passwd" not in refusal  # nothing of the disk was listed
