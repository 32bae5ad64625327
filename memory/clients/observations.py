"""What a tool call teaches: a `PostToolUse` payload turned into an observation worth
keeping (a change, how something works, a discovery), or nothing. Pure."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from memory._record import record
from memory._text import one_line
from memory.clients.conventions import SERVER_NAME

ObservationKind = Literal["change", "how-it-works", "discovery"]


@record
class Observation:
    kind: ObservationKind
    title: str
    content: str
    files: tuple[str, ...] = ()
    changes: int = 0


NOISE_TOOLS: Final = frozenset(
    {
        *("TodoWrite", "TodoRead", "ToolSearch", "ExitPlanMode", "EnterPlanMode"),
        *("AskUserQuestion", "BashOutput", "KillShell", "KillBash", "TaskOutput", "TaskStop"),
        *("ListMcpResourcesTool", "ReadMcpResourceTool", "Skill", "SlashCommand"),
    }
)
NOISE_COMMANDS: Final = frozenset({"pwd", "clear", "true", ":", "whoami", "cd", "ls"})
_EDIT_TOOLS: Final = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
_READ_COMMANDS: Final = frozenset(
    {"cat", "head", "tail", "less", "grep", "rg", "find", "fd", "wc", "tree", "ls", "stat", "du"}
)
_CHANGE_COMMANDS: Final = frozenset(
    {"rm", "mv", "cp", "mkdir", "touch", "chmod", "ln", "patch", "rmdir"}
)
_CHANGE_SUBCOMMANDS: Final = re.compile(
    r"^(git\s+(commit|push|merge|rebase|checkout|switch|reset|apply|am|cherry-pick|stash|tag)"
    r"|(pip|npm|pnpm|yarn|uv|cargo|poetry|go)\s+(install|add|remove|uninstall|get)"
    r"|sed\s+-i)\b"
)
_READ_SUBCOMMANDS: Final = re.compile(r"^git\s+(status|log|diff|show|blame|branch)\b")
_QUOTED: Final = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")
_WRITES_A_FILE: Final = re.compile(
    # `> out.txt`, `>> log`, `| tee out.txt`: output into a file (not a descriptor, not
    # /dev/null, not `2>` alone: a discarded error stream changes nothing)
    r"(?:(?<![0-9&<>])>>?|\btee(?:\s+-a)?)\s*(?!&|/dev/null\b)[^\s|;&<>]"
)


def _is_own_tool(name: str) -> bool:
    """Our memory tools: `mcp__claude-memory__x`, in a plugin `mcp__plugin_<p>_claude-memory__x`,
    and the chat agent's in-process `mcp__memory__x`."""
    return name.startswith("mcp__") and (
        f"{SERVER_NAME}__" in name or name.startswith("mcp__memory__")
    )


def display_path(path: str, root: str) -> str:
    """`/repo/web/src/auth.ts` -> `.../src/auth.ts` (relative to the project, last two parts)."""
    if not path:
        return "?"
    text = path.replace("\\", "/")
    base = root.replace("\\", "/").rstrip("/") + "/"
    if root and text.startswith(base):
        text = text[len(base) :]
    parts = [p for p in text.split("/") if p]
    if len(parts) > 2:
        return ".../" + "/".join(parts[-2:])
    return "/".join(parts) if not text.startswith("/") else "/" + "/".join(parts)


def _relative(path: str, root: str) -> str:
    text = path.replace("\\", "/")
    base = root.replace("\\", "/").rstrip("/") + "/"
    return text[len(base) :] if root and text.startswith(base) else text


def _command_kind(command: str) -> ObservationKind:
    first = command.strip().split(maxsplit=1)[0] if command.strip() else ""
    first = first.rsplit("/", 1)[-1]
    if _WRITES_A_FILE.search(_QUOTED.sub("''", command)):  # `echo a > out.txt` (issue #32)
        return "change"
    if _READ_SUBCOMMANDS.match(command.strip()) or first in _READ_COMMANDS:
        return "discovery"
    if _CHANGE_SUBCOMMANDS.match(command.strip()) or first in _CHANGE_COMMANDS:
        return "change"
    return "how-it-works"


def _response_text(response: Any) -> tuple[str, str]:
    """(stdout, stderr) of a tool response in its several shapes."""
    if isinstance(response, str):
        return response, ""
    if isinstance(response, dict):
        out = response.get("stdout") or response.get("output") or response.get("content") or ""
        err = response.get("stderr") or ""
        return (out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)), (
            err if isinstance(err, str) else ""
        )
    if isinstance(response, list):
        texts = [b.get("text", "") for b in response if isinstance(b, dict)]
        return "\n".join(t for t in texts if isinstance(t, str)), ""
    return "", ""


def observe_tool(
    tool_name: str, tool_input: Mapping[str, Any], tool_response: Any, root: str
) -> Observation | None:
    """A short, rule-based record of one tool call, or None for noise. Never whole file
    contents: edits keep a short excerpt, writes only their size, commands their output tail.
    (The hook sanitizes the tool input and response before, and the stored text again.)"""
    if not tool_name or tool_name in NOISE_TOOLS or _is_own_tool(tool_name):
        return None
    args = dict(tool_input) if isinstance(tool_input, Mapping) else {}

    def arg(name: str) -> str:
        value = args.get(name)
        return value if isinstance(value, str) else ""

    if tool_name in _EDIT_TOOLS:
        path = arg("file_path") or arg("notebook_path") or arg("path")
        verb = "写入" if tool_name == "Write" else "编辑"
        lines = [f"tool: {tool_name}", f"files: {_relative(path, root)}"]
        if tool_name == "Write":
            lines.append(f"wrote {len(arg('content').splitlines())} lines")
        elif tool_name == "MultiEdit":
            given = args.get("edits")
            edits = given if isinstance(given, list) else []
            lines.append(f"{len(edits)} edits")
            for edit in edits[:3]:
                if isinstance(edit, dict):
                    lines.append(f"- {one_line(edit.get('old_string', ''), 120)}")
                    lines.append(f"+ {one_line(edit.get('new_string', ''), 120)}")
        elif tool_name == "Edit":
            lines.append(f"- {one_line(arg('old_string'), 200)}")
            lines.append(f"+ {one_line(arg('new_string'), 200)}")
        else:
            lines.append(f"+ {one_line(arg('new_source'), 200)}")
        return Observation(
            "change",
            f"{verb} {display_path(path, root)}",
            "\n".join(lines),
            (_relative(path, root),) if path else (),
            1,
        )
    if tool_name == "Bash":
        command = arg("command").strip()
        if not command:
            return None
        words = command.split()
        if command in NOISE_COMMANDS or (words[0] == "cd" and len(words) <= 2):
            return None
        out, err = _response_text(tool_response)
        lines = ["tool: Bash", f"$ {one_line(command, 500)}"]
        if arg("description"):
            lines.append(f"why: {one_line(arg('description'), 200)}")
        if out.strip():
            lines.append("out: " + one_line(out.strip()[-600:], 400))
        if err.strip():
            lines.append("err: " + one_line(err.strip()[-400:], 300))
        kind = _command_kind(command)
        # a command that changed files is a file change of the session, as an edit is: it
        # counts for the summary rule (`echo a > out.txt` did not, issue #32)
        changes = 1 if kind == "change" else 0
        return Observation(kind, f"执行: {one_line(command, 80)}", "\n".join(lines), (), changes)
    if tool_name == "Read":
        path = arg("file_path")
        where = ""
        if args.get("offset") or args.get("limit"):
            where = f"lines from {args.get('offset') or 1}, limit {args.get('limit') or '-'}"
        return Observation(
            "discovery",
            f"读取 {display_path(path, root)}",
            "\n".join(filter(None, ["tool: Read", f"files: {_relative(path, root)}", where])),
            (_relative(path, root),) if path else (),
        )
    if tool_name in ("Grep", "Glob", "LS"):
        pattern = arg("pattern") or arg("path")
        label = {"Grep": "搜索", "Glob": "查找文件", "LS": "列目录"}[tool_name]
        out, _ = _response_text(tool_response)
        details = [f"tool: {tool_name}", f"pattern: {one_line(pattern, 200)}"]
        if arg("path"):
            details.append(f"in: {_relative(arg('path'), root)}")
        if arg("glob"):
            details.append(f"glob: {arg('glob')}")
        if out.strip():
            details.append("found: " + one_line(out.strip()[:400], 300))
        return Observation("discovery", f"{label}: {one_line(pattern, 80)}", "\n".join(details))
    if tool_name == "WebFetch":
        url = arg("url")
        return Observation(
            "discovery",
            f"获取网页: {one_line(url, 100)}",
            f"tool: WebFetch\nurl: {url}\nprompt: {one_line(arg('prompt'), 200)}",
        )
    if tool_name == "WebSearch":
        query = arg("query")
        return Observation(
            "discovery", f"搜索网页: {one_line(query, 80)}", f"tool: WebSearch\nquery: {query}"
        )
    if tool_name in ("Task", "Agent"):
        what = arg("description") or arg("prompt")
        out, _ = _response_text(tool_response)
        content = f"tool: {tool_name}\ntask: {one_line(what, 300)}"
        if out.strip():
            content += "\nresult: " + one_line(out.strip()[:600], 400)
        return Observation("how-it-works", f"子任务: {one_line(what, 80)}", content)
    summary = one_line(json.dumps(args, ensure_ascii=False, default=str), 300)
    return Observation("discovery", f"调用 {tool_name}", f"tool: {tool_name}\ninput: {summary}")
