"""Secrets never stored: the corpus goes through every front door (HTTP API, CLI, hooks, MCP,
a chat turn), then every byte under the home is scanned. The look-alikes must arrive intact.

The Claude CLI's own transcripts live under CLAUDE_CONFIG_DIR, outside the home (the one
documented exception, docs/memory-format.md "Secrets"): they are not scanned here."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from settings import Settings
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI, text, tool
from tests.security.corpus import LOOKALIKES, SECRETS

CLAUDE_MEMORY = Path(sys.executable).parent / "claude-memory"
SECRET_TEXT = "\n".join(s.text for s in SECRETS)
LOOKALIKE_TEXT = "\n".join(LOOKALIKES)


def _forms(value: str) -> set[bytes]:
    """The bytes a value takes on disk: UTF-8, and JSON-escaped (`\\uXXXX`, `\\"`)."""
    return {
        value.encode(),
        json.dumps(value)[1:-1].encode(),
        json.dumps(value, ensure_ascii=False)[1:-1].encode(),
    }


def _sqlite_dump(path: Path) -> bytes:
    """Every row of every table (full-text shadow tables included), as SQL text: a value split
    across SQLite pages is whole here."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return "\n".join(conn.iterdump()).encode()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return b""


def leaks(home: Path) -> list[tuple[str, str]]:
    """(file, secret value) for every secret found in the raw bytes of any file under `home`
    (SQLite `-wal`/`-shm` files included) or in a dump of any SQLite database there."""
    found = []
    files = [p for p in sorted(home.rglob("*")) if p.is_file()]
    assert files, f"nothing stored under {home}"
    for path in files:
        data = path.read_bytes()
        if data.startswith(b"SQLite format 3\x00"):
            data += _sqlite_dump(path)
        for secret in SECRETS:
            if any(form in data for form in _forms(secret.value)):
                found.append((str(path.relative_to(home)), secret.value))
    return found


def _run(args: list[str], *, stdin: str = "", env: dict[str, str]) -> str:
    proc = subprocess.run(
        [str(CLAUDE_MEMORY), *args],
        input=stdin.encode(),
        capture_output=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def _hook_payloads(project: Path, transcript: Path) -> dict[str, dict[str, Any]]:
    base = {"session_id": "sess-secrets-1", "transcript_path": str(transcript), "cwd": str(project)}
    return {
        "user-prompt-submit": {
            **base,
            "hook_event_name": "UserPromptSubmit",
            "prompt": SECRET_TEXT,
        },
        "post-tool-use": {
            **base,
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_use_id": "toolu_secret",
            "tool_input": {"command": SECRET_TEXT, "description": SECRET_TEXT},
            "tool_response": {"stdout": SECRET_TEXT, "stderr": SECRET_TEXT},
        },
        "stop": {**base, "hook_event_name": "Stop", "stop_hook_active": False},
        "session-end": {**base, "hook_event_name": "SessionEnd", "reason": "prompt_input_exit"},
    }


def _transcript(path: Path) -> Path:
    """A Claude Code transcript (outside the home) whose last turn echoes the corpus."""
    lines = [
        {"type": "user", "message": {"role": "user", "content": SECRET_TEXT}},
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"You said:\n{SECRET_TEXT}"},
                    {
                        "type": "tool_use",
                        "id": "toolu_2",
                        "name": "Bash",
                        "input": {"command": SECRET_TEXT},
                    },
                ],
            },
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


async def test_the_corpus_through_api_cli_hooks_and_mcp_leaves_no_secret_on_disk(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    from tests.hooks.test_mcp_server import call, mcp_session

    settings = make_settings()
    home = settings.home
    project = tmp_path / "work" / "app"
    project.mkdir(parents=True)
    env = {**os.environ, "CLAUDE_MEMORY_HOME": str(home), "CLAUDE_MEMORY_HOOK_SERVER": "0"}

    # HTTP API: save (every text field) and update
    async with running_app(settings) as client:
        saved = await client.post(
            "/api/memories",
            json={
                "content": SECRET_TEXT,
                "title": "creds password=Hunter2xq",
                "summary": "token: tkn8FhQ2mZ9x",
                "tags": ["pwd=ku83"],
                "source": "postgres://admin:pgUrlPw66@db.example.com/app",
            },
        )
        assert saved.status_code == 200, saved.text
        updated = await client.put(
            f"/api/memories/{saved.json()['id']}", json={"content": f"v2\n{SECRET_TEXT}"}
        )
        assert updated.status_code == 200, updated.text
        plain = await client.post("/api/memories", json={"content": LOOKALIKE_TEXT})
        assert plain.status_code == 200, plain.text

    # CLI: argument and stdin
    _run(["memory", "add", f"cli arg\n{SECRET_TEXT}", "--title", "密码：Zh9pw31"], env=env)
    _run(["memory", "add", "-", "--tags", "口令：kl78m"], stdin=f"stdin\n{SECRET_TEXT}", env=env)

    # hooks, as Claude Code runs them
    transcript = _transcript(tmp_path / "transcript.jsonl")
    for event, payload in _hook_payloads(project, transcript).items():
        _run(["hook", event], stdin=json.dumps(payload), env=env)

    # MCP over stdio
    async with mcp_session(home, project) as session:
        await call(session, "memory_save", content=SECRET_TEXT, title="mcp 密码是 qwe77z")
        await call(session, "memory_save", type="Decision", content=f"decided: {SECRET_TEXT}")

    assert leaks(home) == []
    # the doors did store the text, redacted: the scan is not vacuous
    state = _sqlite_dump(home / "state.db").decode()
    assert state.count("[REDACTED:password]") >= 10
    assert "mcp:" in state and "sess-secrets-1" in state
    note = (home / "memory" / plain.json()["path"]).read_text(encoding="utf-8")
    assert [t for t in LOOKALIKES if t not in note] == []
    assert (home / "logs" / "hooks.log").exists()


@pytest.mark.e2e
async def test_a_chat_turn_echoing_the_corpus_leaves_no_secret_on_disk(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on(
        "Hunter2xq",
        tool("Grep", {"pattern": SECRET_TEXT, "path": "."}, say=f"Searching for\n{SECRET_TEXT}"),
        text(f"Here is what you sent:\n{SECRET_TEXT}\n{LOOKALIKE_TEXT}"),
    )
    fake_model.on("Summarize this session", text(f"Summary: {SECRET_TEXT}"))
    settings = make_settings()
    async with running_app(settings) as client:
        for message in (SECRET_TEXT, "again: password=Hunter2xq", f"last\n{LOOKALIKE_TEXT}"):
            reply = await client.post(
                "/api/chat", json={"message": message, "conversation_id": "secrets"}
            )
            assert reply.status_code == 200, reply.text
        container = client.app.state.container  # type: ignore[attr-defined]
        await container.sessions.close_conversation("secrets", reason="test")
    assert fake_model.requests_for("Hunter2xq"), "the model saw the message"
    assert leaks(settings.home) == []
    conn = sqlite3.connect(settings.home / "state.db")
    try:
        stored = [r[0] for r in conn.execute("SELECT message FROM turns ORDER BY id")]
    finally:
        conn.close()
    assert stored[-1] == f"last\n{LOOKALIKE_TEXT}"
    assert "[REDACTED:password]" in stored[0]
