"""An error nobody planned for still tells the truth at every door: a JSON answer with a next step
and the log to read over HTTP, one cleaned line and a next step in the CLI (the Feishu card:
tests/bridge/test_error_cards_e2e.py). The error is made from the outside: the memory index on
disk is damaged while the app runs."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from settings import Settings
from tests.conftest import running_app
from tests.test_doctor_checks import claude_memory


def damage_index(index: Path) -> None:
    """What a broken disk or a stray tool can leave: the index without its notes table."""
    db = sqlite3.connect(index)
    try:
        db.execute("DROP TABLE notes")
        db.commit()
    finally:
        db.close()


async def test_an_unexpected_store_error_is_a_json_500_with_a_next_step_and_the_log(
    make_settings: Callable[..., Settings], caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings()
    async with running_app(settings) as client:
        assert (await client.get("/api/memories")).status_code == 200
        damage_index(settings.index_path)
        with caplog.at_level(logging.ERROR, logger="web.errors"):
            response = await client.get("/api/memories")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    log_file = str(settings.logs_dir / "server.log")
    assert body["error"] == "OperationalError: no such table: notes"
    assert body["log_file"] == log_file
    assert "`claude-memory memory reindex` rebuilds the index" in body["next_step"]
    assert body["detail"] == (
        f"Unexpected error (OperationalError: no such table: notes). Next: {body['next_step']}. "
        f"The log has the details: search {log_file} for {body['error_id']}."
    )
    [record] = [r for r in caplog.records if body["error_id"] in r.getMessage()]
    assert record.exc_info is not None  # the traceback is in the log, not in the answer
    assert "Traceback" not in response.text


def test_the_cli_says_the_same_in_one_line_with_a_next_step(tmp_path: Path) -> None:
    home = tmp_path / "cm-home"
    made = claude_memory(tmp_path, "memory", "add", "the trip is on Wednesday")
    assert made.returncode == 0, made.stderr
    damage_index(Settings(home=home).index_path)
    done = claude_memory(tmp_path, "memory", "list")
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0] == "claude-memory: unexpected error: OperationalError: no such table: notes"
    assert lines[1].startswith("  -> the memory index or the state database may be damaged")
    assert "Traceback" not in done.stderr
