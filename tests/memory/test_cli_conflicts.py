"""`claude-memory memory add` says when the new note contradicts an older one, and which
choice is pending (resolved on the web page, over HTTP or MCP)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.memory.test_cli import run


def test_add_reports_a_conflict_and_its_pending_choice(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(home, "add", "周会在周一上午 10 点", "--type", "decision", "--json") == 0
    old = json.loads(capsys.readouterr().out)
    assert "conflicts_with" not in old
    assert run(home, "add", "周会在周一上午 11 点", "--type", "decision") == 0
    out = capsys.readouterr().out
    assert f"conflicts with [{old['id']}]: a number changed (10 -> 11)" in out
    assert "Pending your choice (sup_" in out
    assert run(home, "add", "Keep logs for 14 days", "--json") == 0
    capsys.readouterr()
    assert run(home, "add", "Keep logs for 30 days", "--json") == 0
    again = json.loads(capsys.readouterr().out)
    assert again["conflicts_with"] and again["pending"].startswith("sup_")
