"""A fake OpenAI Responses API for the real Codex CLI: `POST /v1/responses` streams Server-Sent
Events as the API documents them (`response.created`, `response.in_progress`,
`response.output_item.added`, `response.content_part.added`, `response.output_text.delta`,
`response.output_text.done`, `response.content_part.done`, `response.function_call_arguments.delta`
/ `.done`, `response.output_item.done`, `response.completed`), each its own chunk of a chunked
HTTP/1.1 body; `GET /v1/models` answers an empty list.

Script it like tests/fakes/anthropic_api.py: `fake.on(trigger, call("exec_command",
{"cmd": "echo hi"}), text("done"))` plays one step per model request of a turn whose user
prompt contains `trigger` (a request that carries a tool's output continues the turn).
Unmatched turns get `text("fake answer")`. Every request is recorded in `fake.requests`.

Codex reaches it through a model provider in its config.toml (`codex_config`): `base_url`
on the loopback, `wire_api = "responses"`, no retries.
"""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

API_KEY_ENV = "FAKE_OPENAI_API_KEY"


@dataclass(frozen=True, slots=True)
class Step:
    kind: str  # "text" | "call"
    text: str = ""
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    namespace: str = ""


def text(value: str) -> Step:
    return Step("text", text=value)


def call(name: str, arguments: dict[str, Any], *, namespace: str = "") -> Step:
    """A function call (Codex's shell tool is `exec_command` with `{"cmd": ...}`); `namespace`
    for a function Codex offered inside a namespace (an MCP server's tools)."""
    return Step("call", name=name, arguments=arguments, namespace=namespace)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def input(self) -> list[dict[str, Any]]:
        items = self.body.get("input")
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    def messages(self, role: str) -> list[str]:
        """The texts of the input messages with this role (`user`, `developer`, ...)."""
        found = []
        for item in self.input:
            if item.get("type") == "message" and item.get("role") == role:
                content = item.get("content")
                parts = content if isinstance(content, list) else []
                found.append("".join(str(p.get("text", "")) for p in parts if isinstance(p, dict)))
        return found

    @property
    def prompt(self) -> str:
        """The last user message (the turn's prompt)."""
        users = self.messages("user")
        return users[-1] if users else ""

    @property
    def continues_turn(self) -> bool:
        """The request carries a tool's output: the same turn goes on."""
        return bool(self.input) and self.input[-1].get("type") == "function_call_output"

    def all_text(self) -> str:
        return json.dumps(self.body.get("input"), ensure_ascii=False)


def _events(step: Step, model: str) -> Iterator[dict[str, Any]]:
    response_id = f"resp_{uuid.uuid4().hex[:16]}"
    base = {"id": response_id, "object": "response", "model": model, "output": []}
    yield {"type": "response.created", "response": {**base, "status": "in_progress"}}
    yield {"type": "response.in_progress", "response": {**base, "status": "in_progress"}}
    done: dict[str, Any]
    if step.kind == "call":
        item_id, call_id = f"fc_{uuid.uuid4().hex[:16]}", f"call_{uuid.uuid4().hex[:16]}"
        arguments = json.dumps(step.arguments)
        item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": step.name}
        if step.namespace:
            item["namespace"] = step.namespace
        yield {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "arguments": "", "status": "in_progress"},
        }
        yield {
            "type": "response.function_call_arguments.delta",
            "item_id": item_id,
            "output_index": 0,
            "delta": arguments,
        }
        yield {
            "type": "response.function_call_arguments.done",
            "item_id": item_id,
            "output_index": 0,
            "arguments": arguments,
        }
        done = {**item, "arguments": arguments, "status": "completed"}
    else:
        item_id = f"msg_{uuid.uuid4().hex[:16]}"
        part = {"type": "output_text", "text": "", "annotations": []}
        item = {"type": "message", "id": item_id, "role": "assistant"}
        yield {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "content": [], "status": "in_progress"},
        }
        where = {"item_id": item_id, "output_index": 0, "content_index": 0}
        yield {"type": "response.content_part.added", **where, "part": part}
        for piece in (step.text[: len(step.text) // 2], step.text[len(step.text) // 2 :]):
            if piece:
                yield {"type": "response.output_text.delta", **where, "delta": piece}
        yield {"type": "response.output_text.done", **where, "text": step.text}
        full = {**part, "text": step.text}
        yield {"type": "response.content_part.done", **where, "part": full}
        done = {**item, "content": [full], "status": "completed"}
    yield {"type": "response.output_item.done", "output_index": 0, "item": done}
    usage = {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 10,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 110,
    }
    completed = {**base, "status": "completed", "output": [done], "usage": usage}
    yield {"type": "response.completed", "response": completed}


class FakeResponsesAPI:
    """Serve the fake on a free loopback port in a background thread."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.unknown_paths: list[str] = []
        self._rules: list[tuple[str, list[Step]]] = []
        self._active: dict[str, list[Step]] = {}
        self._lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- scripting ---------------------------------------------------------------------------
    def on(self, trigger: str, *steps: Step) -> None:
        with self._lock:
            self._rules.append((trigger, list(steps)))

    def turn_requests(self, trigger: str) -> list[RecordedRequest]:
        """The requests that start a turn whose prompt contains `trigger`."""
        return [r for r in self.requests if not r.continues_turn and trigger in r.prompt]

    def _next_step(self, request: RecordedRequest) -> Step:
        session = str(request.body.get("prompt_cache_key") or "")
        with self._lock:
            if request.continues_turn and self._active.get(session):
                return self._active[session].pop(0)
            for trigger, steps in self._rules:
                if trigger in request.prompt:
                    self._active[session] = list(steps[1:])
                    return steps[0] if steps else text("")
            self._active.pop(session, None)
        return text("fake answer")

    # --- serving -----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FakeResponsesAPI:
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _json(self, status: int, data: Any) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path.split("?")[0].rstrip("/") == "/v1/models":
                    self._json(200, {"object": "list", "data": [], "models": []})
                else:
                    fake.unknown_paths.append(self.path)
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                if self.path.split("?")[0] != "/v1/responses":
                    fake.unknown_paths.append(self.path)
                    self._json(404, {"error": {"message": "not found"}})
                    return
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._json(400, {"error": {"message": "body is not JSON"}})
                    return
                request = RecordedRequest(self.path, dict(self.headers), body)
                with fake._lock:
                    fake.requests.append(request)
                step = fake._next_step(request)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for number, event in enumerate(_events(step, str(body.get("model") or ""))):
                    event["sequence_number"] = number
                    chunk = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def codex_config(self) -> str:
        """config.toml lines that point Codex at this fake, with nothing else reaching out."""
        return (
            'model = "fake-model"\n'
            'model_provider = "fake"\n'
            "check_for_update_on_startup = false\n\n"
            "[model_providers.fake]\n"
            'name = "fake"\n'
            f'base_url = "{self.url}"\n'
            'wire_api = "responses"\n'
            f'env_key = "{API_KEY_ENV}"\n'
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n\n"
            "[analytics]\n"
            "enabled = false\n"
        )
