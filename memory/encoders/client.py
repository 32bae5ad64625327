"""The app's side of the encoder worker: start it, talk to it, restart it, never wait on it.

`EncoderClient` (an async context manager owned by the app's lifespan) starts
`python -m memory.encoders.worker` with its own pipes and returns at once; the model loads in
that process while the app serves requests. `status` is one of `EncoderDisabled`,
`EncoderLoading`, `EncoderReady`, `EncoderFailed`. `encode()` raises `EncoderUnavailableError`
at once unless the worker is ready, and after `request_timeout`. A worker that exits or
crashes is restarted (backoff 1 s doubling to `max_restart_delay`; a worker that loaded and
ran for a minute starts again from 1 s), and requests in flight fail instead of hanging. A
worker that is alive but gives no answer to a request for `hang_timeout` seconds (stuck in a
native library, stopped, swapped out) is killed and restarted the same way: otherwise every
search would wait out its timeout and fall back to keywords until the app restarts.

Two lanes to the worker: queries (and pings) and background passage work, each sending one
request at a time, so a query is never queued behind bulk work in the client; the worker
answers a query between two pieces of a passage request (`memory.encoders.worker`), so a
re-index in progress delays a search by one piece, not one batch.

`ThreadEncoder` adapts the client to the synchronous `Encoder` protocol for `MemoryStore`,
whose calls run in worker threads (`asyncio.to_thread`). `VectorSync` embeds notes whose
vectors are missing or stale in the background.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Self

from memory._record import record
from memory.encoders import worker
from memory.encoders.models import (
    WORKER_THREAD_ENV,
    EncoderSpec,
    EncoderUnavailableError,
    TextKind,
)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


log = logging.getLogger(__name__)

_LINE_LIMIT: Final = 256 * 1024 * 1024
"""Largest protocol line (a batch of vectors in base64)."""
_PROJECT_ROOT: Final = str(Path(__file__).resolve().parents[2])
QUERY_PRIORITY: Final = worker.QUERY_PRIORITY
BULK_PRIORITY: Final = worker.BULK_PRIORITY


# --- status ----------------------------------------------------------------------------------


@record
class EncoderDisabled:
    """No encoder configured: keyword search only."""

    def to_dict(self) -> dict[str, Any]:
        return {"state": "disabled", "model": None, "dim": None}


@record
class EncoderLoading:
    label: str
    since: float
    """`time.monotonic()` when this load began."""
    restarts: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": "loading",
            "model": self.label,
            "dim": None,
            "loading_seconds": round(time.monotonic() - self.since, 1),
            "restarts": self.restarts,
        }


@record
class EncoderReady:
    name: str
    dim: int
    pid: int
    load_seconds: float
    restarts: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": "ready",
            "model": self.name,
            "dim": self.dim,
            "pid": self.pid,
            "load_seconds": self.load_seconds,
            "restarts": self.restarts,
        }


@record
class EncoderFailed:
    label: str
    error: str
    retry_in: float
    restarts: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": "failed",
            "model": self.label,
            "dim": None,
            "error": self.error,
            "retry_in_seconds": round(self.retry_in, 1),
            "restarts": self.restarts,
        }


EncoderStatus = EncoderDisabled | EncoderLoading | EncoderReady | EncoderFailed
EncoderStateName = Literal["disabled", "loading", "ready", "failed"]


def state_name(status: EncoderStatus) -> EncoderStateName:
    match status:
        case EncoderReady():
            return "ready"
        case EncoderLoading():
            return "loading"
        case EncoderFailed():
            return "failed"
        case EncoderDisabled():
            return "disabled"


# --- client ----------------------------------------------------------------------------------


@dataclass(order=True)
class _Request:
    priority: int
    seq: int
    payload: dict[str, Any]
    future: asyncio.Future[Any]


@dataclass
class _InFlight:
    """A request written to the worker: the caller's future (which the caller may give up on)
    and whether the worker has answered (what the hang watch waits for)."""

    future: asyncio.Future[Any]
    answered: asyncio.Event


class EncoderClient:
    """Owns one worker process at a time (see the module docstring)."""

    def __init__(
        self,
        spec: EncoderSpec | None,
        *,
        log_path: Path | None = None,
        request_timeout: float = 30.0,
        restart_delay: float = 1.0,
        max_restart_delay: float = 60.0,
        load_delay: float = 0.0,
        hang_timeout: float = 120.0,
        hang_per_text: float = 1.0,
    ) -> None:
        self.spec = spec
        self.log_path = log_path
        self.request_timeout = request_timeout
        self.hang_timeout = hang_timeout
        """Seconds a request written to the worker may go unanswered before the worker is
        killed as hung, plus `hang_per_text` for each text it carries: a background batch of
        16 long notes is up to 256 chunks, which a slow machine encodes at a few a second.
        Loading is not watched."""
        self.hang_per_text = hang_per_text
        self.restart_delay = restart_delay
        self.max_restart_delay = max_restart_delay
        self._load_delay = load_delay
        self._status: EncoderStatus = (
            EncoderDisabled() if spec is None else EncoderLoading(spec.label, time.monotonic(), 0)
        )
        self._restarts = 0
        self._seq = itertools.count()
        self._lanes: tuple[asyncio.PriorityQueue[_Request], ...] = ()
        """(queries and pings, background passages): each sends one request at a time."""
        self._supervisor: asyncio.Task[None] | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._closing = False
        self._changed: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._log_file: Any = None
        self._killed_because: str | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def start(self) -> None:
        """Start the supervisor (returns at once; the model loads in the worker)."""
        if self.spec is None or self._supervisor is not None:
            return
        self.loop = asyncio.get_running_loop()
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - shared with the workers
        self._lanes = (asyncio.PriorityQueue(), asyncio.PriorityQueue())
        self._changed = asyncio.Event()
        self._supervisor = asyncio.create_task(self._supervise(), name="encoder-supervisor")

    async def aclose(self, grace: float = 5.0) -> None:
        """Close the worker's stdin (it exits), wait up to `grace` seconds, then kill it."""
        self._closing = True
        process = self._process
        if process is not None and process.returncode is None:
            if process.stdin is not None:
                with contextlib.suppress(OSError, RuntimeError):
                    process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), grace)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        self._fail_queued(EncoderUnavailableError("stopped"))
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    # --- state -------------------------------------------------------------------------------

    @property
    def status(self) -> EncoderStatus:
        return self._status

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.returncode is None else None

    def _set(self, status: EncoderStatus) -> None:
        self._status = status
        if self._changed is not None:
            self._changed.set()

    async def wait_ready(self, seconds: float) -> EncoderStatus:
        """Wait until the encoder is ready (at most `seconds`; a failed worker is retried
        meanwhile); returns the status then."""
        deadline = time.monotonic() + seconds
        while not isinstance(self._status, EncoderReady | EncoderDisabled) and self._changed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return self._status

    # --- requests ----------------------------------------------------------------------------

    async def encode(
        self,
        texts: Sequence[str],
        kind: TextKind = "passage",
        *,
        time_limit: float | None = None,
        priority: int | None = None,
    ) -> NDArray[np.float32]:
        """Vectors for `texts` (rows in order). Raises EncoderUnavailableError unless ready."""
        import numpy as np

        status = self._status
        if not isinstance(status, EncoderReady):
            detail = status.error if isinstance(status, EncoderFailed) else ""
            raise EncoderUnavailableError(state_name(status), detail)
        if not texts:
            return np.zeros((0, status.dim), dtype=np.float32)
        if priority is None:
            priority = QUERY_PRIORITY if kind == "query" else BULK_PRIORITY
        reply = await self._request(
            {"op": "encode", "texts": list(texts), "kind": kind}, priority, time_limit
        )
        if "error" in reply:
            raise EncoderUnavailableError("failing", str(reply["error"]))
        rows, dim = reply["shape"]
        data = base64.b64decode(reply["data"])
        return np.frombuffer(data, dtype="<f4").reshape(rows, dim).astype(np.float32)

    async def ping(self, time_limit: float | None = None) -> bool:
        reply = await self._request({"op": "ping"}, QUERY_PRIORITY, time_limit)
        return bool(reply.get("ok"))

    async def _request(
        self, payload: dict[str, Any], priority: int, time_limit: float | None
    ) -> dict[str, Any]:
        assert self._lanes
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        lane = self._lanes[0 if priority < BULK_PRIORITY else 1]
        payload = {**payload, "priority": priority}
        lane.put_nowait(_Request(priority, next(self._seq), payload, future))
        limit = time_limit if time_limit is not None else self.request_timeout
        try:
            return await asyncio.wait_for(asyncio.shield(future), limit)
        except TimeoutError:
            future.cancel()
            raise EncoderUnavailableError("busy", f"no answer within {limit:g}s") from None

    def _fail_queued(self, error: Exception) -> None:
        for lane in self._lanes:
            while not lane.empty():
                request = lane.get_nowait()
                if not request.future.done():
                    request.future.set_exception(error)

    # --- the worker ----------------------------------------------------------------------------

    async def _supervise(self) -> None:
        assert self.spec is not None
        delay = self.restart_delay
        while not self._closing:
            started = time.monotonic()
            self._set(EncoderLoading(self.spec.label, started, self._restarts))
            error = await self._run_worker()
            if self._closing:
                return
            self._restarts += 1
            if time.monotonic() - started > 60:
                delay = self.restart_delay  # it ran fine for a while: restart quickly
            self._fail_queued(EncoderUnavailableError("restarting", error))
            self._set(EncoderFailed(self.spec.label, error, delay, self._restarts))
            log.warning("encoder worker stopped (%s); restarting in %.0fs", error, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.max_restart_delay)

    async def _run_worker(self) -> str:
        """Run one worker until it exits; returns why it stopped."""
        assert self.spec is not None
        log_file = self._log_file
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PROJECT_ROOT, env.get("PYTHONPATH", "")) if p
        )
        for name, value in WORKER_THREAD_ENV.items():
            env.setdefault(name, value)
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "memory.encoders.worker",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log_file if log_file is not None else asyncio.subprocess.DEVNULL,
                close_fds=True,
                start_new_session=True,  # a Ctrl+C meant for the app does not kill it first
                env=env,
                limit=_LINE_LIMIT,
            )
        except OSError as exc:
            return f"could not start {sys.executable}: {exc}"
        self._process = process
        assert process.stdin is not None and process.stdout is not None
        config = {**json.loads(self.spec.to_json()), "load_delay": self._load_delay}
        try:
            process.stdin.write((json.dumps(config) + "\n").encode())
            await process.stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            await process.wait()
            return f"worker exited at start: {exc}"
        pending: dict[int, _InFlight] = {}
        self._killed_because = None
        senders = [
            asyncio.create_task(self._send_loop(process, pending, lane), name=f"encoder-{name}")
            for lane, name in zip(self._lanes, ("queries", "passages"), strict=True)
        ]
        reason = "worker exited"
        try:
            reason = await self._read_loop(process, pending)
            reason = self._killed_because or reason
        finally:
            for sender in senders:
                sender.cancel()
            for sender in senders:
                with contextlib.suppress(asyncio.CancelledError):
                    await sender
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            code = await process.wait()
            for item in pending.values():
                if not item.future.done():
                    item.future.set_exception(EncoderUnavailableError("restarting", reason))
            self._process = None
        return f"{reason} (exit code {code})"

    async def _read_loop(
        self, process: asyncio.subprocess.Process, pending: dict[int, _InFlight]
    ) -> str:
        assert process.stdout is not None and self.spec is not None
        while True:
            line = await process.stdout.readline()
            if not line:
                return "worker exited"
            try:
                message = json.loads(line)
            except ValueError:
                log.debug("encoder worker wrote a non-JSON line: %r", line[:200])
                continue
            event = message.get("event")
            if event == "ready":
                self._set(
                    EncoderReady(
                        name=str(message["name"]),
                        dim=int(message["dim"]),
                        pid=process.pid,
                        load_seconds=float(message.get("seconds", 0.0)),
                        restarts=self._restarts,
                    )
                )
                log.info("encoder %s ready (%.1fs)", message["name"], message.get("seconds", 0))
            elif event == "failed":
                return f"load failed: {message.get('error')}"
            elif "id" in message:
                item = pending.pop(int(message["id"]), None)
                if item is not None:
                    item.answered.set()
                    if not item.future.done():
                        item.future.set_result(message)

    async def _send_loop(
        self,
        process: asyncio.subprocess.Process,
        pending: dict[int, _InFlight],
        lane: asyncio.PriorityQueue[_Request],
    ) -> None:
        assert process.stdin is not None
        while True:
            request = await lane.get()
            if request.future.done():
                continue  # the caller gave up
            item = pending[request.seq] = _InFlight(request.future, asyncio.Event())
            line = json.dumps({"id": request.seq, **request.payload}) + "\n"
            try:
                process.stdin.write(line.encode("utf-8"))
                await process.stdin.drain()
            except (ConnectionError, RuntimeError):
                return  # the reader sees the exit
            # one request at a time per lane, so nothing the caller gave up on is sent and a
            # query never waits behind a queue of bulk work; the worker's answer is awaited
            # even when the caller gave up, so a worker that never answers is seen
            allowed = self.hang_timeout + self.hang_per_text * len(request.payload.get("texts", ()))
            try:
                await asyncio.wait_for(item.answered.wait(), allowed)
            except TimeoutError:
                self._killed_because = f"no answer in {allowed:g}s: killed as hung"
                log.warning("encoder worker %s %s", process.pid, self._killed_because)
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                return  # the reader sees the exit; the supervisor restarts it


# --- adapters --------------------------------------------------------------------------------


class ThreadEncoder:
    """The client as a synchronous `Encoder`, for code running in worker threads.

    Never call it on the event loop's thread (it would wait on itself): that raises
    EncoderUnavailableError instead."""

    def __init__(self, client: EncoderClient, timeout: float | None = None) -> None:
        self.client = client
        self.timeout = timeout

    def _ready(self) -> EncoderReady:
        status = self.client.status
        if not isinstance(status, EncoderReady):
            detail = status.error if isinstance(status, EncoderFailed) else ""
            raise EncoderUnavailableError(state_name(status), detail)
        return status

    def status_dict(self) -> dict[str, Any]:
        return self.client.status.to_dict()

    @property
    def name(self) -> str:
        return self._ready().name

    @property
    def dim(self) -> int:
        return self._ready().dim

    def encode(self, texts: Sequence[str], kind: TextKind = "passage") -> NDArray[np.float32]:
        return self.encode_within(texts, kind, self.timeout or self.client.request_timeout)

    def encode_within(
        self, texts: Sequence[str], kind: TextKind, seconds: float
    ) -> NDArray[np.float32]:
        """`encode`, giving up after `seconds` (EncoderUnavailableError "busy"); a request
        still queued then is never sent (`memory.search.plan.vector_budget`)."""
        self._ready()
        loop = self.client.loop
        if loop is None or loop.is_closed():
            raise EncoderUnavailableError("stopped")
        if _running_loop() is loop:
            raise EncoderUnavailableError("unavailable", "called on the event loop thread")
        future = asyncio.run_coroutine_threadsafe(
            self.client.encode(texts, kind, time_limit=seconds), loop
        )
        try:
            return future.result(seconds + 1.0)
        except TimeoutError:
            future.cancel()
            raise EncoderUnavailableError("busy", f"no answer within {seconds:g}s") from None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
