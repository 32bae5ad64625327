"""`python -m memory.encoders.worker`: the encoder in its own process, spoken to over pipes.

Why a process: loading a model in a thread of the app blocked every request (the GIL and
native code held it for seconds), and a multiprocessing pool inherited the MCP server's stdio
pipes and hung. This process is started by `memory.encoders.client.EncoderClient` with its own
stdin/stdout pipes, stderr to a log file, no inherited descriptors and its own session.

Protocol: JSON lines. The first line on stdin is the `EncoderSpec`; the worker answers
`{"event": "loading"}`, then `{"event": "ready", "name", "dim", "seconds"}` or
`{"event": "failed", "error"}` (and exits). Then each request line
`{"id": 7, "op": "encode", "texts": [...], "kind": "query"|"passage"}` gets
`{"id": 7, "shape": [n, dim], "data": "<base64 float32 little-endian>"}` or
`{"id": 7, "error": "..."}`; `{"id": 8, "op": "ping"}` gets `{"id": 8, "ok": true}`.
The worker exits when stdin closes, so it never outlives the app.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from typing import IO, Any

from errors import ClaudeMemoryError
from memory.encoders.models import EncoderSpec, TextKind, load_encoder


def _sender(out: IO[str]) -> Any:
    def send(message: dict[str, Any]) -> None:
        out.write(json.dumps(message, separators=(",", ":")) + "\n")
        out.flush()

    return send


def serve(spec: EncoderSpec, stdin: IO[str], send: Any, load_delay: float = 0.0) -> int:
    send({"event": "loading", "pid": os.getpid()})
    started = time.perf_counter()
    if load_delay > 0:
        time.sleep(load_delay)
    try:
        encoder = load_encoder(spec)
        encoder.encode(["warm up"], "query")  # the first call pays one-off setup costs
    except ClaudeMemoryError as exc:
        send({"event": "failed", "error": exc.message})
        return 2
    except Exception as exc:  # any load failure is reported to the app, which keeps running
        send({"event": "failed", "error": f"{exc.__class__.__name__}: {exc}"})
        return 2
    send(
        {
            "event": "ready",
            "name": encoder.name,
            "dim": encoder.dim,
            "seconds": round(time.perf_counter() - started, 3),
        }
    )
    for line in stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            request_id = request.get("id")
        except ValueError:
            continue  # not ours: the client only writes JSON
        op = request.get("op")
        try:
            if op == "ping":
                send({"id": request_id, "ok": True})
            elif op == "encode":
                texts = [str(t) for t in request.get("texts", [])]
                kind: TextKind = "query" if request.get("kind") == "query" else "passage"
                vectors = encoder.encode(texts, kind)
                data = vectors.astype("<f4").tobytes()
                send(
                    {
                        "id": request_id,
                        "shape": [len(texts), encoder.dim],
                        "data": base64.b64encode(data).decode("ascii"),
                    }
                )
            else:
                send({"id": request_id, "error": f"unknown op {op!r}"})
        except Exception as exc:  # one bad request must not kill the worker
            send({"id": request_id, "error": f"{exc.__class__.__name__}: {exc}"})
    return 0


def main() -> int:
    # Only protocol lines may reach the pipe: keep a private copy of stdout for them and
    # point file descriptor 1 (and sys.stdout) at stderr, so prints from native code or
    # libraries land in the log instead of corrupting the protocol.
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    first = sys.stdin.readline()
    if not first.strip():
        return 0
    config = json.loads(first)
    load_delay = float(config.pop("load_delay", 0.0) or 0.0)
    spec = EncoderSpec.from_json(json.dumps(config))
    return serve(spec, sys.stdin, _sender(protocol), load_delay)


if __name__ == "__main__":
    sys.exit(main())
