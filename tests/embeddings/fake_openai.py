"""A fake OpenAI-compatible `/v1/embeddings` endpoint on 127.0.0.1 (a thread of the test).

Vectors come from `HashingEncoder`, so equal texts get equal vectors; every request body is
kept in `requests`. `fail_next(status)` makes the next request fail; `hold()` makes requests
wait until `release()` (a model that takes long to load), 30 s at most."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memory.encoders.models import HashingEncoder


class FakeEmbeddingsAPI:
    def __init__(self, dim: int = 64) -> None:
        self.encoder = HashingEncoder(dim)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._fail: list[int] = []
        self._open = threading.Event()
        self._open.set()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append(body)
                fake.headers.append(dict(self.headers))
                fake._open.wait(30)
                if self.path != "/v1/embeddings":
                    self._reply(404, {"error": {"message": f"no route {self.path}"}})
                    return
                if fake._fail:
                    self._reply(fake._fail.pop(0), {"error": {"message": "scripted failure"}})
                    return
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                vectors = fake.encoder.encode(texts)
                data = [
                    {"object": "embedding", "index": i, "embedding": vectors[i].tolist()}
                    for i in reversed(range(len(texts)))  # any order: clients sort by index
                ]
                self._reply(200, {"object": "list", "data": data, "model": body.get("model")})

            def _reply(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/v1"

    def fail_next(self, status: int) -> None:
        self._fail.append(status)

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def start(self) -> FakeEmbeddingsAPI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._open.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
