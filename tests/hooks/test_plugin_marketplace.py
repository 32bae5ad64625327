"""The repository as a plugin marketplace (`.claude-plugin/marketplace.json` -> `plugin/`), with
the real Claude Code CLI (bundled with claude-agent-sdk) and the real Codex CLI, offline."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.anthropic_api import FakeMessagesAPI, text
from tests.hooks.claude_code import CLAUDE, claude_env, first_request, run_claude, seed
from tests.hooks.conftest import CLAUDE_MEMORY
from tests.hooks.test_codex_e2e import CODEX

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, env: dict[str, str], cwd: Path | None = None) -> str:
    proc = subprocess.run(
        list(args), env=env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def path_without_claude_memory() -> str:
    folders = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(f for f in folders if not (Path(f) / "claude-memory").exists())


def test_the_marketplace_manifest_names_the_plugin_folder() -> None:
    manifest = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    (entry,) = manifest["plugins"]
    plugin = json.loads((ROOT / "plugin" / ".claude-plugin" / "plugin.json").read_text())
    assert entry["name"] == plugin["name"] and entry["source"] == "./plugin"
    assert entry["version"] == plugin["version"]


def test_marketplace_add_and_plugin_install_give_a_claude_session_memory(
    fake_model: FakeMessagesAPI, mem_home: Path, make_project: Callable[..., Path]
) -> None:
    seed(mem_home)
    # `claude-memory` is not on PATH here: the plugin finds it through CLAUDE_MEMORY_BIN
    env = claude_env(
        fake_model,
        mem_home,
        PATH=path_without_claude_memory(),
        CLAUDE_MEMORY_BIN=str(CLAUDE_MEMORY),
    )
    assert "Validation passed" in cli(str(CLAUDE), "plugin", "validate", str(ROOT), env=env)
    cli(str(CLAUDE), "plugin", "marketplace", "add", str(ROOT), env=env)
    cli(str(CLAUDE), "plugin", "install", "long-term-memory@claude-memory-system", env=env)
    fake_model.on("check the webhook", text("ok"))
    run_claude("please check the webhook signatures", cwd=make_project("shop/app"), env=env)
    seen = first_request(fake_model, "check the webhook").all_text()
    assert "<memory-context>" in seen and "HMAC-SHA256" in seen


def test_without_the_command_the_plugin_s_hooks_fail_open_and_say_why(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    launcher = str(ROOT / "plugin" / "bin" / "claude-memory")
    proc = subprocess.run(
        ["sh", launcher, "hook", "user-prompt-submit"],
        input=b"{}",
        env=env,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout == b""
    assert b"CLAUDE_MEMORY_BIN" in proc.stderr
    # once per session, visibly: the session start says there is no memory (a systemMessage,
    # in a shape Codex's strict SessionStart output accepts too)
    start = subprocess.run(
        ["sh", launcher, "hook", "session-start"],
        input=b"{}",
        env=env,
        capture_output=True,
        timeout=30,
        check=False,
    )
    said = json.loads(start.stdout)
    assert start.returncode == 0 and "no long-term memory" in said["systemMessage"]
    assert said["hookSpecificOutput"] == {"hookEventName": "SessionStart", "additionalContext": ""}
    mcp = subprocess.run(["sh", launcher, "mcp"], env=env, capture_output=True, timeout=30)
    assert mcp.returncode == 1


@pytest.mark.skipif(not CODEX.exists(), reason="the Codex CLI is not installed (scripts/test)")
def test_codex_adds_the_same_marketplace_and_its_plugin(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    env = {**os.environ, "CODEX_HOME": str(codex_home), "HTTPS_PROXY": "http://127.0.0.1:9"}
    out = cli(str(CODEX), "plugin", "marketplace", "add", str(ROOT), env=env)
    assert "claude-memory-system" in out
    cli(str(CODEX), "plugin", "add", "long-term-memory@claude-memory-system", env=env)
    listed = cli(str(CODEX), "mcp", "list", env=env)
    assert "claude-memory" in listed


def test_claude_code_takes_the_plugin_s_word_that_there_is_no_memory(
    fake_model: FakeMessagesAPI, mem_home: Path, make_project: Callable[..., Path]
) -> None:
    # the session start's systemMessage (no claude-memory anywhere) is accepted by the real
    # Claude Code: the session goes on and answers, with no memory context
    env = claude_env(fake_model, mem_home, PATH=path_without_claude_memory())
    env.pop("CLAUDE_MEMORY_BIN", None)
    cli(str(CLAUDE), "plugin", "marketplace", "add", str(ROOT), env=env)
    cli(str(CLAUDE), "plugin", "install", "long-term-memory@claude-memory-system", env=env)
    fake_model.on("hello there", text("hi"))
    done = run_claude("hello there", cwd=make_project("shop/app"), env=env)
    assert "hi" in done.stdout
    assert "<memory-context>" not in first_request(fake_model, "hello there").all_text()
