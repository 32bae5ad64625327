"""`PostgresMemoryStore`: the memory's notes in PostgreSQL, shared by every app instance.

The `MemoryBackend` twin of `memory.sqlite.store.MemoryStore` (same contract, same suite in
`tests/storage/test_memory_contract.py`). Where the SQLite store keeps markdown files as the
truth and derives an index from them, here the database holds the notes themselves:

* `memory_notes`: one row per note, its fields and raw (sanitized) body kept permanently, plus
  what search derives from them (`search` tsvector, `identifiers` for pg_trgm, MinHash
  `bands`, `content_hash`, `doc_key`), recomputed by `rebuild()`;
* `memory_note_vectors`: vectors per (note, model, chunk) in a pgvector column, with one HNSW
  cosine index per model (`memory_vector_models`); rebuildable from the notes at any time.

The algorithm is the SQLite store's, written once: search orchestration in
`memory.search.engine` (this module answers `SearchQueries`), save, dedup, update and the rest
in `memory.core.StoreCore` (this module answers `SaveQueries`); this module keeps only its SQL
and its lifecycle (pools, migrations, sequences). See docs/postgres.md for what differs (exact
vs HNSW vector search, tsvector limits).

Keyword search matches and ranks as the SQLite index does (`memory.search.fts5`): the `search`
tsvector holds the words SQLite's FTS5 tokenizer makes of each column (it is run to make
them), weighted A-D by column, plus the multi-character rjieba words of the CJK runs; a query
word becomes a phrase of the same words (`连接池` -> `'连' <-> '接' <-> '池' | '连接池'`); and
matches are scored with FTS5's BM25: per phrase, its column-weighted occurrences
(`ts_rank_cd` with normalization 0 counts them), the note's word count (`fts_tokens`), the
mean over all notes and exact document frequencies (counted once per change of the notes).

Writes that could race across instances are made safe in the database: a save holds a
transaction-level advisory lock per scope (duplicate detection then insertion, as the SQLite
store's single writer does), updates lock their row, inserts use `ON CONFLICT`. Change
counters are sequences bumped after commit, so whoever polls `generation()` sees the data.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import hashlib
import json
import logging
import math
import re
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import psycopg
from psycopg import sql

from errors import ClaudeMemoryError, ConfigurationError, InvalidInputError, NotFoundError
from memory import _text, core
from memory._record import record
from memory.config import MemoryConfig
from memory.encoders.models import Encoder
from memory.model import (
    Note,
    NoteDraft,
    SaveResult,
    SearchHit,
    SortKey,
    SyncReport,
)
from memory.notes.files import (
    NOTE_SUFFIX,
    PROFILE_PATH,
    PROFILE_TEXT,
    note_folder,
    parse_note,
    safe_relpath,
)
from memory.search import engine, fts5
from memory.search.filters import Filters, prefilter_most, reader_sql
from memory.search.keyword import (
    HAYSTACK_CHARS,
    Candidate,
    ParsedQuery,
    Term,
    segment,
)
from memory.search.plan import QueryVector, SearchPlan
from memory.search.vectors import PendingNote, VectorStats, chunk_note, doc_key
from storage.postgres import Connection, PostgresDatabase

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

log = logging.getLogger(__name__)

ProgressFn = Callable[[str, int, int], None]

COMPONENT: Final = "memory-notes"
TEXT_VERSION: Final = 5
"""Bump when the derived columns change (tokens, segmentation): `open` recomputes them.
3: dedup keys (`_text.dedup_bands`: skeleton, subject, MinHash of the skeleton).
5: `fts_tokens` counts the scope word of SQLite's index (`fts5.SCOPE_WORDS`)."""
TS_CONFIG: Final = "memory_text"
"""Migration 1's text search configuration; words are made by `memory.search.fts5` since 2."""

# Advisory lock classes, apart from storage/postgres.py's 0x434D_0001 (migrations) and
# 0x434D_0002 (conversation turns).
LOCK_CLASS_MEMORY_SAVE: Final = 0x434D_0003
LOCK_CLASS_VECTOR_MODEL: Final = 0x434D_0004

_WEIGHT_CASE: Final = (
    "CASE x.w "
    + " ".join(
        f"WHEN '{letter}' THEN {int(weight)}"
        for letter, weight in zip(fts5.TSVECTOR_WEIGHTS, fts5.BM25_WEIGHTS, strict=True)
    )
    + " END"
)
"""A tsvector position's weight letter as its column's BM25 weight (title 10 ... body 1)."""

MIGRATIONS: Final[tuple[str, ...]] = (
    # 1: the notes. Text columns that are sorted or compared with ids use the "C" collation:
    # byte order, like SQLite and Python, whatever the database's locale.
    f"""
    CREATE EXTENSION IF NOT EXISTS vector;
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE TEXT SEARCH DICTIONARY memory_english_stem (TEMPLATE = snowball, Language = english);
    CREATE TEXT SEARCH CONFIGURATION {TS_CONFIG} (COPY = pg_catalog.simple);
    ALTER TEXT SEARCH CONFIGURATION {TS_CONFIG}
        ALTER MAPPING FOR asciiword, asciihword, hword_asciipart WITH memory_english_stem;
    CREATE SEQUENCE memory_notes_changed;
    CREATE SEQUENCE memory_notes_generation;
    CREATE SEQUENCE memory_vectors_generation;
    CREATE TABLE memory_notes (
        id TEXT COLLATE "C" PRIMARY KEY,
        path TEXT COLLATE "C" NOT NULL UNIQUE,
        title TEXT NOT NULL,
        type TEXT COLLATE "C" NOT NULL,
        scope TEXT COLLATE "C" NOT NULL,
        tags TEXT[] NOT NULL DEFAULT '{{}}',
        tag_keys TEXT[] NOT NULL DEFAULT '{{}}',
        summary TEXT NOT NULL,
        body TEXT NOT NULL,
        importance DOUBLE PRECISION NOT NULL,
        status TEXT COLLATE "C" NOT NULL
            CHECK (status IN ('active', 'deprecated', 'superseded')),
        superseded_by TEXT,
        created TIMESTAMPTZ NOT NULL,
        updated TIMESTAMPTZ NOT NULL,
        expires_at TIMESTAMPTZ,
        source TEXT,
        extra JSONB NOT NULL DEFAULT '{{}}',
        access_count BIGINT NOT NULL DEFAULT 0,
        content_hash TEXT NOT NULL,
        doc_key TEXT NOT NULL,
        bands BIGINT[] NOT NULL DEFAULT '{{}}',
        identifiers TEXT NOT NULL DEFAULT '',
        search TSVECTOR NOT NULL,
        text_version INTEGER NOT NULL,
        changed BIGINT NOT NULL DEFAULT nextval('memory_notes_changed')
    );
    CREATE INDEX memory_notes_search ON memory_notes USING gin (search);
    CREATE INDEX memory_notes_identifiers ON memory_notes USING gin (identifiers gin_trgm_ops);
    CREATE INDEX memory_notes_tag_keys ON memory_notes USING gin (tag_keys);
    CREATE INDEX memory_notes_bands ON memory_notes USING gin (bands);
    CREATE INDEX memory_notes_content ON memory_notes (scope, content_hash);
    CREATE INDEX memory_notes_updated ON memory_notes (updated DESC, id DESC);
    CREATE INDEX memory_notes_created ON memory_notes (created DESC, id DESC);
    CREATE INDEX memory_notes_importance ON memory_notes (importance DESC, updated DESC);
    CREATE INDEX memory_notes_type ON memory_notes (type);
    CREATE INDEX memory_notes_changed_order ON memory_notes (changed);
    """,
    # 2: vectors, per note, model and chunk. The column has no fixed dimension (models
    # differ), so the HNSW index is one partial expression index per model, created when the
    # model's first vectors arrive (`PostgresNoteVectors._ensure_model`).
    """
    CREATE TABLE memory_vector_models (
        model TEXT COLLATE "C" PRIMARY KEY,
        dim INTEGER NOT NULL CHECK (dim > 0),
        index_name TEXT,
        created TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE TABLE memory_note_vectors (
        note_id TEXT COLLATE "C" NOT NULL REFERENCES memory_notes(id) ON DELETE CASCADE,
        model TEXT COLLATE "C" NOT NULL,
        chunk INTEGER NOT NULL,
        doc_key TEXT NOT NULL,
        embedding vector NOT NULL,
        PRIMARY KEY (note_id, model, chunk)
    );
    CREATE INDEX memory_note_vectors_model ON memory_note_vectors (model, chunk);
    """,
    # 3: searches stay fast after writes (bench/memory_bench.py, docs/postgres.md). A GIN
    # index's pending list is scanned by every search until a vacuum merges it (10k notes:
    # 8 -> 24 ms after 300 saves), so inserts go straight into the indexes; and pages keep
    # room for the access-count update every search makes, so it stays a HOT update (no
    # index entries rewritten; applies to pages written from now on).
    """
    ALTER INDEX memory_notes_search SET (fastupdate = off);
    ALTER INDEX memory_notes_identifiers SET (fastupdate = off);
    ALTER INDEX memory_notes_tag_keys SET (fastupdate = off);
    ALTER INDEX memory_notes_bands SET (fastupdate = off);
    SELECT gin_clean_pending_list(i::regclass) FROM unnest(ARRAY['memory_notes_search',
        'memory_notes_identifiers', 'memory_notes_tag_keys', 'memory_notes_bands']) AS i;
    ALTER TABLE memory_notes SET (fillfactor = 85);
    """,
    # 4: BM25 as FTS5 computes it needs each note's word count (`memory.search.fts5`); text
    # version 2 fills it in and rewrites `search` with FTS5's own words.
    """
    ALTER TABLE memory_notes ADD COLUMN fts_tokens INTEGER NOT NULL DEFAULT 0;
    """,
    # 5: postings, so a common word's newest matches and their BM25 come from one index
    # instead of every match's row (docs/postgres.md, "Where a search's time goes"): per note
    # and word of its `search` tsvector (and per pair of adjacent CJK characters, a Chinese
    # word's phrase), the column-weighted count and the note's length, keyed by the note's
    # `changed`. Kept by a trigger, so every writer (save, update, restore, rebuild, delete)
    # keeps them in its own transaction. And the notes' lengths in an index of their own:
    # BM25's note and word totals read it alone (9 ms at 100k notes, 160-270 reading rows).
    f"""
    CREATE FUNCTION memory_note_terms_of(doc tsvector) RETURNS TABLE (term text, f integer)
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        WITH o AS (
            SELECT u.lexeme, p.pos, p.w
            FROM unnest(doc) u, unnest(u.positions, u.weights) AS p(pos, w)
        )
        SELECT x.term, sum({_WEIGHT_CASE})::integer FROM (
            SELECT o.lexeme AS term, o.w FROM o
            UNION ALL
            SELECT ' ' || a.lexeme || b.lexeme, a.w FROM o a JOIN o b ON b.pos = a.pos + 1
            WHERE length(a.lexeme) = 1 AND length(b.lexeme) = 1
                AND ascii(a.lexeme) > 127 AND ascii(b.lexeme) > 127
        ) x GROUP BY x.term
    $$;
    CREATE TABLE memory_note_terms (
        term TEXT COLLATE "C" NOT NULL,
        changed BIGINT NOT NULL,
        f INTEGER NOT NULL,
        d INTEGER NOT NULL
    );
    INSERT INTO memory_note_terms
        SELECT o.term, n.changed, o.f, n.fts_tokens
        FROM memory_notes n, memory_note_terms_of(n.search) o;
    CREATE INDEX memory_note_terms_window ON memory_note_terms (term, changed DESC)
        INCLUDE (f, d);
    CREATE FUNCTION memory_note_terms_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' THEN
            DELETE FROM memory_note_terms
            WHERE term = ANY(ARRAY(SELECT o.term FROM memory_note_terms_of(OLD.search) o))
                AND changed = OLD.changed;
        END IF;
        IF TG_OP <> 'DELETE' THEN
            INSERT INTO memory_note_terms
                SELECT o.term, NEW.changed, o.f, NEW.fts_tokens
                FROM memory_note_terms_of(NEW.search) o;
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER memory_note_terms AFTER INSERT OR DELETE
        OR UPDATE OF search, changed, fts_tokens ON memory_notes
        FOR EACH ROW EXECUTE FUNCTION memory_note_terms_sync();
    CREATE INDEX memory_notes_lengths ON memory_notes (fts_tokens);
    """,
    # 6: BM25's statistics of the whole table, kept for every instance (`_CorpusCounts`):
    # counting a common word's postings reads all of them (50-230 ms at 1M notes), and each
    # instance, and each restart, counted every word again.
    """
    CREATE TABLE memory_count_cache (
        key TEXT COLLATE "C" PRIMARY KEY,
        counts BIGINT[] NOT NULL,
        generation BIGINT NOT NULL
    );
    """,
)
SCHEMA_VERSION: Final = len(MIGRATIONS)

_EXACT_MAX: Final = 2000
"""A vector search whose filters leave at most this many notes compares their vectors exactly
instead of walking the HNSW graph and dropping what fails the filters."""
_DF_CAP: Final = 5000
_RANK_BODY: Final = HAYSTACK_CHARS + 200
"""Body characters ranking reads (relevance, coverage and snippets look at the first
HAYSTACK_CHARS; the margin keeps a snippet's trailing "…" exact)."""
_SIMILARITY_BODY: Final = _text.SIMILARITY_CHARS * 2
_HNSW_MAX_DIM: Final = 2000
_HNSW_MAX_EF: Final = 1000

_NOTE_COLS: Final = (
    "n.id, n.path, n.title, n.type, n.scope, n.tags, n.summary, n.body, n.importance,"
    " n.status, n.superseded_by, n.created, n.updated, n.expires_at, n.source,"
    " n.access_count, n.extra"
)
_RANK_COLS: Final = _NOTE_COLS.replace("n.body", f"left(n.body, {_RANK_BODY}) AS body")
_SEARCH_VECTOR: Final = "%(search)s::tsvector"
_WRITE_COLS: Final = (
    "id",
    "path",
    "title",
    "type",
    "scope",
    "tags",
    "tag_keys",
    "summary",
    "body",
    "importance",
    "status",
    "superseded_by",
    "created",
    "updated",
    "expires_at",
    "source",
    "extra",
    "access_count",
    "content_hash",
    "doc_key",
    "bands",
    "identifiers",
    "fts_tokens",
    "text_version",
)
_ORDER: Final = {
    "updated": "n.updated DESC, n.id DESC",
    "created": "n.created DESC, n.id DESC",
    "importance": "n.importance DESC, n.updated DESC, n.id DESC",
    "access": "n.access_count DESC, n.updated DESC, n.id DESC",
}


# --- searchable text -------------------------------------------------------------------------

_CJK_RUN_RE = re.compile(f"[{_text.CJK_CHAR}]+")
_CJK_WORD_RE = re.compile(f"[{_text.CJK_CHAR}]{{2,}}")


def cjk_words(text: str) -> list[str]:
    """The multi-character rjieba words of a text's CJK runs (`连接池泄漏` -> `连接池 泄漏`):
    indexed besides the characters so a word matches as one lexeme too, which also holds
    past the 16,383 positions a tsvector can tell apart (phrases need positions)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    words: list[str] = []
    for run in _CJK_RUN_RE.findall(folded):
        if len(run) > 1:
            words.extend(w for w in segment(run) if _CJK_WORD_RE.fullmatch(w))
    return words


@record
class _TermQuery:
    """A query word as tsquery text: `match` finds the notes that have it, `phrase` counts
    its occurrences (`ts_rank_cd`) for BM25; `keys`, its postings (`memory_note_terms`)."""

    match: str
    phrase: str
    keys: tuple[str, ...] = ()
    """The postings every note holding the phrase has, each counting at least the phrase's
    occurrences: the word itself, or a phrase's pairs of CJK characters and its other
    words. Empty for a prefix (its words are not known in advance)."""


def _paired(word: str) -> bool:
    """A word of one non-ASCII character: adjacent ones are paired in the postings (the
    `memory_note_terms_of` rule: `length() = 1 AND ascii() > 127`)."""
    return len(word) == 1 and ord(word) > 127


def posting_keys(words: Sequence[str]) -> tuple[str, ...]:
    """The postings of a phrase of FTS5 words (see `_TermQuery.keys`)."""
    keys: builtins.list[str] = []
    covered: set[int] = set()
    for i in range(len(words) - 1):
        if _paired(words[i]) and _paired(words[i + 1]):
            keys.append(" " + words[i] + words[i + 1])
            covered.update((i, i + 1))
    keys += [w for i, w in enumerate(words) if i not in covered]
    return tuple(dict.fromkeys(keys))


@functools.lru_cache(maxsize=4096)
def term_query(term: Term) -> _TermQuery | None:
    """The word's FTS5 words as a phrase (prefix on the last), or'ed with the word itself
    when it is a CJK word (matched as a lexeme past 16,383 positions). None when FTS5 makes
    no word of it (it matches nothing there either)."""
    # as FTS5 reads `Term.fts`: the quoted text, CJK characters spaced, through the tokenizer
    words = fts5.shared_tokenizer().words(term.text.replace('"', " "))
    phrase = fts5.phrase_query(words, prefix=term.prefix)
    if phrase is None:
        return None
    keys = () if term.prefix else posting_keys(words)
    folded = unicodedata.normalize("NFKC", term.text).casefold()
    if phrase.startswith("(") and _CJK_WORD_RE.fullmatch(folded):
        return _TermQuery(f"( {phrase} | {fts5.quote_lexeme(folded)} )", phrase, keys)
    return _TermQuery(phrase, phrase, keys)


def query_text(parsed: ParsedQuery, *, require_all: bool = False) -> str | None:
    """The tsquery text of a parsed query: words OR-ed (AND-ed with `require_all`), minus
    the excluded ones. None when no word has a token."""
    terms = [q.match for t in parsed.terms if (q := term_query(t)) is not None]
    if not terms:
        return None
    expr = "( " + (" & " if require_all else " | ").join(terms) + " )"
    excluded = [q.match for t in parsed.excluded if (q := term_query(t)) is not None]
    if excluded:
        expr += " & !( " + " | ".join(excluded) + " )"
    return expr


def _like(word: str) -> str:
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _pg_text(value: str) -> str:
    """PostgreSQL text cannot hold NUL: stored as U+FFFD (as the conversation store does)."""
    return value.replace("\x00", "\ufffd")


def _storable(note: Note) -> Note:
    """The note as the database will hold it, before anything is derived from it (hashes of
    the stored text stay the same through a rebuild)."""
    return replace(
        note,
        title=_pg_text(note.title),
        summary=_pg_text(note.summary),
        body=_pg_text(note.body),
        tags=tuple(_pg_text(t) for t in note.tags),
        source=_pg_text(note.source) if note.source else None,
    )


@record
class _Derived:
    """What search needs of a note, computed in Python (tokens, rjieba, hashes)."""

    content_hash: str
    doc_key: str
    bands: tuple[int, ...]
    identifiers: str
    tag_keys: tuple[str, ...]
    search: str
    """The `search` tsvector's text (`memory.search.fts5.tsvector_text`)."""
    fts_tokens: int
    """How many words FTS5 makes of the note: BM25's document length."""


def _derive(note: Note, max_chars: int) -> _Derived:
    body = note.body[:max_chars]
    chash = _text.content_hash(note.body)
    tags = " ".join(note.tags)
    words = fts5.shared_tokenizer().columns(
        fts5.fts_columns(note.title, note.tags, note.summary, body)
    )
    return _Derived(
        content_hash=chash,
        doc_key=doc_key(note.title, note.summary, chash),
        bands=tuple(_text.dedup_bands(note.body)),
        identifiers=_text.latin_tokens(" ".join((note.title, tags, note.summary, body))),
        tag_keys=tuple(dict.fromkeys(t.casefold() for t in note.tags)),
        search=fts5.tsvector_text(words, cjk_words(f"{note.title} {tags} {note.summary} {body}")),
        # plus the scope word the SQLite index holds for each note (`fts5.scope_word`)
        fts_tokens=sum(map(len, words)) + fts5.SCOPE_WORDS,
    )


def _values(note: Note, derived: _Derived) -> dict[str, Any]:
    return {
        "id": note.id,
        "path": _pg_text(note.path),
        "title": _pg_text(note.title),
        "type": note.type,
        "scope": note.scope,
        "tags": [_pg_text(t) for t in note.tags],
        "tag_keys": [_pg_text(t) for t in derived.tag_keys],
        "summary": _pg_text(note.summary),
        "body": _pg_text(note.body),
        "importance": note.importance,
        "status": note.status,
        "superseded_by": note.superseded_by,
        "created": note.created,
        "updated": note.updated,
        "expires_at": note.expires_at,
        "source": _pg_text(note.source) if note.source else None,
        "extra": _json(note.extra),
        "access_count": note.access_count,
        "content_hash": derived.content_hash,
        "doc_key": derived.doc_key,
        "bands": list(derived.bands),
        "identifiers": _pg_text(derived.identifiers),
        "fts_tokens": derived.fts_tokens,
        "text_version": TEXT_VERSION,
        "search": _pg_text(derived.search),
    }


def _json(extra: dict[str, Any]) -> str:
    # jsonb refuses \u0000 as text columns refuse NUL
    return json.dumps(extra, ensure_ascii=False, default=str).replace("\\u0000", "\ufffd")


def _utc(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.astimezone(UTC)


def _note(row: dict[str, Any]) -> Note:
    extra = row["extra"]
    extra = dict(extra) if isinstance(extra, dict) else {}
    return core.note_from_row(
        row, tags=row["tags"], access_count=int(row["access_count"]), extra=extra
    )


def _rank_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row in the shape `memory.search.keyword` ranks (tags as JSON text, `updated_ts`)."""
    out = dict(row)
    out["tags"] = json.dumps(list(row["tags"]), ensure_ascii=False)
    out["updated_ts"] = row["updated"].timestamp()
    return out


def _where(filters: Filters) -> tuple[str, list[Any]]:
    """`memory.sqlite.index.Filters` as a PostgreSQL condition on `memory_notes n`."""
    clauses: list[str] = []
    params: list[Any] = []
    if filters.type:
        clauses.append("n.type = %s")
        params.append(filters.type)
    if filters.scope:
        if filters.scope_includes_user and filters.scope != "user":
            clauses.append("n.scope IN (%s, 'user')")
        else:
            clauses.append("n.scope = %s")
        params.append(filters.scope)
    if filters.tag:
        clauses.append("n.tag_keys @> ARRAY[%s]::text[]")
        params.append(_pg_text(filters.tag.strip().lstrip("#").casefold()))
    if filters.status:
        clauses.append("n.status = %s")
        params.append(filters.status)
    if filters.active_at is not None:
        clauses.append("n.status = 'active' AND (n.expires_at IS NULL OR n.expires_at > %s)")
        params.append(datetime.fromtimestamp(filters.active_at, UTC))
    if filters.reader is not None:
        clause, values = reader_sql(filters.reader, mark="%s")
        clauses.append(clause)
        params.extend(values)
    return (" AND ".join(clauses) or "TRUE"), params


def _listing(filters: Filters, order: SortKey) -> tuple[str, list[Any]]:
    """The notes passing `filters` in `order` (add the LIMIT). A tag's notes are found
    through its GIN index first, then sorted: the planner cannot tell how many notes hold a
    tag its statistics never met (the pinned tag, read by every prompt's brief, which few
    or no notes have), guessed thousands, and walked the whole `updated` index for the
    first 20 of them (1M notes: 1.6 s to find none, 1 ms this way). OFFSET 0 keeps the
    filter planned on its own."""
    where, params = _where(filters)
    source = "memory_notes n"
    if filters.tag:
        source = f"(SELECT * FROM memory_notes n WHERE {where} OFFSET 0) n"
        where = "TRUE"
    return f"SELECT {_NOTE_COLS} FROM {source} WHERE {where} ORDER BY {_ORDER[order]}", params


def _vector_text(vector: Any) -> str:
    """pgvector's text form; float32 values print exactly as Python floats."""
    return "[" + ",".join(map(str, vector.reshape(-1).tolist())) + "]"


# --- vectors ---------------------------------------------------------------------------------


class PostgresNoteVectors:
    """Note vectors in `memory_note_vectors` (a `NoteVectors`), searched through pgvector."""

    def __init__(self, db: PostgresDatabase, *, max_chars: int) -> None:
        self._db = db
        self._max_chars = max_chars
        self._known: dict[str, int] = {}
        """model -> dim of the models whose index exists (checked once per process)."""
        self._lock = threading.Lock()

    # --- reads -------------------------------------------------------------------------------
    def generation(self) -> int:
        return _sequence_value(self._db, "memory_vectors_generation")

    def pending(self, model: str, limit: int | None = None) -> list[PendingNote]:
        """Notes whose vectors for `model` are missing or stale, oldest change first."""
        rows = self._db.fetch(
            "SELECT n.id, n.doc_key, n.title, n.summary, left(n.body, %s) AS body"
            " FROM memory_notes n LEFT JOIN memory_note_vectors v"
            "   ON v.note_id = n.id AND v.model = %s AND v.chunk = 0"
            " WHERE v.doc_key IS DISTINCT FROM n.doc_key ORDER BY n.changed LIMIT %s",
            (self._max_chars, model, limit),
        )
        return [
            PendingNote(
                r["id"], r["doc_key"], tuple(chunk_note(r["title"], r["summary"], r["body"]))
            )
            for r in rows
        ]

    def has_any(self) -> bool:
        return bool(self._db.fetch("SELECT 1 FROM memory_note_vectors LIMIT 1"))

    def models(self) -> dict[str, int]:
        rows = self._db.fetch(
            "SELECT model, count(*) AS notes FROM memory_note_vectors WHERE chunk = 0"
            " GROUP BY model ORDER BY 2 DESC, 1"
        )
        return {r["model"]: int(r["notes"]) for r in rows}

    def has_vectors(self, model: str) -> bool:
        rows = self._db.fetch(
            "SELECT 1 FROM memory_note_vectors WHERE model = %s AND chunk = 0 LIMIT 1", (model,)
        )
        return bool(rows)

    def stats(self, model: str | None) -> VectorStats:
        [row] = self._db.fetch(
            "SELECT (SELECT count(*) FROM memory_notes) AS notes,"
            " (SELECT count(*) FROM memory_notes n JOIN memory_note_vectors v"
            "   ON v.note_id = n.id AND v.model = %s AND v.chunk = 0"
            "   WHERE v.doc_key = n.doc_key) AS embedded,"
            " (SELECT count(DISTINCT note_id) FROM memory_note_vectors) AS have,"
            " (SELECT count(*) FROM memory_note_vectors WHERE model = %s) AS chunks",
            (model, model),
        )
        embedded = int(row["embedded"]) if model else 0
        return VectorStats(
            model=model,
            notes=int(row["notes"]),
            embedded=embedded,
            stale=int(row["have"]) - embedded,
            chunks=int(row["chunks"]) if model else 0,
        )

    # --- writes ------------------------------------------------------------------------------
    def write(
        self,
        model: str,
        items: Sequence[tuple[PendingNote, NDArray[np.float32]]],
        *,
        conn: Connection | None = None,
    ) -> int:
        """Store the vectors of some notes (one row per chunk). Notes deleted or changed
        since `pending()` are skipped; returns how many notes were written. With `conn` (a
        transaction of the caller's) the caller bumps the generation after its commit."""
        if not items:
            return 0
        self.ensure_model(model, int(items[0][1].shape[1]))
        if conn is None:
            with self._db.transaction() as own:
                written = self._write(own, model, items)
            if written:
                self.bump()
            return written
        return self._write(conn, model, items)

    def _write(
        self,
        conn: Connection,
        model: str,
        items: Sequence[tuple[PendingNote, NDArray[np.float32]]],
    ) -> int:
        # Three statements for the whole batch, not three per note (a bulk load of 1M notes
        # spent most of its time in round trips). The row locks, taken in id order (one
        # order for every writer: two instances embedding the same notes never deadlock),
        # make concurrent writers of one note's vectors take turns, and the doc_key check
        # skips a note edited since `pending()` (its next scan redoes it).
        ids = sorted({note.id for note, _ in items})
        current = {
            r["id"]: r["doc_key"]
            for r in conn.execute(
                "SELECT id, doc_key FROM memory_notes WHERE id = ANY(%s)"
                " ORDER BY id FOR NO KEY UPDATE",
                (ids,),
            ).fetchall()
        }
        fresh = {note.id: (note, vectors) for note, vectors in items}
        keep = [fresh[i] for i in ids if i in current and current[i] == fresh[i][0].doc_key]
        if not keep:
            return 0
        conn.execute(
            "DELETE FROM memory_note_vectors WHERE note_id = ANY(%s) AND model = %s",
            ([note.id for note, _ in keep], model),
        )
        with (
            conn.cursor() as cur,
            cur.copy(
                "COPY memory_note_vectors (note_id, model, chunk, doc_key, embedding) FROM STDIN"
            ) as copy,
        ):
            for note, vectors in keep:
                for i in range(vectors.shape[0]):
                    copy.write_row((note.id, model, i, note.doc_key, _vector_text(vectors[i])))
        return len(keep)

    def ensure_model(self, model: str, dim: int) -> None:
        """Register `model` and create its HNSW index the first time its vectors arrive
        (its own transaction, before any write transaction: CREATE INDEX locks the table)."""
        if self._known.get(model) == dim:
            return
        with self._lock, self._db.transaction() as conn:
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (LOCK_CLASS_VECTOR_MODEL, model)
            )
            row = conn.execute(
                "SELECT dim, index_name FROM memory_vector_models WHERE model = %s", (model,)
            ).fetchone()
            if row is not None and int(row["dim"]) != dim:
                # the same name with another size: its old vectors are useless, redo them
                log.warning("encoder %s changed dimension (%s -> %d)", model, row["dim"], dim)
                conn.execute("DELETE FROM memory_note_vectors WHERE model = %s", (model,))
                if row["index_name"]:
                    conn.execute(
                        sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(row["index_name"]))
                    )
                conn.execute("DELETE FROM memory_vector_models WHERE model = %s", (model,))
                row = None
            if row is None:
                name = None
                if dim <= _HNSW_MAX_DIM:  # HNSW on `vector` stops at 2,000 dimensions
                    name = (
                        "memory_note_vectors_hnsw_"
                        + hashlib.sha1(model.encode(), usedforsecurity=False).hexdigest()[:12]
                    )
                    conn.execute(
                        sql.SQL(
                            "CREATE INDEX IF NOT EXISTS {} ON memory_note_vectors"
                            " USING hnsw ((embedding::vector({})) vector_cosine_ops)"
                            " WHERE model = {}"
                        ).format(sql.Identifier(name), sql.SQL(str(int(dim))), sql.Literal(model))
                    )
                else:
                    log.warning("vectors of %s (%d dimensions) are searched exactly", model, dim)
                conn.execute(
                    "INSERT INTO memory_vector_models (model, dim, index_name) VALUES (%s, %s, %s)",
                    (model, dim, name),
                )
        self._known[model] = dim

    def bump(self) -> None:
        _bump(self._db, "memory_vectors_generation")

    def prune(self, model: str | None = None) -> int:
        """Drop the vectors (and indexes) of every model but `model`. Vectors of deleted
        notes go with their notes (foreign key)."""
        if model is None:
            return 0
        with self._lock, self._db.transaction() as conn:
            removed = conn.execute(
                "DELETE FROM memory_note_vectors WHERE model <> %s", (model,)
            ).rowcount
            for row in conn.execute(
                "DELETE FROM memory_vector_models WHERE model <> %s RETURNING index_name", (model,)
            ).fetchall():
                if row["index_name"]:
                    conn.execute(
                        sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(row["index_name"]))
                    )
            self._known = {m: d for m, d in self._known.items() if m == model}
        if removed:
            self.bump()
        return int(removed)

    def clear(self) -> None:
        with self._db.connection() as conn:
            conn.execute("DELETE FROM memory_note_vectors")
        self.bump()

    # --- search ------------------------------------------------------------------------------
    def search(
        self,
        model: str,
        query: NDArray[np.float32],
        k: int,
        *,
        allowed: Callable[[Connection, list[str]], set[str]] | None = None,
        subset: Callable[[Connection, int], list[str] | None] | None = None,
        conn: Connection | None = None,
    ) -> list[tuple[str, float]]:
        """The `k` notes whose best chunk is nearest to `query` by cosine: [(id, cosine)],
        best first. `allowed(conn, ids)` filters candidates; when it drops too many, the scan
        widens (HNSW while it can, then exact) until `k` pass or every chunk was seen.

        Filters first: `subset(conn, most)` returns the ids that pass the filters when there
        are at most `most` of them (else None); then only their vectors are compared, exactly
        (what the widening scan ends with when few notes pass)."""
        if k <= 0:
            return []
        with contextlib.ExitStack() as stack:
            if conn is None:
                conn = stack.enter_context(self._db.transaction())
            row = conn.execute(
                "SELECT dim, index_name FROM memory_vector_models WHERE model = %s", (model,)
            ).fetchone()
            if row is None or int(row["dim"]) != int(query.shape[-1]):
                return []
            dim = int(row["dim"])
            text = _vector_text(query)
            within = subset(conn, _EXACT_MAX) if subset is not None else None
            if within is not None:
                return self._nearest_within(conn, model, dim, text, k, within)
            want = max(k * 2, 32)
            while True:
                exact = row["index_name"] is None or want > _HNSW_MAX_EF
                if not exact:
                    # HNSW returns at most ef_search rows; the setting ends with the transaction
                    conn.execute(
                        "SELECT set_config('hnsw.ef_search', %s, true)", (str(max(want, 40)),)
                    )
                cast = sql.SQL("embedding") if exact else sql.SQL(f"embedding::vector({dim})")
                found = conn.execute(
                    sql.SQL(
                        "SELECT note_id, {cast} <=> %(q)s::vector({dim}) AS distance"
                        " FROM memory_note_vectors WHERE model = {model}"
                        " ORDER BY {cast} <=> %(q)s::vector({dim}) LIMIT %(want)s"
                    ).format(cast=cast, dim=sql.SQL(str(dim)), model=sql.Literal(model)),
                    {"q": text, "want": want},
                ).fetchall()
                best: dict[str, float] = {}
                for r in found:
                    distance = float(r["distance"])
                    if not math.isnan(distance) and r["note_id"] not in best:  # zero vectors
                        best[r["note_id"]] = 1.0 - distance
                ids = list(best)
                if allowed is not None and ids:
                    keep = allowed(conn, ids)
                    ids = [i for i in ids if i in keep]
                if len(ids) >= k or len(found) < want:
                    return [(i, best[i]) for i in ids[:k]]
                want *= 4

    @staticmethod
    def _nearest_within(
        conn: Connection, model: str, dim: int, text: str, k: int, within: list[str]
    ) -> list[tuple[str, float]]:
        """The `k` notes of `within` nearest to the query vector `text`, compared exactly."""
        if not within:
            return []
        found = conn.execute(
            sql.SQL(
                "SELECT note_id, embedding <=> %(q)s::vector({dim}) AS distance"
                " FROM memory_note_vectors WHERE model = %(model)s AND note_id = ANY(%(ids)s)"
                " ORDER BY distance, note_id, chunk"
            ).format(dim=sql.SQL(str(dim))),
            {"q": text, "model": model, "ids": within},
        ).fetchall()
        best: dict[str, float] = {}
        for r in found:
            distance = float(r["distance"])
            if not math.isnan(distance) and r["note_id"] not in best:  # zero vectors
                best[r["note_id"]] = 1.0 - distance
                if len(best) >= k:
                    break
        return list(best.items())


def _sequence_value(db: PostgresDatabase, name: str) -> int:
    # a sequence's last value is global (any session's nextval), outside transactions
    [row] = db.fetch(f"SELECT last_value, is_called FROM {name}")
    return int(row["last_value"]) if row["is_called"] else 0


def _bump(db: PostgresDatabase, name: str, by: int = 1) -> None:
    # after the commit of what changed: a poller that sees the new value sees the data too
    if by <= 1:
        db.fetch("SELECT nextval(%s)", (name,))
    else:  # as many as the notes written (`SLACK_SHARE`)
        db.fetch("SELECT setval(%s, nextval(%s) + %s)", (name, name, by - 1))


# --- the store -------------------------------------------------------------------------------


class _CorpusCounts:
    """How many notes and words there are, and how many notes have each phrase: BM25's
    statistics, kept until the notes change (the shared generation counter, bumped by any
    instance's write), since common words come back in most searches and counting one
    reads every note that has it. `refresh` once per search, then ask.

    `stats` (`Filters.statistics`): the notes counted, those of a filter that leaves few
    (a scope then ranks as in a home holding it alone), or None, the whole table. A phrase
    is counted among them by reading theirs (the filter's index, the match checked on
    each), not through the `search` GIN index's list of every note holding the phrase: in
    a 10k home, 0.2 ms a word against 10 for the whole table's count."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = -1
        self._counts: dict[str, tuple[int, ...]] = {}
        self._whole: dict[str, tuple[int, tuple[int, ...]]] = {}
        """Counts over the whole table: key -> (generation counted at, counts), kept across
        changes while the notes changed since are at most `_slack` (`SLACK_SHARE`)."""
        self._slack = 0
        self._sized = False
        """Whether the notes were counted once: until then the kept counts may apply."""
        self._made: dict[str, tuple[int, tuple[int, ...]]] = {}
        """Whole-table counts this instance made, for `memory_count_cache` (`keep`)."""

    def refresh(self, conn: Connection) -> None:
        """Forget the counts when the notes changed since they were made. Also sets the
        search transaction's planner settings (`_SEARCH_SETTINGS`), in the same round trip."""
        [row] = conn.execute(
            f"SELECT {_SEARCH_SETTINGS} last_value, is_called FROM memory_notes_generation"
        ).fetchall()
        generation = int(row["last_value"]) if row["is_called"] else 0
        with self._lock:
            if self._generation != generation:
                self._counts.clear()
                self._generation = generation

    def _get(
        self,
        conn: Connection,
        key: str,
        sql: str,
        params: tuple[object, ...] = (),
        *,
        whole: bool = False,
    ) -> tuple[int, ...]:
        with self._lock:
            generation, known = self._generation, self._counts.get(key)
            kept = self._whole.get(key) if whole and known is None else None
            if kept is not None and 0 <= generation - kept[0] <= self._slack:
                known = kept[1]
        if known is not None:
            return known
        counted_at, made = generation, False
        # kept counts apply to a large table only: a small one never reads them (nor keeps any)
        if whole and (self._slack or (key == "" and not self._sized)):
            known, counted_at = self._kept(conn, key, generation)
        if known is None:
            found = conn.execute(sql, params).fetchone()
            known = tuple(int(v or 0) for v in found.values()) if found else (0,)
            made = True
        with self._lock:
            if self._generation == generation:
                if len(self._counts) >= 4096:
                    self._counts.clear()
                self._counts[key] = known
                if whole:
                    if len(self._whole) >= 4096:
                        self._whole.clear()
                    self._whole[key] = (counted_at, known)
                    if key == "":  # the notes: how far the whole table's counts may lag
                        self._slack, self._sized = _slack(known[0]), True
                    if made and self._slack:  # a large table: worth keeping for all
                        self._made[key] = (generation, known)
        return known

    def _kept(
        self, conn: Connection, key: str, generation: int
    ) -> tuple[tuple[int, ...] | None, int]:
        """Counts another instance (or this one before a restart) made and kept in
        `memory_count_cache`, while still within the slack: (counts or None, made at)."""
        row = conn.execute(
            "SELECT counts, generation FROM memory_count_cache WHERE key = %s", (_pg_text(key),)
        ).fetchone()
        if row is None:
            return None, generation
        counts, made = tuple(int(v) for v in row["counts"]), int(row["generation"])
        slack = _slack(counts[0]) if key == "" else self._slack
        if slack and 0 <= generation - made <= slack:
            return counts, made
        return None, generation

    def keep(self, db: PostgresDatabase) -> None:
        """Store the whole-table counts this instance made since the last call, for every
        instance: after the search's transaction (its row locks), in key order (two
        instances keeping the same words never deadlock), the newest kept."""
        with self._lock:
            made, self._made = self._made, {}
        if not made:
            return
        rows = sorted((_pg_text(key), list(counts), at) for key, (at, counts) in made.items())
        with db.transaction() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memory_count_cache (key, counts, generation) VALUES (%s, %s, %s)"
                " ON CONFLICT (key) DO UPDATE SET counts = excluded.counts,"
                " generation = excluded.generation"
                " WHERE memory_count_cache.generation < excluded.generation",
                rows,
            )

    def corpus(self, conn: Connection, stats: Filters | None = None) -> tuple[int, int]:
        """(notes, words FTS5 makes of them all)."""
        where, params = _where(stats) if stats is not None else ("TRUE", [])
        notes, words = self._get(
            conn,
            _stats_key(stats, ""),
            f"SELECT count(*) AS n, sum(n.fts_tokens) AS words FROM memory_notes n WHERE {where}",
            tuple(params),
            whole=stats is None,
        )
        return notes, words

    def postings(self, conn: Connection, key: str) -> int:
        """Notes holding a postings key (`memory_note_terms`), in the whole table, counted
        up to just over half the notes: from there on FTS5's IDF is its floor (1e-6,
        `fts5.bm25_idf`) whatever the count, and the engine's own weights stop at `DF_CAP`,
        while counting a word every note holds read 1M postings (989 ms at 1M notes)."""
        most = self.corpus(conn)[0] // 2 + 1
        sql = (
            "SELECT count(*) AS n FROM (SELECT 1 FROM memory_note_terms WHERE term = %s LIMIT %s) x"
        )
        return self._get(conn, "\x01" + key, sql, (key, most), whole=True)[0]

    def hits(self, conn: Connection, tsquery: str, stats: Filters | None = None) -> int:
        """Notes matching a tsquery (exactly, as FTS5 counts a phrase's rows)."""
        where, params = _where(stats) if stats is not None else ("TRUE", [])
        few = stats is not None
        sql = f"SELECT count(*) AS n FROM memory_notes n WHERE {_matches(few)} AND {where}"
        key = _stats_key(stats, tsquery)
        return self._get(conn, key, sql, (_pg_text(tsquery), *params), whole=stats is None)[0]


_SEARCH_SETTINGS: Final = (
    "set_config('enable_seqscan', 'off', true) AS seqscan,"
    " set_config('work_mem', '32MB', true) AS work_mem,"
    " set_config('synchronous_commit', 'off', true) AS sync,"
    " set_config('plan_cache_mode', 'force_custom_plan', true) AS plans,"
)
"""A search transaction's settings (they end with it). No sequential scan: the planner prices a
tsquery match like a comparison, so for a word in a quarter of the notes it read every note
and matched each (100k notes: every row's tsvector), where the `search` GIN index lists the
matches at once. Room to sort the newest matches in memory (the default 4MB sorted 27k
matches on disk). And a commit that does not wait for the disk: a search writes only its
hits' access counts, which a crash may lose (the last moment's, never a note), while every
search waited for a WAL flush before answering, and held its hits' row locks meanwhile. psycopg
prepares a statement run five times on a connection; a generic plan of a prepared search knows
neither the words (how many notes hold them) nor the query's constants (`%s::tsquery` parsed
again on every row ranked), so each search gets a plan of its own values."""


def _slack(notes: int) -> int:
    """How many notes may change before whole-table counts over `notes` notes are made
    again (`SLACK_SHARE`); 0: exact."""
    return notes // SLACK_SHARE if notes >= SLACK_MIN else 0


SLACK_MIN: Final = 10_000
SLACK_SHARE: Final = 1000
"""From `SLACK_MIN` notes on, the whole table's counts (notes, words, notes holding each
phrase) are kept until `notes / SLACK_SHARE` notes changed (100 at 100k), not recounted after
every save: with several users saving, every search recounted them (a common word's count reads
a quarter of the notes: tens of ms at 100k), and a thousandth of the notes moves BM25's
statistics by about a thousandth. The generation counts notes changed: a save moves it by one,
`restore` and `rebuild` by as many notes as they wrote. Smaller stores, and the counts of a
scope's few notes, stay exact (the same doubles as SQLite's FTS5)."""


@record
class _Scoring:
    """The exact BM25 of a keyword statement: each word's count (`freqs`, `ts_rank_cd` of its
    `phrases`) and term (`terms`, with six `factors` each: idf, k1 + 1, k1, 1 - b, b, avgdl)."""

    freqs: builtins.list[str]
    terms: builtins.list[str]
    phrases: builtins.list[str]
    factors: builtins.list[float]


def _stats_key(stats: Filters | None, tsquery: str) -> str:
    return f"{tsquery}\x00{stats!r}" if stats is not None else tsquery


def _matches(few: bool) -> str:
    """A note matching the tsquery parameter. With `few` (the filters leave few notes) an
    expression the `search` GIN index cannot answer, so the planner reads the filtered notes
    through their own index and checks each, instead of intersecting the word's whole list
    of notes with them (1.3 vs 0.35 ms a query for a scope of 100 notes in a 10k home)."""
    return "(n.search @@ %s::tsquery) IS TRUE" if few else "n.search @@ %s::tsquery"


class PostgresMemoryStore(core.StoreCore):
    """The memory in PostgreSQL. Open with `PostgresMemoryStore.open(db, config)`; the
    database (its pools) belongs to the caller, who closes it after the store."""

    vectors: PostgresNoteVectors

    def __init__(
        self,
        db: PostgresDatabase,
        config: MemoryConfig,
        *,
        clock: Callable[[], datetime] | None = None,
        encoder: Encoder | None = None,
    ) -> None:
        self._init_core(config, clock, encoder)
        self._db = db
        self.vectors = PostgresNoteVectors(db, max_chars=config.max_indexed_chars)
        self._closed = False
        self._corpus = _CorpusCounts()
        self._on_close: builtins.list[Callable[[], None]] = []

    # --- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        db: PostgresDatabase,
        config: MemoryConfig,
        *,
        clock: Callable[[], datetime] | None = None,
        encoder: Encoder | None = None,
    ) -> PostgresMemoryStore:
        """Migrate the schema, add the profile skeleton if missing, and bring derived columns
        written by an older version up to date."""
        try:
            db.migrate(COMPONENT, MIGRATIONS)
        except (
            psycopg.errors.UndefinedFile,
            psycopg.errors.FeatureNotSupported,
            psycopg.errors.InsufficientPrivilege,
        ) as exc:
            raise ConfigurationError(
                f"the memory on PostgreSQL needs the vector (pgvector) and pg_trgm extensions "
                f"in {db.where}: install pgvector on the server and let this user create them "
                f"(or run CREATE EXTENSION vector; CREATE EXTENSION pg_trgm as an admin): {exc}"
            ) from exc
        store = cls(db, config, clock=clock, encoder=encoder)
        store._seed_profile()
        [row] = db.fetch(
            "SELECT count(*) AS stale FROM memory_notes WHERE text_version <> %s", (TEXT_VERSION,)
        )
        if row["stale"]:
            log.info("memory text format changed; recomputing %d notes", row["stale"])
            store._rederive(only_stale=True)
        return store

    def close_with(self, release: Callable[[], None]) -> None:
        """Call `release` on close (a pool opened for this store alone)."""
        self._on_close.append(release)

    def close(self) -> None:
        """Stop the query-encoding threads; the pools stay open for their owner (unless one
        was handed to `close_with`)."""
        if self._closed:
            return
        self._closed = True
        self._query_vectors.close()
        while self._on_close:
            self._on_close.pop()()

    def _check_open(self) -> None:
        if self._closed:
            raise ClaudeMemoryError("the memory store is closed; open it again")

    @contextlib.contextmanager
    def _conn(self) -> Iterator[Connection]:
        self._check_open()
        with self._db.connection() as conn:
            yield conn

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Connection]:
        self._check_open()
        with self._db.transaction() as conn:
            yield conn

    def generation(self) -> tuple[int, int]:
        """(notes, vectors) change counters, shared by every instance on the database."""
        self._check_open()
        return (_sequence_value(self._db, "memory_notes_generation"), self.vectors.generation())

    def _bump_notes(self, notes: int = 1) -> None:
        _bump(self._db, "memory_notes_generation", notes)

    def _seed_profile(self) -> None:
        """The profile skeleton every memory starts with (the SQLite store's `user/profile.md`,
        re-created whenever it is missing, as `ensure_memory_layout` does)."""
        parsed = parse_note(PROFILE_TEXT.encode("utf-8"), PROFILE_PATH, time.time())
        note = parsed.note
        values = _values(note, _derive(note, self.config.max_indexed_chars))
        with self._conn() as conn:
            row = conn.execute(_insert_sql(), values).fetchone()
        if row is not None:
            self._bump_notes()

    # --- writes ------------------------------------------------------------------------------

    def restore(self, notes: Iterable[Note], *, batch: int = 500) -> int:
        """Insert notes exactly as they are (ids, paths, dates, status, access counts): for
        moving a home here (`memory migrate`). No redaction or dedup: they passed both when
        first saved. A note already here under the same id or path is replaced (the profile
        skeleton every store starts with). Returns how many were written."""
        self._check_open()
        written = 0
        chunk: builtins.list[Note] = []

        def flush() -> int:
            stored = _last_of_each([_storable(n) for n in chunk])
            rows = [_values(n, _derive(n, self.config.max_indexed_chars)) for n in stored]
            count = 0
            # two round trips a batch (a bulk load of 1M notes spent most of its time in
            # them): the replaced notes go at once, then the inserts as one pipeline
            with self._tx() as conn, conn.cursor() as cur:
                cur.execute(
                    "DELETE FROM memory_notes WHERE id = ANY(%s) OR path = ANY(%s)",
                    ([v["id"] for v in rows], [v["path"] for v in rows]),
                )
                cur.executemany(_insert_sql(), rows, returning=True)
                while True:
                    count += cur.fetchone() is not None
                    if not cur.nextset():
                        break
            chunk.clear()
            return count

        for note in notes:
            chunk.append(note)
            if len(chunk) >= batch:
                written += flush()
        if chunk:
            written += flush()
        self._bump_notes(written)
        return written

    def _save(self, draft: NoteDraft) -> SaveResult:
        """Write a new note, or refresh the existing one if it is an (exact or near) duplicate
        of an active note of the same scope (`memory.core.save_locked`). Text is sanitized
        first."""
        self._check_open()
        now = self._now()
        note, _ = core.draft_note(draft, now, self.config.max_note_bytes, _storable)
        wanted = safe_relpath(draft.path) if draft.path else None
        derived = _derive(note, self.config.max_indexed_chars)  # outside the lock: rjieba
        with self._tx() as conn:
            # One writer per scope: duplicate detection and insertion are one step, as under
            # the SQLite store's write lock, so two instances never both add the same note.
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                (LOCK_CLASS_MEMORY_SAVE, note.scope),
            )
            result = core.save_locked(
                _SaveQueries(self, conn, derived, wanted, note.scope, now),
                draft,
                note,
                content_hash=derived.content_hash,
                bands=list(derived.bands),
                threshold=self.config.dedup_threshold,
                now=now,
            )
        self._bump_notes()
        return result

    def _insert(self, conn: Connection, note: Note, derived: _Derived, wanted: str | None) -> Note:
        """Insert under the wanted path when free, else `<folder>/<date>-<slug>-<id tail>.md`
        (numbered when taken), like the SQLite store names its files."""
        folder = note_folder(note.type, note.scope)
        stem = f"{note.created:%Y%m%d}-{_text.slugify(note.title)}-{note.id[-6:]}"
        paths = [wanted] if wanted else []
        paths += [f"{folder}/{stem}{'' if n == 0 else f'-{n}'}{NOTE_SUFFIX}" for n in range(100)]
        for path in paths:
            placed = replace(note, path=path)
            if conn.execute(_insert_sql(), _values(placed, derived)).fetchone() is not None:
                return placed
            if _exists(conn, note.id):  # the same id, inserted meanwhile by a draft with an id
                raise InvalidInputError(f"a note with id {note.id!r} already exists")
        raise InvalidInputError(f"no free path for {stem!r} in {folder!r}")  # pragma: no cover

    def get(self, note_id: str) -> Note:
        """The full note (raises NotFoundError)."""
        _check_id(note_id)
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {_NOTE_COLS} FROM memory_notes n WHERE n.id = %s", (note_id,)
            ).fetchone()
        if row is None:
            raise NotFoundError("note", note_id)
        return _note(row)

    def _update(
        self, note_id: str, clean: dict[str, Any], extra: dict[str, Any] | None = None
    ) -> Note:
        _check_id(note_id)
        with self._tx() as conn:
            row = conn.execute(
                f"SELECT {_NOTE_COLS} FROM memory_notes n WHERE n.id = %s FOR UPDATE", (note_id,)
            ).fetchone()
            if row is None:
                raise NotFoundError("note", note_id)
            old = _note(row)
            changes = core.changed(old, {**clean, "updated": self._now()}, old.path, extra=extra)
            note = _storable(replace(old, **changes))
            values = _values(note, _derive(note, self.config.max_indexed_chars))
            assignments = ", ".join(f"{c} = %({c})s" for c in _WRITE_COLS if c != "id")
            conn.execute(
                f"UPDATE memory_notes SET {assignments}, search = {_SEARCH_VECTOR},"
                " changed = nextval('memory_notes_changed') WHERE id = %(id)s",
                values,
            )
        self._bump_notes()
        return note

    def _delete(self, note_id: str) -> None:
        """Delete the note and its vectors (raises NotFoundError)."""
        _check_id(note_id)
        with self._conn() as conn:
            row = conn.execute(
                "DELETE FROM memory_notes WHERE id = %s RETURNING id", (note_id,)
            ).fetchone()
        if row is None:
            raise NotFoundError("note", note_id)
        self._bump_notes()

    def record_access(self, ids: Sequence[str]) -> None:
        self._check_open()
        if ids:
            with self._tx() as conn:
                _SearchQueries(self, conn, Filters()).record_access(list(ids))

    def flush_access_counts(self) -> int:
        """Access counts are written by every search already: nothing waits."""
        self._check_open()
        return 0

    def rebuild(self, progress: ProgressFn | None = None) -> SyncReport:
        """Recompute every note's derived columns (tokens, hashes, bands) from its stored
        text: after a change of segmentation, or to be sure. Vectors stay (same text)."""
        return self._rederive(progress=progress)

    def _rederive(
        self, *, only_stale: bool = False, progress: ProgressFn | None = None
    ) -> SyncReport:
        started = time.perf_counter()
        where = "WHERE text_version <> %s" if only_stale else ""
        with self._conn() as conn:
            ids = [
                r["id"]
                for r in conn.execute(
                    f"SELECT id FROM memory_notes {where} ORDER BY id",
                    (TEXT_VERSION,) if only_stale else (),
                )
            ]
        total = len(ids)
        if progress:
            progress("index", 0, total)
        assignments = ", ".join(f"{c} = %({c})s" for c in _WRITE_COLS if c != "id")
        for start in range(0, total, 200):
            part = ids[start : start + 200]
            with self._tx() as conn:
                # locked while recomputed: an update meanwhile must not be undone
                rows = conn.execute(
                    f"SELECT {_NOTE_COLS} FROM memory_notes n WHERE n.id = ANY(%s)"
                    " ORDER BY n.id FOR UPDATE",
                    (part,),
                ).fetchall()
                batch = []
                for row in rows:
                    note = _note(row)
                    batch.append(_values(note, _derive(note, self.config.max_indexed_chars)))
                with conn.cursor() as cur:
                    cur.executemany(
                        f"UPDATE memory_notes SET {assignments}, search = {_SEARCH_VECTOR}"
                        " WHERE id = %(id)s",
                        batch,
                    )
            if progress:
                progress("index", min(start + 200, total), total)
        self._bump_notes(total)
        return SyncReport(added=total, seconds=time.perf_counter() - started)

    # --- reads -------------------------------------------------------------------------------

    def _list(
        self, filters: Filters, sort: SortKey, limit: int, offset: int
    ) -> builtins.list[Note]:
        listing, params = _listing(filters, sort)
        with self._conn() as conn:
            rows = conn.execute(
                f"{listing} LIMIT %s OFFSET %s", (*params, limit, offset)
            ).fetchall()
        return [_note(r) for r in rows]

    def _count(self, filters: Filters) -> int:
        where, params = _where(filters)
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT count(*) AS n FROM memory_notes n WHERE {where}", params
            ).fetchone()
        return int(row["n"]) if row else 0

    def iter_notes(self) -> Iterator[Note]:
        """Every note in full, in path order (for export), streamed from the server."""
        with self._tx() as conn, conn.cursor(name="memory_iter_notes") as cur:
            cur.itersize = 200
            cur.execute(f"SELECT {_NOTE_COLS} FROM memory_notes n ORDER BY n.path")
            for row in cur:
                yield _note(row)

    def _top_rows(
        self, filters: Filters, order: SortKey, limit: int
    ) -> builtins.list[tuple[dict[str, Any], Note]]:
        listing, params = _listing(filters, order)
        with self._conn() as conn:
            rows = conn.execute(f"{listing} LIMIT %s", (*params, limit)).fetchall()
        return [(_rank_row(r), _note(r)) for r in rows]

    def _counts(self, now: datetime) -> core.Counts:
        with self._conn() as conn:

            def grouped(column: str) -> dict[str, int]:
                rows = conn.execute(
                    f"SELECT {column} AS k, count(*) AS n FROM memory_notes"
                    f" GROUP BY {column} ORDER BY {column}"
                ).fetchall()
                return {r["k"]: int(r["n"]) for r in rows}

            row = conn.execute(
                "SELECT (SELECT count(*) FROM memory_notes) AS total,"
                " (SELECT count(*) FROM memory_notes WHERE expires_at <= %s) AS expired",
                (now,),
            ).fetchone()
            assert row is not None
            # access counts are written by the search itself, and notes are rows: nothing
            # pending, nothing to parse
            return core.Counts(
                total=int(row["total"]),
                by_type=grouped("type"),
                by_scope=grouped("scope"),
                by_status=grouped("status"),
                expired=int(row["expired"]),
            )

    def _index_stats(self) -> tuple[str, dict[str, Any]]:
        [row] = self._db.fetch(
            "SELECT pg_total_relation_size('memory_notes')"
            "   + pg_total_relation_size('memory_note_vectors') AS size,"
            " current_setting('server_version') AS server"
        )
        return self._db.where, {
            "path": self._db.where,
            "size_bytes": int(row["size"]),
            "schema_version": SCHEMA_VERSION,
            "text_version": TEXT_VERSION,
            "postgresql_version": row["server"],
            "keyword": (
                f"tsvector of FTS5's words ({fts5.TOKENIZER}; CJK per character"
                " + rjieba words), FTS5 BM25 + pg_trgm; query: rjieba"
            ),
            "last_sync": SyncReport().to_dict(),
        }

    # --- search (the algorithm: memory.search.engine) ------------------------------------------

    def _ranked_hits(
        self, plan: SearchPlan, filters: Filters, limit: int, now_ts: float, record: bool
    ) -> builtins.list[SearchHit]:
        with self.search_queries(filters) as queries:
            weights = self.config.ranking
            ranked = engine.rank(
                queries, plan, filters, limit, now_ts, weights=weights, fusion=self.fusion
            )
            if record and ranked:
                queries.record_access([s.row["id"] for s in ranked])
        return engine.hits(ranked, plan.parsed)

    @contextlib.contextmanager
    def search_queries(self, filters: Filters) -> Iterator[_SearchQueries]:
        """What the search engine asks of this database, for a search under `filters`: one
        transaction (the vector search's HNSW setting lasts until its end)."""
        with self._tx() as conn:
            self._corpus.refresh(conn)
            yield _SearchQueries(self, conn, filters)
        self._corpus.keep(self._db)

    def _fts_rows(
        self,
        conn: Connection,
        parsed: ParsedQuery,
        filters: Filters,
        limit: int,
        cap: int,
        *,
        require_all: bool = False,
        stats: Filters | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """Best BM25 matches among the most recently changed `cap` matching notes, scored as
        FTS5's `bm25()` scores them (`memory.search.fts5`) with the statistics of the notes
        of `stats` (`Filters.statistics`: the filters leave few notes, `_matches` reads
        theirs) or of the whole table (None); ties in id order, as the SQLite index."""
        tsquery = query_text(parsed, require_all=require_all)
        if tsquery is None:
            return []
        few = stats is not None
        notes, words = self._corpus.corpus(conn, stats)
        avgdl = float(words) / float(max(notes, 1))
        freqs: builtins.list[str] = []
        terms: builtins.list[str] = []
        phrases: builtins.list[str] = []
        factors: builtins.list[float] = []
        used: builtins.list[_TermQuery] = []
        for term in parsed.terms:
            query = term_query(term)
            if query is None:
                continue  # FTS5 makes no word of it: it adds nothing to any score
            i = len(freqs)
            freqs.append(
                f"round(ts_rank_cd('{fts5.TS_RANK_CD_WEIGHTS}'::float4[], m.search,"
                f" %s::tsquery, 0)::float8 * {fts5.RANK_SCALE}) AS f{i}"
            )
            phrases.append(_pg_text(query.phrase))
            # the C expression's order of operations, so the doubles come out the same
            terms.append(f"%s * ((f{i} * %s) / (f{i} + %s * (%s + %s * d / %s)))")
            idf = fts5.bm25_idf(notes, self._word_notes(conn, query, stats))
            factors += [idf, fts5.K1 + 1.0, fts5.K1, 1 - fts5.B, fts5.B, avgdl]
            used.append(query)
        if not terms:
            return []
        where, where_params = _where(filters)
        if not few and all(q.keys for q in used):
            scoring = _Scoring(freqs, terms, phrases, factors)
            return self._window_rows(
                conn, tsquery, used, scoring, filters, limit, cap, require_all=require_all
            )
        rows = conn.execute(
            # the newest matches by their row address alone (a small sort), then their words.
            # `changed + 0`: ordered by the `changed` index, the planner walked every note from
            # the newest, matching each (the LIMIT looked near), instead of the GIN index's list
            f"WITH t AS (SELECT n.ctid AS t FROM memory_notes n"
            f"   WHERE {_matches(few)} AND {where} ORDER BY n.changed + 0 DESC LIMIT %s),"
            f" m AS (SELECT n.id, n.search, n.fts_tokens FROM memory_notes n"
            f"   WHERE n.ctid = ANY(ARRAY(SELECT t.t FROM t))),"
            # materialized: inlined, each word's count was computed twice
            f" f AS MATERIALIZED (SELECT m.id, m.fts_tokens::float8 AS d, {', '.join(freqs)}"
            f"   FROM m),"
            f" r AS (SELECT f.id, {' + '.join(terms)} AS score FROM f"
            f"   ORDER BY score DESC, f.id LIMIT %s)"
            f" SELECT {_RANK_COLS}, r.score FROM r JOIN memory_notes n ON n.id = r.id"
            f" ORDER BY r.score DESC, n.id",
            (
                _pg_text(tsquery),
                *where_params,
                cap if cap > 0 else None,
                *phrases,
                *factors,
                limit,
            ),
        ).fetchall()
        return [_rank_row(r) for r in rows]

    def _window_rows(
        self,
        conn: Connection,
        tsquery: str,
        used: builtins.list[_TermQuery],
        scoring: _Scoring,
        filters: Filters,
        limit: int,
        cap: int,
        *,
        require_all: bool,
    ) -> builtins.list[dict[str, Any]]:
        """`_fts_rows` from the postings (`memory_note_terms`, migration 5).

        Each word's newest `cap` postings (of its rarest key: the word itself, or the rarest
        CHARACTER pair of a Chinese word) are read from one index, with their note's count
        and length, without reading a note: summed per note, they bound its BM25 from above
        (a pair or a word occurs at least as often as the phrase holding it). Only the best
        `wanted` notes by that bound are read and scored exactly (`ts_rank_cd`, the match and
        the filters checked on each); when the `limit`-th exact score is not above the bound
        of the notes left out, `wanted` grows and the statement runs again. So the result is
        the exact BM25 ranking of the notes in the words' windows: every match while a word
        has at most `cap` notes, its newest `cap` beyond (docs/search.md). With
        `require_all`, the notes in every word's window."""
        windows: builtins.list[str] = []
        params: builtins.list[object] = []
        for i, query in enumerate(used):
            windows.append(
                "(SELECT p.changed, %s * ((p.f::float8 * %s) / (p.f + %s * (%s + %s * p.d / %s)))"
                " AS s FROM memory_note_terms p WHERE p.term = %s"
                " ORDER BY p.changed DESC LIMIT %s)"
            )
            params += [*scoring.factors[i * 6 : i * 6 + 6], self._driver(conn, query.keys)]
            params.append(cap if cap > 0 else None)
        where, where_params = _where(filters)
        every = f"HAVING count(*) = {len(used)}" if require_all else ""
        wanted = max(4 * limit, 64)
        while True:
            rows = conn.execute(
                f"WITH w AS ({' UNION ALL '.join(windows)}),"
                " u AS (SELECT w.changed, sum(w.s) AS ub FROM w GROUP BY w.changed"
                f"   {every} ORDER BY ub DESC, w.changed LIMIT %s),"
                " b AS (SELECT min(u.ub) AS bound, count(*) AS considered FROM u),"
                # the match checked on each note read, never through the GIN index
                " m AS (SELECT n.id, n.search, n.fts_tokens FROM u"
                "   JOIN memory_notes n ON n.changed = u.changed"
                f"   WHERE {_matches(True)} AND {where}),"
                f" f AS MATERIALIZED (SELECT m.id, m.fts_tokens::float8 AS d,"
                f"   {', '.join(scoring.freqs)} FROM m),"
                f" r AS (SELECT f.id, {' + '.join(scoring.terms)} AS score FROM f"
                "   ORDER BY score DESC, f.id LIMIT %s)"
                f" SELECT {_RANK_COLS}, r.score, b.bound, b.considered"
                " FROM b LEFT JOIN (r JOIN memory_notes n ON n.id = r.id) ON TRUE"
                " ORDER BY r.score DESC, n.id",
                (
                    *params,
                    wanted,
                    _pg_text(tsquery),
                    *where_params,
                    *scoring.phrases,
                    *scoring.factors,
                    limit,
                ),
            ).fetchall()
            found = [r for r in rows if r["id"] is not None]
            considered, bound = int(rows[0]["considered"]), rows[0]["bound"]
            if considered < wanted:
                break  # every note of the windows was scored
            # the notes left out score at most `bound` (a margin for the sums' rounding)
            if len(found) >= limit and float(found[limit - 1]["score"]) > bound * (1 + 1e-9):
                break
            wanted *= 4
        for row in found:
            del row["bound"], row["considered"]
        return [_rank_row(r) for r in found]

    def _word_notes(self, conn: Connection, query: _TermQuery, stats: Filters | None) -> int:
        """Notes holding a word (its IDF): counted on their rows, exactly as FTS5 does; in the
        whole table from `SLACK_MIN` notes on, from its postings instead (the fewest of its
        keys': exact for a word and a two-character Chinese word, at most a little above for
        a longer phrase), since counting a common word's rows read tens of thousands of them
        (100-250 ms at 100k notes, for each word a search had not met since the notes
        changed)."""
        if stats is None and query.keys and self._corpus.corpus(conn)[0] >= SLACK_MIN:
            return min(self._corpus.postings(conn, k) for k in query.keys)
        return self._corpus.hits(conn, query.match, stats)

    def _driver(self, conn: Connection, keys: tuple[str, ...]) -> str:
        """The key of a word whose postings are fewest (its window's notes are the likeliest
        to hold the whole phrase); keys held by over half the notes count alike
        (`_CorpusCounts.postings`), the first by name then."""
        if len(keys) == 1:
            return keys[0]
        return min(keys, key=lambda k: (self._corpus.postings(conn, k), k))

    def _trigram_rows(
        self, conn: Connection, words: builtins.list[Term], filters: Filters, limit: int
    ) -> builtins.list[dict[str, Any]]:
        """Notes whose identifiers contain a query identifier (pg_trgm), newest first."""
        where, params = _where(filters)
        likes = [_like(_pg_text(t.text.lower().replace('"', " "))) for t in words]
        ors = " OR ".join("n.identifiers LIKE %s" for _ in likes)
        rows = conn.execute(
            f"SELECT {_RANK_COLS} FROM memory_notes n WHERE ({ors}) AND {where}"
            " ORDER BY n.updated DESC, n.id LIMIT %s",
            (*likes, *params, limit),
        ).fetchall()
        return [_rank_row(r) for r in rows]

    def _filtered_ids(
        self, conn: Connection, filters: Filters, most: int
    ) -> builtins.list[str] | None:
        """The ids of the notes that pass a narrowing filter (a scope, type, tag or status),
        when there are at most `most` of them; else None."""
        if not filters.narrows:
            return None
        where, params = _where(filters)
        found = conn.execute(
            f"SELECT n.id FROM memory_notes n WHERE {where} LIMIT %s", (*params, most + 1)
        ).fetchall()
        return None if len(found) > most else [r["id"] for r in found]

    def _narrowed(
        self, conn: Connection, filters: Filters, most: int
    ) -> tuple[int, builtins.list[str] | None] | None:
        """How many notes pass a narrowing filter, when at most `most` (counting stops past
        it), and their ids when at most `_EXACT_MAX` (the vector side's exact scan: read in
        the same query, and not at all when there are more); else None."""
        if not filters.narrows:
            return None
        where, params = _where(filters)
        [row] = conn.execute(
            "SELECT count(*) AS n, CASE WHEN count(*) <= %s THEN array_agg(x.id) END AS ids"
            f" FROM (SELECT n.id FROM memory_notes n WHERE {where} LIMIT %s) x",
            (_EXACT_MAX, *params, most + 1),
        ).fetchall()
        count = int(row["n"])
        if count > most:
            return None
        return count, (list(row["ids"] or []) if count <= _EXACT_MAX else None)

    def _allowed_ids(self, conn: Connection, ids: builtins.list[str], filters: Filters) -> set[str]:
        where, params = _where(filters)
        found = conn.execute(
            f"SELECT n.id FROM memory_notes n WHERE n.id = ANY(%s) AND {where}", (ids, *params)
        )
        return {r["id"] for r in found}


_ACTIVE: Final = (
    "n.scope = %s AND n.status = 'active' AND (n.expires_at IS NULL OR n.expires_at > %s)"
)
"""Dedup looks among the active, unexpired notes of the new note's scope."""


class _SearchQueries:
    """`memory.search.engine.SearchQueries` in one PostgreSQL transaction, for a search
    under `filters`."""

    def __init__(self, store: PostgresMemoryStore, conn: Connection, filters: Filters) -> None:
        self._store = store
        self._conn = conn
        self._filters = filters
        self._most = -1
        self._first: tuple[int | None] | None = None
        self._ids: builtins.list[str] | None = None
        """The ids of the `first` notes, when at most `_EXACT_MAX`."""

    def first(self) -> int | None:
        """How many notes pass a narrowing filter when they are few
        (`memory.search.filters.prefilter_most`, counted as the SQLite index counts them),
        else None; asked once a search. The keyword side then reads those notes, checks the
        match on each and ranks with their scope's statistics (docs/search.md, "Filters
        first")."""
        if self._first is None:
            self._most = prefilter_most(self._store._corpus.corpus(self._conn)[0])
            found = self._store._narrowed(self._conn, self._filters, self._most)
            self._first = (None if found is None else found[0],)
            self._ids = None if found is None else found[1]
        return self._first[0]

    def _subset(self, conn: Connection, filters: Filters, most: int) -> builtins.list[str] | None:
        """The ids the vector side compares exactly (`PostgresNoteVectors.search`), without
        reading ids when the count of `first` already says there are too many."""
        if filters == self._filters and filters.narrows:
            few = self.first()
            if (few is None and self._most >= most) or (few is not None and few > most):
                return None
            if self._ids is not None:
                return self._ids
        return self._store._filtered_ids(conn, filters, most)

    def _local(self, filters: Filters) -> Filters | None:
        """The notes whose statistics rank the search (`Filters.statistics`) when its
        filters leave few notes, else None (the whole table's)."""
        if filters != self._filters or self.first() is None:
            return None
        return filters.statistics

    def keyword_candidates(
        self, parsed: ParsedQuery, filters: Filters, limit: int, *, require_all: bool
    ) -> builtins.list[Candidate]:
        cap = self._store.config.max_ranked_matches
        rows = self._store._fts_rows(
            self._conn,
            parsed,
            filters,
            limit,
            cap,
            require_all=require_all,
            stats=self._local(filters),
        )
        # FTS5's sign: bm25 < 0, lower is better
        return [Candidate(r, -float(r["score"])) for r in rows]

    def identifier_rows(
        self, parsed: ParsedQuery, filters: Filters, limit: int
    ) -> builtins.list[dict[str, Any]]:
        words = [t for t in parsed.terms if t.is_latin and len(t.norm.replace(" ", "")) >= 3]
        if not words:
            return []
        return self._store._trigram_rows(self._conn, words, filters, limit)

    def doc_freqs(self, parsed: ParsedQuery) -> tuple[int, builtins.list[int]]:
        corpus = self._store._corpus
        stats = self._local(self._filters)
        found = []
        for term in parsed.terms:
            query = term_query(term)
            found.append(0 if query is None else self._store._word_notes(self._conn, query, stats))
        return corpus.corpus(self._conn, stats)[0], found

    def nearest(
        self, vector: QueryVector, k: int, filters: Filters
    ) -> builtins.list[tuple[str, float]]:
        store = self._store
        return store.vectors.search(
            vector.model,
            vector.vector,
            k,
            allowed=lambda c, ids: store._allowed_ids(c, ids, filters),
            subset=lambda c, most: self._subset(c, filters, most),
            conn=self._conn,
        )

    def rows_by_id(self, ids: builtins.list[str]) -> dict[str, dict[str, Any]]:
        rows = self._conn.execute(
            f"SELECT {_RANK_COLS} FROM memory_notes n WHERE n.id = ANY(%s)", (ids,)
        ).fetchall()
        return {r["id"]: _rank_row(r) for r in rows}

    def record_access(self, ids: builtins.list[str]) -> None:
        """Every hit adds one to its note's access count. Rows are locked in id order, so two
        instances counting overlapping hits never deadlock; a hit whose row another
        transaction holds (an edit, a save refreshing it, background embedding writing its
        vectors: 16 notes a transaction, up to a second under load) is not counted this time
        rather than making the search wait for it."""
        self._conn.execute(
            "UPDATE memory_notes n SET access_count = n.access_count + 1"
            " FROM (SELECT id FROM memory_notes WHERE id = ANY(%s) ORDER BY id"
            " FOR NO KEY UPDATE SKIP LOCKED) l WHERE n.id = l.id",
            (sorted(set(ids)),),
        )


class _SaveQueries:
    """`memory.core.SaveQueries` in a save's transaction (the scope's advisory lock held)."""

    def __init__(
        self,
        store: PostgresMemoryStore,
        conn: Connection,
        derived: _Derived,
        wanted: str | None,
        scope: str,
        now: datetime,
    ) -> None:
        self._store = store
        self._conn = conn
        self._derived = derived
        self._wanted = wanted
        self._active = (scope, now)

    def same_content(self, content_hash: str) -> dict[str, Any] | None:
        return self._conn.execute(
            f"SELECT n.id, n.path FROM memory_notes n WHERE n.content_hash = %s AND {_ACTIVE}"
            " ORDER BY n.changed LIMIT 1",
            (content_hash, *self._active),
        ).fetchone()

    def sharing_bands(self, bands: builtins.list[int]) -> builtins.list[dict[str, Any]]:
        # the notes sharing most MinHash bands first; only a few are compared in full
        return self._conn.execute(
            f"SELECT n.id, n.path, n.type, left(n.body, {_SIMILARITY_BODY}) AS body,"
            " (SELECT count(*) FROM unnest(n.bands) b WHERE b = ANY(%s::bigint[])) AS shared"
            f" FROM memory_notes n WHERE n.bands && %s::bigint[] AND {_ACTIVE}"
            " ORDER BY shared DESC, n.changed LIMIT 10",
            (bands, bands, *self._active),
        ).fetchall()

    def exists(self, note_id: str) -> bool:
        return _exists(self._conn, note_id)

    def row_to_supersede(self, note_id: str) -> dict[str, Any] | None:
        sql = "SELECT id FROM memory_notes WHERE id = %s FOR UPDATE"
        return self._conn.execute(sql, (note_id,)).fetchone()

    def refresh(self, row: dict[str, Any], now: datetime) -> SaveResult:
        self._conn.execute(
            "UPDATE memory_notes SET updated = %s, access_count = access_count + 1,"
            " changed = nextval('memory_notes_changed') WHERE id = %s",
            (now, row["id"]),
        )
        return SaveResult(id=row["id"], deduplicated=True, path=row["path"])

    def insert(self, note: Note) -> Note:
        return self._store._insert(self._conn, note, self._derived, self._wanted)

    def mark_superseded(self, row: dict[str, Any], new_id: str, now: datetime) -> None:
        self._conn.execute(
            "UPDATE memory_notes SET status = 'superseded', superseded_by = %s,"
            " updated = %s, changed = nextval('memory_notes_changed') WHERE id = %s",
            (new_id, now, row["id"]),
        )


def _last_of_each(notes: list[Note]) -> list[Note]:
    """`notes` without those a later one of the list replaces (the same id or path), in
    their order: restoring a list with repeats keeps the last, as one by one would."""
    ids: set[str] = set()
    paths: set[str] = set()
    kept: list[Note] = []
    for note in reversed(notes):
        if note.id not in ids and note.path not in paths:
            kept.append(note)
        ids.add(note.id)
        paths.add(note.path)
    return kept[::-1]


def _insert_sql() -> str:
    columns = ", ".join(_WRITE_COLS)
    values = ", ".join(f"%({c})s" for c in _WRITE_COLS)
    return (
        f"INSERT INTO memory_notes ({columns}, search) VALUES ({values}, {_SEARCH_VECTOR})"
        " ON CONFLICT DO NOTHING RETURNING id"
    )


def _exists(conn: Connection, note_id: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM memory_notes WHERE id = %s", (note_id,)).fetchone() is not None
    )


def _check_id(note_id: object) -> None:
    if not isinstance(note_id, str) or not note_id:
        raise NotFoundError("note", str(note_id))
