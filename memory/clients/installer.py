"""`claude-memory install|uninstall claude-code|codex`: wire the hooks and the MCP server into
the user's CLI configs.

* Claude Code: the six hooks go into `$CLAUDE_CONFIG_DIR/settings.json` (default
  `~/.claude/settings.json`), the MCP server into the user-scope `mcpServers` of
  `$CLAUDE_CONFIG_DIR/.claude.json` (default `~/.claude.json`), the same place
  `claude mcp add --scope user` writes.
* Codex: the MCP server goes into `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`)
  as a `[mcp_servers.claude-memory]` table between marker comments.

Every change is a merge: other settings, other hooks and other servers stay as they are; a
second install changes nothing; `uninstall` removes exactly what install added. A file is backed
up (`<name>.claude-memory-backup-<time>`) before it is first changed, written atomically, and
`--dry-run` prints the diff without writing anything. Commands use the absolute path of the
installed `claude-memory` script, so they work from any folder and shell.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from errors import ConfigurationError
from memory.clients.conventions import EVENT_NAMES, SERVER_NAME, claude_config_dir, codex_home

Target = Literal["claude-code", "codex"]
TARGETS: Final[tuple[Target, ...]] = ("claude-code", "codex")

HOOK_TIMEOUTS: Final[dict[str, int]] = {
    "session-start": 15,
    "user-prompt-submit": 10,
    "post-tool-use": 10,
    "stop": 10,
    "session-end": 30,
    "pre-compact": 10,
}
"""Seconds (Claude Code's unit); each is well above the hook's own budget."""
TOOL_EVENTS: Final = frozenset({"post-tool-use"})
BEGIN_MARK: Final = "# >>> claude-memory (managed by `claude-memory install codex`) >>>"
END_MARK: Final = "# <<< claude-memory <<<"
_EXECUTABLES: Final = frozenset({"claude-memory", "claude-memory.exe"})


@dataclass(frozen=True, slots=True)
class FileChange:
    path: Path
    before: str | None
    """The file's text now (None: it does not exist)."""
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        lines = difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            self.after.splitlines(keepends=True),
            fromfile=f"{self.path} (now)" if self.before is not None else "/dev/null",
            tofile=f"{self.path} (after)",
        )
        return "".join(lines)


# --- locations and commands -------------------------------------------------------------------


def claude_settings_path(environ: Mapping[str, str]) -> Path:
    return claude_config_dir(environ) / "settings.json"


def claude_state_path(environ: Mapping[str, str]) -> Path:
    """Where Claude Code keeps user-scope MCP servers (checked with `claude mcp add -s user`)."""
    if environ.get("CLAUDE_CONFIG_DIR"):
        return claude_config_dir(environ) / ".claude.json"
    return Path(environ.get("HOME") or "~").expanduser() / ".claude.json"


def codex_config_path(environ: Mapping[str, str]) -> Path:
    return codex_home(environ) / "config.toml"


def resolve_executable(argv0: str | None = None) -> list[str]:
    """The absolute command that runs `claude-memory`: the script we were started as, the one
    next to this interpreter, one on PATH, or `python -m cli` as a last resort."""
    candidates: list[Path] = []
    if argv0 and Path(argv0).name in _EXECUTABLES:
        candidates.append(Path(os.path.abspath(argv0)))
    candidates.append(Path(sys.executable).parent / "claude-memory")
    found = shutil.which("claude-memory")
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return [str(Path(os.path.abspath(candidate)))]
    return [os.path.abspath(sys.executable), "-m", "cli"]


def base_command(executable: Sequence[str], home: Path | None) -> list[str]:
    """`claude-memory [--home DIR]`: the home is pinned when it is not the default one, since
    CLIs do not pass the shell's CLAUDE_MEMORY_HOME on to every hook reliably."""
    command = list(executable)
    if home is not None:
        command += ["--home", str(home)]
    return command


def hook_command(executable: Sequence[str], home: Path | None, event: str) -> str:
    return shlex.join([*base_command(executable, home), "hook", event])


def is_our_command(command: object) -> bool:
    """A hook command that runs `claude-memory ... hook <event>` (any path or home)."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    ours = any(Path(w).name in _EXECUTABLES for w in words) or any(
        words[i : i + 2] == ["-m", "cli"] for i in range(len(words))
    )
    if not ours or "hook" not in words:
        return False
    position = words.index("hook")
    return position + 1 < len(words) and words[position + 1] in EVENT_NAMES


# --- Claude Code ------------------------------------------------------------------------------


def _hook_entry(executable: Sequence[str], home: Path | None, event: str) -> dict[str, Any]:
    return {
        "type": "command",
        "command": hook_command(executable, home, event),
        "timeout": HOOK_TIMEOUTS[event],
    }


def _group(executable: Sequence[str], home: Path | None, event: str) -> dict[str, Any]:
    group: dict[str, Any] = {}
    if event in TOOL_EVENTS:
        group["matcher"] = "*"
    group["hooks"] = [_hook_entry(executable, home, event)]
    return group


def _without_ours(groups: list[Any]) -> list[Any]:
    kept: list[Any] = []
    for group in groups:
        if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
            kept.append(group)
            continue
        hooks = [
            h
            for h in group["hooks"]
            if not (isinstance(h, dict) and is_our_command(h.get("command")))
        ]
        if hooks:
            kept.append({**group, "hooks": hooks})
    return kept


def merge_hooks(
    settings: Mapping[str, Any], executable: Sequence[str], home: Path | None
) -> dict[str, Any]:
    """Settings with our six hooks in place (pure). Entries already as wanted stay where they
    are; stale ones (another path or home) are replaced; other hooks are untouched."""
    result = copy.deepcopy(dict(settings))
    hooks = result.get("hooks")
    if hooks is None:
        hooks = {}
    if not isinstance(hooks, dict):
        raise ConfigurationError("settings.json: 'hooks' is not an object; fix it by hand first")
    for event, name in EVENT_NAMES.items():
        groups = hooks.get(name) or []
        if not isinstance(groups, list):
            raise ConfigurationError(f"settings.json: hooks.{name} is not a list; fix it first")
        wanted = _group(executable, home, event)
        if wanted in groups and sum(_count_ours(g) for g in groups) == 1:
            continue
        hooks[name] = [*_without_ours(groups), wanted]
    result["hooks"] = hooks
    return result


def _count_ours(group: Any) -> int:
    if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
        return 0
    return sum(
        1 for h in group["hooks"] if isinstance(h, dict) and is_our_command(h.get("command"))
    )


def remove_hooks(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings without our hooks (pure); events and `hooks` left empty by that are dropped."""
    result = copy.deepcopy(dict(settings))
    hooks = result.get("hooks")
    if not isinstance(hooks, dict):
        return result
    for name in list(hooks):
        groups = hooks[name]
        if not isinstance(groups, list) or not any(_count_ours(g) for g in groups):
            continue
        kept = _without_ours(groups)
        if kept:
            hooks[name] = kept
        else:
            del hooks[name]
    if not hooks:
        del result["hooks"]
    return result


def mcp_entry(executable: Sequence[str], home: Path | None) -> dict[str, Any]:
    command = [*base_command(executable, home), "mcp"]
    return {"type": "stdio", "command": command[0], "args": command[1:], "env": {}}


def merge_mcp(state: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(dict(state))
    servers = result.get("mcpServers")
    if servers is None:
        servers = {}
    if not isinstance(servers, dict):
        raise ConfigurationError("'mcpServers' is not an object; fix the file by hand first")
    servers[SERVER_NAME] = dict(entry)
    result["mcpServers"] = servers
    return result


def remove_mcp(state: Mapping[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(dict(state))
    servers = result.get("mcpServers")
    if isinstance(servers, dict) and SERVER_NAME in servers:
        del servers[SERVER_NAME]
        if not servers:
            del result["mcpServers"]
    return result


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}") from None


def _load_json(path: Path, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(
            f"{path} is not valid JSON ({exc}); fix it by hand, nothing was changed"
        ) from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"{path} does not hold a JSON object; nothing was changed")
    return data


def _json_change(path: Path, transform: Any) -> FileChange:
    before = _read(path)
    data = _load_json(path, before)
    new = transform(data)
    if new == data and before is not None:
        return FileChange(path, before, before)  # same content: keep the file byte for byte
    return FileChange(path, before, json.dumps(new, indent=2, ensure_ascii=False) + "\n")


def plan_claude_code(
    environ: Mapping[str, str], executable: Sequence[str], home: Path | None, *, remove: bool
) -> list[FileChange]:
    if remove:
        return [
            _json_change(claude_settings_path(environ), remove_hooks),
            _json_change(claude_state_path(environ), remove_mcp),
        ]
    entry = mcp_entry(executable, home)
    return [
        _json_change(claude_settings_path(environ), lambda d: merge_hooks(d, executable, home)),
        _json_change(claude_state_path(environ), lambda d: merge_mcp(d, entry)),
    ]


# --- Codex ------------------------------------------------------------------------------------

_BLOCK = re.compile(re.escape(BEGIN_MARK) + r".*?" + re.escape(END_MARK) + r"\n?", re.DOTALL)


def codex_block(executable: Sequence[str], home: Path | None) -> str:
    command = [*base_command(executable, home), "mcp"]

    def toml_string(value: str) -> str:
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string

    args = ", ".join(toml_string(a) for a in command[1:])
    return (
        f"{BEGIN_MARK}\n[mcp_servers.{SERVER_NAME}]\ncommand = {toml_string(command[0])}\n"
        f"args = [{args}]\n{END_MARK}\n"
    )


def merge_codex(text: str, block: str, path: Path) -> str:
    current = _parse_toml(text, path)
    if _BLOCK.search(text):
        new = _BLOCK.sub(lambda _m: block, text, count=1)
    elif SERVER_NAME in (current.get("mcp_servers") or {}):
        raise ConfigurationError(
            f"{path} already defines [mcp_servers.{SERVER_NAME}] by hand; remove it first"
        )
    else:
        separator = (
            "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        )
        new = text + separator + block
    _parse_toml(new, path)
    return new


def remove_codex(text: str) -> str:
    match = _BLOCK.search(text)
    if not match:
        return text
    before, after = text[: match.start()], text[match.end() :]
    if before.endswith("\n\n") and not after:
        before = before[:-1]
    return before + after


def _parse_toml(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path} is not valid TOML ({exc}); nothing was changed") from None


def plan_codex(
    environ: Mapping[str, str], executable: Sequence[str], home: Path | None, *, remove: bool
) -> list[FileChange]:
    path = codex_config_path(environ)
    before = _read(path)
    text = before or ""
    after = remove_codex(text) if remove else merge_codex(text, codex_block(executable, home), path)
    if before is None and remove:
        return []
    return [FileChange(path, before, after)]


# --- applying ---------------------------------------------------------------------------------


def plan(
    target: Target,
    environ: Mapping[str, str],
    *,
    executable: Sequence[str] | None = None,
    home: Path | None = None,
    remove: bool = False,
) -> list[FileChange]:
    """The file changes an install (or uninstall) would make; nothing is written."""
    exe = list(executable or resolve_executable())
    if target == "claude-code":
        changes = plan_claude_code(environ, exe, home, remove=remove)
    elif target == "codex":
        changes = plan_codex(environ, exe, home, remove=remove)
    else:
        raise ConfigurationError(f"unknown target {target!r}: use claude-code or codex")
    if remove:
        changes = [c for c in changes if c.before is not None]
    return changes


def apply(changes: Sequence[FileChange], *, now: float | None = None) -> list[Path]:
    """Write the changed files (backup first, atomic replace); returns the backups made."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    backups: list[Path] = []
    for change in changes:
        if not change.changed:
            continue
        change.path.parent.mkdir(parents=True, exist_ok=True)
        mode = 0o600
        if change.before is not None:
            backup = change.path.with_name(f"{change.path.name}.claude-memory-backup-{stamp}")
            shutil.copy2(change.path, backup)
            backups.append(backup)
            mode = change.path.stat().st_mode & 0o777
        fd, tmp = tempfile.mkstemp(dir=change.path.parent, prefix=f".{change.path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(change.after)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, change.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return backups


def run(
    target: Target,
    *,
    remove: bool,
    dry_run: bool,
    environ: Mapping[str, str],
    home: Path | None,
    executable: Sequence[str] | None = None,
    out: Any = None,
) -> int:
    """The `install` / `uninstall` commands: print what happens, do it unless `dry_run`."""
    out = out or sys.stdout
    changes = plan(target, environ, executable=executable, home=home, remove=remove)
    verb = "uninstall" if remove else "install"
    changed = [c for c in changes if c.changed]
    if not changed:
        print(
            f"{target}: nothing to {verb}; already {'absent' if remove else 'installed'}.", file=out
        )
        return 0
    if dry_run:
        print(
            f"{target}: {verb} would change {len(changed)} file(s) (dry run, nothing written):",
            file=out,
        )
        for change in changed:
            print(change.diff(), file=out, end="" if change.diff().endswith("\n") else "\n")
        return 0
    backups = apply(changed)
    for change in changed:
        print(f"{target}: updated {change.path}", file=out)
    for backup in backups:
        print(f"  backup: {backup}", file=out)
    if not remove and target == "claude-code":
        print(
            "  start a new Claude Code session; `claude mcp list` should show claude-memory",
            file=out,
        )
    if not remove and target == "codex":
        print("  start a new Codex session; `codex mcp list` should show claude-memory", file=out)
    return 0
