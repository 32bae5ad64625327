"""Secrets never stored, on PostgreSQL: the corpus through the HTTP API, the CLI, the hooks, the
MCP server and a chat turn of an app whose memory and state live in the database; then every
text of every row of every table is scanned (tests/security has the same for a SQLite home).

The SDK's transcript mirror (`agent_session*` tables) is the documented exception, as the
CLI's own transcripts are (docs/memory-format.md, "Secrets")."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from settings import Settings
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI, text
from tests.security.corpus import LOOKALIKES, SECRETS
from tests.security.test_secrets_at_rest import (
    LOOKALIKE_TEXT,
    SECRET_TEXT,
    _forms,
    _hook_payloads,
    _run,
    _transcript,
)

TRANSCRIPT_MIRROR = ("agent_session",)  # the SDK's verbatim transcripts: documented exception


def database_leaks(url: str) -> tuple[list[tuple[str, str]], int]:
    """(table, secret) for every secret in any row of any table, and how many rows were read."""
    found: list[tuple[str, str]] = []
    rows_read = 0
    with psycopg.connect(url) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
            )
        ]
        for table in tables:
            if table.startswith(TRANSCRIPT_MIRROR):
                continue
            for (row,) in conn.execute(f'SELECT t::text FROM "{table}" t'):  # every column
                rows_read += 1
                data = row.encode()
                for secret in SECRETS:
                    if any(form in data for form in _forms(secret.value)):
                        found.append((table, secret.value))
    return found, rows_read


@pytest.mark.e2e
async def test_the_corpus_through_every_front_door_leaves_no_secret_in_the_database(
    make_settings: Callable[..., Settings],
    fake_model: FakeMessagesAPI,
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.hooks.test_mcp_server import call, mcp_session

    monkeypatch.setenv("CLAUDE_MEMORY_DATABASE_URL", database_url)
    settings = make_settings(database_url=database_url)
    home = settings.home
    project = tmp_path / "work" / "app"
    project.mkdir(parents=True)
    env = {**os.environ, "CLAUDE_MEMORY_HOME": str(home), "CLAUDE_MEMORY_HOOK_SERVER": "0"}
    fake_model.on("Hunter2xq", text(f"Here is what you sent:\n{SECRET_TEXT}"))

    async with running_app(settings) as client:
        saved = await client.post("/api/memories", json={"content": SECRET_TEXT})
        assert saved.status_code == 200, saved.text
        plain = await client.post("/api/memories", json={"content": LOOKALIKE_TEXT})
        assert plain.status_code == 200, plain.text
        for message in (SECRET_TEXT, "again: password=Hunter2xq"):
            reply = await client.post(
                "/api/chat", json={"message": message, "conversation_id": "secrets"}
            )
            assert reply.status_code == 200, reply.text
        container = client.app.state.container  # type: ignore[attr-defined]
        await container.sessions.close_conversation("secrets", reason="test")

    _run(["memory", "add", f"cli arg\n{SECRET_TEXT}", "--title", "密码：Zh9pw31"], env=env)
    transcript = _transcript(tmp_path / "transcript.jsonl")
    for event, payload in _hook_payloads(project, transcript).items():
        _run(["hook", event], stdin=json.dumps(payload), env=env)
    async with mcp_session(home, project) as session:
        await call(session, "memory_save", content=SECRET_TEXT, title="mcp 密码是 qwe77z")

    found, rows_read = database_leaks(database_url)
    assert found == []
    assert rows_read > 10, "the doors stored their text in the database"
    with psycopg.connect(database_url) as conn:
        (body,) = conn.execute(
            "SELECT body FROM memory_notes WHERE id = %s", (plain.json()["id"],)
        ).fetchone() or (None,)
        turns = [r[0] for r in conn.execute("SELECT message FROM conversation_turns")]
    assert [look for look in LOOKALIKES if look not in (body or "")] == []
    assert any("[REDACTED:password]" in t for t in turns)
