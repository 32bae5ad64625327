"""What an Edit, MultiEdit or Write call would change, as a unified diff for its approval card
(pure: the file's current text comes in from the caller, which reads it off the loop).

A diff is capped (lines and bytes) far under a card's documented 30 KB body, so a Write of a
large file still gives a card Feishu accepts; what is left out is counted in a last line.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

DIFF_LINES = 80  # lines shown, at most
DIFF_CHARS = 6_000  # characters shown, at most (a card holds 30 KB, its escapes grow the text)
LINE_CHARS = 200  # a longer line is cut
INPUT_LINES = 2_000  # lines of each side diffed, at most
_CONTEXT = 2
_TICKS = re.compile(r"`+")
DIFF_TOOLS = frozenset({"Edit", "MultiEdit", "Write"})


def file_to_read(tool: str, tool_input: Mapping[str, Any]) -> str | None:
    """The path whose current text a Write's diff needs (an Edit's diff needs none)."""
    path = tool_input.get("file_path")
    return path if tool == "Write" and isinstance(path, str) and path else None


def tool_diff(tool: str, tool_input: Mapping[str, Any], before: str | None = None) -> str | None:
    """The change an Edit / MultiEdit / Write call asks for, as unified diff lines (capped), or
    None for other tools. `before`: a Write's file as it is now (None: a new file)."""
    if tool not in DIFF_TOOLS:
        return None
    path = str(tool_input.get("file_path") or "file")
    pairs: list[tuple[str, str]] = []
    if tool == "Edit":
        pairs.append((_text(tool_input.get("old_string")), _text(tool_input.get("new_string"))))
    elif tool == "MultiEdit":
        edits = tool_input.get("edits")
        for edit in edits if isinstance(edits, list) else []:
            if isinstance(edit, Mapping):
                pairs.append((_text(edit.get("old_string")), _text(edit.get("new_string"))))
    else:
        pairs.append((before or "", _text(tool_input.get("content"))))
    lines: list[str] = []
    for old, new in pairs:
        # only the start is shown: diffing whole large files would be slow for nothing
        diff = difflib.unified_diff(
            old.splitlines()[:INPUT_LINES],
            new.splitlines()[:INPUT_LINES],
            fromfile=path if (tool != "Write" or before is not None) else "/dev/null",
            tofile=path,
            n=_CONTEXT,
            lineterm="",
        )
        body = list(diff)
        lines.extend(body[2:] if lines else body)  # the file header once
    return _capped(lines) if lines else None


def diff_markdown(diff: str) -> str:
    """The diff as a fenced `diff` block, its fence longer than any run of backticks inside."""
    fence = "`" * max(3, max((len(m) for m in _TICKS.findall(diff)), default=0) + 1)
    return f"{fence}diff\n{diff}\n{fence}"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _capped(lines: list[str]) -> str:
    shown: list[str] = []
    size = 0
    for line in lines:
        line = line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"
        if len(shown) >= DIFF_LINES or size + len(line) + 1 > DIFF_CHARS:
            break
        shown.append(line)
        size += len(line) + 1
    left = len(lines) - len(shown)
    if left:
        shown.append(f"… (+{left})")
    return "\n".join(shown)
