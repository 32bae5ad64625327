"""The SQLite index: derived from the note files, rebuilt from them at will.

- WAL journal, `busy_timeout`, numbered migrations recorded in `schema_migrations`.
- `notes`: one row per note file (front matter fields, the indexed body, file stat and hashes).
- `notes_fts`: FTS5 `porter unicode61 remove_diacritics 2` over a copy of title, tags,
  summary and body where every CJK character stands alone (see `_text.space_cjk`); English
  words are stemmed (`leaks` finds `leak`); contentless, so the text is stored once (in
  `notes.body`).
- `notes_tri`: FTS5 `trigram` over the unique code-like tokens of a note (identifiers with
  `_`, digits, dots or camelCase), for substring matches such as `ConnPool` in
  `getConnPoolSize`.
- `note_tags` (tag filter) and `note_bands` (MinHash bands for near-duplicate candidates).
- `note_vectors`: float32 vectors of note chunks, tagged with the encoder (`memory.sqlite.vectors`).

One writer path: `Index.write()` takes an in-process lock, then `BEGIN IMMEDIATE` (retried
while another process holds the lock, up to `lock_timeout`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from errors import ClaudeMemoryError
from memory import _text
from memory._record import record
from memory.model import (
    Note,
    SortKey,
    path_note_id,
)
from memory.notes.capture import sanitize
from memory.notes.files import ParsedFile
from memory.search import fts5
from memory.search.filters import PREFILTER_MAX, Filters
from memory.sqlite.vectors import VECTOR_TABLES

if TYPE_CHECKING:
    from memory.sqlite.scope_index import ScopeIndex

log = logging.getLogger(__name__)

TEXT_VERSION: Final = "5"
"""Bump when indexed text changes (segmentation, sanitising, dedup keys): the FTS tables are
rebuilt. 3: dedup keys (`_text.dedup_bands`: skeleton, subject, MinHash of the skeleton).
4: Chinese numerals that count or date something folded to digits in those keys.
5: each note's scope word (`fts5.scope_word`, migration 7's `scope` column)."""

_MIGRATIONS: Final[tuple[tuple[int, str, tuple[str, ...]], ...]] = (
    (
        1,
        "notes",
        (
            """CREATE TABLE notes (
                nid INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT NOT NULL UNIQUE,
                path TEXT NOT NULL UNIQUE,
                dir TEXT NOT NULL,
                title TEXT NOT NULL,
                type TEXT NOT NULL,
                scope TEXT NOT NULL,
                tags TEXT NOT NULL,
                summary TEXT NOT NULL,
                body TEXT NOT NULL,
                importance REAL NOT NULL,
                status TEXT NOT NULL,
                superseded_by TEXT,
                created TEXT NOT NULL,
                created_ts REAL NOT NULL,
                updated TEXT NOT NULL,
                updated_ts REAL NOT NULL,
                expires_at TEXT,
                expires_ts REAL,
                source TEXT,
                access_count INTEGER NOT NULL DEFAULT 0,
                access_pending INTEGER NOT NULL DEFAULT 0,
                content_hash TEXT NOT NULL,
                file_hash TEXT NOT NULL,
                mtime_ns INTEGER NOT NULL,
                size INTEGER NOT NULL,
                verified_ns INTEGER NOT NULL,
                parse_ok INTEGER NOT NULL,
                warnings TEXT NOT NULL DEFAULT ''
            )""",
            "CREATE INDEX notes_dir ON notes(dir)",
            "CREATE INDEX notes_updated ON notes(updated_ts)",
            "CREATE INDEX notes_created ON notes(created_ts)",
            "CREATE INDEX notes_type ON notes(type)",
            "CREATE INDEX notes_scope ON notes(scope)",
            "CREATE INDEX notes_hash ON notes(content_hash)",
            "CREATE INDEX notes_pending ON notes(access_pending) WHERE access_pending > 0",
        ),
    ),
    (
        2,
        "tags and near-duplicate bands",
        (
            "CREATE TABLE note_tags (tag TEXT NOT NULL, nid INTEGER NOT NULL,"
            " PRIMARY KEY (tag, nid)) WITHOUT ROWID",
            "CREATE INDEX note_tags_nid ON note_tags(nid)",
            "CREATE TABLE note_bands (band INTEGER NOT NULL, nid INTEGER NOT NULL,"
            " PRIMARY KEY (band, nid)) WITHOUT ROWID",
            "CREATE INDEX note_bands_nid ON note_bands(nid)",
        ),
    ),
    (
        3,
        "full-text tables",
        (
            f"CREATE VIRTUAL TABLE notes_fts USING fts5({', '.join(fts5.COLUMNS)},"
            f" content='', tokenize='{fts5.TOKENIZER}')",
            "CREATE VIRTUAL TABLE notes_tri USING fts5(words, content='', tokenize='trigram')",
        ),
    ),
    (
        4,
        "meta",
        (
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            f"INSERT INTO meta VALUES ('text_version', '{TEXT_VERSION}')",
            "INSERT INTO meta VALUES ('generation', '0')",
        ),
    ),
    (
        5,
        "importance index",
        ("CREATE INDEX notes_importance ON notes(importance)",),
    ),
    (6, "note vectors", VECTOR_TABLES),  # see memory/sqlite/vectors.py
    (
        7,
        "scope words",
        # the index is derived: TEXT_VERSION 5 refills it from the notes
        (
            "DROP TABLE notes_fts",
            f"CREATE VIRTUAL TABLE notes_fts USING fts5({', '.join(fts5.COLUMNS)}, scope,"
            f" content='', tokenize='{fts5.TOKENIZER}')",
        ),
    ),
    (
        8,
        "a scope's newest notes",
        # the prompt's brief lists the newest 200 `user` notes: through `notes_scope` SQLite
        # read and sorted all of them (252 ms at 100k notes, 40k of them `user`)
        ("CREATE INDEX notes_scope_updated ON notes(scope, updated_ts)",),
    ),
)
SCHEMA_VERSION: Final = _MIGRATIONS[-1][0]

NOTE_COLUMNS: Final = (
    "nid, id, path, title, type, scope, tags, summary, body, importance, status, superseded_by,"
    " created, updated, updated_ts, expires_at, expires_ts, source, access_count, access_pending,"
    " mtime_ns, size, parse_ok"
)
BM25_WEIGHTS: Final = ", ".join(map(str, (*fts5.BM25_WEIGHTS, 0.0)))
"""`bm25()`'s column weights: the scope column's word never counts as an occurrence."""

_BUSY_CODES: Final = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


class IndexBusyError(ClaudeMemoryError):
    """Another process held the index too long."""

    status_code = 503


@record
class Entry:
    """A note as the index stores it (computed outside the write lock)."""

    note: Note
    dir: str
    body: str
    """Sanitized, capped body: what is searchable."""
    content_hash: str
    file_hash: str
    mtime_ns: int
    size: int
    verified_ns: int
    parse_ok: bool
    warnings: tuple[str, ...]
    bands: tuple[int, ...]


def make_entry(
    parsed: ParsedFile,
    *,
    data_hash: str,
    mtime_ns: int,
    size: int,
    verified_ns: int,
    max_chars: int,
    sanitized: bool = False,
) -> Entry:
    """`sanitized`: the note was written by the store, its text is already clean."""
    note = parsed.note
    clean_body = note.body
    if not sanitized:
        # Hand-written notes may hold secrets or private spans: the index never does.
        clean_body = sanitize(note.body)
        note = replace(
            note,
            title=sanitize(note.title),
            summary=sanitize(note.summary),
            tags=tuple(sanitize(t) for t in note.tags),
        )
    rel_dir = note.path.rsplit("/", 1)[0] if "/" in note.path else ""
    return Entry(
        note=note,
        dir=rel_dir,
        body=clean_body[:max_chars],
        content_hash=_text.content_hash(clean_body),
        file_hash=data_hash,
        mtime_ns=mtime_ns,
        size=size,
        verified_ns=verified_ns,
        parse_ok=parsed.ok,
        warnings=parsed.warnings,
        bands=tuple(_text.dedup_bands(clean_body)),
    )


def _ts(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat(timespec="seconds")


def trigram_text(title: str, tags_json: str, summary: str, body: str) -> str:
    """What a note gives the trigram index: its unique code-like tokens."""
    return _text.latin_tokens(" ".join((title, " ".join(json.loads(tags_json)), summary, body)))


class Index:
    """Connections (one per thread), migrations and the single write path."""

    def __init__(self, path: Path, *, busy_timeout_ms: int = 5000, lock_timeout: float = 60.0):
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._lock_timeout = lock_timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._conn_lock = threading.Lock()
        self._write_lock = threading.RLock()
        self._closed = False

    # --- connections -------------------------------------------------------------------------

    def conn(self) -> sqlite3.Connection:
        if self._closed:
            raise ClaudeMemoryError("the memory store is closed; open it again")
        existing: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if existing is not None:
            return existing
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
        self._retry(lambda: conn.execute("PRAGMA journal_mode=WAL"))
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA temp_store=MEMORY")
        self._local.conn = conn
        with self._conn_lock:
            self._connections.append(conn)
        return conn

    def close(self) -> None:
        with self._conn_lock:
            self._closed = True
            for conn in self._connections:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._connections.clear()

    def _retry(self, action: Any) -> Any:
        deadline = time.monotonic() + self._lock_timeout
        delay = 0.005
        while True:
            try:
                return action()
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode not in _BUSY_CODES or time.monotonic() > deadline:
                    if exc.sqlite_errorcode in _BUSY_CODES:
                        raise IndexBusyError(
                            f"the memory index {self.path} stayed locked for "
                            f"{self._lock_timeout:.0f}s; another process is writing, retry"
                        ) from exc
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: in-process lock, then BEGIN IMMEDIATE (retried when busy)."""
        conn = self.conn()
        with self._write_lock:
            if conn.in_transaction:  # nested use from the same thread: join the outer one
                yield conn
                return
            self._retry(lambda: conn.execute("BEGIN IMMEDIATE"))
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            self._retry(lambda: conn.execute("COMMIT"))

    @contextlib.contextmanager
    def try_write(self, timeout: float) -> Iterator[sqlite3.Connection | None]:
        """Like `write()`, but yields None instead of waiting more than `timeout` seconds."""
        conn = self.conn()
        if not self._write_lock.acquire(timeout=timeout):
            yield None
            return
        try:
            if conn.in_transaction:
                yield conn
                return
            conn.execute(f"PRAGMA busy_timeout={max(int(timeout * 1000), 1)}")
            try:
                conn.execute("BEGIN IMMEDIATE")
                began = True
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode not in _BUSY_CODES:
                    raise
                began = False
            finally:
                conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
            if not began:
                yield None
                return
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            self._retry(lambda: conn.execute("COMMIT"))
        finally:
            self._write_lock.release()

    # --- schema ------------------------------------------------------------------------------

    def migrate(self) -> bool:
        """Apply pending migrations. True when the indexed text must be rebuilt."""
        conn = self.conn()
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        with self.write() as tx:
            done = {row[0] for row in tx.execute("SELECT version FROM schema_migrations")}
            for version, name, statements in _MIGRATIONS:
                if version in done:
                    continue
                for statement in statements:
                    tx.execute(statement)
                tx.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                    (version, name, datetime.now(UTC).isoformat(timespec="seconds")),
                )
                log.info("memory index migration %d applied: %s", version, name)
            text_version = self.get_meta(tx, "text_version")
        return text_version != TEXT_VERSION

    def schema_version(self) -> int:
        row = self.conn().execute("SELECT max(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)

    @staticmethod
    def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
        conn.execute(
            "INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    @staticmethod
    def bump_generation(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")

    def generation(self) -> int:
        return int(self.get_meta(self.conn(), "generation") or 0)

    # --- writes (call inside `write()`) ------------------------------------------------------

    def put(
        self, conn: sqlite3.Connection, entry: Entry, *, path_exists: Any = None
    ) -> tuple[str, Entry]:
        """Insert or replace the row of `entry.note.path`. Returns ("added"|"updated", entry).

        If another file already uses this id: when that file is gone, this is a move and the
        old row goes; otherwise this file gets an id derived from its path (and a warning).
        """
        note = entry.note
        other = conn.execute(
            "SELECT nid, path FROM notes WHERE id = ? AND path <> ?", (note.id, note.path)
        ).fetchone()
        if other is not None:
            if path_exists is not None and not path_exists(other["path"]):
                self.delete(conn, other["nid"])
            else:
                new_id = path_note_id(note.path)
                log.warning(
                    "memory note %s reuses id %s of %s; indexed as %s (give it its own id)",
                    note.path,
                    note.id,
                    other["path"],
                    new_id,
                )
                note = replace(note, id=new_id)
                entry = replace(entry, note=note)
        old = conn.execute(
            "SELECT nid, access_pending FROM notes WHERE path = ?", (note.path,)
        ).fetchone()
        tags_json = json.dumps(list(note.tags), ensure_ascii=False)
        values: dict[str, Any] = {
            "id": note.id,
            "path": note.path,
            "dir": entry.dir,
            "title": note.title,
            "type": note.type,
            "scope": note.scope,
            "tags": tags_json,
            "summary": note.summary,
            "body": entry.body,
            "importance": note.importance,
            "status": note.status,
            "superseded_by": note.superseded_by,
            "created": _iso(note.created),
            "created_ts": _ts(note.created),
            "updated": _iso(note.updated),
            "updated_ts": _ts(note.updated),
            "expires_at": _iso(note.expires_at),
            "expires_ts": _ts(note.expires_at),
            "source": note.source,
            "access_count": note.access_count,
            "content_hash": entry.content_hash,
            "file_hash": entry.file_hash,
            "mtime_ns": entry.mtime_ns,
            "size": entry.size,
            "verified_ns": entry.verified_ns,
            "parse_ok": int(entry.parse_ok),
            "warnings": "\n".join(entry.warnings),
        }
        outcome = "added"
        if old is not None:
            # a changed note gets a new row id: row ids follow the order of change, which
            # `fts_rows(cap=...)` relies on to rank the most recent matches
            self._unindex(conn, int(old["nid"]))
            conn.execute("DELETE FROM notes WHERE nid = ?", (old["nid"],))
            values["access_pending"] = int(old["access_pending"])
            outcome = "updated"
        columns = ", ".join(values)
        placeholders = ", ".join(f":{k}" for k in values)
        cursor = conn.execute(f"INSERT INTO notes ({columns}) VALUES ({placeholders})", values)
        nid = int(cursor.lastrowid or 0)
        conn.execute(
            "INSERT INTO notes_fts (rowid, title, tags, summary, body, scope)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                nid,
                *fts5.fts_columns_json(note.title, tags_json, note.summary, entry.body),
                fts5.scope_word(note.scope),
            ),
        )
        conn.execute(
            "INSERT INTO notes_tri (rowid, words) VALUES (?, ?)",
            (nid, trigram_text(note.title, tags_json, note.summary, entry.body)),
        )
        conn.executemany(
            "INSERT OR IGNORE INTO note_tags VALUES (?, ?)",
            [(tag.casefold(), nid) for tag in note.tags],
        )
        conn.executemany(
            "INSERT OR IGNORE INTO note_bands VALUES (?, ?)", [(b, nid) for b in entry.bands]
        )
        self.bump_generation(conn)
        return outcome, entry

    def _unindex(self, conn: sqlite3.Connection, nid: int) -> None:
        """Remove a row's FTS entries, tags and bands (contentless FTS needs the old values)."""
        row = conn.execute(
            "SELECT title, tags, summary, body, scope FROM notes WHERE nid = ?", (nid,)
        ).fetchone()
        if row is None:
            return
        conn.execute(
            "INSERT INTO notes_fts (notes_fts, rowid, title, tags, summary, body, scope)"
            " VALUES ('delete', ?, ?, ?, ?, ?, ?)",
            (
                nid,
                *fts5.fts_columns_json(row["title"], row["tags"], row["summary"], row["body"]),
                fts5.scope_word(row["scope"]),
            ),
        )
        conn.execute(
            "INSERT INTO notes_tri (notes_tri, rowid, words) VALUES ('delete', ?, ?)",
            (nid, trigram_text(row["title"], row["tags"], row["summary"], row["body"])),
        )
        conn.execute("DELETE FROM note_tags WHERE nid = ?", (nid,))
        conn.execute("DELETE FROM note_bands WHERE nid = ?", (nid,))

    def delete(self, conn: sqlite3.Connection, nid: int) -> None:
        self._unindex(conn, nid)
        conn.execute("DELETE FROM notes WHERE nid = ?", (nid,))
        self.bump_generation(conn)

    def delete_all(self, conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO notes_fts (notes_fts) VALUES ('delete-all')")
        conn.execute("INSERT INTO notes_tri (notes_tri) VALUES ('delete-all')")
        for table in ("note_tags", "note_bands", "notes"):
            conn.execute(f"DELETE FROM {table}")
        self.set_meta(conn, "text_version", TEXT_VERSION)
        self.bump_generation(conn)

    def mark_verified(self, conn: sqlite3.Connection, path: str, mtime_ns: int, size: int) -> None:
        """The file's stat changed but not its bytes (e.g. touched): remember the new stat."""
        conn.execute(
            "UPDATE notes SET mtime_ns = ?, size = ?, verified_ns = ? WHERE path = ?",
            (mtime_ns, size, time.time_ns(), path),
        )

    def add_access(self, conn: sqlite3.Connection, nids: Sequence[int]) -> None:
        conn.executemany(
            "UPDATE notes SET access_pending = access_pending + 1 WHERE nid = ?",
            [(n,) for n in nids],
        )

    # --- reads -------------------------------------------------------------------------------

    def file_states(self, dirs: Iterable[str] | None = None) -> dict[str, sqlite3.Row]:
        """path -> (nid, mtime_ns, size, file_hash, verified_ns) for all rows or some folders."""
        conn = self.conn()
        sql = "SELECT nid, path, mtime_ns, size, file_hash, verified_ns FROM notes"
        if dirs is None:
            rows = conn.execute(sql).fetchall()
        else:
            wanted = sorted(set(dirs))
            rows = []
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ", ".join("?" * len(chunk))
                rows.extend(conn.execute(f"{sql} WHERE dir IN ({marks})", chunk).fetchall())
        return {row["path"]: row for row in rows}

    def row_by_id(self, note_id: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = (
            self.conn()
            .execute(f"SELECT {NOTE_COLUMNS} FROM notes WHERE id = ?", (note_id,))
            .fetchone()
        )
        return row

    def row_by_path(self, relpath: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = (
            self.conn()
            .execute(f"SELECT {NOTE_COLUMNS} FROM notes WHERE path = ?", (relpath,))
            .fetchone()
        )
        return row

    def count(self) -> int:
        return int(self.conn().execute("SELECT count(*) FROM notes").fetchone()[0])


_ORDER: Final[dict[SortKey, str]] = {
    "updated": "n.updated_ts DESC, n.id DESC",
    "created": "n.created_ts DESC, n.id DESC",
    "importance": "n.importance DESC, n.updated_ts DESC, n.id DESC",
    "access": "(n.access_count + n.access_pending) DESC, n.updated_ts DESC, n.id DESC",
}


def list_rows(
    conn: sqlite3.Connection, filters: Filters, sort: SortKey, limit: int, offset: int
) -> list[sqlite3.Row]:
    where, params = filters.sql()
    cols = ", ".join(f"n.{c.strip()}" for c in NOTE_COLUMNS.split(","))
    return conn.execute(
        f"SELECT {cols} FROM notes n WHERE {where} ORDER BY {_ORDER[sort]} LIMIT ? OFFSET ?",
        [*params, limit, offset],
    ).fetchall()


def count_rows(conn: sqlite3.Connection, filters: Filters) -> int:
    where, params = filters.sql()
    return int(conn.execute(f"SELECT count(*) FROM notes n WHERE {where}", params).fetchone()[0])


def _rowid_floor(
    conn: sqlite3.Connection, table: str, match: str, cap: int, low: int | None = None
) -> int:
    """The smallest rowid among the newest `cap` matches (0 when there are fewer). With
    `low`, 0 also when that cannot exceed `low` (fewer than `cap` notes from `low` on), which
    two index lookups tell instead of walking `cap` matches."""
    # two subqueries: SQLite reads min and max off the rowid b-tree only one per SELECT
    span = conn.execute(
        "SELECT (SELECT min(nid) FROM notes), (SELECT max(nid) FROM notes)"
    ).fetchone()
    if span[0] is None or span[1] - max(span[0], low or 0) + 1 <= cap:
        return 0
    row = conn.execute(
        f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
        (match, cap - 1),
    ).fetchone()
    return 0 if row is None else int(row[0])


@record
class Narrowed:
    """The notes a narrowing filter leaves, when they are few enough to be found first."""

    count: int
    low: int
    """Their smallest rowid (0 when none)."""
    high: int
    """Their largest rowid (-1 when none)."""


def narrowed(
    conn: sqlite3.Connection, filters: Filters, most: int = PREFILTER_MAX
) -> Narrowed | None:
    """How many notes pass filters which narrow (a scope, type, tag or status), and their
    rowid span, when they are at most `most` (one query, stopping at `most + 1`); else None.
    Searches then rank only matches among them (docs/search.md, "Filters first"). Counted in
    SQL: a row per note into Python cost ~9 ms for a scope of 4k notes (`narrowed_ids` reads
    their ids when the vector side needs them)."""
    if not filters.narrows:
        return None
    where, params = filters.sql()
    count, low, high = conn.execute(
        f"SELECT count(*), min(nid), max(nid) FROM (SELECT n.nid FROM notes n WHERE {where}"
        " LIMIT ?)",
        [*params, most + 1],
    ).fetchone()
    if count > most:
        return None
    return Narrowed(int(count), int(low or 0), -1 if high is None else int(high))


def narrowed_ids(conn: sqlite3.Connection, filters: Filters, first: Narrowed) -> list[str]:
    """The ids of the notes `narrowed` counted."""
    where, params = filters.sql()
    rows = conn.execute(
        f"SELECT n.id FROM notes n WHERE {where} AND n.nid BETWEEN ? AND ?",
        [*params, first.low, first.high],
    ).fetchall()
    return [r[0] for r in rows]


def fts_rows(
    conn: sqlite3.Connection,
    match: str,
    filters: Filters,
    limit: int,
    cap: int = 0,
    *,
    first: Narrowed | None = None,
) -> list[sqlite3.Row]:
    """Best BM25 matches of an FTS expression (bm25 < 0; lower is better).

    With `cap`, only the newest `cap` matches (by rowid, i.e. most recently indexed) are
    ranked: BM25 costs ~1 µs per matching row, and a very common word can match most notes.
    `first` (the few notes that pass the filters, `narrowed`): FTS5 walks the matches within
    their rowids and computes BM25 only for their rows (its statistics stay the whole
    index's, so the scores are the same; searches rank those notes with their scope's
    statistics instead, `fts_rows_local`). Else ranks inside FTS and joins only the best `4 x limit`
    rows (fast); when filters leave fewer than `limit` of those, ranks every (capped) match
    that passes the filters."""
    where, params = filters.sql()
    cols = ", ".join(f"n.{c.strip()}" for c in NOTE_COLUMNS.split(","))
    inner = f" SELECT rowid, bm25(notes_fts, {BM25_WEIGHTS}) AS bm25 FROM notes_fts"
    inner += " WHERE notes_fts MATCH ? AND rowid >= ?"
    if first is not None and where != "1":
        if not first.count:
            return []
        low, high = first.low, first.high
        floor = _rowid_floor(conn, "notes_fts", match, cap, low) if cap > 0 else 0
        # `+rowid`: a filter on the walk, not a rowid lookup per note (each lookup would
        # restart the query and recount BM25's statistics)
        inner += f" AND rowid <= ? AND +rowid IN (SELECT n.nid FROM notes n WHERE {where})"
        return conn.execute(
            f"SELECT {cols}, f.bm25 AS bm25 FROM ({inner}) f JOIN notes n ON n.nid = f.rowid"
            " ORDER BY f.bm25, n.id LIMIT ?",
            [match, max(floor, low), high, *params, limit],
        ).fetchall()
    ranked = f"SELECT rowid, bm25(notes_fts, {BM25_WEIGHTS}) AS bm25 FROM notes_fts"
    ranked += " WHERE notes_fts MATCH ?"
    found: list[object] = [match]
    if cap > 0 and _more_notes_than(conn, cap):
        # the newest `cap` matches ranked in one walk, newest first, which stops there: a
        # walk to find the cap's lowest rowid first cost ~1-4 ms more a query at 100k notes
        ranked = f"SELECT rowid, bm25 FROM ({ranked} ORDER BY rowid DESC LIMIT ?)"
        found.append(cap)
    outer = f" JOIN notes n ON n.nid = f.rowid WHERE {where} ORDER BY f.bm25, n.id LIMIT ?"
    rows = conn.execute(
        f"SELECT {cols}, f.bm25 AS bm25 FROM ({ranked} ORDER BY bm25 LIMIT ?) f{outer}",
        [*found, limit * 4, *params, limit],
    ).fetchall()
    if len(rows) < limit and where != "1":
        rows = conn.execute(
            f"SELECT {cols}, f.bm25 AS bm25 FROM ({ranked}) f{outer}",
            [*found, *params, limit],
        ).fetchall()
    return rows


def _more_notes_than(conn: sqlite3.Connection, cap: int) -> bool:
    """Whether the index may hold more than `cap` notes (their rowids span more), so a
    query's matches may too."""
    span = conn.execute(
        "SELECT (SELECT min(nid) FROM notes), (SELECT max(nid) FROM notes)"
    ).fetchone()
    return span[0] is not None and span[1] - span[0] + 1 > cap


@record
class Statistics:
    """BM25's statistics of a set of notes: how many, how many words FTS5 made of them all,
    and how many hold each phrase (`hits`, an FTS5 phrase -> notes)."""

    notes: int
    words: int
    hits: Callable[[str], int]

    @property
    def avgdl(self) -> float:
        return float(self.words) / float(max(self.notes, 1))


def fts_totals(conn: sqlite3.Connection) -> tuple[int, int]:
    """(rows, words) of the whole FTS5 index, as its `bm25()` reads them (the averages
    record)."""
    row = conn.execute("SELECT block FROM notes_fts_data WHERE id = 1").fetchone()
    # a new index's record may be there and empty (no note indexed yet)
    counts = (fts5.varints(bytes(row[0])) if row is not None else []) or [0]
    return counts[0], sum(counts[1:])


def fts_words(conn: sqlite3.Connection, filters: Filters) -> int:
    """Words FTS5 made of the notes that pass `filters` (their `docsize` records)."""
    where, params = filters.sql()
    sizes = conn.execute(
        f"SELECT d.sz FROM notes_fts_docsize d WHERE d.id IN (SELECT n.nid FROM notes n"
        f" WHERE {where})",
        params,
    )
    return sum(sum(fts5.varints(bytes(r[0]))) for r in sizes)


def phrase_hits(conn: sqlite3.Connection, phrase: str, filters: Filters | None = None) -> int:
    """Notes holding an FTS5 phrase: all of them, or those that pass `filters`."""
    if filters is None:
        sql, params = "SELECT count(*) FROM notes_fts WHERE notes_fts MATCH ?", [phrase]
    else:
        where, extra = filters.sql()
        # `+rowid`: a check on the walk of the phrase's matches, not a lookup per note
        sql = (
            "SELECT count(*) FROM notes_fts WHERE notes_fts MATCH ?"
            f" AND +rowid IN (SELECT n.nid FROM notes n WHERE {where})"
        )
        params = [scope_match(filters, phrase), *extra]
    return int(conn.execute(sql, params).fetchone()[0])


def scope_match(filters: Filters, match: str) -> str:
    """`match` within the filters' scope (and the user's notes it includes), as FTS5's own
    query: it then seeks the matches within the scope's few notes (their scope word's list
    steps through the word's list by its index) instead of walking every match of the
    home. Unchanged without a scope."""
    reader = filters.reader
    if not filters.scope:
        if reader is None or reader.owner or not reader.scopes:
            return match
        # a member's turn: their few scopes' notes (`Filters.reader`)
        words = [fts5.scope_word(scope) for scope in reader.scopes]
        return f"scope: ({' OR '.join(words)}) AND ({match})"
    words = [fts5.scope_word(filters.scope)]
    if filters.scope_includes_user and filters.scope != "user":
        words.append(fts5.scope_word("user"))
    return f"scope: ({' OR '.join(words)}) AND ({match})"


def fts_rows_local(
    conn: sqlite3.Connection,
    match: str,
    phrases: Sequence[str],
    filters: Filters,
    limit: int,
    cap: int,
    *,
    first: Narrowed,
    whole: Statistics,
    local: Statistics,
    require_all: bool = False,
    plain: bool = True,
    walked: dict[str, dict[int, float]] | None = None,
    sizes: dict[int, tuple[str, int]] | None = None,
) -> list[tuple[sqlite3.Row, float]]:
    """Best BM25 matches of an FTS expression among the few notes that pass the filters
    (`first`), scored with the statistics of `local` (the notes of the filter's scope, type,
    tag or status: `Filters.statistics`) instead of the whole index's: [(row, bm25)], bm25 <
    0, lower is better. So a scope ranks as in a home holding it alone, and as PostgreSQL
    ranks it (`memory.postgres.store`).

    FTS5's `bm25()` knows only the whole index's statistics (`whole`). Each phrase's
    column-weighted occurrences in a note are recovered from `bm25()` of that phrase alone
    (`fts5.phrase_freq`, exact), then scored again with `local` (`fts5.bm25_term`); the
    phrases are `match`'s, in its order. `plain`: `match` is only those phrases, OR-ed
    (AND-ed with `require_all`), so the notes it matches are known from theirs; else (an
    excluded word) `match` is walked once more for them. `cap`: as `fts_rows`. `walked`:
    each phrase's -bm25 by rowid, kept by the caller for its next call (a search asks for
    the notes holding every word, then for those holding any). `sizes`: each note's id and
    word count by rowid, read for the notes not in it yet and kept there likewise."""
    if not first.count or not phrases:
        return []
    where, params = filters.sql()
    floor = _rowid_floor(conn, "notes_fts", match, cap, first.low) if cap > 0 else 0
    span = [max(floor, first.low), first.high]
    # `+rowid`: a check on the walk of the matches, not a lookup per note (each lookup
    # restarts the query, and bm25() recounts its statistics)
    walk = (
        "FROM notes_fts WHERE notes_fts MATCH ? AND rowid >= ? AND rowid <= ?"
        f" AND +rowid IN (SELECT n.nid FROM notes n WHERE {where})"
    )
    walked = {} if walked is None else walked
    keys = [f"{phrase}\x00{span}" for phrase in phrases]
    for phrase, key in zip(phrases, keys, strict=True):
        if key not in walked:
            sql = f"SELECT rowid, -bm25(notes_fts, {BM25_WEIGHTS}) {walk}"
            found_in = [scope_match(filters, phrase), *span, *params]
            walked[key] = dict(conn.execute(sql, found_in).fetchall())
    scored = [walked[key] for key in keys]
    if not plain:
        within = [scope_match(filters, match), *span, *params]
        found = [r[0] for r in conn.execute(f"SELECT rowid {walk}", within)]
    else:
        found = _found(scored, require_all=require_all)
    if not found:
        return []
    sizes = {} if sizes is None else sizes
    missing = [rowid for rowid in found if rowid not in sizes]
    if missing:
        marks = ", ".join("?" * len(missing))
        for nid, note_id, size in conn.execute(
            "SELECT n.nid, n.id, d.sz FROM notes n JOIN notes_fts_docsize d ON d.id = n.nid"
            f" WHERE n.nid IN ({marks})",
            missing,
        ):
            sizes[int(nid)] = (note_id, sum(fts5.varints(bytes(size))))
    found = [rowid for rowid in found if rowid in sizes]  # a note gone from `notes`: none
    words = {rowid: sizes[rowid][1] for rowid in found}
    scores = dict.fromkeys(found, 0.0)
    for phrase, by_row in zip(phrases, scored, strict=True):
        seen = fts5.bm25_idf(whole.notes, whole.hits(phrase))
        idf = fts5.bm25_idf(local.notes, local.hits(phrase))
        for rowid, total in scores.items():
            score = by_row.get(rowid)
            if score is not None:
                d = float(words.get(rowid, 0))
                freq = fts5.phrase_freq(score, seen, d, whole.avgdl)
                scores[rowid] = total + fts5.bm25_term(idf, freq, d, local.avgdl)
    return _best_rows(conn, scores, {nid: sizes[nid][0] for nid in found}, limit)


def fts_rows_scope_index(
    conn: sqlite3.Connection,
    index: ScopeIndex,
    match: str,
    phrases: Sequence[str],
    active_at: float | None,
    limit: int,
    *,
    require_all: bool = False,
    plain: bool = True,
) -> list[tuple[sqlite3.Row, float]]:
    """`fts_rows_local` on a scope's own index (`ScopeIndex`, holding the notes of the
    search's `Filters.statistics`): each phrase's BM25 is FTS5's own there, with the scope's
    statistics; the notes a search sees are those `active_at` leaves. The same ranking, for
    the cost of the scope's notes rather than the whole index's."""
    if not phrases:
        return []
    allowed = index.allowed(active_at)
    scored = [index.scores(phrase) for phrase in phrases]
    found = index.matches(match) if not plain else _found(scored, require_all=require_all)
    found = [nid for nid in found if nid in allowed]
    scores = {nid: sum(s.get(nid, 0.0) for s in scored) for nid in found}
    return _best_rows(conn, scores, {nid: index.ids[nid] for nid in found}, limit)


def _found(scored: Sequence[dict[int, float]], *, require_all: bool) -> list[int]:
    """The notes an OR (or, `require_all`, AND) of phrases matches, from each one's notes."""
    if require_all:
        return [rowid for rowid in scored[0] if all(rowid in s for s in scored[1:])]
    return list(dict.fromkeys(rowid for s in scored for rowid in s))


def _best_rows(
    conn: sqlite3.Connection, scores: dict[int, float], ids: dict[int, str], limit: int
) -> list[tuple[sqlite3.Row, float]]:
    """The `limit` best notes by score (ties: by note id), their rows read: [(row, bm25)],
    bm25 the negated score as FTS5's (lower is better)."""
    best = sorted((-scores[nid], ids[nid], nid) for nid in scores)[:limit]
    if not best:
        return []
    cols = ", ".join(f"n.{c.strip()}" for c in NOTE_COLUMNS.split(","))
    marks = ", ".join("?" * len(best))
    rows = {
        r["nid"]: r
        for r in conn.execute(
            f"SELECT {cols} FROM notes n WHERE n.nid IN ({marks})", [nid for _, _, nid in best]
        )
    }
    return [(rows[nid], bm25) for bm25, _id, nid in best if nid in rows]


def identifier_floor(conn: sqlite3.Connection, match: str, cap: int) -> int:
    """The smallest rowid among the newest `cap` notes a trigram query matches in the whole
    index (0 when fewer do): `trigram_rows` ranks only those."""
    return _rowid_floor(conn, "notes_tri", match, cap)


def trigram_rows_of(
    conn: sqlite3.Connection, nids: Sequence[int], filters: Filters, limit: int
) -> list[sqlite3.Row]:
    """`trigram_rows` when the matches are known already (`nids`, a scope's own index): those
    that pass the filters, newest first."""
    if not nids:
        return []
    where, params = filters.sql()
    cols = ", ".join(f"n.{c.strip()}" for c in NOTE_COLUMNS.split(","))
    marks = ", ".join("?" * len(nids))
    return conn.execute(
        f"SELECT {cols} FROM notes n WHERE n.nid IN ({marks}) AND {where}"
        " ORDER BY n.updated_ts DESC, n.id LIMIT ?",
        [*nids, *params, limit],
    ).fetchall()


def trigram_rows(
    conn: sqlite3.Connection,
    match: str,
    filters: Filters,
    limit: int,
    cap: int = 0,
    *,
    first: Narrowed | None = None,
    floor: int | None = None,
) -> list[sqlite3.Row]:
    """Notes whose identifiers contain the query's identifiers as substrings (newest first;
    with `cap`, among the newest `cap` matches only). `first`: the few notes that pass the
    filters (`narrowed`): only matches within their rowids are read. `floor`: the cap's
    `identifier_floor` when known already."""
    where, params = filters.sql()
    cols = ", ".join(f"n.{c.strip()}" for c in NOTE_COLUMNS.split(","))
    low, high = (first.low, first.high) if first is not None else (0, -1)
    if first is not None and not first.count:
        return []
    if floor is None:
        floor = _rowid_floor(conn, "notes_tri", match, cap, low) if cap > 0 else 0
    span = " AND rowid <= ?" if first is not None else ""
    return conn.execute(
        f"SELECT {cols} FROM notes n WHERE n.nid IN (SELECT rowid FROM notes_tri"
        f" WHERE notes_tri MATCH ? AND rowid >= ?{span}) AND {where}"
        f" ORDER BY n.updated_ts DESC, n.id LIMIT ?",
        [match, max(floor, low), *([high] if first is not None else []), *params, limit],
    ).fetchall()
