"""A search's query vector: asked for when the search starts, collected when it is needed.

Both stores (SQLite and PostgreSQL) search the same way: the query is encoded in a worker
thread while the keyword side runs, and the result is a vector, or no vector and why not
(`notice`: the encoder is loading or failed, no note has vectors yet). Repeated queries (hooks
asking again, search as you type) come from a small cache instead of the encoder.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from memory.embeddings import Encoder, EncoderUnavailableError

CACHE_SIZE: Final = 256
NO_VECTORS_YET: Final = (
    "semantic search has no vectors yet (notes are being embedded); keyword results only"
)


@dataclass(frozen=True, slots=True)
class QueryVector:
    """A query's vector and the encoder (model name) it came from."""

    vector: Any
    model: str


Resolved = tuple[QueryVector | None, str | None]


class PendingQuery:
    """One search's query vector, resolved once, on first use."""

    def __init__(self, future: Future[Resolved]) -> None:
        self._future = future
        self._resolved: Resolved | None = None

    def vector(self) -> QueryVector | None:
        if self._resolved is None:
            self._resolved = self._future.result()
        return self._resolved[0]

    @property
    def notice(self) -> str | None:
        """Why there is no vector (None when there is one, or when it was never asked for)."""
        return self._resolved[1] if self._resolved is not None else None


def _unavailable(exc: EncoderUnavailableError) -> str:
    return f"semantic search unavailable ({exc.message}); keyword results only"


class QueryVectors:
    """The query-encoding threads and cache of one store (thread-safe)."""

    def __init__(self, cache_size: int = CACHE_SIZE) -> None:
        self._cache: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def start(
        self, encoder: Encoder | None, has_vectors: Callable[[str], bool], query: str
    ) -> PendingQuery:
        """Start encoding `query` (no reason given when no encoder is set). Whether any note
        has vectors is asked here, on the caller's thread: a worker needing a pooled
        connection while every search holds one would exhaust a PostgreSQL pool."""
        done: Future[Resolved] = Future()
        if encoder is None:
            done.set_result((None, None))
            return PendingQuery(done)
        try:
            model = encoder.name
            if not has_vectors(model):
                done.set_result((None, NO_VECTORS_YET))
                return PendingQuery(done)
        except EncoderUnavailableError as exc:
            done.set_result((None, _unavailable(exc)))
            return PendingQuery(done)
        key = (model, query)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                done.set_result((QueryVector(cached, model), None))
                return PendingQuery(done)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(2, thread_name_prefix="query-vector")
            return PendingQuery(self._pool.submit(self._encode, encoder, key))

    def _encode(self, encoder: Encoder, key: tuple[str, str]) -> Resolved:
        model, query = key
        try:
            vector = encoder.encode([query], "query")[0]
        except EncoderUnavailableError as exc:
            return None, _unavailable(exc)
        with self._lock:
            self._cache[key] = vector
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return QueryVector(vector, model), None

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
