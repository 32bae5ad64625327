"""`claude-memory install|uninstall claude-code|codex`: merge, idempotence, dry run, revert."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from errors import ConfigurationError
from memory.clients import installer
from memory.clients.conventions import EVENT_NAMES
from tests.hooks.conftest import CLAUDE_MEMORY

ROOT = Path(__file__).resolve().parents[2]
EXE = ["/opt/cm/bin/claude-memory"]

ORIGINAL_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "~/bin/lint-prompt"}]}],
        "PostToolUse": [
            {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "prettier -w"}]}
        ],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}],
    },
}
ORIGINAL_STATE: dict[str, Any] = {
    "numStartups": 12,
    "mcpServers": {"github": {"type": "stdio", "command": "gh-mcp", "args": [], "env": {}}},
}


@pytest.fixture
def claude_dir(monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = Path(os.environ["CLAUDE_CONFIG_DIR"])
    (folder / "settings.json").write_text(json.dumps(ORIGINAL_SETTINGS, indent=4) + "\n")
    (folder / ".claude.json").write_text(json.dumps(ORIGINAL_STATE) + "\n")
    return folder


def run(
    target: str,
    *,
    remove: bool = False,
    dry_run: bool = False,
    home: Path | None = None,
    capsys: pytest.CaptureFixture[str] | None = None,
) -> str:
    code = installer.run(
        target,
        remove=remove,
        dry_run=dry_run,
        environ=dict(os.environ),  # type: ignore[arg-type]
        home=home,
        executable=EXE,
    )
    assert code == 0
    return capsys.readouterr().out if capsys else ""


def ours(settings: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for event, groups in settings.get("hooks", {}).items():
        for group in groups:
            for hook in group["hooks"]:
                if installer.is_our_command(hook["command"]):
                    found.setdefault(event, []).append({**hook, "matcher": group.get("matcher")})
    return found


def test_install_merges_hooks_and_registers_the_mcp_server(
    claude_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run("claude-code", capsys=capsys)
    settings = json.loads((claude_dir / "settings.json").read_text())
    mine = ours(settings)
    assert set(mine) == set(EVENT_NAMES.values())
    assert all(len(v) == 1 for v in mine.values())
    assert mine["UserPromptSubmit"][0]["command"] == (
        "/opt/cm/bin/claude-memory hook user-prompt-submit"
    )
    assert mine["SessionEnd"][0]["timeout"] == 30
    assert mine["UserPromptSubmit"][0]["timeout"] == 10
    assert mine["PostToolUse"][0]["matcher"] == "*"
    # everything else is untouched
    assert (
        settings["model"] == "opus" and settings["permissions"] == ORIGINAL_SETTINGS["permissions"]
    )
    assert settings["hooks"]["Notification"] == ORIGINAL_SETTINGS["hooks"]["Notification"]
    assert (
        settings["hooks"]["UserPromptSubmit"][0]
        == ORIGINAL_SETTINGS["hooks"]["UserPromptSubmit"][0]
    )
    assert settings["hooks"]["PostToolUse"][0] == ORIGINAL_SETTINGS["hooks"]["PostToolUse"][0]
    state = json.loads((claude_dir / ".claude.json").read_text())
    assert state["numStartups"] == 12 and "github" in state["mcpServers"]
    assert state["mcpServers"]["claude-memory"] == {
        "type": "stdio",
        "command": "/opt/cm/bin/claude-memory",
        "args": ["mcp"],
        "env": {},
    }
    backups = sorted(p.name for p in claude_dir.glob("*.claude-memory-backup-*"))
    assert len(backups) == 2
    backup = next(claude_dir.glob("settings.json.claude-memory-backup-*"))
    assert json.loads(backup.read_text()) == ORIGINAL_SETTINGS
    assert "updated" in out and "backup" in out


def test_install_is_idempotent(claude_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run("claude-code")
    first = (claude_dir / "settings.json").read_text(), (claude_dir / ".claude.json").read_text()
    backups = set(claude_dir.glob("*.claude-memory-backup-*"))
    out = run("claude-code", capsys=capsys)
    assert "already installed" in out
    assert (
        (claude_dir / "settings.json").read_text(),
        (claude_dir / ".claude.json").read_text(),
    ) == first
    assert set(claude_dir.glob("*.claude-memory-backup-*")) == backups


def test_a_moved_install_replaces_its_old_hooks_instead_of_adding_more(claude_dir: Path) -> None:
    installer.apply(
        installer.plan("claude-code", dict(os.environ), executable=["/old/venv/bin/claude-memory"])
    )
    run("claude-code", home=Path("/data/memory home"))
    mine = ours(json.loads((claude_dir / "settings.json").read_text()))
    assert all(len(v) == 1 for v in mine.values())
    assert mine["Stop"][0]["command"] == (
        "/opt/cm/bin/claude-memory --home '/data/memory home' hook stop"
    )
    state = json.loads((claude_dir / ".claude.json").read_text())
    assert state["mcpServers"]["claude-memory"]["args"] == ["--home", "/data/memory home", "mcp"]


def test_dry_run_prints_the_change_and_writes_nothing(
    claude_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {p.name: p.read_bytes() for p in claude_dir.iterdir()}
    out = run("claude-code", dry_run=True, capsys=capsys)
    assert "dry run" in out
    assert "+" in out and "claude-memory hook session-start" in out
    assert {p.name: p.read_bytes() for p in claude_dir.iterdir()} == before


def test_uninstall_restores_the_original_settings(
    claude_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run("claude-code")
    out = run("claude-code", remove=True, dry_run=True, capsys=capsys)
    assert "-" in out and "dry run" in out
    assert ours(json.loads((claude_dir / "settings.json").read_text()))  # dry run changed nothing
    run("claude-code", remove=True)
    assert json.loads((claude_dir / "settings.json").read_text()) == ORIGINAL_SETTINGS
    assert json.loads((claude_dir / ".claude.json").read_text()) == ORIGINAL_STATE
    assert "nothing to uninstall" in run("claude-code", remove=True, capsys=capsys)


def test_install_into_an_empty_config_and_back(capsys: pytest.CaptureFixture[str]) -> None:
    folder = Path(os.environ["CLAUDE_CONFIG_DIR"])
    run("claude-code")
    assert ours(json.loads((folder / "settings.json").read_text()))
    run("claude-code", remove=True)
    assert json.loads((folder / "settings.json").read_text()) == {}
    assert json.loads((folder / ".claude.json").read_text()) == {}


def test_broken_settings_are_left_alone(claude_dir: Path) -> None:
    (claude_dir / "settings.json").write_text("{ broken")
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        installer.plan("claude-code", dict(os.environ), executable=EXE)
    assert (claude_dir / "settings.json").read_text() == "{ broken"


CODEX_ORIGINAL = """\
model = "gpt-5-codex"
approval_policy = "on-request"

[mcp_servers.docs]
command = "docs-mcp"
args = ["--stdio"]
"""


def test_codex_install_adds_the_server_idempotently_and_uninstall_restores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    codex = tmp_path / "codex-home"
    codex.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(codex))
    config = codex / "config.toml"
    config.write_text(CODEX_ORIGINAL)
    out = run("codex", dry_run=True, capsys=capsys)
    assert "[mcp_servers.claude-memory]" in out and config.read_text() == CODEX_ORIGINAL
    run("codex", home=Path("/srv/mem"))
    parsed = tomllib.loads(config.read_text())
    assert (
        parsed["model"] == "gpt-5-codex" and parsed["mcp_servers"]["docs"]["command"] == "docs-mcp"
    )
    assert parsed["mcp_servers"]["claude-memory"] == {
        "command": "/opt/cm/bin/claude-memory",
        "args": ["--home", "/srv/mem", "mcp"],
    }
    text = config.read_text()
    run("codex", home=Path("/srv/mem"))
    assert config.read_text() == text
    run("codex")  # home changed: the managed block is replaced, not duplicated
    assert config.read_text().count("[mcp_servers.claude-memory]") == 1
    run("codex", remove=True)
    assert config.read_text() == CODEX_ORIGINAL


def test_codex_config_written_by_hand_is_not_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path))
    (tmp_path / "config.toml").write_text('[mcp_servers.claude-memory]\ncommand = "x"\n')
    with pytest.raises(ConfigurationError, match="by hand"):
        installer.plan("codex", dict(os.environ), executable=EXE)


def test_codex_install_creates_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "new"))
    run("codex")
    parsed = tomllib.loads((tmp_path / "new" / "config.toml").read_text())
    assert parsed["mcp_servers"]["claude-memory"]["args"] == ["mcp"]


def test_the_cli_installs_with_the_absolute_script_path(claude_dir: Path, tmp_path: Path) -> None:
    env = {**os.environ, "CLAUDE_MEMORY_HOME": str(tmp_path / "cm")}
    for args in (["install", "claude-code", "--dry-run"], ["install", "claude-code"]):
        proc = subprocess.run(
            [str(CLAUDE_MEMORY), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
    mine = ours(json.loads((claude_dir / "settings.json").read_text()))
    assert mine["SessionStart"][0]["command"] == (
        f"{CLAUDE_MEMORY} --home {tmp_path / 'cm'} hook session-start"
    )
    proc = subprocess.run(
        [str(CLAUDE_MEMORY), "uninstall", "claude-code"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert json.loads((claude_dir / "settings.json").read_text()) == ORIGINAL_SETTINGS


def test_the_plugin_folder_matches_the_installer() -> None:
    plugin = ROOT / "plugin"
    manifest = json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] and manifest["version"]
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == set(EVENT_NAMES.values())
    for event, name in EVENT_NAMES.items():
        (group,) = hooks[name]
        (hook,) = group["hooks"]
        assert hook == {
            "type": "command",
            "command": f"claude-memory hook {event}",
            "timeout": installer.HOOK_TIMEOUTS[event],
        }
        assert installer.is_our_command(hook["command"])
    servers = json.loads((plugin / ".mcp.json").read_text())["mcpServers"]
    assert servers["claude-memory"] == {"command": "claude-memory", "args": ["mcp"]}
