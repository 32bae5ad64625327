"""`python -m memory.cli` on the shared PostgreSQL database: it reads the same settings as
`claude-memory memory`, so a note it adds lives in the database, not in the home's files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli import main as cli_main


def test_python_m_memory_cli_works_on_the_database(
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    done = subprocess.run(
        [sys.executable, "-m", "memory.cli", "--home", str(home), "add", "部署用 systemd 重启服务"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "CLAUDE_MEMORY_DATABASE_URL": database_url},
    )
    assert done.returncode == 0, done.stderr
    note_id = done.stdout.split()[1]
    assert note_id.startswith("mem_")
    assert not list(home.rglob("*.md")), "the note went to the home's files"

    monkeypatch.setenv("CLAUDE_MEMORY_DATABASE_URL", database_url)
    assert cli_main(["--home", str(tmp_path / "other"), "memory", "show", note_id]) == 0
    assert "systemd" in capsys.readouterr().out
