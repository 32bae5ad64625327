"""Note vectors in the SQLite index, searched with numpy.

Vectors are float32 BLOBs in `note_vectors`, one row per chunk of a note, keyed by the note's
id (stable across rewrites and rebuilds, so neither re-embeds an unchanged note) and tagged
with the encoder's name. A note needs (re-)embedding when it has no chunk-0 row for the
current encoder or when `doc_key` (a hash of its title, summary and body) changed; rows of
another encoder are stale and replaced. Rows of deleted notes are pruned on the next scan.

Search is an exact scan: the rows of the current encoder are kept in memory as one float32
matrix (reloaded when `meta.vectors_generation` moves), and `matrix @ query` scores every chunk.
From `COARSE_MIN_ROWS` rows on, each row's signs (one bit a dimension) are kept beside it and a
search compares exactly only the rows whose signs are nearest the query's (`coarse_candidates`):
at 100k notes the full product reads 540 MB a search.
At personal-memory sizes that beats sqlite-vec (0.3 ms vs 8 ms at 10k 384-d vectors; see
docs/retrieval.md), and the stdlib sqlite3 here cannot load extensions anyway.

numpy is imported lazily: the module can be imported by a base install.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from memory.search.vectors import PendingNote, VectorStats, chunk_note, doc_key

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

VECTOR_TABLES: Final[tuple[str, ...]] = (
    """CREATE TABLE note_vectors (
        id TEXT NOT NULL,
        chunk INTEGER NOT NULL,
        model TEXT NOT NULL,
        doc_key TEXT NOT NULL,
        dim INTEGER NOT NULL,
        vec BLOB NOT NULL,
        PRIMARY KEY (id, chunk)
    )""",
    "CREATE INDEX note_vectors_model ON note_vectors(model, chunk)",
    "INSERT OR IGNORE INTO meta VALUES ('vectors_generation', '0')",
)
"""Migration 5 of `memory.sqlite.index` (needs the `meta` table of migration 4)."""


class _IndexLike(Protocol):
    def conn(self) -> sqlite3.Connection: ...

    def write(self) -> AbstractContextManager[sqlite3.Connection]: ...


@dataclass(slots=True)
class _Matrix:
    model: str
    generation: int
    ids: list[str]
    """Note id of each row (a note has one row per chunk)."""
    vectors: Any
    """float32 (rows, dim)."""
    spans: dict[str, tuple[int, int]]
    """Note id -> its rows [start, stop) (a note's chunks are adjacent: rows are in id order)."""
    signs: Any = None
    """uint64 (words, rows): each row's signs, 64 to a word, word-major (`_signs`); None below
    `COARSE_MIN_ROWS` rows, which are always scanned exactly."""
    owners: Any = None
    """int32 (rows,): the ordinal of each row's note (rows of one note share it), with `signs`:
    the best row of each note is found in numpy, not in a Python loop over every candidate."""


SUBSET_SHARE: Final = 8
"""A filtered search scans only the rows of the notes that pass its filters when they are at
most 1/8 of the notes with vectors (gathering scattered rows costs more per row than the
full product)."""


COARSE_MIN_ROWS: Final = 20_000
"""From this many rows a search first ranks every row by its signs (one bit a dimension, 1/32
of the matrix) and compares only the best `coarse_candidates` rows exactly. The exact product
reads the whole float32 matrix each search: 150k chunks x 896 dimensions are 540 MB, 50-60 ms
of memory traffic on this VM, more when other processes use the memory bus too (the 164-185 ms
hybrid p95 at 100k notes); the signs are 17 MB, ~2 ms."""


def coarse_candidates(rows: int) -> int:
    """How many rows the signs put forward for the exact comparison. On the default encoder's
    vectors (12k real note and query vectors, 300 held out as queries) the best 2,000 by
    signs held 100 % of the exact top 50 (1,000: 99.9 %, at worst 96 %); larger matrices get
    proportionally more: those 12k among 138k random vectors (150k rows, 3,750 put forward),
    99.9 % of the top 50 (at worst 96 %), in 0.39x the exact scan's time (p50, load 7.6)."""
    return max(2000, rows // 40)


class VectorIndex:
    """Vectors of one index database (thread-safe; writes go through `index.write()`)."""

    def __init__(self, index: _IndexLike) -> None:
        self._index = index
        self._lock = threading.Lock()
        self._matrix: _Matrix | None = None

    # --- reads -------------------------------------------------------------------------------

    def generation(self) -> int:
        """Moves whenever vectors are written or dropped."""
        return self._generation(self._index.conn())

    def _generation(self, conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT value FROM meta WHERE key = 'vectors_generation'").fetchone()
        return int(row[0]) if row is not None else 0

    def _current_keys(self, conn: sqlite3.Connection, model: str) -> dict[str, str]:
        rows = conn.execute(
            "SELECT id, doc_key FROM note_vectors WHERE model = ? AND chunk = 0", (model,)
        )
        return {r[0]: r[1] for r in rows}

    def stats(self, model: str | None) -> VectorStats:
        conn = self._index.conn()
        notes = conn.execute("SELECT id, title, summary, content_hash FROM notes").fetchall()
        keys = self._current_keys(conn, model) if model else {}
        embedded = sum(1 for r in notes if keys.get(r[0]) == doc_key(r[1], r[2], r[3]))
        have = conn.execute(
            "SELECT count(DISTINCT id) FROM note_vectors WHERE id IN (SELECT id FROM notes)"
        ).fetchone()[0]
        chunks = 0
        if model:
            chunks = conn.execute(
                "SELECT count(*) FROM note_vectors WHERE model = ?", (model,)
            ).fetchone()[0]
        return VectorStats(
            model=model,
            notes=len(notes),
            embedded=embedded,
            stale=int(have) - embedded,
            chunks=int(chunks),
        )

    def pending(self, model: str, limit: int | None = None) -> list[PendingNote]:
        """Notes to (re-)embed for `model`, oldest rows first (at most `limit`)."""
        conn = self._index.conn()
        keys = self._current_keys(conn, model)
        wanted: list[tuple[str, str]] = []
        for row in conn.execute(
            "SELECT id, title, summary, content_hash FROM notes ORDER BY nid"
        ).fetchall():
            key = doc_key(row[1], row[2], row[3])
            if keys.get(row[0]) != key:
                wanted.append((row[0], key))
                if limit is not None and len(wanted) >= limit:
                    break
        out: list[PendingNote] = []
        for start in range(0, len(wanted), 500):
            part = dict(wanted[start : start + 500])
            marks = ", ".join("?" * len(part))
            for row in conn.execute(
                f"SELECT id, title, summary, body FROM notes WHERE id IN ({marks})", list(part)
            ).fetchall():
                chunks = chunk_note(row["title"], row["summary"], row["body"])
                out.append(PendingNote(row["id"], part[row["id"]], tuple(chunks)))
        order = {note_id: i for i, (note_id, _) in enumerate(wanted)}
        out.sort(key=lambda p: order[p.id])
        return out

    def has_any(self) -> bool:
        """Whether any vectors are stored (of any encoder)."""
        return (
            self._index.conn().execute("SELECT 1 FROM note_vectors LIMIT 1").fetchone() is not None
        )

    def models(self) -> dict[str, int]:
        """Encoder name -> notes with vectors of it (current or not)."""
        rows = self._index.conn().execute(
            "SELECT model, count(*) FROM note_vectors WHERE chunk = 0"
            " GROUP BY model ORDER BY 2 DESC"
        )
        return {r[0]: int(r[1]) for r in rows}

    def has_vectors(self, model: str) -> bool:
        """Whether any note has vectors of `model` (else semantic search has nothing)."""
        row = (
            self._index.conn()
            .execute("SELECT 1 FROM note_vectors WHERE model = ? AND chunk = 0 LIMIT 1", (model,))
            .fetchone()
        )
        return row is not None

    # --- writes ------------------------------------------------------------------------------

    def write(
        self,
        model: str,
        items: Sequence[tuple[PendingNote, NDArray[np.float32]]],
        *,
        tx: sqlite3.Connection | None = None,
    ) -> int:
        """Store the vectors of some notes (rows: one per chunk, in order). Notes deleted or
        changed since `pending()` are skipped; returns how many notes were written."""
        if not items:
            return 0
        if tx is None:
            with self._index.write() as conn:
                return self.write(model, items, tx=conn)
        written = 0
        for note, vectors in items:
            row = tx.execute(
                "SELECT title, summary, content_hash FROM notes WHERE id = ?", (note.id,)
            ).fetchone()
            if row is None or doc_key(row[0], row[1], row[2]) != note.doc_key:
                continue  # deleted or edited meanwhile: the next scan picks it up
            tx.execute("DELETE FROM note_vectors WHERE id = ?", (note.id,))
            dim = int(vectors.shape[1])
            tx.executemany(
                "INSERT INTO note_vectors (id, chunk, model, doc_key, dim, vec)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (note.id, i, model, note.doc_key, dim, _blob(vectors[i]))
                    for i in range(vectors.shape[0])
                ],
            )
            written += 1
        if written:
            _bump(tx)
        return written

    def prune(self, model: str | None = None) -> int:
        """Drop rows of deleted notes (and, with `model`, rows of other encoders)."""
        with self._index.write() as tx:
            removed = tx.execute(
                "DELETE FROM note_vectors WHERE id NOT IN (SELECT id FROM notes)"
            ).rowcount
            if model is not None:
                removed += tx.execute(
                    "DELETE FROM note_vectors WHERE model <> ?", (model,)
                ).rowcount
            if removed:
                _bump(tx)
        return int(removed)

    def clear(self) -> None:
        with self._index.write() as tx:
            tx.execute("DELETE FROM note_vectors")
            _bump(tx)

    # --- search ------------------------------------------------------------------------------

    def _load(self, model: str) -> _Matrix:
        np = _np()
        conn = self._index.conn()
        generation = self._generation(conn)
        cached = self._matrix
        if cached is not None and cached.model == model and cached.generation == generation:
            return cached
        with self._lock:
            cached = self._matrix
            if cached is not None and cached.model == model and cached.generation == generation:
                return cached
            rows = conn.execute(
                "SELECT id, dim, vec FROM note_vectors WHERE model = ? ORDER BY id, chunk",
                (model,),
            ).fetchall()
            ids = [r[0] for r in rows]
            if rows:
                dim = int(rows[0][1])
                vectors = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4")
                vectors = vectors.reshape(len(rows), dim).astype(np.float32, copy=False)
            else:
                vectors = np.zeros((0, 0), dtype=np.float32)
            spans: dict[str, tuple[int, int]] = {}
            for row, note_id in enumerate(ids):
                start = spans.get(note_id, (row, row))[0]
                spans[note_id] = (start, row + 1)
            signs = owners = None
            if len(ids) >= COARSE_MIN_ROWS:
                signs = _signs(vectors)
                # rows are in id order: a new note starts where the id changes
                starts = np.fromiter(
                    (i > 0 and ids[i] != ids[i - 1] for i in range(len(ids))),
                    dtype=np.int32,
                    count=len(ids),
                )
                owners = np.cumsum(starts, dtype=np.int32)
            self._matrix = _Matrix(model, generation, ids, vectors, spans, signs, owners)
            return self._matrix

    def search(
        self,
        model: str,
        query: NDArray[np.float32],
        k: int,
        *,
        allowed: Callable[[list[str]], set[str]] | None = None,
        subset: Callable[[int], Collection[str] | None] | None = None,
    ) -> list[tuple[str, float]]:
        """The `k` notes whose best chunk is most similar to `query`: [(id, cosine)], best
        first. `allowed(ids)` filters candidate ids (e.g. by type, scope, status); when it
        drops too many, the scan widens until `k` notes pass or every row was considered.

        Filters first: `subset(most)` returns the ids that pass the filters when there are at
        most `most` of them (else None); then only their rows are scanned, and the result is
        the one the widening scan would reach (exact either way)."""
        np = _np()
        matrix = self._load(model)
        total = len(matrix.ids)
        if total == 0 or k <= 0 or matrix.vectors.shape[1] != query.shape[-1]:
            return []
        vector = query.reshape(-1).astype(np.float32, copy=False)
        within = subset(len(matrix.spans) // SUBSET_SHARE) if subset is not None else None
        if within is not None:
            return _nearest_within(matrix, vector, k, within)
        if matrix.signs is not None:
            found = _nearest_by_signs(matrix, vector, k, allowed)
            if found is not None:
                return found
        scores = matrix.vectors @ vector
        want = min(total, max(k * 2, 32))
        while True:
            if want >= total:
                top = np.argsort(-scores, kind="stable")
            else:
                part = np.argpartition(-scores, want - 1)[:want]
                top = part[np.argsort(-scores[part], kind="stable")]
            best: dict[str, float] = {}
            for row in top.tolist():
                note_id = matrix.ids[row]
                if note_id not in best:
                    best[note_id] = float(scores[row])
            ids = list(best)
            if allowed is not None:
                keep = allowed(ids)
                ids = [i for i in ids if i in keep]
            if len(ids) >= k or want >= total:
                return [(i, best[i]) for i in ids[:k]]
            want = min(total, want * 4)


def _nearest_within(
    matrix: _Matrix, vector: NDArray[np.float32], k: int, within: Collection[str]
) -> list[tuple[str, float]]:
    """The `k` notes of `within` nearest to `vector`, scanning only their rows (in row order,
    so equal scores keep the full scan's order)."""
    np = _np()
    spans = sorted(span for span in map(matrix.spans.get, within) if span is not None)
    if not spans:
        return []
    rows = np.concatenate([np.arange(start, stop) for start, stop in spans])
    scores = matrix.vectors[rows] @ vector
    ids = [matrix.ids[row] for row in rows.tolist()]
    best: dict[str, float] = {}
    for i in np.argsort(-scores, kind="stable").tolist():
        note_id = ids[i]
        if note_id not in best:
            best[note_id] = float(scores[i])
            if len(best) >= k:
                break
    return list(best.items())


def _signs(vectors: Any) -> Any:
    """Each row's signs as bits, word-major: (ceil(dim / 64), rows) uint64, so the distance
    to a query is a few passes over contiguous words (row-major, the per-row sums cost 4x)."""
    np = _np()
    bits = np.packbits(vectors > 0, axis=1)
    pad = (-bits.shape[1]) % 8
    if pad:
        bits = np.pad(bits, ((0, 0), (0, pad)))
    return np.ascontiguousarray(bits.view(np.uint64).T)


def _nearest_by_signs(
    matrix: _Matrix,
    vector: NDArray[np.float32],
    k: int,
    allowed: Callable[[list[str]], set[str]] | None,
) -> list[tuple[str, float]] | None:
    """The `k` best notes among the rows whose signs differ least from the query's
    (`coarse_candidates`), compared exactly; None when the filters leave fewer than `k` of
    them (the caller scans everything then)."""
    np = _np()
    signs = matrix.signs
    query = _signs(vector.reshape(1, -1))[:, 0]
    distance = np.zeros(signs.shape[1], dtype=np.uint16)
    count = _popcount(np)
    for word in range(signs.shape[0]):
        distance += count(signs[word] ^ query[word])
    total = signs.shape[1]
    want = coarse_candidates(total)
    if want >= total:
        return None
    rows = np.sort(np.argpartition(distance, want - 1)[:want])
    scores = matrix.vectors[rows] @ vector
    order = np.argsort(-scores, kind="stable")
    # each note's best row, in score order (its first in `order`)
    _, first = np.unique(matrix.owners[rows[order]], return_index=True)
    best = order[np.sort(first)]
    # the filters are asked about the best notes first, as many more as they drop (asking
    # about every candidate's note was 14 ms of a 100k search: 2,500 ids in SQL)
    asked = max(k * 2, 32)
    found: list[tuple[str, float]] = []
    start = 0
    while len(found) < k and start < len(best):
        part = best[start : start + asked].tolist()
        pairs = [(matrix.ids[int(rows[i])], float(scores[i])) for i in part]
        keep = allowed([note_id for note_id, _ in pairs]) if allowed is not None else None
        found += [p for p in pairs if keep is None or p[0] in keep]
        start += asked
        asked *= 4
    if len(found) < k:
        return None
    return found[:k]


def _popcount(np: Any) -> Callable[[Any], Any]:
    """Set bits of each uint64: numpy's own from 2.0 (the embeddings extra allows 1.26)."""
    native = getattr(np, "bitwise_count", None)
    if native is not None:
        return native  # type: ignore[no-any-return]
    table = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)

    def count(words: Any) -> Any:
        return table[words.view(np.uint8)].reshape(-1, 8).sum(axis=1, dtype=np.uint16)

    return count


def _np() -> Any:
    from memory.encoders.models import _np as load

    return load()


def _blob(vector: Any) -> bytes:
    return bytes(_np().asarray(vector, dtype="<f4").tobytes())


def _bump(tx: sqlite3.Connection) -> None:
    tx.execute(
        "INSERT INTO meta VALUES ('vectors_generation', '1') ON CONFLICT(key)"
        " DO UPDATE SET value = value + 1"
    )
