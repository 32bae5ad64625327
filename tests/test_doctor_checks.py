"""`claude-memory doctor` names what is broken, and a bad setting is one line (real processes)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.agent.test_endpoint import closed_port
from tests.fakes.anthropic_api import FakeMessagesAPI
from tests.fakes.feishu_platform import FakeFeishu
from tests.helpers import PlainWebServer
from tests.hooks.conftest import CLAUDE_MEMORY


def claude_memory(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLAUDE_MEMORY), "--home", str(tmp_path / "cm-home"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
        check=False,
    )


def test_doctor_names_an_unreachable_endpoint_and_fails(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    done = claude_memory(tmp_path, "doctor", ANTHROPIC_BASE_URL=endpoint, ANTHROPIC_API_KEY="k")
    assert done.returncode == 1
    assert f"[!!] model endpoint: {endpoint} unreachable (connection refused)" in done.stdout
    assert "check ANTHROPIC_BASE_URL" in done.stdout


def test_doctor_fails_an_endpoint_that_is_another_web_server(tmp_path: Path) -> None:
    """An `ANTHROPIC_BASE_URL` answering 404 on every path is not "all good": the chat would
    fail on every turn."""
    with PlainWebServer(404) as server:
        done = claude_memory(
            tmp_path, "doctor", ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="k"
        )
    assert done.returncode == 1, done.stdout
    assert (
        f"[!!] model endpoint: {server.url} is not an Anthropic Messages API "
        "(POST /v1/messages answered HTTP 404)\n     -> check ANTHROPIC_BASE_URL: it must be"
    ) in done.stdout
    assert "all good" not in done.stdout
    assert server.requests == ["GET /v1/models", "POST /v1/messages"]


def test_doctor_says_the_credentials_are_refused(
    tmp_path: Path, fake_model: FakeMessagesAPI
) -> None:
    fake_model.accepted_keys = {"right"}
    done = claude_memory(
        tmp_path, "doctor", ANTHROPIC_BASE_URL=fake_model.url, ANTHROPIC_API_KEY="wrong"
    )
    assert done.returncode == 1
    expected = f"[!!] model endpoint: {fake_model.url} refused the credentials (HTTP 401)"
    assert expected in done.stdout
    good = claude_memory(
        tmp_path, "doctor", ANTHROPIC_BASE_URL=fake_model.url, ANTHROPIC_API_KEY="right"
    )
    assert f"[ok] model endpoint: {fake_model.url} reachable, credentials accepted" in good.stdout


def test_doctor_checks_the_encoder_setting_and_its_url(
    tmp_path: Path, fake_model: FakeMessagesAPI
) -> None:
    model = {"ANTHROPIC_BASE_URL": fake_model.url, "ANTHROPIC_API_KEY": "k"}
    bogus = claude_memory(tmp_path, "doctor", CLAUDE_MEMORY_ENCODER="bogus", **model)
    assert bogus.returncode == 1
    assert "[!!] encoder: unknown encoder 'bogus'" in bogus.stdout
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    openai = claude_memory(
        tmp_path,
        "doctor",
        CLAUDE_MEMORY_ENCODER="openai:bge-m3",
        CLAUDE_MEMORY_ENCODER_URL=dead,
        **model,
    )
    assert f"[!!] encoder openai:bge-m3: {dead} unreachable (connection refused)" in openai.stdout
    bad_url = claude_memory(tmp_path, "doctor", FEISHU_DOMAIN="open.feishu", **model)
    assert "[!!] Feishu domain open.feishu: it must start with http:// or https://" in (
        bad_url.stdout
    )


def test_doctor_asks_feishu_for_a_tenant_token(
    tmp_path: Path, fake_model: FakeMessagesAPI, fake_feishu: FakeFeishu
) -> None:
    env = {
        "ANTHROPIC_BASE_URL": fake_model.url,
        "ANTHROPIC_API_KEY": "k",
        "FEISHU_APP_ID": fake_feishu.app_id,
        "FEISHU_DOMAIN": fake_feishu.url,
    }
    good = claude_memory(tmp_path, "doctor", FEISHU_APP_SECRET=fake_feishu.app_secret, **env)
    assert f"[ok] Feishu bridge: the app's credentials work at {fake_feishu.url}" in good.stdout
    assert good.returncode == 0, good.stdout
    bad = claude_memory(tmp_path, "doctor", FEISHU_APP_SECRET="not-the-secret", **env)
    assert bad.returncode == 1
    assert "refused the app's credentials (code 10014" in bad.stdout
    assert "not-the-secret" not in bad.stdout + bad.stderr


@pytest.mark.parametrize("command", [["serve"], ["doctor"], ["feishu"], ["memory", "list"]])
def test_a_bad_port_is_one_line_and_exit_2(tmp_path: Path, command: list[str]) -> None:
    done = claude_memory(tmp_path, *command, CLAUDE_MEMORY_PORT="abc")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "claude-memory: CLAUDE_MEMORY_PORT: Input should be a valid integer, unable to parse "
        "string as an integer (got 'abc')"
    ]


def test_serve_with_a_bogus_encoder_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = claude_memory(tmp_path, "serve", CLAUDE_MEMORY_ENCODER="bogus")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("claude-memory: unknown encoder 'bogus': use none, auto")


def _enable_plugin() -> None:
    # what `claude plugin install long-term-memory@claude-memory-system` writes (Claude Code
    # 2.1.327, tried by hand): the plugin enabled in settings.json
    settings = Path(os.environ["CLAUDE_CONFIG_DIR"]) / "settings.json"
    data = json.loads(settings.read_text()) if settings.exists() else {}
    data.setdefault("enabledPlugins", {})["long-term-memory@claude-memory-system"] = True
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps(data))


def test_doctor_says_when_the_plugin_and_the_installed_hooks_both_run(tmp_path: Path) -> None:
    # both: every hook ran twice, and doctor said "all good"
    assert claude_memory(tmp_path, "install", "claude-code").returncode == 0
    before = claude_memory(tmp_path, "doctor").stdout
    assert "[ok] Claude Code: hooks installed for" in before
    _enable_plugin()
    after = claude_memory(tmp_path, "doctor")
    assert after.returncode == 1
    assert "and the hooks installed too: every hook runs twice" in after.stdout
    assert "claude-memory uninstall claude-code" in after.stdout


def test_doctor_says_when_the_plugin_cannot_find_the_command(tmp_path: Path) -> None:
    _enable_plugin()
    folders = os.environ.get("PATH", "").split(os.pathsep)
    path = os.pathsep.join(f for f in folders if not (Path(f) / "claude-memory").exists())
    done = claude_memory(tmp_path, "doctor", PATH=path)
    assert "[!!] Claude Code plugin: claude-memory not on PATH: the plugin has no memory" in (
        done.stdout
    )


def _ours(event: str) -> dict[str, object]:
    return {"hooks": [{"type": "command", "command": f"claude-memory hook {event}"}]}


@pytest.mark.parametrize(
    ("hooks", "config", "fine"),
    [
        ({}, None, [True]),  # Codex not set up: nothing to say
        ({"hooks": {"Stop": [_ours("stop")]}}, "[mcp_servers.claude-memory]\n", [True, True]),
        ({"hooks": {"Stop": [_ours("stop"), _ours("stop")]}}, None, [False, False]),
    ],
)
def test_codex_lines(hooks: dict[str, object], config: str | None, fine: list[bool]) -> None:
    from memory.clients.installer import codex_checks

    assert [ok for ok, _, _ in codex_checks(hooks, config)] == fine
