"""`claude-memory install|uninstall claude-code|codex`: wire the hooks and the MCP server into
the user's CLI configs.

* Claude Code: the eight hooks (`TARGET_EVENTS`) go into `$CLAUDE_CONFIG_DIR/settings.json`
  (default `~/.claude/settings.json`), the MCP server into the user-scope `mcpServers` of
  `$CLAUDE_CONFIG_DIR/.claude.json` (default `~/.claude.json`), the same place
  `claude mcp add --scope user` writes.
* Codex: the seven hooks Codex offers (no FileChanged) go into `$CODEX_HOME/hooks.json`
  (default `~/.codex/hooks.json`, the same shape as Claude Code's `hooks`; every command
  carries `--client codex`), the MCP server
  and the hooks' trust entries into `$CODEX_HOME/config.toml`, between marker comments.
  Codex runs a hook that is not managed by policy only once the user has reviewed it (`/hooks`
  in the TUI), which records `[hooks.state."<file>:<event>:<group>:<handler>"] trusted_hash`
  in config.toml; `codex exec` skips an unreviewed hook without a word. The installer writes
  exactly those entries for exactly the hooks it installs (the hash is Codex's own: sha256 of
  the hook's definition, see `codex_trust_hash`), so the hooks run from the first session;
  a hook edited afterwards no longer matches its hash and Codex asks again.

Every change is a merge: other settings, other hooks and other servers stay as they are; a
second install changes nothing; `uninstall` removes exactly what install added. A file keeps
its indentation (2 or 4 spaces, tabs), key order and final newline, and when uninstall leaves
the content an install backup had, the backup's bytes are written back, so the file is byte
for byte what it was; a file install created is removed again. A file is backed up
(`<name>.claude-memory-backup-<time>[-n]`, never overwriting an earlier backup, and not again
when a backup already holds the same bytes) before it is changed, written atomically, and
`--dry-run` prints the diff without writing anything.
Commands use the absolute path of the installed `claude-memory` script, so they work from any
folder and shell.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from errors import ConfigurationError
from memory._record import record
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
    "post-compact": 10,
    "file-changed": 10,
}
"""Seconds (Claude Code's unit); each is well above the hook's own budget."""
TARGET_EVENTS: Final[dict[str, tuple[str, ...]]] = {
    "claude-code": tuple(EVENT_NAMES),
    # Codex 0.169's events (its hooks schema): no FileChanged (nor watchPaths)
    "codex": tuple(e for e in EVENT_NAMES if e != "file-changed"),
}
"""The hooks each client gets: the events it offers."""
CODEX_SESSION_END_TIMEOUT: Final = 3
"""Codex clamps a SessionEnd hook to 3 s (1 s when unset); we write the 3 it would use."""
CODEX_SESSION_END_BUDGET: Final = "2.5"
"""The session-end hook's own budget under Codex (`CLAUDE_MEMORY_HOOK_BUDGET`), under the
3 s after which Codex kills it: what is not done by then is left to the next session start
(it closes the idle episode with its summary)."""
TOOL_EVENTS: Final = frozenset({"post-tool-use"})
BEGIN_MARK: Final = "# >>> claude-memory (managed by `claude-memory install codex`) >>>"
END_MARK: Final = "# <<< claude-memory <<<"
BACKUP_INFIX: Final = ".claude-memory-backup-"
_EXECUTABLES: Final = frozenset({"claude-memory", "claude-memory.exe"})
_CODEX_EVENTS: Final[dict[str, str]] = {
    "session-start": "session_start",
    "user-prompt-submit": "user_prompt_submit",
    "post-tool-use": "post_tool_use",
    "stop": "stop",
    "session-end": "session_end",
    "pre-compact": "pre_compact",
    "post-compact": "post_compact",
}
"""Codex's snake_case event names, as used in its trust keys and hashes."""


@record
class FileChange:
    path: Path
    before: str | None
    """The file's text now (None: it does not exist)."""
    after: str | None
    """The file's text after the change (None: the file is removed)."""

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        lines = difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            (self.after or "").splitlines(keepends=True),
            fromfile=f"{self.path} (now)" if self.before is not None else "/dev/null",
            tofile=f"{self.path} (after)" if self.after is not None else "/dev/null",
        )
        return "".join(lines)


@record
class HookSpec:
    """One hook as a client's config holds it."""

    event: str
    """Our name (`session-start`)."""
    command: str
    timeout: int
    matcher: str | None = None

    @property
    def name(self) -> str:
        return EVENT_NAMES[self.event]

    def entry(self) -> dict[str, Any]:
        return {"type": "command", "command": self.command, "timeout": self.timeout}

    def group(self) -> dict[str, Any]:
        group: dict[str, Any] = {}
        if self.matcher is not None:
            group["matcher"] = self.matcher
        group["hooks"] = [self.entry()]
        return group


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


def codex_hooks_path(environ: Mapping[str, str]) -> Path:
    return codex_home(environ) / "hooks.json"


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


def hook_command(
    executable: Sequence[str], home: Path | None, event: str, target: Target = "claude-code"
) -> str:
    words = [*base_command(executable, home), "hook", event]
    if target == "codex":
        words += ["--client", "codex"]
        if event == "session-end":
            # Codex runs hook commands through the shell; the prefix sets the hook's budget
            return f"CLAUDE_MEMORY_HOOK_BUDGET={CODEX_SESSION_END_BUDGET} {shlex.join(words)}"
    return shlex.join(words)


def hook_specs(target: Target, executable: Sequence[str], home: Path | None) -> list[HookSpec]:
    """The hooks `target` gets (`TARGET_EVENTS`)."""
    specs: list[HookSpec] = []
    for event in TARGET_EVENTS[target]:
        timeout = HOOK_TIMEOUTS[event]
        if target == "codex" and event == "session-end":
            timeout = CODEX_SESSION_END_TIMEOUT
        matcher = "*" if event in TOOL_EVENTS else None
        specs.append(
            HookSpec(event, hook_command(executable, home, event, target), timeout, matcher)
        )
    return specs


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


# --- hooks in a JSON object (Claude Code's settings.json, Codex's hooks.json) ------------------


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


def merge_hooks(settings: Mapping[str, Any], specs: Sequence[HookSpec]) -> dict[str, Any]:
    """Settings with our hooks in place (pure). Entries already as wanted stay where they
    are; stale ones (another path or home) are replaced; other hooks are untouched."""
    result = copy.deepcopy(dict(settings))
    hooks = result.get("hooks")
    if hooks is None:
        hooks = {}
    if not isinstance(hooks, dict):
        raise ConfigurationError("'hooks' is not an object; fix the file by hand first")
    for spec in specs:
        groups = hooks.get(spec.name) or []
        if not isinstance(groups, list):
            raise ConfigurationError(f"hooks.{spec.name} is not a list; fix the file first")
        wanted = spec.group()
        if wanted in groups and sum(_count_ours(g) for g in groups) == 1:
            continue
        hooks[spec.name] = [*_without_ours(groups), wanted]
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


def hook_positions(
    settings: Mapping[str, Any], specs: Sequence[HookSpec]
) -> list[tuple[HookSpec, int, int]]:
    """Where each spec sits: (spec, group index, handler index) within its event's list."""
    found: list[tuple[HookSpec, int, int]] = []
    hooks = settings.get("hooks") or {}
    for spec in specs:
        for gi, group in enumerate(hooks.get(spec.name) or []):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for hi, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if isinstance(handler, dict) and handler.get("command") == spec.command:
                    found.append((spec, gi, hi))
    return found


def allowed_tools() -> list[str]:
    """The permission rules `install claude-code` adds (`permissions.allow`): our read-only
    tools and `memory_save`, as Codex runs them (docs/codex.md, "Tool approvals"). Without
    them `claude -p` refused every call ("you haven't granted it yet") and an interactive
    session asked at each search. Retiring, resolving and cleaning up still ask."""
    from memory.clients.mcp_tools.catalog import SPECS

    names = [spec.name for spec in SPECS if spec.effect == "reads"] + ["memory_save"]
    return [f"mcp__{SERVER_NAME}__{name}" for name in names]


def merge_permissions(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings whose `permissions.allow` holds our rules (pure); other rules untouched."""
    result = copy.deepcopy(dict(settings))
    permissions = result.get("permissions")
    if permissions is None:
        permissions = {}
    if not isinstance(permissions, dict) or not isinstance(permissions.get("allow", []), list):
        raise ConfigurationError("'permissions.allow' is not a list; fix the file by hand first")
    allow = list(permissions.get("allow", []))
    allow += [rule for rule in allowed_tools() if rule not in allow]
    result["permissions"] = {**permissions, "allow": allow}
    return result


def remove_permissions(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings without our rules (pure); an `allow` or `permissions` left empty is dropped."""
    result = copy.deepcopy(dict(settings))
    permissions = result.get("permissions")
    if not isinstance(permissions, dict) or not isinstance(permissions.get("allow"), list):
        return result
    ours = set(allowed_tools())
    allow = [rule for rule in permissions["allow"] if rule not in ours]
    if allow:
        permissions["allow"] = allow
    else:
        del permissions["allow"]
    if not permissions:
        del result["permissions"]
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


# --- reading and writing files as their owners wrote them --------------------------------------


def _read(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8", newline="") as handle:  # keep CRLF as it is
            return handle.read()
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


_INDENT = re.compile(r"\n([ \t]+)[^ \t\r\n]")


def dump_json_like(data: Any, original: str | None) -> str:
    """`data` as JSON in the style of `original`: its indentation (tabs or N spaces; 2 for a
    one-line or new file), its line endings and whether it ends with a newline. Key order is
    the data's own, which `json.loads` keeps."""
    indent: str | int = 2
    newline, final = "\n", True
    if original:
        match = _INDENT.search(original)
        if match:
            unit = match.group(1)
            indent = "\t" if unit.startswith("\t") else len(unit)
        newline = "\r\n" if "\r\n" in original else "\n"
        final = original.endswith("\n")
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    if newline != "\n":
        text = text.replace("\n", newline)
    return text + (newline if final else "")


def backups_of(path: Path) -> list[Path]:
    """The install backups of `path`, newest first."""
    try:
        found = [p for p in path.parent.iterdir() if p.name.startswith(path.name + BACKUP_INFIX)]
    except OSError:
        return []

    def order(p: Path) -> tuple[str, int]:
        stamp, _, number = p.name[len(path.name + BACKUP_INFIX) :].partition("~")
        return stamp, int(number) if number.isdigit() else 0

    return sorted(found, key=order, reverse=True)


def _restored(path: Path, same: Callable[[str], bool]) -> str | None:
    """The text of the newest backup that `same` accepts (the file as it was before an
    install, when uninstall leaves the same content), else None."""
    for backup in backups_of(path):
        text = _read(backup)
        if text is not None and same(text):
            return text
    return None


def _json_equal(data: Any) -> Callable[[str], bool]:
    def same(text: str) -> bool:
        try:
            return bool(json.loads(text) == data)
        except ValueError:
            return False

    return same


def _json_change(
    path: Path, transform: Callable[[dict[str, Any]], dict[str, Any]], *, remove: bool = False
) -> FileChange:
    before = _read(path)
    data = _load_json(path, before)
    new = transform(data)
    if new == data and before is not None:
        return FileChange(path, before, before)  # same content: keep the file byte for byte
    if remove and before is not None:
        restored = _restored(path, _json_equal(new))
        if restored is not None:
            return FileChange(path, before, restored)
        if not new:  # no backup held this (empty) content: install created the file
            return FileChange(path, before, None)
    return FileChange(path, before, dump_json_like(new, before))


# --- Claude Code ------------------------------------------------------------------------------


def plan_claude_code(
    environ: Mapping[str, str], executable: Sequence[str], home: Path | None, *, remove: bool
) -> list[FileChange]:
    if remove:
        return [
            _json_change(
                claude_settings_path(environ),
                lambda d: remove_permissions(remove_hooks(d)),
                remove=True,
            ),
            _json_change(claude_state_path(environ), remove_mcp, remove=True),
        ]
    entry = mcp_entry(executable, home)
    specs = hook_specs("claude-code", executable, home)
    return [
        _json_change(
            claude_settings_path(environ), lambda d: merge_permissions(merge_hooks(d, specs))
        ),
        _json_change(claude_state_path(environ), lambda d: merge_mcp(d, entry)),
    ]


# --- Codex ------------------------------------------------------------------------------------

_BLOCK = re.compile(re.escape(BEGIN_MARK) + r".*?" + re.escape(END_MARK) + r"\r?\n?", re.DOTALL)


def codex_trust_hash(spec: HookSpec) -> str:
    """The hash Codex (0.169) records when a user trusts this hook: sha256 of its definition
    as canonical JSON (`version_for_toml` in codex-rs/config/src/fingerprint.rs), with the
    timeout Codex uses after clamping. Only the definition is hashed, not the program."""
    timeout = spec.timeout
    if spec.event == "session-end":
        timeout = min(timeout, CODEX_SESSION_END_TIMEOUT)
    ident: dict[str, Any] = {
        "event_name": _CODEX_EVENTS[spec.event],
        "hooks": [{"type": "command", "command": spec.command, "timeout": timeout, "async": False}],
    }
    if spec.matcher is not None:
        ident["matcher"] = spec.matcher
    canonical = json.dumps(ident, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def codex_trust_entries(
    hooks_file: Path, settings: Mapping[str, Any], specs: Sequence[HookSpec]
) -> dict[str, str]:
    """`hooks.state` key -> trusted hash for our hooks as they sit in `settings` (hooks.json).
    Codex names a hook by the file's real path, its event, group and handler index."""
    source = os.path.realpath(hooks_file)
    return {
        f"{source}:{_CODEX_EVENTS[spec.event]}:{gi}:{hi}": codex_trust_hash(spec)
        for spec, gi, hi in hook_positions(settings, specs)
    }


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a TOML basic string


def codex_block(
    executable: Sequence[str], home: Path | None, trust: Mapping[str, str] | None = None
) -> str:
    command = [*base_command(executable, home), "mcp"]
    args = ", ".join(_toml_string(a) for a in command[1:])
    lines = [
        BEGIN_MARK,
        f"[mcp_servers.{SERVER_NAME}]",
        f"command = {_toml_string(command[0])}",
        f"args = [{args}]",
        "",
        "# Codex asks before each call of an MCP tool that is not read-only, and `codex exec`",
        "# (approval policy never) refuses it. The read tools say they are read-only; saving a",
        "# note is what the memory's own text asks the model to do, and what reaches every",
        "# session or speaks for you waits for your confirmation anyway (docs/permissions.md).",
        f"[mcp_servers.{SERVER_NAME}.tools.memory_save]",
        'approval_mode = "approve"',
    ]
    if trust:
        lines += [
            "",
            "# Codex runs a hook only once it is trusted. These are the hashes of the hooks",
            "# `claude-memory install codex` wrote to hooks.json, what reviewing them in /hooks",
            "# would record; a hook changed since no longer matches and must be reviewed again.",
        ]
        for key, digest in trust.items():
            lines += [
                f"[hooks.state.{_toml_string(key)}]",
                f"trusted_hash = {_toml_string(digest)}",
            ]
    lines.append(END_MARK)
    return "\n".join(lines) + "\n"


def merge_codex(text: str, block: str, path: Path) -> str:
    current = _parse_toml(text, path)
    outside = _parse_toml(_BLOCK.sub("", text, count=1), path)
    if not _BLOCK.search(text) and SERVER_NAME in (current.get("mcp_servers") or {}):
        raise ConfigurationError(
            f"{path} already defines [mcp_servers.{SERVER_NAME}] by hand; remove it first"
        )
    wanted = _parse_toml(block, path)
    ours = ((wanted.get("hooks") or {}).get("state") or {}).keys()
    theirs = ((outside.get("hooks") or {}).get("state") or {}).keys()
    if clash := sorted(set(ours) & set(theirs)):
        raise ConfigurationError(
            f"{path} already has [hooks.state] entries for our hooks ({clash[0]}); "
            "remove them first (install writes its own)"
        )
    if _BLOCK.search(text):
        new = _BLOCK.sub(lambda _m: block, text, count=1)
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


def _toml_change(path: Path, before: str | None, after: str, *, remove: bool) -> FileChange:
    if remove and before is not None and after != before:
        # the separator install added in front of the block is not in the file any more: a
        # backup with the same text up to trailing newlines is the file as it was
        restored = _restored(path, lambda t: t.rstrip("\r\n") == after.rstrip("\r\n"))
        if restored is not None:
            return FileChange(path, before, restored)
        if not after.strip():
            return FileChange(path, before, None)
    return FileChange(path, before, after)


def plan_codex(
    environ: Mapping[str, str], executable: Sequence[str], home: Path | None, *, remove: bool
) -> list[FileChange]:
    config = codex_config_path(environ)
    hooks_file = codex_hooks_path(environ)
    before = _read(config)
    text = before or ""
    if remove:
        changes = [_json_change(hooks_file, remove_hooks, remove=True)]
        if before is not None:
            changes.append(_toml_change(config, before, remove_codex(text), remove=True))
        return changes
    specs = hook_specs("codex", executable, home)
    hooks_change = _json_change(hooks_file, lambda d: merge_hooks(d, specs))
    merged = json.loads(hooks_change.after or "{}")
    trust = codex_trust_entries(hooks_file, merged, specs)
    after = merge_codex(text, codex_block(executable, home, trust), config)
    return [hooks_change, FileChange(config, before, after)]


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


def _backup(path: Path, stamp: str) -> Path | None:
    """Copy `path` to a backup name no earlier backup has (`-<stamp>`, then `~2`, `~3`, ...):
    two installs in the same second keep both originals. None when a backup already holds
    these very bytes: each install/uninstall cycle left two more copies of the same two texts
    (issue #32); now only the first cycle makes backups."""
    content = path.read_bytes()
    for earlier in backups_of(path):
        try:
            if earlier.read_bytes() == content:
                return None
        except OSError:
            continue
    number = 1
    while True:
        suffix = stamp if number == 1 else f"{stamp}~{number}"
        backup = path.with_name(f"{path.name}{BACKUP_INFIX}{suffix}")
        try:
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            number += 1
            continue
        with os.fdopen(fd, "wb") as handle, open(path, "rb") as source:
            shutil.copyfileobj(source, handle)
        shutil.copystat(path, backup)
        return backup


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
            backup = _backup(change.path, stamp)
            if backup is not None:
                backups.append(backup)
            mode = change.path.stat().st_mode & 0o777
        if change.after is None:
            change.path.unlink(missing_ok=True)
            continue
        fd, tmp = tempfile.mkstemp(dir=change.path.parent, prefix=f".{change.path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                handle.write(change.after)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, change.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return backups


CODEX_TRUST_NOTE: Final = (
    "  Codex runs a hook only after you trust it (/hooks in Codex). The {count} hooks just\n"
    "  written to {hooks} are marked trusted in {config} ([hooks.state] trusted_hash,\n"
    "  what reviewing them in /hooks records). Edit one and Codex asks for a review again;\n"
    "  `claude-memory uninstall codex` removes the hooks and their trust entries."
)


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
        action = "removed" if change.after is None else "updated"
        print(f"{target}: {action} {change.path}", file=out)
    for backup in backups:
        print(f"  backup: {backup}", file=out)
    if not remove and target == "claude-code":
        print(
            "  start a new Claude Code session; `claude mcp list` should show claude-memory",
            file=out,
        )
    if not remove and target == "codex":
        print(
            CODEX_TRUST_NOTE.format(
                count=len(TARGET_EVENTS["codex"]),
                hooks=codex_hooks_path(environ),
                config=codex_config_path(environ),
            ),
            file=out,
        )
        print("  start a new Codex session; `codex mcp list` should show claude-memory", file=out)
    return 0


# --- what `doctor` says about the clients (docs/claude-code.md, "Checking the setup") -----------

PLUGIN_ID: Final = "long-term-memory@claude-memory-system"
"""The plugin as Claude Code records it in `enabledPlugins` once installed from this
repository's marketplace."""

ClientCheck = tuple[bool, str, str]
"""One `doctor` line: fine?, what was checked, what to do when it is not."""


def hooks_installed(settings: Mapping[str, Any]) -> dict[str, int]:
    """Our hook commands per event in a settings object (Claude Code's settings.json, Codex's
    hooks.json)."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return {}
    counts = {
        name: sum(_count_ours(g) for g in groups)
        for name, groups in hooks.items()
        if isinstance(groups, list)
    }
    return {name: n for name, n in counts.items() if n}


def claude_code_checks(settings: Mapping[str, Any], *, command_found: bool) -> list[ClientCheck]:
    """Claude Code's setup (pure): our hooks, each once; the plugin; not both (every hook
    would run twice, silently); and the plugin's launcher finding `claude-memory`."""
    counts = hooks_installed(settings)
    plugins = settings.get("enabledPlugins")
    plugin = isinstance(plugins, dict) and plugins.get(PLUGIN_ID) is True
    twice = sorted(name for name, n in counts.items() if n > 1)
    checks: list[ClientCheck] = []
    if not counts and not plugin:
        none = "Claude Code: no memory hooks (claude-memory install claude-code adds them)"
        return [(True, none, "")]
    if counts:
        checks.append(
            (
                not twice,
                f"Claude Code: hooks installed for {len(counts)} events"
                + (f", twice for {', '.join(twice)}" if twice else ""),
                "claude-memory uninstall claude-code, then claude-memory install claude-code",
            )
        )
    if plugin:
        checks.append(
            (
                not counts,
                f"Claude Code: plugin {PLUGIN_ID} enabled"
                + (" and the hooks installed too: every hook runs twice" if counts else ""),
                "keep one: claude-memory uninstall claude-code, or claude plugin uninstall "
                + PLUGIN_ID,
            )
        )
        checks.append(
            (
                command_found,
                "Claude Code plugin: claude-memory "
                + ("found on PATH" if command_found else "not on PATH: the plugin has no memory"),
                "install it (uv tool install <checkout>), or tell the plugin where it is"
                ' (docs/claude-code.md, "Plugin install")',
            )
        )
    return checks


def codex_checks(hooks: Mapping[str, Any], config_text: str | None) -> list[ClientCheck]:
    """Codex's setup (pure): our hooks in hooks.json, each once, and the MCP server in
    config.toml."""
    counts = hooks_installed(hooks)
    server = config_text is not None and f"[mcp_servers.{SERVER_NAME}]" in config_text
    if not counts and not server:
        return [(True, "Codex: no memory hooks (claude-memory install codex adds them)", "")]
    twice = sorted(name for name, n in counts.items() if n > 1)
    return [
        (
            bool(counts) and not twice,
            f"Codex: hooks installed for {len(counts)} events"
            + (f", twice for {', '.join(twice)}" if twice else ""),
            "claude-memory uninstall codex, then claude-memory install codex",
        ),
        (
            server,
            f"Codex: MCP server {SERVER_NAME} " + ("configured" if server else "not configured"),
            "claude-memory install codex",
        ),
    ]


def client_checks(environ: Mapping[str, str]) -> list[ClientCheck]:
    """The `doctor` lines for Claude Code and Codex, from their files under `environ`'s
    config folders."""
    claude = _load_json(claude_settings_path(environ), _read(claude_settings_path(environ)))
    # where the plugin's launcher looks (plugin/bin/claude-memory), its own variable aside
    local = Path(environ.get("HOME", "~")).expanduser() / ".local" / "bin" / "claude-memory"
    found = shutil.which("claude-memory", path=environ.get("PATH")) is not None or local.exists()
    codex_hooks = _load_json(codex_hooks_path(environ), _read(codex_hooks_path(environ)))
    return [
        *claude_code_checks(claude, command_found=found),
        *codex_checks(codex_hooks, _read(codex_config_path(environ))),
    ]
