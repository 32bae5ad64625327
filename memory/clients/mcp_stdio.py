"""The MCP protocol on stdio, ours: JSON-RPC 2.0, one message per line (MCP specification,
"Transports: stdio" and "Lifecycle"), for the requests a tool server answers: `initialize`,
`ping`, `tools/list`, `tools/call`, and the notifications `initialized` and `cancelled`.

Why not the SDK: importing `mcp` (and pydantic with it) cost `claude-memory mcp` 0.5 s on a
quiet machine and 1.4-2 s on a busy one before it could answer `initialize`, and Codex waits
for an optional MCP server 1 s (`mcp_optional_startup_grace_ms`): its first model request went
out without the memory tools (issue #32). Here the
answers to `initialize` and `tools/list` come from `mcp_tools.catalog` alone; the tools and the
memory load afterwards (`ToolRunner.warm`), and a tool call waits for them.

Every request line gets an answer, even one that cannot be read (a JSON escape of half a UTF-16
pair, broken JSON): an error for its id, or for `null` when no id can be read, as JSON-RPC 2.0
asks; the client would otherwise wait for its own timeout (60 s in Claude Code). Notifications
are never answered. Tool calls run in worker threads, so a slow one never holds `ping` or
another call; answers are written one line at a time.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, Final, NamedTuple, Protocol

from errors import InvalidInputError
from memory.clients.conventions import SERVER_NAME
from memory.clients.mcp_tools.catalog import INSTRUCTIONS, SERVER_VERSION, listing
from storage.text import require_text

log = logging.getLogger(__name__)

PROTOCOL_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""The MCP revisions this server speaks, newest first: it answers with the client's when it is
one of them, else with the newest (the client then decides whether to go on)."""

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602

TOOL_WORKERS: Final = 4
"""Tool calls at once; more wait their turn (the memory has one writer anyway)."""

# The values below are NamedTuples, not `memory._record` records: a record's dataclass machinery
# (dataclasses, inspect) is ~8 ms of CPU, a sixth of what the start costs before `initialize`.


class Request(NamedTuple):
    id: str | int
    method: str
    params: dict[str, Any]


class Notification(NamedTuple):
    method: str
    params: dict[str, Any]


class Unreadable(NamedTuple):
    """A line that is no message we can act on: the error to answer it with, or None (a
    notification or a response: never answered)."""

    answer: dict[str, Any] | None


Incoming = Request | Notification | Unreadable


class ToolText(NamedTuple):
    """A tool call's result: its text, and whether it is an error the model should see."""

    text: str
    error: bool = False


class NoSuchTool(NamedTuple):
    name: str


class ToolRunner(Protocol):
    """What serves the tool calls (`memory.clients.mcp_server.LazyTools`)."""

    def warm(self) -> None:
        """Start loading the tools and the memory in the background; returns at once."""

    def call(
        self, name: str, arguments: object, meta: Mapping[str, Any] | None
    ) -> ToolText | NoSuchTool:
        """Run one tool call (blocking: called in a worker thread)."""
        ...


def read(line: str) -> Incoming:
    """One line, parsed and checked once. Pure."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        return Unreadable(error(None, PARSE_ERROR, f"not JSON: {exc}"))
    if not isinstance(data, dict):
        return Unreadable(error(None, INVALID_REQUEST, "not a JSON-RPC 2.0 request"))
    if "id" not in data and "method" in data:
        return _notification(data)
    request_id = data.get("id")
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        return Unreadable(error(None, INVALID_REQUEST, "not a JSON-RPC 2.0 request"))
    try:
        require_text("the request", data)
    except InvalidInputError as exc:
        return Unreadable(error(request_id, INVALID_PARAMS, exc.message))
    if "method" not in data and ("result" in data or "error" in data):
        return Unreadable(None)  # a response: this server sends no requests
    method, params = data.get("method"), data.get("params", {})
    if data.get("jsonrpc") != "2.0" or not isinstance(method, str) or not isinstance(params, dict):
        return Unreadable(error(request_id, INVALID_REQUEST, "not a valid JSON-RPC 2.0 request"))
    return Request(request_id, method, params)


def _notification(data: dict[str, Any]) -> Notification | Unreadable:
    """Never answered, even when wrong."""
    method, params = data.get("method"), data.get("params", {})
    try:
        require_text("the notification", data)
    except InvalidInputError:
        return Unreadable(None)
    if data.get("jsonrpc") != "2.0" or not isinstance(method, str) or not isinstance(params, dict):
        return Unreadable(None)
    return Notification(method, params)


def refusal(line: str) -> dict[str, Any] | None:
    """The JSON-RPC error answering a line that cannot be read, None for a readable line or a
    notification. Pure: the table in the tests."""
    incoming = read(line)
    return incoming.answer if isinstance(incoming, Unreadable) else None


def error(request_id: str | int | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def result(request_id: str | int, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def initialized(params: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to `initialize`. Pure."""
    asked = params.get("protocolVersion")
    version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION},
        "instructions": INSTRUCTIONS,
    }


def tool_result(outcome: ToolText) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": outcome.text}], "isError": outcome.error}


EMPTY_LISTS: Final[dict[str, dict[str, list[Any]]]] = {
    "resources/list": {"resources": []},
    "resources/templates/list": {"resourceTemplates": []},
    "prompts/list": {"prompts": []},
}
"""Lists a client may ask for although the server offers none of them."""


class _Out:
    """stdout, one whole line at a time, from any thread; a client gone is not an error."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.cancelled: set[str | int] = set()

    def send(self, message: dict[str, Any]) -> None:
        try:
            data = json.dumps(message, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in stored text: escaped, still JSON
            data = json.dumps(message, ensure_ascii=True).encode("ascii")
        with self._lock:
            try:
                self._stream.write(data + b"\n")
                self._stream.flush()
            except (BrokenPipeError, ValueError):  # the client left (or closed our end)
                log.info("the client is gone; an answer was dropped")

    def answer(self, request_id: str | int, value: dict[str, Any]) -> None:
        if request_id in self.cancelled:  # the client gave up on it: no answer, as MCP asks
            self.cancelled.discard(request_id)
            return
        self.send(result(request_id, value))


def serve(runner: ToolRunner, stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """Answer until stdin closes, then let running tool calls finish (queued ones are
    dropped) and return."""
    out = _Out(stdout)
    with ThreadPoolExecutor(TOOL_WORKERS, thread_name_prefix="mcp-tool") as pool:
        for raw in stdin:
            line = raw.decode("utf-8", errors="replace")
            if not line.strip():
                continue
            match read(line):
                case Unreadable(answer=answer):
                    if answer is not None:
                        log.warning("refused a request line: %s", answer["error"]["message"])
                        out.send(answer)
                case Notification(method="notifications/cancelled", params=params):
                    request_id = params.get("requestId")
                    if isinstance(request_id, str | int):
                        out.cancelled.add(request_id)
                case Notification():
                    pass  # `initialized` and the rest: nothing to do
                case Request(id=request_id, method=method, params=params):
                    _dispatch(runner, pool, out, request_id, method, params)
        pool.shutdown(wait=True, cancel_futures=True)


def _dispatch(
    runner: ToolRunner,
    pool: ThreadPoolExecutor,
    out: _Out,
    request_id: str | int,
    method: str,
    params: dict[str, Any],
) -> None:
    match method:
        case "initialize":
            out.send(result(request_id, initialized(params)))
        case "ping":
            out.send(result(request_id, {}))
        case "tools/list":
            out.send(result(request_id, listing()))
            runner.warm()  # the list is out: load the tools while the client settles
        case "tools/call":
            name = params.get("name")
            if not isinstance(name, str):
                out.send(error(request_id, INVALID_PARAMS, "tools/call needs a tool name"))
                return
            meta = params.get("_meta")
            arguments = params.get("arguments")
            pool.submit(_call, runner, out, request_id, name, arguments, meta)
        case _ if method in EMPTY_LISTS:
            out.send(result(request_id, EMPTY_LISTS[method]))
        case _:
            out.send(error(request_id, METHOD_NOT_FOUND, f"method not found: {method}"))


def _call(
    runner: ToolRunner,
    out: _Out,
    request_id: str | int,
    name: str,
    arguments: object,
    meta: object,
) -> None:
    try:
        outcome = runner.call(name, arguments, meta if isinstance(meta, Mapping) else None)
    except Exception:  # a bug of ours: the client gets an answer, the log the trace
        log.exception("tool %s failed", name)
        outcome = ToolText(f"{name} failed unexpectedly (details in mcp.log)", error=True)
    match outcome:
        case ToolText():
            out.answer(request_id, tool_result(outcome))
        case NoSuchTool(name=unknown):
            out.send(error(request_id, INVALID_PARAMS, f"unknown tool: {unknown}"))
