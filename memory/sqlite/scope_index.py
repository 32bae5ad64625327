"""A scope's own FTS5 index, in memory, for a scope searched again and again.

A scoped search in the home's index (`index.fts_rows_local`) walks each query word's matches
within the scope, but FTS5's `bm25()` first counts the word's notes in the *whole* index (it
knows no other statistics), and the scope's own ranking then needs those whole-index counts to
recover each word's occurrences: the common words of a prompt cost in proportion to the home,
not to the project (docs/search.md, "Filters first"). A `ScopeIndex` holds the notes of
one set of statistics filters (`Filters.statistics`: a scope with the user's notes, a type, a
tag) in an FTS5 table of its own, with the home's tokenizer and columns: its `bm25()` is then
BM25 with the scope's statistics, the ranking a home holding that scope alone gives, for the
cost of the scope's notes.

Built from the index's rows (the same column text `Index.put` writes), on a scope's second
search within one index generation (a hook process searches once and never builds one), and
dropped with the generation (`MemoryStore._kept_for_searches`). Each index is its own
in-memory connection, used under a lock (one walk at a time, ~0.1 ms).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from typing import Final

from memory.search import fts5
from memory.sqlite.index import BM25_WEIGHTS, trigram_text

SCOPE_INDEX_MOST: Final = 500
"""Most notes a scope may hold for its own index: building one costs ~0.05 ms a note (5 ms for
100 notes: CJK spacing in Python, FTS5's tokenizer), paid on the scope's second search after
any change to the index; a larger scope keeps the walk in the home's index."""
SCOPE_INDEX_CHARS: Final = 2_000_000
"""...and at most this many characters of text (the index keeps up to `max_indexed_chars`,
500k, of each note): a scope's own index lives in memory, 8 of them at once."""
SCOPE_INDEXES_KEPT: Final = 8
"""Scopes with an index of their own at once, per store and index generation."""

_SCORES_KEPT: Final = 20_000
"""Phrase scores an index keeps (one per note holding a phrase) before it forgets them all: a
long-lived app whose notes do not change keeps its index while prompts bring new words."""


class ScopeIndex:
    """The notes of one statistics filter in an FTS5 table of their own (see the module)."""

    def __init__(self, rows: Iterable[tuple[int, str, str, str, str, str, str, str, float | None]]):
        """`rows`: (nid, id, title, tags JSON, summary, body, scope, status, expires_ts) of
        each note, as the index's `notes` table holds them."""
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._conn.execute(
            f"CREATE VIRTUAL TABLE t USING fts5({', '.join(fts5.COLUMNS)}, scope,"
            f" content='', tokenize='{fts5.TOKENIZER}')"
        )
        # the identifiers' substrings, as the home's `notes_tri` holds them
        self._conn.execute(
            "CREATE VIRTUAL TABLE tri USING fts5(words, content='', tokenize='trigram')"
        )
        self.ids: dict[int, str] = {}
        """Each note's id by rowid (the home index's nid)."""
        self._life: dict[int, tuple[str, float | None]] = {}
        self._scores: dict[str, dict[int, float]] = {}
        self._kept = 0
        fts_rows = []
        tri_rows = []
        for nid, note_id, title, tags, summary, body, scope, status, expires_ts in rows:
            self.ids[nid] = note_id
            self._life[nid] = (status, expires_ts)
            columns = fts5.fts_columns_json(title, tags, summary, body)
            fts_rows.append((nid, *columns, fts5.scope_word(scope)))
            tri_rows.append((nid, trigram_text(title, tags, summary, body)))
        with self._lock:
            self._conn.execute("BEGIN")
            self._conn.executemany(
                "INSERT INTO t (rowid, title, tags, summary, body, scope)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                fts_rows,
            )
            self._conn.executemany("INSERT INTO tri (rowid, words) VALUES (?, ?)", tri_rows)
            self._conn.execute("COMMIT")

    @property
    def notes(self) -> int:
        return len(self.ids)

    def scores(self, phrase: str) -> dict[int, float]:
        """Each note holding an FTS5 phrase, with the phrase's BM25 (> 0, higher is better)
        under the scope's statistics. Kept: the index never changes."""
        found = self._scores.get(phrase)
        if found is None:
            with self._lock:
                found = dict(
                    self._conn.execute(
                        f"SELECT rowid, -bm25(t, {BM25_WEIGHTS}) FROM t WHERE t MATCH ?", (phrase,)
                    ).fetchall()
                )
            self._kept += len(found)
            if self._kept > _SCORES_KEPT:
                self._scores.clear()
                self._kept = len(found)
            self._scores[phrase] = found
        return found

    def matches(self, match: str) -> list[int]:
        """The notes an FTS5 expression matches."""
        with self._lock:
            return [
                r[0] for r in self._conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (match,))
            ]

    def identifiers(self, match: str) -> list[int]:
        """The notes whose identifiers match a trigram query (`ParsedQuery.trigram`)."""
        with self._lock:
            found = self._conn.execute("SELECT rowid FROM tri WHERE tri MATCH ?", (match,))
            return [r[0] for r in found]

    def allowed(self, active_at: float | None) -> set[int]:
        """The notes a search sees: all of them, or only those active and not expired at
        `active_at` (what `Filters.active_at` adds to the statistics filters)."""
        if active_at is None:
            return set(self.ids)
        return {
            nid
            for nid, (status, expires) in self._life.items()
            if status == "active" and (expires is None or expires > active_at)
        }

    def close(self) -> None:
        with self._lock:
            self._conn.close()
