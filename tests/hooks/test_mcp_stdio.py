"""The MCP server answers every request line, even one the SDK cannot parse (a JSON escape of
half a UTF-16 pair, broken JSON): before 26 Nov such a request got no answer and the client
waited for its own timeout. The table over the pure `refusal`, then the real server on raw
stdio."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memory.clients.mcp_stdio import refusal
from tests.hooks.conftest import CLAUDE_MEMORY, MCP_INITIALIZE

INIT = MCP_INITIALIZE
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call(request_id: int, tool: str, arguments: dict[str, Any]) -> str:
    message = {"name": tool, "arguments": arguments}
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": message}
    )


SURROGATE_SEARCH = (
    '{"jsonrpc":"2.0","id":2,"method":"tools/call",'
    '"params":{"name":"memory_search","arguments":{"query":"\\ud800"}}}'
)


@pytest.mark.parametrize(
    ("line", "answer"),
    [
        (json.dumps(INIT), None),
        (json.dumps(INITIALIZED), None),
        (call(3, "memory_search", {"query": "deploy"}), None),
        (SURROGATE_SEARCH, (2, -32602, "lone surrogate")),
        (
            '{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"n\\udc00":1}}',
            ("a", -32602, "lone surrogate"),
        ),
        ('{"jsonrpc":"2.0","id":4,"method":', (None, -32700, "not JSON")),
        ("[1, 2]", (None, -32600, "not a JSON-RPC")),
        ('{"jsonrpc":"1.0","id":5,"method":"ping"}', (5, -32600, "not a valid JSON-RPC")),
        ('{"jsonrpc":"2.0","method":"notifications/\\ud800"}', None),  # never answered
    ],
)
def test_refusal(line: str, answer: tuple[Any, int, str] | None) -> None:
    got = refusal(line)
    if answer is None:
        assert got is None
        return
    assert got is not None
    request_id, code, words = answer
    assert (got["id"], got["error"]["code"]) == (request_id, code)
    assert words in got["error"]["message"]
    json.dumps(got, ensure_ascii=True)  # writable as it is


def test_the_server_answers_a_request_it_cannot_parse_and_goes_on(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    lines = [
        json.dumps(INIT),
        json.dumps(INITIALIZED),
        SURROGATE_SEARCH,
        '{"jsonrpc":"2.0","id":7,"method":',
        call(3, "memory_save", {"content": "Deploys go out on Fridays."}),
    ]
    server = subprocess.Popen(
        [str(CLAUDE_MEMORY), "--home", str(mem_home), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
        cwd=make_project("app"),
        env={k: v for k, v in os.environ.items() if k != "CLAUDE_MEMORY_HOME"},
    )
    assert server.stdin is not None and server.stdout is not None
    by_id: dict[Any, dict[str, Any]] = {}
    try:
        # stdin stays open until the last answer: a client that hangs up gets none
        def ask(*requests: str, until: set[Any]) -> None:
            for line in requests:
                server.stdin.write(line + "\n")  # type: ignore[union-attr]
            server.stdin.flush()  # type: ignore[union-attr]
            while not until <= by_id.keys():
                answer = json.loads(server.stdout.readline())  # type: ignore[union-attr]
                by_id[answer.get("id")] = answer

        ask(*lines, until={1, 2, 3, None})
        ask(call(4, "memory_search", {"query": "deploys Fridays"}), until={4})
    finally:
        server.stdin.close()
        server.wait(timeout=60)
        server.stdout.close()
    assert by_id[2]["error"]["code"] == -32602
    assert "lone surrogate" in by_id[2]["error"]["message"]
    assert by_id[None]["error"]["code"] == -32700
    assert "result" in by_id[3] and "result" in by_id[4]
    found = by_id[4]["result"]["content"][0]["text"]
    assert "Fridays" in found, found


HEAVY = (
    *("mcp", "pydantic", "settings", "memory.sqlite", "memory.clients.opening", "numpy", "asyncio"),
    *("dataclasses", "inspect"),  # ~8 ms of CPU, a sixth of the start
)
"""What `claude-memory mcp` must not import before its first answer (issue #32: the SDK and
pydantic alone made `initialize` take 0.5-2 s, and Codex started without the tools)."""


def test_initialize_is_answered_before_anything_heavy_is_imported(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CLAUDE_MEMORY_HOME"}
    server = subprocess.Popen(
        [str(CLAUDE_MEMORY), "--home", str(mem_home), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=make_project("app"),
        env=env | {"PYTHONPROFILEIMPORTTIME": "1"},
    )
    assert server.stdin and server.stdout and server.stderr
    try:
        server.stdin.write(json.dumps(INIT) + "\n")
        server.stdin.flush()
        answer = json.loads(server.stdout.readline())
    finally:
        server.stdin.close()  # before tools/list: nothing but the first answer was needed
        imports = server.stderr.read()
        server.wait(timeout=30)
        server.stdout.close()
        server.stderr.close()
    assert answer["result"]["serverInfo"]["name"] == "claude-memory"
    assert answer["result"]["protocolVersion"] == "2025-06-18"
    assert answer["result"]["capabilities"] == {"tools": {"listChanged": False}}
    loaded = {line.rsplit("|", 1)[-1].strip() for line in imports.splitlines() if "|" in line}
    assert not {m for m in loaded if m.split(".")[0] in HEAVY or m in HEAVY}, sorted(loaded)


def test_the_tool_list_is_small_and_every_result_is_text(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    server = subprocess.Popen(
        [str(CLAUDE_MEMORY), "--home", str(mem_home), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
        cwd=make_project("app"),
        env={k: v for k, v in os.environ.items() if k != "CLAUDE_MEMORY_HOME"},
    )
    assert server.stdin is not None and server.stdout is not None

    def ask(line: str) -> dict[str, Any]:
        server.stdin.write(line + "\n")  # type: ignore[union-attr]
        server.stdin.flush()  # type: ignore[union-attr]
        return dict(json.loads(server.stdout.readline()))  # type: ignore[union-attr]

    try:
        ask(json.dumps(INIT))
        listed = ask(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))["result"]
        assert ask(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}))["result"] == {}
        saved = ask(call(4, "memory_save", {"content": "Backups run at 02:00."}))["result"]
        unknown = ask(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "sampling/x"}))
    finally:
        server.stdin.close()
        server.wait(timeout=60)
        server.stdout.close()
    # 26 tools and 18,992 characters before (11,854 sent with every Codex request)
    assert len(listed["tools"]) <= 12
    assert len(json.dumps(listed)) <= 8000
    assert all("outputSchema" not in tool for tool in listed["tools"])
    assert saved["content"][0]["type"] == "text" and "structuredContent" not in saved
    assert saved["content"][0]["text"].startswith("Saved as [mem_")
    assert unknown["error"]["code"] == -32601


def test_the_server_names_the_installed_version() -> None:
    from importlib.metadata import version

    from memory.clients.mcp_tools.catalog import SERVER_VERSION

    assert version("claude-memory-system") == SERVER_VERSION


@pytest.mark.parametrize(
    ("asked", "answered"),
    [
        ("2024-11-05", "2024-11-05"),  # an older client keeps its revision
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),  # unknown: ours, newest; the client decides
        (None, "2025-11-25"),
    ],
)
def test_the_protocol_revision_is_the_clients_when_the_server_speaks_it(
    asked: str | None, answered: str
) -> None:
    from memory.clients.mcp_stdio import initialized

    assert initialized({"protocolVersion": asked})["protocolVersion"] == answered


def test_a_bad_setting_is_every_tool_calls_error_not_a_dead_server(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    """The settings are read after the first answers (they cost the start ~0.2 s): a bad one
    no longer stops the server before `initialize`, where the client saw only 'failed'; each
    tool call says which variable is wrong."""
    env = {k: v for k, v in os.environ.items() if k != "CLAUDE_MEMORY_HOME"}
    lines = [
        json.dumps(INIT),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        call(3, "memory_status", {}),
    ]
    proc = subprocess.run(
        [str(CLAUDE_MEMORY), "--home", str(mem_home), "mcp"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        cwd=make_project("app"),
        env=env | {"CLAUDE_MEMORY_PORT": "notanumber"},
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    answers = {a["id"]: a for a in map(json.loads, proc.stdout.splitlines())}
    assert answers[1]["result"]["serverInfo"]["name"] == "claude-memory"
    assert len(answers[2]["result"]["tools"]) == 11
    assert answers[3]["result"]["isError"] is True
    assert "CLAUDE_MEMORY_PORT" in answers[3]["result"]["content"][0]["text"]
    assert "CLAUDE_MEMORY_PORT" in proc.stderr  # the client's MCP log says it too
