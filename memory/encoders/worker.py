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
A request may carry `"priority"` (lower first; queries 0, background passages 10).
The worker exits when stdin closes, so it never outlives the app.

Queries go first (issue #32): a thread reads requests as they come, and a long passage request
is encoded a few texts at a time, with any query that arrived meanwhile answered between two
pieces. A prompt's vector then waits for one piece (a few hundred ms at worst on two cores),
not for a background batch of a dozen notes (seconds). Before it says ready the worker encodes
a query of each length bucket (`WARM_QUERIES`), so no prompt pays a first-time cost.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, Final

from errors import ClaudeMemoryError
from memory.encoders.models import Encoder, EncoderSpec, TextKind, load_encoder

PIECE_CHARS: Final = 400
"""A passage request is encoded in pieces of about this many characters (at least one text):
the longest a query waits behind background work (~100 tokens, about one note). A served
prompt waits 0.15 s for its vector (`memory.clients.hooks.HOOK_VECTOR_SECONDS`), then searches
on keywords: behind a piece of 1,200 characters (three notes, 0.3-0.5 s of CPU) a prompt right
after `serve`, while the notes are embedded, seldom got its vector in time. Encoding 48 notes
of ~350 characters in pieces of 400 took 3 % more CPU than in pieces of 1,200 (7.65-7.82 s
against 7.39-7.58, load 7)."""
QUERY_PRIORITY: Final = 0
BULK_PRIORITY: Final = 10
WARM_QUERIES: Final = (
    "warm up",
    "how did we fix the login timeout in the payment service last week",
    "上周支付服务的登录超时问题最后是怎么解决的？当时谁负责，改了哪些配置，现在还需要做什么后续检查吗",
)
"""Encoded once before ready: a short, a long English and a long Chinese query, so the
model's buffers and code paths are warm before the first prompt."""
_STOP: Final = (-1, -1, None)


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
        for text in WARM_QUERIES:  # the first calls pay one-off setup costs
            encoder.encode([text], "query")
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
    waiting = _Waiting(stdin)
    for request in waiting:
        _answer(encoder, request, send, waiting)
    return 0


class _Waiting:
    """The requests read so far, lowest priority first, in arrival order within one; a thread
    reads stdin meanwhile, so a query is seen while a passage request is being encoded.
    Iterating ends when stdin closes."""

    def __init__(self, stdin: IO[str]) -> None:
        self._queue: queue.PriorityQueue[tuple[int, int, dict[str, Any] | None]] = (
            queue.PriorityQueue()
        )
        self._seq = itertools.count()
        threading.Thread(target=self._read, args=(stdin,), name="requests", daemon=True).start()

    def _read(self, stdin: IO[str]) -> None:
        try:
            for line in stdin:
                if not line.strip():
                    continue
                try:
                    request = json.loads(line)
                except ValueError:
                    continue  # not ours: the client only writes JSON
                if isinstance(request, dict):
                    self._queue.put((_priority(request), next(self._seq), request))
        finally:
            self._queue.put(_STOP)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:
            _, _, request = self._queue.get()
            if request is None:
                return
            yield request

    def ahead_of(self, priority: int) -> list[dict[str, Any]]:
        """The requests waiting that go before `priority` (taken from the queue)."""
        taken: list[dict[str, Any]] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return taken
            if item[2] is not None and item[0] < priority:
                taken.append(item[2])
                continue
            self._queue.put(item)  # not ahead (or the end): back where it was
            return taken


def _priority(request: dict[str, Any]) -> int:
    value = request.get("priority")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if request.get("op") == "encode" and request.get("kind") != "query":
        return BULK_PRIORITY
    return QUERY_PRIORITY


def _answer(
    encoder: Encoder,
    request: dict[str, Any],
    send: Callable[[dict[str, Any]], None],
    waiting: _Waiting,
) -> None:
    request_id = request.get("id")
    op = request.get("op")
    try:
        if op == "ping":
            send({"id": request_id, "ok": True})
        elif op == "encode":
            texts = [str(t) for t in request.get("texts", [])]
            kind: TextKind = "query" if request.get("kind") == "query" else "passage"
            priority = _priority(request)

            def between() -> None:
                # what came in meanwhile and goes first (queries) is answered now
                for other in waiting.ahead_of(priority):
                    _answer(encoder, other, send, waiting)

            vectors = _encode_in_pieces(encoder, texts, kind, between)
            send(
                {
                    "id": request_id,
                    "shape": [len(texts), encoder.dim],
                    "data": base64.b64encode(vectors).decode("ascii"),
                }
            )
        else:
            send({"id": request_id, "error": f"unknown op {op!r}"})
    except Exception as exc:  # one bad request must not kill the worker
        send({"id": request_id, "error": f"{exc.__class__.__name__}: {exc}"})


def _encode_in_pieces(
    encoder: Encoder, texts: Sequence[str], kind: TextKind, between: Callable[[], None]
) -> bytes:
    """The vectors of `texts` as little-endian float32 bytes, encoded `pieces()` at a time
    with `between()` run after each piece but the last."""
    parts: list[bytes] = []
    groups = pieces(texts, PIECE_CHARS)
    for n, group in enumerate(groups):
        parts.append(encoder.encode(group, kind).astype("<f4").tobytes())
        if n + 1 < len(groups):
            between()
    return b"".join(parts)


def pieces(texts: Sequence[str], chars: int) -> list[list[str]]:
    """`texts` in order, cut into groups of at most `chars` characters (a longer text alone)."""
    groups: list[list[str]] = []
    size = chars + 1
    for text in texts:
        if size + len(text) > chars:
            groups.append([])
            size = 0
        groups[-1].append(text)
        size += len(text)
    return groups


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
