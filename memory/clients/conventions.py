"""What the memory knows about its clients, Claude Code and Codex: the hook events, the name
our MCP server goes by, where they keep their configs and transcripts, how to find the
session a hook belongs to, and how to read the last reply out of a transcript.

Standard library only: every hook process imports this.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

HookEvent = Literal[
    "session-start",
    "user-prompt-submit",
    "post-tool-use",
    "stop",
    "session-end",
    "pre-compact",
    "post-compact",
    "file-changed",
]
EVENT_NAMES: Final[dict[str, str]] = {
    "session-start": "SessionStart",
    "user-prompt-submit": "UserPromptSubmit",
    "post-tool-use": "PostToolUse",
    "stop": "Stop",
    "session-end": "SessionEnd",
    "pre-compact": "PreCompact",
    "post-compact": "PostCompact",
    "file-changed": "FileChanged",
}
EVENTS: Final[tuple[str, ...]] = tuple(EVENT_NAMES)
SERVER_NAME: Final = "claude-memory"
"""The MCP server's name in the CLI configs; tools appear as `mcp__claude-memory__<tool>`."""
TRANSCRIPT_TAIL: Final = 512_000


# --- session ids ------------------------------------------------------------------------------

_UUID_TAIL = re.compile(
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$", re.IGNORECASE
)
_SESSION_FIELDS: Final = ("session_id", "sessionId", "thread_id", "thread-id", "conversation_id")


def claude_config_dir(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("CLAUDE_CONFIG_DIR") or "~/.claude").expanduser()


def codex_home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("CODEX_HOME") or "~/.codex").expanduser()


def claude_project_dirs(config_dir: Path, cwd: str) -> list[Path]:
    """Where Claude Code keeps this folder's transcripts: the cwd with `:`, `\\` and `/`
    replaced by `-` (newer versions replace every non-alphanumeric character)."""
    names = [re.sub(r"[:\\/]", "-", cwd), re.sub(r"[^A-Za-z0-9]", "-", cwd)]
    return [config_dir / "projects" / name for name in dict.fromkeys(names)]


def _newest(paths: Sequence[Path]) -> Path | None:
    best: tuple[int, Path] | None = None
    for path in paths:
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            continue
        if best is None or mtime > best[0]:
            best = (mtime, path)
    return best[1] if best else None


def _newest_child_dir(folder: Path) -> Path | None:
    try:
        children = sorted(
            (p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()),
            key=lambda p: int(p.name),
        )
    except OSError:
        return None
    return children[-1] if children else None


def find_claude_session(environ: Mapping[str, str], cwd: str) -> str | None:
    for folder in claude_project_dirs(claude_config_dir(environ), cwd):
        try:
            newest = _newest(list(folder.glob("*.jsonl")))
        except OSError:
            continue
        if newest is not None:
            return newest.stem
    return None


def find_codex_session(environ: Mapping[str, str]) -> str | None:
    """The newest rollout of `~/.codex/sessions/<year>/<month>/<day>/` (uuid at the end)."""
    folder: Path | None = codex_home(environ) / "sessions"
    for _ in range(3):
        folder = _newest_child_dir(folder) if folder is not None else None
    if folder is None:
        return None
    newest = _newest(list(folder.glob("*.jsonl")))
    if newest is None:
        return None
    return normalize_session_id(newest.stem)


def normalize_session_id(value: str) -> str:
    """One form of a session id everywhere: a Codex rollout name
    (`rollout-2026-11-23T19-29-51-<uuid>`, as in the file name) becomes its UUID, which is
    what Codex's hook payloads and MCP tool calls carry as the session (thread) id."""
    value = value.strip()
    if value.startswith("rollout-"):
        match = _UUID_TAIL.search(value)
        if match:
            return match.group(1)
    return value


def resolve_session_id(
    payload: Mapping[str, Any], environ: Mapping[str, str], cwd: str, client: str
) -> str | None:
    """The payload's session id, else the transcript's name, else the newest transcript of
    Claude Code (or Codex) for this folder; None lets the service reuse or generate one.
    Always in the form of `normalize_session_id`."""
    for name in _SESSION_FIELDS:
        value = payload.get(name)
        if isinstance(value, str) and value.strip():
            return normalize_session_id(value)
    transcript = payload.get("transcript_path")
    if isinstance(transcript, str) and transcript.endswith(".jsonl"):
        return normalize_session_id(Path(transcript).stem)
    finders: list[Callable[[], str | None]] = [
        lambda: find_claude_session(environ, cwd),
        lambda: find_codex_session(environ),
    ]
    if client == "codex":
        finders.reverse()
    for finder in finders:
        found = finder()
        if found:
            return found
    return None


# --- transcripts ------------------------------------------------------------------------------


def _message_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    texts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") in ("text", "output_text"):
            text = block.get("text")
            if isinstance(text, str):
                texts.append(text)
    return texts


def last_assistant_reply(transcript_path: str | os.PathLike[str]) -> str:
    """The text of the last assistant message in a Claude Code (or Codex) JSONL transcript.

    Only the file's tail is read. Claude Code writes one line per content block; the blocks of
    the last message that has text (same message id) are joined."""
    path = Path(transcript_path)
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TRANSCRIPT_TAIL))
            data = handle.read()
    except OSError:
        return ""
    lines = data.decode("utf-8", errors="replace").splitlines()
    if size > TRANSCRIPT_TAIL and lines:
        lines = lines[1:]  # the first line is probably cut
    message_id: str | None = None
    parts: list[str] = []
    for line in reversed(lines):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        message = entry.get("message")
        if not isinstance(message, dict):  # Codex: {"type": "response_item", "payload": {...}}
            payload = entry.get("payload")
            message = payload if isinstance(payload, dict) else {}
        role = message.get("role") or entry.get("type")
        if role == "user" and parts:
            break
        if role != "assistant":
            continue
        texts = [t for t in _message_texts(message.get("content")) if t.strip()]
        this_id = message.get("id")
        if parts and this_id != message_id:
            break
        if texts:
            parts[:0] = texts
            message_id = this_id if isinstance(this_id, str) else None
            if message_id is None:
                break
    return "\n".join(parts).strip()
