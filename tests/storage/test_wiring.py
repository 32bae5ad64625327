"""Choosing the backend from settings: SQLite by default, the shared database with a URL."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.conversations import ConversationStore
from app import build_container
from bridge.state import BridgeState
from cli import main as cli_main
from errors import ConfigurationError
from memory.clients.mcp_tools.context import McpConfig, ToolContext
from memory.model import NoteDraft
from memory.postgres.state import PostgresStateDB
from memory.postgres.store import PostgresMemoryStore
from settings import Settings
from tests.conftest import running_app
from tests.hooks.conftest import run_hook_process


def test_without_a_database_url_everything_stays_in_sqlite(
    make_settings: Callable[..., Settings],
) -> None:
    container = build_container(make_settings())
    try:
        assert isinstance(container.conversations, ConversationStore)
        assert container.database is None and container.feishu_state is None
        assert container.sessions.session_store is None and container.sessions.turn_lock is None
    finally:
        container.conversations.close()
        container.state.close()
        container.memory.close()


async def test_two_containers_on_one_database_share_conversations_and_feishu_state(
    make_settings: Callable[..., Settings], database_url: str, tmp_path: Path
) -> None:
    def settings(name: str) -> Settings:
        return make_settings(
            home=tmp_path / name,
            database_url=database_url,
            feishu_app_id="cli_x",
            feishu_app_secret="s",
        )

    a, b = build_container(settings("a")), build_container(settings("b"))
    try:
        await a.start()
        await b.start()
        assert isinstance(a.conversations, ConversationStore)
        assert isinstance(b.feishu_state, BridgeState)
        a.conversations.ensure("c1", title="from a", source="web")
        assert (conv := b.conversations.get("c1")) is not None and conv.title == "from a"
        assert a.feishu_state is not None and a.feishu_state.claim("e1", "m1") is True
        assert b.feishu_state.claim("e1", "m1") is False
        assert a.sessions.session_store is not None and b.sessions.turn_lock is not None
    finally:
        await a.aclose()
        await b.aclose()


async def test_health_names_the_shared_database_without_its_credentials(
    make_settings: Callable[..., Settings], database_url: str
) -> None:
    settings = make_settings(database_url=database_url, api_token="s3cret")
    async with running_app(settings) as client:
        public = (await client.get("/health")).json()
        body = (await client.get("/health", headers={"Authorization": "Bearer s3cret"})).json()
    assert public["database"] == {
        "ok": True,
        "notes": public["database"]["notes"],
        "backend": "postgresql",
    }
    assert body["database"]["ok"] is True
    assert body["database"]["shared_state"].startswith("postgresql://")
    assert "postgres@" not in body["database"]["shared_state"]


def test_an_unreachable_database_stops_startup_with_a_clear_error(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    url = f"postgresql://postgres@/nope?host={tmp_path / 'no-server'}"
    settings = make_settings(database_url=url, database_pool_timeout_seconds=1)
    with pytest.raises(ConfigurationError, match="CLAUDE_MEMORY_DATABASE_URL"):
        build_container(settings)


def test_doctor_checks_the_database_and_the_vector_extension(
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAUDE_MEMORY_DATABASE_URL", database_url)
    cli_main(["--home", str(tmp_path / "home"), "doctor"])
    out = capsys.readouterr().out
    assert "[ok] database: PostgreSQL 18" in out
    assert "[ok] vector extension: pgvector" in out


def test_doctor_reports_an_unreachable_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"postgresql://postgres:secret@/nope?host={tmp_path / 'no-server'}"
    monkeypatch.setenv("CLAUDE_MEMORY_DATABASE_URL", url)
    code = cli_main(["--home", str(tmp_path / "home"), "doctor"])
    out = capsys.readouterr().out
    assert code == 1
    assert "[!!] database: postgresql://" in out and "unreachable" in out
    assert "secret" not in out and "postgres@" not in out  # no credentials, no user name
    assert "secret" not in out


def test_the_cli_a_direct_hook_and_the_mcp_server_share_the_memory_on_the_database(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Every client of the memory that runs without the app reads the URL from the
    environment and reaches the same notes: none of them writes a note file."""
    monkeypatch.setenv("CLAUDE_MEMORY_DATABASE_URL", database_url)
    monkeypatch.setenv("CLAUDE_MEMORY_HOOK_SERVER", "0")  # no app: hooks work directly
    home_cli, home_hook, home_mcp = (tmp_path / n for n in ("cli", "hook", "mcp"))

    assert cli_main(["--home", str(home_cli), "memory", "add", "部署用 systemd 重启服务"]) == 0
    capsys.readouterr()

    project = tmp_path / "project"
    project.mkdir()
    prompt = json.dumps(
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "sess-db",
            "cwd": str(project),
            "transcript_path": "",
            "prompt": "我们怎么部署服务的？",
        }
    )
    hook = run_hook_process(
        "user-prompt-submit", prompt, env={"CLAUDE_MEMORY_HOME": str(home_hook)}
    )
    assert hook.returncode == 0, hook.stderr
    assert hook.output is not None
    assert "systemd" in hook.output["hookSpecificOutput"]["additionalContext"]

    resources = ToolContext(
        McpConfig.for_home(home_mcp, database_url=database_url), cwd=str(project)
    )
    try:
        assert isinstance(resources.store, PostgresMemoryStore)
        saved = resources.store.save(NoteDraft(content="The MCP server saved this note."))
        assert cli_main(["--home", str(home_cli), "memory", "show", saved.id]) == 0
        assert "The MCP server saved this note." in capsys.readouterr().out
        assert isinstance(resources.state, PostgresStateDB)
    finally:
        resources.close()
    for home in (home_cli, home_hook, home_mcp):
        assert not list(home.rglob("*.md")), f"a note file was written under {home}"
