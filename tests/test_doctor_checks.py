"""`claude-memory doctor` names what is broken, and a bad setting is one line (real processes)."""

from __future__ import annotations

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
