"""The home is private on disk: folders 0700, files 0600, logs included, however it is used."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from settings import Settings
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI, text
from tests.helpers import assert_private_tree
from tests.hooks.conftest import CLAUDE_MEMORY, run_hook_process
from tests.hooks.test_hook_process import real_payloads


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """Start from the usual 022, so only the app's own umask can make the home private."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def doctor(home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLAUDE_MEMORY), "--home", str(home), "doctor"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
        check=False,
    )


@pytest.mark.e2e
async def test_after_a_chat_turn_and_hook_runs_the_home_is_private(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    fake_model.on("remember my cat", text("Noted: your cat is Tom."))
    settings = make_settings()
    async with running_app(settings) as client:
        reply = (await client.post("/api/chat", json={"message": "remember my cat"})).json()
        saved = await client.post("/api/memories", json={"content": "The cat is called Tom."})
    assert reply["reply"] == "Noted: your cat is Tom."
    assert saved.status_code == 200

    project = tmp_path / "project"
    project.mkdir()
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text(json.dumps({"type": "user", "message": {"content": "hi"}}) + "\n")
    payloads = real_payloads(project, transcript)
    env = {"CLAUDE_MEMORY_HOME": str(settings.home_dir), "CLAUDE_MEMORY_HOOK_SERVER": "0"}
    for event in ("session-start", "user-prompt-submit", "post-tool-use", "stop"):
        done = run_hook_process(event, json.dumps(payloads[event]), env=env)
        assert done.returncode == 0, done.stderr

    assert (settings.logs_dir).is_dir() and any(settings.logs_dir.iterdir())
    assert_private_tree(settings.home_dir)


async def test_a_home_made_world_readable_before_is_narrowed_at_start(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings()
    home = settings.home_dir
    (home / "logs").mkdir(parents=True)
    (home / "logs" / "old.log").write_text("a conversation")
    (home / "state.db").write_bytes(b"")
    for path, mode in ((home, 0o755), (home / "logs", 0o755), (home / "state.db", 0o644)):
        path.chmod(mode)
    async with running_app(settings) as client:
        assert (await client.get("/health")).status_code == 200
    assert (home.stat().st_mode & 0o777) == 0o700
    assert (home / "logs").stat().st_mode & 0o777 == 0o700
    assert (home / "state.db").stat().st_mode & 0o777 == 0o600
    # Deeper entries stay as they were (no walk on every start) but nobody else can reach
    # them now; doctor names them.
    assert (home / "logs" / "old.log").stat().st_mode & 0o777 == 0o644


def test_doctor_warns_about_a_readable_home_and_says_the_chmod_to_run(tmp_path: Path) -> None:
    home = tmp_path / "cm-home"
    (home / "memory").mkdir(parents=True)
    note = home / "memory" / "note.md"
    note.write_text("private")
    for path, mode in ((home, 0o700), (home / "memory", 0o700), (note, 0o644)):
        path.chmod(mode)
    done = doctor(home)
    assert f"1 entry under {home} readable by group or others: {note}" in done.stdout
    assert f"run: chmod -R go-rwx '{home}'" in done.stdout
    subprocess.run(["chmod", "-R", "go-rwx", str(home)], check=True)
    again = doctor(home)
    assert f"[ok] private: {home}" in again.stdout


def test_doctor_shows_the_model_endpoint_without_its_credentials(tmp_path: Path) -> None:
    done = doctor(
        tmp_path / "cm-home",
        ANTHROPIC_BASE_URL="https://alice:hunter2@llm.example/v1?key=sk-leak",
    )
    assert "model endpoint: https://llm.example/v1?key=***" in done.stdout
    assert "hunter2" not in done.stdout + done.stderr
    assert "sk-leak" not in done.stdout + done.stderr


def test_a_hook_run_creates_a_private_home(tmp_path: Path) -> None:
    home = tmp_path / "fresh-home"
    project = tmp_path / "project"
    project.mkdir()
    payload = real_payloads(project, tmp_path / "none.jsonl")["user-prompt-submit"]
    env = {"CLAUDE_MEMORY_HOME": str(home), "CLAUDE_MEMORY_HOOK_SERVER": "0"}
    done = run_hook_process("user-prompt-submit", json.dumps(payload), env=env)
    assert done.returncode == 0, done.stderr
    assert home.is_dir()
    assert_private_tree(home)
