"""`claude-memory install|uninstall claude-code|codex`: merge, idempotence, dry run, revert."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
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
    target: installer.Target,
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
        environ=dict(os.environ),
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
    # our read tools and memory_save are allowed, after the user's own rules (claude -p
    # refused every memory tool call without them: "you haven't granted it yet")
    allow = settings["permissions"]["allow"]
    assert allow[0] == "Bash(npm test)" and "mcp__claude-memory__memory_search" in allow
    assert "mcp__claude-memory__memory_save" in allow
    assert "mcp__claude-memory__memory_cleanup" not in allow  # deleting still asks
    # everything else is untouched
    assert settings["model"] == "opus"
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
    assert (claude_dir / "settings.json").read_text() == json.dumps(
        ORIGINAL_SETTINGS, indent=4
    ) + "\n"
    assert (claude_dir / ".claude.json").read_text() == json.dumps(ORIGINAL_STATE) + "\n"
    assert "nothing to uninstall" in run("claude-code", remove=True, capsys=capsys)


def test_install_into_an_empty_config_and_back(capsys: pytest.CaptureFixture[str]) -> None:
    folder = Path(os.environ["CLAUDE_CONFIG_DIR"])
    run("claude-code")
    assert ours(json.loads((folder / "settings.json").read_text()))
    out = run("claude-code", remove=True, capsys=capsys)
    # files install created are gone again (their last content stays in a backup)
    assert not (folder / "settings.json").exists() and not (folder / ".claude.json").exists()
    assert "removed" in out


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


def codex_home_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    codex = tmp_path / "codex-home"
    codex.mkdir(exist_ok=True)
    monkeypatch.setenv("CODEX_HOME", str(codex))
    return codex


def trust_state(config: Path) -> dict[str, Any]:
    return dict(tomllib.loads(config.read_text()).get("hooks", {}).get("state", {}))


def test_codex_install_adds_server_hooks_and_trust_idempotently_and_uninstall_restores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    codex = codex_home_dir(tmp_path, monkeypatch)
    config = codex / "config.toml"
    config.write_text(CODEX_ORIGINAL)
    out = run("codex", dry_run=True, capsys=capsys)
    assert "[mcp_servers.claude-memory]" in out and config.read_text() == CODEX_ORIGINAL
    assert not (codex / "hooks.json").exists()
    out = run("codex", home=Path("/srv/mem"), capsys=capsys)
    assert "trusted" in out and "/hooks" in out  # the user is told about the trust step
    parsed = tomllib.loads(config.read_text())
    assert (
        parsed["model"] == "gpt-5-codex" and parsed["mcp_servers"]["docs"]["command"] == "docs-mcp"
    )
    assert parsed["mcp_servers"]["claude-memory"] == {
        "command": "/opt/cm/bin/claude-memory",
        "args": ["--home", "/srv/mem", "mcp"],
        # `codex exec` refuses an MCP call that needs approval: saving does not ask
        "tools": {"memory_save": {"approval_mode": "approve"}},
    }
    hooks_text = (codex / "hooks.json").read_text()
    hooks = json.loads(hooks_text)
    assert set(hooks) == {"hooks"}  # Codex refuses a file with any other root key ($schema)
    assert '"http"' not in hooks_text  # ... or with an http handler
    mine = ours(hooks)
    # every event Codex offers; it has no FileChanged
    assert set(mine) == {EVENT_NAMES[e] for e in EVENT_NAMES if e != "file-changed"}
    assert "PostCompact" in mine
    assert mine["UserPromptSubmit"][0]["command"] == (
        "/opt/cm/bin/claude-memory --home /srv/mem hook user-prompt-submit --client codex"
    )
    # Codex kills a SessionEnd hook after 3 s: the hook's own budget is set below that
    assert mine["SessionEnd"][0]["timeout"] == 3
    assert mine["SessionEnd"][0]["command"].startswith("CLAUDE_MEMORY_HOOK_BUDGET=2.5 ")
    # exactly our seven hooks are trusted, each with the hash of its definition
    state = trust_state(config)
    source = os.path.realpath(codex / "hooks.json")
    snake = {"SessionStart": "session_start", "UserPromptSubmit": "user_prompt_submit"}
    key = f"{source}:{snake['UserPromptSubmit']}:0:0"
    assert len(state) == 7 and key in state
    spec = installer.HookSpec(
        "user-prompt-submit", mine["UserPromptSubmit"][0]["command"], 10, None
    )
    assert state[key] == {"trusted_hash": installer.codex_trust_hash(spec)}
    text = config.read_text()
    run("codex", home=Path("/srv/mem"))
    assert config.read_text() == text and (codex / "hooks.json").read_text() == hooks_text
    run("codex")  # home changed: the managed block is replaced, not duplicated
    assert config.read_text().count("[mcp_servers.claude-memory]") == 1
    assert len(trust_state(config)) == 7
    assert all(len(v) == 1 for v in ours(json.loads((codex / "hooks.json").read_text())).values())
    run("codex", remove=True)
    assert config.read_text() == CODEX_ORIGINAL
    assert not (codex / "hooks.json").exists()


def test_codex_trust_hash_is_codex_s_own_formula() -> None:
    """The canonical JSON Codex 0.169 hashes (fingerprint.rs `version_for_toml`), checked
    against the real CLI's `hooks/list` in tests/hooks/test_codex_e2e.py."""
    spec = installer.HookSpec("post-tool-use", "/x/claude-memory hook post-tool-use", 10, "*")
    canonical = (
        '{"event_name":"post_tool_use","hooks":[{"async":false,'
        '"command":"/x/claude-memory hook post-tool-use","timeout":10,"type":"command"}],'
        '"matcher":"*"}'
    )
    assert (
        installer.codex_trust_hash(spec)
        == "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    )
    end = installer.HookSpec("session-end", "e", 30, None)  # Codex clamps SessionEnd to 3 s
    assert installer.codex_trust_hash(end) == installer.codex_trust_hash(
        installer.HookSpec("session-end", "e", 3, None)
    )


def test_codex_hooks_merge_with_the_user_s_hooks_and_trust_their_real_position(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codex = codex_home_dir(tmp_path, monkeypatch)
    original = json.dumps(
        {
            "description": "mine",
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]},
        },
        indent="\t",
    )  # tab-indented, no final newline
    (codex / "hooks.json").write_text(original)
    run("codex")
    merged = json.loads((codex / "hooks.json").read_text())
    assert merged["description"] == "mine"
    assert merged["hooks"]["Stop"][0] == {"hooks": [{"type": "command", "command": "say done"}]}
    assert '\n\t"hooks"' in (codex / "hooks.json").read_text()  # still tabs
    state = trust_state(codex / "config.toml")
    source = os.path.realpath(codex / "hooks.json")
    assert f"{source}:stop:1:0" in state and f"{source}:stop:0:0" not in state  # not theirs
    run("codex", remove=True)
    assert (codex / "hooks.json").read_text() == original
    assert not (codex / "config.toml").exists()


def test_codex_trust_entries_written_by_the_user_for_our_hooks_are_not_duplicated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codex = codex_home_dir(tmp_path, monkeypatch)
    # the user (or Codex's /hooks) recorded a trust entry for the place our hook will take
    key = f"{os.path.realpath(codex / 'hooks.json')}:session_start:0:0"
    original = f'[hooks.state."{key}"]\ntrusted_hash = "sha256:00"\n'
    (codex / "config.toml").write_text(original)
    with pytest.raises(ConfigurationError, match=r"hooks\.state"):
        installer.plan("codex", dict(os.environ), executable=EXE)
    assert (codex / "config.toml").read_text() == original


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
            "command": f'sh "${{CLAUDE_PLUGIN_ROOT}}/bin/claude-memory" hook {event}',
            "timeout": installer.HOOK_TIMEOUTS[event],
        }
        assert installer.is_our_command(hook["command"])
    servers = json.loads((plugin / ".mcp.json").read_text())["mcpServers"]
    assert servers["claude-memory"] == {
        "command": "sh",
        "args": ["${CLAUDE_PLUGIN_ROOT}/bin/claude-memory", "mcp"],
    }


# --- byte for byte ------------------------------------------------------------------------------

SETTINGS_STYLES = {
    "four spaces": json.dumps(ORIGINAL_SETTINGS, indent=4) + "\n",
    "tabs, no final newline": json.dumps(ORIGINAL_SETTINGS, indent="\t"),
    "two spaces, CRLF": (json.dumps(ORIGINAL_SETTINGS, indent=2) + "\n").replace("\n", "\r\n"),
    "one line, non-ASCII kept": '{"model":"opus","statusLine":"记忆 ✓"}',
    "odd spacing": '{ "model" :  "opus" ,\n   "env": {"A": "1"}  }\n',
}


@pytest.mark.parametrize("style", SETTINGS_STYLES)
def test_uninstall_gives_back_the_settings_byte_for_byte(claude_dir: Path, style: str) -> None:
    original = SETTINGS_STYLES[style].encode()
    (claude_dir / "settings.json").write_bytes(original)
    state = (claude_dir / ".claude.json").read_bytes()
    run("claude-code")
    installed = (claude_dir / "settings.json").read_bytes()
    assert ours(json.loads(installed))
    if style.startswith("tabs"):
        assert b'\n\t"hooks": {' in installed and not installed.endswith(b"\n")
    if style.startswith("four"):
        assert b'\n    "hooks": {' in installed
    if "CRLF" in style:
        assert b"\r\n" in installed and b"\n" not in installed.replace(b"\r\n", b"")
    run("claude-code", remove=True)
    assert (claude_dir / "settings.json").read_bytes() == original
    assert (claude_dir / ".claude.json").read_bytes() == state


def test_uninstall_after_the_user_changed_the_file_keeps_the_change_and_the_style(
    claude_dir: Path,
) -> None:
    run("claude-code")
    path = claude_dir / "settings.json"
    data = json.loads(path.read_text())
    data["theme"] = "dark"  # as Claude Code's /config would
    path.write_text(json.dumps(data, indent=4) + "\n")
    run("claude-code", remove=True)
    assert path.read_text() == json.dumps({**ORIGINAL_SETTINGS, "theme": "dark"}, indent=4) + "\n"


CODEX_STYLES = {
    "comments and blank lines": (
        '# my Codex config\nmodel = "o4"  # fast\n\n\n[profiles.work]\n# keep\n'
        'approval_policy = "never"\n\n'
    ),
    "no final newline": 'model = "o4"\n[tui]\nnotifications = true',
    "CRLF": '# win\r\nmodel = "o4"\r\n',
    "empty": "",
}


@pytest.mark.parametrize("style", CODEX_STYLES)
def test_codex_uninstall_gives_back_config_toml_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    codex = codex_home_dir(tmp_path, monkeypatch)
    original = CODEX_STYLES[style].encode()
    (codex / "config.toml").write_bytes(original)
    run("codex")
    assert "claude-memory" in tomllib.loads((codex / "config.toml").read_text())["mcp_servers"]
    run("codex", remove=True)
    assert (codex / "config.toml").read_bytes() == original
    assert not (codex / "hooks.json").exists()


def test_backups_made_in_the_same_second_never_overwrite_each_other(claude_dir: Path) -> None:
    original = (claude_dir / "settings.json").read_bytes()
    now = time.time()
    settings = claude_dir / "settings.json"
    installer.apply(installer.plan("claude-code", dict(os.environ), executable=EXE), now=now)
    # the person changes something between the runs: three different texts to keep
    settings.write_text(json.dumps(json.loads(settings.read_text()) | {"theme": "dark"}))
    installer.apply(
        installer.plan("claude-code", dict(os.environ), executable=EXE, remove=True), now=now
    )
    installer.apply(installer.plan("claude-code", dict(os.environ), executable=EXE), now=now)
    backups = installer.backups_of(claude_dir / "settings.json")
    assert len(backups) == 3 and len({b.name for b in backups}) == 3
    # the very first backup is still the untouched original
    assert original in [b.read_bytes() for b in backups]
    assert backups[-1].read_bytes() == original  # oldest last


def test_install_uninstall_cycles_keep_one_backup_per_text(
    claude_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue #32: each install/uninstall cycle left 4 more backup files, copies of the same texts
    run("claude-code")
    run("claude-code", remove=True)
    first = sorted(p.name for p in claude_dir.glob("*.claude-memory-backup-*"))
    for _ in range(3):
        run("claude-code")
        run("claude-code", remove=True)
    assert sorted(p.name for p in claude_dir.glob("*.claude-memory-backup-*")) == first
    assert len(first) == 4  # the original and the installed text of each of the two files
    assert (claude_dir / "settings.json").read_text() == json.dumps(
        ORIGINAL_SETTINGS, indent=4
    ) + "\n"
