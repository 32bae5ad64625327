"""The seam between the app and wherever the memory lives.

`MemoryBackend` is the surface the app, the agent tools, the hooks, the MCP server and the CLI
use of a memory store; `NoteVectors` the part of it that `memory.clients.vector_sync.VectorSync`
uses to embed notes in the background. Two implementations satisfy both:

* `memory.sqlite.store.MemoryStore`: markdown files as the truth, a SQLite index (one machine);
* `memory.postgres.store.PostgresMemoryStore`: the notes themselves in PostgreSQL, shared by every
  app instance on the database (docs/postgres.md).

One behavioural suite runs on both (`tests/storage/test_memory_contract.py`). File-only
operations (`abspath`, `root`, `sync`, `_index.json`) stay on `MemoryStore`.

`StateBackend` is the seam of the state database (episodes, pending memories, injection
windows): `memory.sqlite.state.StateDB` or `memory.postgres.state.PostgresStateDB`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

from memory.config import MemoryConfig
from memory.model import Note, NoteDraft, Reader, SaveResult, SearchHit, SyncReport
from memory.notes.changes import HistoryRecorder
from memory.search.fusion import SearchMode, SearchOutcome
from memory.search.plan import QueryVector
from memory.search.vectors import PendingNote, VectorStats
from storage.sql import Row, Writer

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from memory.encoders.models import Encoder  # not loaded by a keyword-only hook

ProgressFn = Callable[[str, int, int], None]
"""progress(stage, done, total)."""


@runtime_checkable
class NoteVectors(Protocol):
    """Note vectors, per encoder (model name); what background embedding needs."""

    def generation(self) -> int:
        """Moves whenever vectors are written or dropped."""
        ...

    def pending(self, model: str, limit: int | None = None) -> list[PendingNote]:
        """Notes whose vectors for `model` are missing or stale, oldest change first."""
        ...

    def write(self, model: str, items: Sequence[tuple[PendingNote, NDArray[np.float32]]]) -> int:
        """Store vectors (one row per chunk); notes changed or deleted since `pending` are
        skipped. Returns how many notes were written."""
        ...

    def has_any(self) -> bool:
        """Whether any vectors are stored, of any model."""
        ...

    def models(self) -> dict[str, int]:
        """Model name -> notes with vectors of it."""
        ...

    def has_vectors(self, model: str) -> bool: ...

    def stats(self, model: str | None) -> VectorStats: ...


@runtime_checkable
class MemoryBackend(Protocol):
    """The memory store as the app uses it. Synchronous: call it from a worker thread."""

    @property
    def config(self) -> MemoryConfig:
        """Where it lives and how it behaves (the relevance floors among it)."""
        ...

    @property
    def encoder(self) -> Encoder | None:
        """The text encoder used for saves and searches (None: keyword search only)."""
        ...

    @property
    def vectors(self) -> NoteVectors: ...

    # --- lifecycle -------------------------------------------------------------------------
    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None:
        """Closes the store."""
        ...

    def generation(self) -> tuple[int, int]:
        """(notes, vectors) change counters: moves whenever either changes."""
        ...

    def rebuild(self, progress: ProgressFn | None = None) -> SyncReport:
        """Recompute every derived search structure from the notes."""
        ...

    # --- notes -----------------------------------------------------------------------------
    def save(self, draft: NoteDraft) -> SaveResult:
        """A new note, or the refreshed existing one when it is an (exact or near)
        duplicate; text is sanitized (`<private>` dropped, secrets redacted)."""
        ...

    def get(self, note_id: str) -> Note:
        """The full note (NotFoundError when unknown)."""
        ...

    def update(self, note_id: str, **changes: Any) -> Note: ...

    def delete(self, note_id: str) -> None: ...

    def supersede(self, old_id: str, new_id: str) -> Note: ...

    def deprecate(self, note_id: str, reason: str | None = None) -> Note: ...

    # --- history (memory.notes.changes) ---------------------------------------------------------
    def attach_history(self, history: HistoryRecorder | None) -> None:
        """Record every change of a note as a version from now on (None: no history)."""
        ...

    def restore_version(self, note_id: str, number: int) -> Note:
        """Bring back a version's title, summary, text and tags (a deleted note: saved again
        under its id); itself a new version."""
        ...

    def list(
        self,
        type: str | None = None,
        scope: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        limit: int = 50,
        offset: int = 0,
        sort: str = "updated",
        *,
        reader: Reader | None = None,
    ) -> builtins.list[Note]:
        """`reader`: only the notes of the scopes it reads (`memory.model.Reader`; None:
        every note); the same in `count`, `search`, `search_detailed` and `top_notes`."""
        ...

    def count(
        self,
        type: str | None = None,
        scope: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        *,
        reader: Reader | None = None,
    ) -> int: ...

    def iter_notes(self) -> Iterator[Note]:
        """Every note in full, in path order (export)."""
        ...

    def stats(self) -> dict[str, Any]: ...

    def flush_access_counts(self) -> int: ...

    def record_access(self, ids: Sequence[str]) -> None:
        """Count one access of each note (injected into a prompt, read in full by a model);
        unknown ids are skipped. Searches count their hits themselves (`record_access=`)."""
        ...

    # --- search ----------------------------------------------------------------------------
    def search(
        self,
        query: str,
        limit: int = 10,
        type: str | None = None,
        scope: str | None = None,
        include_inactive: bool = False,
        *,
        tag: str | None = None,
        record_access: bool = True,
        floor: float | None = None,
        reader: Reader | None = None,
    ) -> builtins.list[SearchHit]: ...

    def search_detailed(
        self,
        query: str,
        limit: int = 10,
        type: str | None = None,
        scope: str | None = None,
        include_inactive: bool = False,
        *,
        tag: str | None = None,
        record_access: bool = True,
        mode: SearchMode = "auto",
        floor: float | None = None,
        reader: Reader | None = None,
    ) -> SearchOutcome: ...

    def top_notes(
        self, limit: int = 50, scope: str | None = None, *, reader: Reader | None = None
    ) -> builtins.list[tuple[Note, float]]: ...

    def query_vector(self, text: str) -> QueryVector | None:
        """The vector a search for `text` ranks by (cached); None when there is none."""
        ...

    # --- semantic search -------------------------------------------------------------------
    def attach_encoder(self, encoder: Encoder | None) -> None: ...

    def sync_vectors(self, progress: ProgressFn | None = None, *, batch: int = 32) -> int: ...

    def check_embedded(self, model: str, items: Sequence[tuple[PendingNote, Any]]) -> None:
        """What a save left until its note had vectors: the older note it repeats or
        updates (`memory.core.StoreCore.check_embedded`)."""
        ...

    def reindex_vectors(self, progress: ProgressFn | None = None) -> int: ...

    def reset_vectors(self) -> dict[str, Any]: ...


# --- the state database (episodes, pending memories, windows) ------------------------------


# The row and the writer every state store shares (storage/sql.py), named for the memory.
StateRow = Row
StateWriter = Writer


class StateBackend(Protocol):
    """The memory state database, SQLite (`StateDB`) or PostgreSQL (`PostgresStateDB`).

    Write transactions are serialized across every process and instance sharing the storage
    (SQLite: `BEGIN IMMEDIATE`; PostgreSQL: an advisory lock), so a read-then-insert inside
    `write()` — "start an episode unless one is active" — never races another writer.
    Do not nest `write()` blocks, nor read through `read()` inside one: use the writer.
    """

    def read(self, sql: str, params: Sequence[object] = ()) -> Sequence[StateRow]: ...

    def write(self) -> AbstractContextManager[StateWriter]: ...

    def close(self) -> None: ...
