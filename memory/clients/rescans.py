"""The app's full rescans of the notes folder, in a background task instead of a request.

A store read checks the folders (new, deleted, renamed notes) and the files of the notes it
returns; only a full scan finds a note edited in place that the read did not return. The
store's own rule rescans on a read once `rescan_interval` has passed since the last scan:
~120 ms of CPU at 10k notes, and since prompts come seconds apart, every prompt paid it. The
app opens its store with `rescan_interval=inf` and runs the scans here (`Rescans`): after hook
requests, when none is in flight, and every `idle_interval` when nobody asks. A hook process or
the MCP server keeps the store's own rule (they have no background to run it in).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator

from errors import ClaudeMemoryError
from memory._record import record
from memory.clients._background import BackgroundTask
from memory.clients.notes_watch import NoteFiles

log = logging.getLogger("memory.clients.rescans")


@record
class RescanPolicy:
    """When the app rescans every note file (`rescan_due`). Seconds."""

    interval: float = 2.0
    """At least this long between two rescans while the app is asked (stretched to 20x the last
    scan's duration, so rescans take at most ~5 % of the time)."""
    idle_interval: float = 30.0
    """An app nobody asks rescans this often anyway: a note edited in place while it idles is
    found by a search within this delay (Claude Code's `file-changed` hook is sooner)."""
    quiet: float = 0.25
    """No hook request for this long before a rescan: a prompt arriving during a scan would wait
    for the store's sync lock."""
    window: float = 1.0
    """A rescan starts within this long after `quiet`, while the user reads the answer; once
    that has passed, it waits for the end of the next request (a scan started at any moment
    would sooner or later run into a prompt)."""
    max_wait: float = 60.0
    """A rescan postponed by a steady stream of requests runs this long after it was due."""


def rescan_due(
    policy: RescanPolicy,
    *,
    now: float,
    last_scan: float,
    scan_cost: float,
    last_request: float,
    in_flight: int,
) -> bool:
    """Whether the app should rescan every note file now (monotonic seconds; `scan_cost`: the
    last scan's duration; `last_request`: when the last hook request ended or began)."""
    since = now - last_scan
    spacing = max(policy.interval, 20 * scan_cost)
    if since < spacing:
        return False
    if since >= spacing + policy.max_wait:
        return True
    if in_flight:
        return False
    quiet_for = now - last_request
    if since >= policy.idle_interval:
        return quiet_for >= policy.quiet
    just_answered = last_request > last_scan
    return just_answered and policy.quiet <= quiet_for <= policy.quiet + policy.window


class Rescans(BackgroundTask):
    """Rescans `store` when `rescan_due` says so, checked every `tick` seconds. Owned by the
    app's lifespan (`async with`); the hook route wraps each request in `serving()`."""

    task_name = "notes-rescan"

    def __init__(
        self,
        store: NoteFiles,
        policy: RescanPolicy | None = None,
        *,
        tick: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.policy = policy or RescanPolicy()
        self.tick = tick
        self.clock = clock
        self.scans = 0
        self._last_scan = clock()  # the store synced when it was opened
        self._scan_cost = 0.0
        self._last_request = float("-inf")
        self._in_flight = 0
        self._scan: asyncio.Future[object] | None = None

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Around a hook request (on the event loop): no rescan starts while it runs."""
        self._in_flight += 1
        self._last_request = self.clock()
        try:
            yield
        finally:
            self._in_flight -= 1
            self._last_request = self.clock()

    def due(self) -> bool:
        return rescan_due(
            self.policy,
            now=self.clock(),
            last_scan=self._last_scan,
            scan_cost=self._scan_cost,
            last_request=self._last_request,
            in_flight=self._in_flight,
        )

    async def rescan(self) -> None:
        """One full scan in a worker thread (a failure is logged; the next one retries)."""
        started = time.perf_counter()
        # shielded: a shutdown waits for the scan (`__aexit__`) before the store closes
        self._scan = asyncio.ensure_future(asyncio.to_thread(self.store.sync))
        try:
            await asyncio.shield(self._scan)
        except (OSError, ClaudeMemoryError, sqlite3.Error) as exc:
            log.warning("notes rescan failed (retried later): %s", exc)
        self._scan_cost = time.perf_counter() - started
        self._last_scan = self.clock()
        self.scans += 1

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.tick)
            if self.due():
                await self.rescan()

    async def __aexit__(self, *exc: object) -> None:
        await super().__aexit__(*exc)
        if self._scan is not None and not self._scan.done():
            with contextlib.suppress(OSError, ClaudeMemoryError, sqlite3.Error):
                await self._scan
