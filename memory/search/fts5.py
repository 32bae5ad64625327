"""The SQLite index's words and BM25, for every backend that must rank the same way.

SQLite's FTS5 decides what a word is (`porter unicode61 remove_diacritics 2` over text whose
CJK characters stand alone) and scores matches with `bm25()`. The PostgreSQL store indexes
and ranks with the same words and the same formula, so a home moved there answers a query
with the same notes in the same order (docs/postgres.md):

- `Fts5Tokenizer` runs SQLite's own tokenizer on an in-memory table, so the words are FTS5's
  by construction (stems, diacritics, what splits a word), not an imitation of them.
- `tsvector_text` lays those words out as a PostgreSQL `tsvector` literal: one weight per
  column (A title, B tags, C summary, D body) and a gap between columns, so a phrase never
  spans two columns (FTS5 phrases do not either).
- `bm25_idf` and the constants are FTS5's `bm25()`: score = sum over the query's phrases of
  idf x f (k1 + 1) / (f + k1 (1 - b + b |D| / avgdl)), f the phrase's occurrences weighted
  by column, |D| the note's word count (its scope word included), avgdl the mean over all
  notes.
- `scope_word`: the one word of a note's `scope` column in the SQLite index, so FTS5 can
  seek a query word's matches within a scope (`scope: (word) AND (...)`) instead of walking
  them all (docs/search.md, "Filters first"). It counts in the note's length (FTS5 counts
  every word it indexes), so the PostgreSQL store adds `SCOPE_WORDS` to its length too.
"""

from __future__ import annotations

import functools
import json
import math
import sqlite3
import threading
from collections.abc import Sequence
from typing import Final

from memory import _text

TOKENIZER: Final = "porter unicode61 remove_diacritics 2"
COLUMNS: Final = ("title", "tags", "summary", "body")
BM25_WEIGHTS: Final = (10.0, 6.0, 4.0, 1.0)
"""Per column, in `COLUMNS` order: title, tags and summary weigh more than the body."""
SCOPE_WORDS: Final = 1
"""Words of a note's scope column (`scope_word`), part of BM25's document length."""
K1: Final = 1.2
B: Final = 0.75

TSVECTOR_WEIGHTS: Final = "ABCD"
"""The tsvector weight letter of each column, in `COLUMNS` order."""
RANK_SCALE: Final = max(BM25_WEIGHTS)
TS_RANK_CD_WEIGHTS: Final = "{" + ", ".join(repr(w / RANK_SCALE) for w in BM25_WEIGHTS[::-1]) + "}"
"""`ts_rank_cd`'s weights (D, C, B, A order, at most 1): with normalization 0 it returns the
column-weighted count of a phrase's occurrences divided by `RANK_SCALE`."""

MAX_POSITION: Final = 16_383
"""The last position a tsvector tells apart; later words share it."""
MAX_POSITIONS: Final = 256
"""Positions a tsvector keeps per word."""
MAX_LEXEME_BYTES: Final = 2046
TSVECTOR_BUDGET: Final = 700_000
"""Bytes of distinct words kept per note: a tsvector holds at most 1 MB."""


def scope_word(scope: str) -> str:
    """The word standing for a scope in the SQLite index's `scope` column: letters and
    digits only (one token), ending in a digit (nothing for the porter stemmer to cut). A
    note's text never lands in that column, and the column weighs 0 in `bm25()`."""
    import hashlib  # here: OpenSSL's load is ~2.5 ms of every hook process otherwise

    return "zq" + hashlib.sha1(scope.encode("utf-8"), usedforsecurity=False).hexdigest()[:16] + "0"


def fts_columns(title: str, tags: Sequence[str], summary: str, body: str) -> tuple[str, ...]:
    """The text of each FTS column: every CJK character spaced, so each is one word."""
    return tuple(_text.space_cjk(t) for t in (title, " ".join(tags), summary, body))


def fts_columns_json(title: str, tags_json: str, summary: str, body: str) -> tuple[str, ...]:
    """`fts_columns` with the tags as the index stores them (a JSON list)."""
    return fts_columns(title, json.loads(tags_json), summary, body)


def bm25_idf(rows: int, hits: int) -> float:
    """FTS5's IDF of a phrase found in `hits` of `rows` notes (1e-6 when most have it). FTS5
    reads both counts in one snapshot; ours may be read apart while another thread saves
    notes, so `hits` can exceed `rows`: that too is "most have it", not a math error."""
    ratio = (rows - hits + 0.5) / (hits + 0.5)
    idf = math.log(ratio) if ratio > 0.0 else 0.0
    return idf if idf > 0.0 else 1e-6


def bm25_term(idf: float, freq: float, words: float, avgdl: float) -> float:
    """One phrase's part of a note's BM25: `freq` its column-weighted occurrences, `words`
    the note's word count. The C expression's order of operations (PostgreSQL's query keeps
    it too), so the doubles come out as FTS5's."""
    return idf * ((freq * (K1 + 1.0)) / (freq + K1 * ((1 - B) + B * words / avgdl)))


def phrase_freq(score: float, idf: float, words: float, avgdl: float) -> int:
    """A phrase's column-weighted occurrences in a note, from `bm25()` of that phrase alone
    (`score` = -bm25) and the statistics FTS5 scored it with (`bm25_term` solved for
    `freq`). The weights are whole numbers, so is the count: rounding makes it exact."""
    norm = K1 * ((1 - B) + B * words / avgdl)
    room = idf * (K1 + 1.0) - score
    if room <= 0.0:  # statistics read apart while notes were saved (see `bm25_idf`)
        return 1
    return round(score * norm / room)


def varints(blob: bytes) -> list[int]:
    """The numbers of an FTS5 record (SQLite's big-endian varints): a row's word count per
    column (`<table>_docsize.sz`), or the table's row count then its word count per column
    (the averages record, `<table>_data` id 1)."""
    out: list[int] = []
    i = 0
    while i < len(blob):
        value = 0
        for j in range(9):
            byte = blob[i]
            i += 1
            if j == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


class Fts5Tokenizer:
    """SQLite's FTS5 tokenizer as a function: the words of each column, in order.

    One in-memory FTS5 table; each call inserts a row, reads its words back through
    `fts5vocab` and rolls back. Thread-safe (one call at a time; ~0.3 ms for 2 KB of text)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._conn.execute(
            f"CREATE VIRTUAL TABLE words USING fts5({', '.join(COLUMNS)}, tokenize='{TOKENIZER}')"
        )
        self._conn.execute("CREATE VIRTUAL TABLE instances USING fts5vocab(words, 'instance')")
        self._column = {name: i for i, name in enumerate(COLUMNS)}

    def columns(self, values: Sequence[str]) -> list[list[str]]:
        """The words FTS5 indexes for each of up to four column texts (`fts_columns`)."""
        if len(values) > len(COLUMNS):
            raise ValueError(f"at most {len(COLUMNS)} columns, got {len(values)}")
        padded = [*values, *([""] * (len(COLUMNS) - len(values)))]
        placed: list[list[tuple[int, str]]] = [[] for _ in COLUMNS]
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.execute(
                    f"INSERT INTO words (rowid, {', '.join(COLUMNS)}) VALUES (1, ?, ?, ?, ?)",
                    padded,
                )
                rows = self._conn.execute("SELECT term, col, offset FROM instances").fetchall()
            finally:
                self._conn.execute("ROLLBACK")
        for term, col, offset in rows:
            placed[self._column[col]].append((offset, term))
        return [[term for _, term in sorted(words)] for words in placed[: len(values)]]

    def words(self, text: str) -> list[str]:
        """The words of one text, as a query phrase's words (CJK characters spaced first)."""
        return self.columns([_text.space_cjk(text)])[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def quote_lexeme(word: str) -> str:
    """A word as a tsvector/tsquery literal (no normalisation happens on the way in)."""
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def storable(word: str) -> bool:
    return len(word.encode("utf-8")) <= MAX_LEXEME_BYTES


def _lexeme_cost(word: str) -> int | None:
    """Bytes a word takes in a tsvector (with its entry), None when too long for one."""
    size = len(word.encode("utf-8"))
    return None if size > MAX_LEXEME_BYTES else size + 8


def tsvector_text(columns: Sequence[Sequence[str]], extra: Sequence[str] = ()) -> str:
    """A tsvector literal of the words of up to four columns (`Fts5Tokenizer.columns`), each
    word at its position with its column's weight, one empty position between columns; plus
    `extra` words without positions (rjieba's CJK words, matched as one lexeme). Past the
    tsvector's limits (positions, words per note, bytes) the rest shares the last position
    or is left out, as `to_tsvector` does."""
    positions: dict[str, list[str]] = {}
    size = 0
    position = 0
    for weight, words in zip(TSVECTOR_WEIGHTS, columns, strict=False):
        mark = "" if weight == "D" else weight
        for word in words:
            position += 1
            at = positions.get(word)
            if at is None:
                cost = _lexeme_cost(word)
                if cost is None or size + cost > TSVECTOR_BUDGET:
                    continue
                size += cost
                at = positions[word] = []
            if len(at) < MAX_POSITIONS:
                spot = f"{min(position, MAX_POSITION)}{mark}"
                if not at or at[-1] != spot:
                    at.append(spot)
        position += 1
    parts = [f"{quote_lexeme(w)}:{','.join(at)}" for w, at in positions.items()]
    for word in dict.fromkeys(extra):
        cost = None if word in positions else _lexeme_cost(word)
        if cost is not None and size + cost <= TSVECTOR_BUDGET:
            size += cost
            parts.append(quote_lexeme(word))
    return " ".join(parts)


def phrase_query(words: Sequence[str], *, prefix: bool = False) -> str | None:
    """A tsquery literal of a phrase of words (prefix on the last), None for no words."""
    quoted = [quote_lexeme(w) for w in words if storable(w)]
    if not quoted or len(quoted) != len(words):
        return None
    if prefix:
        quoted[-1] += ":*"
    return quoted[0] if len(quoted) == 1 else "( " + " <-> ".join(quoted) + " )"


@functools.cache
def shared_tokenizer() -> Fts5Tokenizer:
    """One tokenizer per process, made on first use."""
    return Fts5Tokenizer()
