"""The permission policy holds with the real CLI: every tool call passes the PreToolUse gate."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from settings import Settings
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI, text, tool

pytestmark = pytest.mark.e2e


def permission_records(log_file: str) -> list[dict[str, object]]:
    lines = Path(log_file).read_text(encoding="utf-8").splitlines()
    return [r["data"] for r in map(json.loads, lines) if r["type"] == "permission"]


async def test_rm_outside_the_workspace_is_refused_and_the_file_survives(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    settings = make_settings()
    outside = settings.workspace_dir.parent / "outside.txt"
    outside.parent.mkdir(parents=True, exist_ok=True)
    outside.write_text("precious")
    fake_model.on("delete it", tool("Bash", {"command": "rm ../outside.txt"}), text("I could not."))
    async with running_app(settings) as client:
        body = (await client.post("/api/chat", json={"message": "delete it"})).json()
    assert outside.read_text() == "precious"
    (record,) = permission_records(body["log_file"])
    assert record["allowed"] is False
    assert "outside the workspace" in str(record["reason"])
    # The model saw the refusal as an error tool result with the policy's reason.
    follow_up = fake_model.message_requests()[-1]
    (result,) = follow_up.tool_results
    assert result["is_error"] is True
    assert "outside the workspace" in json.dumps(result["content"])


async def test_mv_inside_the_workspace_really_moves_the_file(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    settings = make_settings()
    settings.workspace_dir.mkdir(parents=True, exist_ok=True)
    (settings.workspace_dir / "a.txt").write_text("content")
    fake_model.on("rename", tool("Bash", {"command": "mv a.txt b.txt"}), text("Renamed."))
    async with running_app(settings) as client:
        body = (await client.post("/api/chat", json={"message": "rename a to b"})).json()
    assert body == body | {"reply": "Renamed.", "is_error": False}
    assert not (settings.workspace_dir / "a.txt").exists()
    assert (settings.workspace_dir / "b.txt").read_text() == "content"
    (record,) = permission_records(body["log_file"])
    assert record["allowed"] is True


async def test_read_only_ls_of_root_is_still_refused_by_the_hook(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    # The CLI auto-approves read-only commands like `ls` without asking can_use_tool;
    # only the PreToolUse hook stops this one.
    fake_model.on("look around", tool("Bash", {"command": "ls /"}), text("Refused, sorry."))
    async with running_app(make_settings()) as client:
        body = (await client.post("/api/chat", json={"message": "look around"})).json()
    (result,) = fake_model.message_requests()[-1].tool_results
    assert result["is_error"] is True
    listing = json.dumps(result["content"])
    assert "outside the workspace" in listing
    assert "proc" not in listing and "etc" not in listing.replace("etc.", "")
    assert permission_records(body["log_file"])[0]["allowed"] is False


async def test_write_through_a_symlink_to_outside_is_refused(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    settings = make_settings()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    settings.workspace_dir.mkdir(parents=True, exist_ok=True)
    (settings.workspace_dir / "link").symlink_to(outside)
    fake_model.on(
        "write through link",
        tool(
            "Write", {"file_path": str(settings.workspace_dir / "link" / "x.txt"), "content": "hi"}
        ),
        text("Could not write."),
    )
    async with running_app(settings) as client:
        body = (await client.post("/api/chat", json={"message": "write through link"})).json()
    assert not (outside / "x.txt").exists()
    assert permission_records(body["log_file"])[0]["allowed"] is False
