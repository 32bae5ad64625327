"""A fake Anthropic Messages API for end-to-end tests.

The real claude-agent-sdk and its bundled Claude Code CLI talk to this server through
`ANTHROPIC_BASE_URL`; only the model is fake. It records every request (`fake.requests`) and
answers from scripts:

* `fake.on(trigger, *steps)`: when a turn starts (the last user message is a prompt, not a tool
  result) and the prompt contains `trigger`, the steps are played one per model request for that
  CLI session (keyed by the `x-claude-code-session-id` header), so tool round trips continue the
  same script even with several conversations in flight.
* otherwise the model answers `echo: <prompt>`.

Steps are `Reply` objects built with `text(...)`, `tool(...)`, `error(...)`.

`GET /v1/models` answers as the real List Models endpoint does (`data`, `has_more`, `first_id`,
`last_id`); those probes are recorded in `fake.model_list_requests`, not in `fake.requests`
(they are not model calls). Set `fake.accepted_keys` to make every other key (`x-api-key` or
`Authorization: Bearer`) get the API's 401 `authentication_error`, on `/v1/models` and
`/v1/messages` alike.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class ToolCall:
    name: str
    input: dict[str, Any]
    id: str = field(default_factory=lambda: f"toolu_{uuid.uuid4().hex[:20]}")


@dataclass
class Reply:
    """One model response."""

    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    status: int = 200
    error_type: str = "api_error"
    error_message: str = "fake error"
    delay: float = 0.0  # seconds before the response starts
    chunk_delay: float = 0.0  # seconds between text chunks
    chunks: int = 3  # how many deltas the text is split into
    stream_error: str | None = None
    """After the text's first delta, an `event: error` of this type ("overloaded_error") and
    the stream ends: "We may occasionally send errors in the event stream ... an
    overloaded_error, which would normally correspond to an HTTP 529 in a non-streaming
    context" (docs.anthropic.com/en/api/messages-streaming, "Error events")."""
    drop_stream: bool = False
    """After the text's first delta the connection is closed with no message_stop (a proxy or
    network dropping a long response)."""


def text(value: str, *, delay: float = 0.0, chunk_delay: float = 0.0, chunks: int = 3) -> Reply:
    return Reply(text=value, delay=delay, chunk_delay=chunk_delay, chunks=chunks)


def tool(name: str, tool_input: dict[str, Any], *, say: str | None = None) -> Reply:
    return Reply(text=say, tool_calls=[ToolCall(name, tool_input)])


def error(status: int, error_type: str = "api_error", message: str = "fake error") -> Reply:
    return Reply(status=status, error_type=error_type, error_message=message)


def broken_stream(value: str, *, error_type: str | None = "overloaded_error") -> Reply:
    """A streamed answer that breaks after its first words: an error event (`error_type`) or,
    with None, a dropped connection."""
    return Reply(text=value, chunks=4, stream_error=error_type, drop_stream=error_type is None)


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def session_id(self) -> str | None:
        return self.headers.get("x-claude-code-session-id")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    def user_texts(self) -> list[str]:
        """Every text block of every user message, system reminders included."""
        out: list[str] = []
        for message in self.messages:
            if message.get("role") != "user":
                continue
            out.extend(_texts(message.get("content")))
        return out

    def all_text(self) -> str:
        """System prompt, every message's text and tool results, joined: for `in` checks."""
        parts: list[str] = []
        system = self.body.get("system")
        if isinstance(system, str):
            parts.append(system)
        elif isinstance(system, list):
            parts.extend(b.get("text", "") for b in system if isinstance(b, dict))
        for message in self.messages:
            parts.extend(_texts(message.get("content"), include_tool_results=True))
        return "\n".join(parts)

    def _last_conversational(self) -> dict[str, Any] | None:
        # This CLI appends `role: "system"` messages (environment, tool lists) after the turn.
        for message in reversed(self.messages):
            if message.get("role") in ("user", "assistant"):
                return message
        return None

    def turn_text(self) -> str:
        """Text added since the model last spoke: this turn's prompt and its reminders."""
        start = 0
        for i, message in enumerate(self.messages):
            if message.get("role") == "assistant":
                start = i + 1
        parts: list[str] = []
        for message in self.messages[start:]:
            parts.extend(_texts(message.get("content"), include_tool_results=True))
        return "\n".join(parts)

    @property
    def prompt(self) -> str | None:
        """The user's prompt if this request starts a turn, else None (a tool round trip)."""
        last = self._last_conversational()
        if last is None or last.get("role") != "user":
            return None
        content = last.get("content")
        if isinstance(content, list):
            # After an interruption the CLI puts the next prompt in the same message as the
            # interrupted tool's result: only text after the last tool result can be a prompt.
            results = [
                i
                for i, b in enumerate(content)
                if isinstance(b, dict) and b.get("type") == "tool_result"
            ]
            if results:
                content = content[results[-1] + 1 :]
        texts = [t for t in _texts(content) if not t.lstrip().startswith(_NOT_PROMPT)]
        if not texts or texts[-1].lstrip().startswith(_CONTINUATION):
            return None
        return texts[-1]

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        last = self._last_conversational()
        content = last.get("content") if last else None
        if not isinstance(content, list):
            return []
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]

    @property
    def tool_names(self) -> list[str]:
        return [t.get("name", "") for t in self.body.get("tools", []) if isinstance(t, dict)]


# Text blocks the CLI adds itself; none of them is the user's prompt.
_NOT_PROMPT = (
    "<system-reminder>",
    "<local-command",
    "<command-name>",
    "[Request interrupted",
)
# The CLI's nudge after an empty answer continues the turn: it is not a new prompt.
_CONTINUATION = "[Your previous response had no visible output"


def _texts(content: Any, *, include_tool_results: bool = False) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            out.append(block.get("text", ""))
        elif include_tool_results and block.get("type") == "tool_result":
            out.extend(_texts(block.get("content")))
    return out


class FakeMessagesAPI:
    """Serve the fake on a free loopback port in a background thread."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.unknown_paths: list[str] = []
        self._rules: list[tuple[str, list[Reply]]] = []
        self._active: dict[str, list[Reply]] = {}
        self._lock = threading.Lock()
        self.default: Callable[[RecordedRequest], Reply] = lambda req: text(
            f"echo: {req.prompt or ''}"
        )
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.model_list_requests: list[RecordedRequest] = []
        self.accepted_keys: set[str] | None = None  # None: any key is accepted

    # --- scripting ---------------------------------------------------------------------------
    def on(self, trigger: str, *steps: Reply) -> None:
        """Play `steps` for a turn whose prompt contains `trigger` (first matching rule wins)."""
        with self._lock:
            self._rules.append((trigger, list(steps)))

    def message_requests(self) -> list[RecordedRequest]:
        return [
            r for r in self.requests if r.path.startswith("/v1/messages") and "count" not in r.path
        ]

    def turn_requests(self) -> list[RecordedRequest]:
        """Requests that start a turn (the prompt is user text, not a tool result)."""
        return [r for r in self.message_requests() if r.prompt is not None]

    def requests_for(self, trigger: str) -> list[RecordedRequest]:
        return [r for r in self.message_requests() if trigger in (r.prompt or "")]

    def _choose(self, req: RecordedRequest) -> Reply:
        key = req.session_id or "-"
        with self._lock:
            prompt = req.prompt
            if prompt is not None:
                self._active.pop(key, None)
                for trigger, steps in self._rules:
                    if trigger in prompt:
                        self._active[key] = list(steps)
                        break
            queue = self._active.get(key)
            if queue:
                return queue.pop(0)
        return self.default(req)

    # --- server ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeMessagesAPI:
        app = Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/{path:path}", self._unknown, methods=["GET", "POST", "HEAD", "PUT"]),
            ]
        )
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", access_log=False
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="fake-anthropic", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("fake Messages API did not start")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True  # do not wait for scripted slow responses
        if self._thread is not None:
            self._thread.join(timeout=5)

    async def _record(self, request: Request) -> RecordedRequest:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        rec = RecordedRequest(
            path=request.url.path,
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body,
        )
        with self._lock:
            self.requests.append(rec)
        return rec

    async def _unknown(self, request: Request) -> Response:
        await self._record(request)
        self.unknown_paths.append(f"{request.method} {request.url.path}")
        return JSONResponse(
            {"type": "error", "error": {"type": "not_found_error", "message": "unknown path"}},
            status_code=404,
        )

    async def _count_tokens(self, request: Request) -> Response:
        await self._record(request)
        return JSONResponse({"input_tokens": 42})

    def _refused(self, request: Request) -> Response | None:
        """The API's 401 for a key not in `accepted_keys` (None when the key is accepted)."""
        if self.accepted_keys is None:
            return None
        key = request.headers.get("x-api-key")
        bearer = request.headers.get("authorization", "")
        if key is None and bearer.lower().startswith("bearer "):
            key = bearer[len("bearer ") :]
        if key in self.accepted_keys:
            return None
        message = "invalid x-api-key" if key else "x-api-key header is required"
        return JSONResponse(
            {
                "type": "error",
                "error": {"type": "authentication_error", "message": message},
                "request_id": f"req_{uuid.uuid4().hex[:24]}",
            },
            status_code=401,
        )

    async def _models(self, request: Request) -> Response:
        """List Models: the first page of the models this fake answers as."""
        rec = RecordedRequest(
            path=request.url.path,
            headers={k.lower(): v for k, v in request.headers.items()},
            body={},
        )
        with self._lock:
            self.model_list_requests.append(rec)
        refused = self._refused(request)
        if refused is not None:
            return refused
        models = [
            {
                "type": "model",
                "id": "claude-fake",
                "display_name": "Claude Fake",
                "created_at": "2026-01-01T00:00:00Z",
            }
        ]
        return JSONResponse(
            {"data": models, "has_more": False, "first_id": "claude-fake", "last_id": "claude-fake"}
        )

    async def _messages(self, request: Request) -> Response:
        req = await self._record(request)
        refused = self._refused(request)
        if refused is not None:
            return refused
        reply = self._choose(req)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.status != 200:
            return JSONResponse(
                {
                    "type": "error",
                    "error": {"type": reply.error_type, "message": reply.error_message},
                },
                status_code=reply.status,
            )
        model = req.body.get("model") or "claude-fake"
        if not req.body.get("stream"):
            if reply.stream_error is not None or reply.drop_stream:
                # the same failure asked again without streaming: overloaded is a 529 there
                # ("Error events", docs.anthropic.com/en/api/messages-streaming)
                return JSONResponse(
                    {
                        "type": "error",
                        "error": {"type": "overloaded_error", "message": "Overloaded"},
                    },
                    status_code=529,
                )
            return JSONResponse(_message_json(reply, model))
        return StreamingResponse(_sse(reply, model), media_type="text/event-stream")


def _message_json(reply: Reply, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input})
    return {
        "id": f"msg_{uuid.uuid4().hex[:16]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _split(value: str, parts: int) -> list[str]:
    if parts <= 1 or len(value) < parts:
        return [value]
    size = -(-len(value) // parts)
    return [value[i : i + size] for i in range(0, len(value), size)]


async def _sse(reply: Reply, model: str) -> AsyncIterator[bytes]:
    usage = {
        "input_tokens": 10,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    yield _event(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": f"msg_{uuid.uuid4().hex[:16]}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        },
    )
    yield _event("ping", {"type": "ping"})
    index = 0
    if reply.text:
        yield _event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
        )
        for n, piece in enumerate(_split(reply.text, reply.chunks)):
            if reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
            yield _event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": piece},
                },
            )
            if n == 0 and reply.stream_error is not None:
                message = "Overloaded" if reply.stream_error == "overloaded_error" else "error"
                yield _event(
                    "error",
                    {"type": "error", "error": {"type": reply.stream_error, "message": message}},
                )
                return
            if n == 0 and reply.drop_stream:
                raise ConnectionResetError("the fake drops the stream")
        yield _event("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    for call in reply.tool_calls:
        yield _event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": {},
                },
            },
        )
        yield _event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(call.input)},
            },
        )
        yield _event("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    yield _event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
                "stop_sequence": None,
            },
            "usage": {"output_tokens": 12},
        },
    )
    yield _event("message_stop", {"type": "message_stop"})
