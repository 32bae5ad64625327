"""The MCP server's stdio transport: every request line gets an answer.

The SDK's own stdio transport (`mcp.server.stdio`) parses each line with pydantic, which
refuses JSON that escapes half of a UTF-16 pair (`"\\ud800"`: valid JSON, but no Unicode
text) and, like any malformed line, hands the parse error to the session, which only logs it.
The client then waits for an answer that never comes, until its own tool timeout (60 s in
Claude Code). Here such a line is answered at once with a JSON-RPC error for its id (or for
`null` when no id can be read), as JSON-RPC 2.0 asks, and everything else goes through
unchanged.
"""

from __future__ import annotations

import json
import logging
import sys
from io import TextIOWrapper
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import mcp.types as types
from mcp.shared.message import SessionMessage

from errors import InvalidInputError
from storage.text import require_text

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.server.fastmcp import FastMCP

log = logging.getLogger(__name__)


def refusal(line: str) -> dict[str, Any] | None:
    """The JSON-RPC error answering a request line the SDK cannot parse, None for a line it
    can (or a notification, which gets no answer). Pure: the table in the tests."""
    return read(line)[1]


def read(line: str) -> tuple[types.JSONRPCMessage | ValueError, dict[str, Any] | None]:
    """A line parsed once: (the message, None), or (the parse error, the answer to send back,
    None for a notification: it is passed on, to be logged)."""
    try:
        return types.JSONRPCMessage.model_validate_json(line), None
    except ValueError as error:
        return error, _refuse(line)


def _refuse(line: str) -> dict[str, Any] | None:
    try:
        data = json.loads(line)
    except ValueError as exc:
        return _error(None, types.PARSE_ERROR, f"not JSON: {exc}")
    request_id = data.get("id") if isinstance(data, dict) else None
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        if isinstance(data, dict) and "method" in data and "id" not in data:
            return None  # a notification: never answered, even when wrong
        return _error(None, types.INVALID_REQUEST, "not a JSON-RPC 2.0 request")
    try:
        require_text("the request", data)
    except InvalidInputError as exc:
        return _error(request_id, types.INVALID_PARAMS, exc.message)
    return _error(request_id, types.INVALID_REQUEST, "not a valid JSON-RPC 2.0 request")


def _error(request_id: str | int | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


async def run_stdio(server: FastMCP) -> None:
    """`server.run_stdio_async()`, with the transport above."""
    low = server._mcp_server  # what FastMCP.run_stdio_async runs, here on our streams
    stdin = anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
    stdout = anyio.wrap_file(TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))
    read_writer: MemoryObjectSendStream[SessionMessage | Exception]
    read_stream: MemoryObjectReceiveStream[SessionMessage | Exception]
    write_stream: MemoryObjectSendStream[SessionMessage]
    write_reader: MemoryObjectReceiveStream[SessionMessage]
    read_writer, read_stream = anyio.create_memory_object_stream(0)
    write_stream, write_reader = anyio.create_memory_object_stream(0)
    out = anyio.Lock()  # one line at a time: the session's answers and ours

    async def emit(text: str) -> None:
        async with out:
            await stdout.write(text + "\n")
            await stdout.flush()

    async def reader() -> None:
        try:
            async with read_writer:
                async for line in stdin:
                    if not line.strip():
                        continue
                    message, answer = read(line)
                    if answer is not None:
                        log.warning("refused a request line: %s", answer["error"]["message"])
                        await emit(json.dumps(answer, ensure_ascii=True))
                    elif isinstance(message, ValueError):  # a notification the SDK cannot read
                        await read_writer.send(message)
                    else:
                        await read_writer.send(SessionMessage(message))
        except anyio.ClosedResourceError:  # pragma: no cover - the session ended first
            await anyio.lowlevel.checkpoint()

    async def writer() -> None:
        try:
            async with write_reader:
                async for sent in write_reader:
                    await emit(sent.message.model_dump_json(by_alias=True, exclude_none=True))
        except anyio.ClosedResourceError:  # pragma: no cover
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader)
        tasks.start_soon(writer)
        await low.run(read_stream, write_stream, low.create_initialization_options())
        tasks.cancel_scope.cancel()
