"""Background embedding: the encoder worker (`memory.encoders.client`) fills any backend's
note vectors (`memory.backend.NoteVectors`) while the app or the MCP server runs.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from memory.clients._background import BackgroundTask
from memory.encoders.client import BULK_PRIORITY, EncoderClient, EncoderReady
from memory.encoders.models import EncoderUnavailableError
from memory.search.vectors import PendingNote, by_note

if TYPE_CHECKING:
    from memory.backend import NoteVectors

log = logging.getLogger(__name__)


BULK_CHUNKS: Final = 8
"""Most chunks one background request carries: a query waits for at most one such request in
the worker (queries go first, but a request in flight is not interrupted). Every save reaches
the vectors through here (a save never waits on the encoder), long notes too: 16 notes of 16
chunks were 256 texts in one request, longer than a search's time limit, so it was given up and
sent again forever. Measured with bench/served_latency.py on a quiet machine (10k notes, 30
samples, 28 Nov): with 32 chunks a search while 4 clients save took p50 1,145 / p95 2,099 ms
and while a backlog is embedded 60 / 1,350 ms; with 8, 1,147 / 1,217 and 627 / 804."""


def within_chunks(pending: Sequence[PendingNote], most: int) -> list[PendingNote]:
    """The first notes of `pending` whose chunks together are at most `most` (the first note
    whatever its size)."""
    taken: list[PendingNote] = []
    count = 0
    for note in pending:
        if taken and count + len(note.chunks) > most:
            break
        taken.append(note)
        count += len(note.chunks)
    return taken


def bulk_time_limit(texts: int) -> float:
    """How long a background request may take: 10 s and 1 s a text (the worker is killed as
    hung only after 120 s and 1 s a text, `memory.encoders.client`)."""
    return 10.0 + float(texts)


class VectorSync(BackgroundTask):
    """Background embedding: whenever the index changes, embed notes whose vectors are
    missing or stale (`batch` notes per request, bulk priority), while the encoder is ready."""

    task_name = "vector-sync"

    def __init__(
        self,
        client: EncoderClient,
        vectors: NoteVectors,
        generation: Callable[[], object],
        *,
        batch: int = 16,
        interval: float = 1.0,
        written: Callable[[str, Sequence[tuple[PendingNote, Any]]], None] | None = None,
    ) -> None:
        """`written(model, items)`: after each batch is stored, in a thread (the checks a
        save leaves until its note has vectors, `StoreCore.check_embedded`)."""
        self.client = client
        self.written = written
        self.vectors = vectors
        self.generation = generation
        self.batch = batch
        self.interval = interval
        self.embedded = 0
        self._wake = threading.Event()

    def wake(self) -> None:
        """Check for work now rather than at the next interval."""
        self._wake.set()

    async def step(self) -> int:
        """Embed one batch of pending notes; returns how many were written (0: none left)."""
        status = self.client.status
        if not isinstance(status, EncoderReady):
            return 0
        pending = await asyncio.to_thread(self.vectors.pending, status.name, self.batch)
        if not pending:
            return 0
        pending = within_chunks(pending, BULK_CHUNKS)
        texts = [chunk for note in pending for chunk in note.chunks]
        matrix = await self.client.encode(
            texts, "passage", priority=BULK_PRIORITY, time_limit=bulk_time_limit(len(texts))
        )
        items = by_note(pending, matrix)
        written = await asyncio.to_thread(self.vectors.write, status.name, items)
        if self.written is not None:
            await asyncio.to_thread(self.written, status.name, items)
        self.embedded += written
        return max(written, 1)

    async def _run(self) -> None:
        seen: tuple[object, str] | None = None
        while True:
            status = self.client.status
            if isinstance(status, EncoderReady):
                try:
                    current = (await asyncio.to_thread(self.generation), status.name)
                    if current != seen and await self.step() == 0:
                        seen = current
                    elif current != seen:
                        continue  # more to do: no pause between batches
                except EncoderUnavailableError as exc:
                    log.info("background embedding paused: %s", exc.message)
                except Exception:  # logged, retried at the next interval; never kills the app
                    log.exception("background embedding failed")
            await asyncio.to_thread(self._wake.wait, self.interval)
            self._wake.clear()
