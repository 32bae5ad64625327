"""Background embedding: the encoder worker (`memory.encoders.client`) fills any backend's
note vectors (`memory.backend.NoteVectors`) while the app or the MCP server runs.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from memory._background import BackgroundTask
from memory.encoders.client import BULK_PRIORITY, EncoderClient, EncoderReady
from memory.encoders.models import EncoderUnavailableError
from memory.search.vectors import PendingNote, by_note

if TYPE_CHECKING:
    from memory.backend import NoteVectors

log = logging.getLogger(__name__)


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
        texts = [chunk for note in pending for chunk in note.chunks]
        matrix = await self.client.encode(texts, "passage", priority=BULK_PRIORITY)
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
