"""`MemoryStore`: the one facade over notes and index (web API, agent tools, hooks, MCP, CLI).

The algorithm (search orchestration, save with dedup, update) is `memory.search.engine` and
`memory.core.StoreCore`, shared with the PostgreSQL store; this module answers their queries
(`_SearchQueries`, `_SaveQueries`) and keeps what is the files' own: sync (`FileSync`, in
`memory.sqlite.file_sync`), `_index.json`, access counts folded into front matter.

Synchronous (SQLite). Safe from several threads (one connection per thread, one in-process
write lock) and from several processes (`BEGIN IMMEDIATE` with retries; files are written
through unique temp names and renamed). Files change first, the index follows.

Freshness: hand edits, additions and deletions are picked up by an incremental sync (stat,
then hash when the stat changed). `open()` syncs; reads (`search`, `list`, `get`, `stats`)
check folder mtimes every time (new, deleted or renamed files), rescan every file on small
stores (`rescan_every_read_below`) or when the last scan is older than `rescan_interval`,
and re-check the files of the notes they return. See docs/search.md.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from errors import ClaudeMemoryError, InvalidInputError, NotFoundError
from memory import _text, core
from memory.config import MemoryConfig
from memory.model import (
    Note,
    NoteDraft,
    SaveResult,
    SearchHit,
    SortKey,
    SyncReport,
)
from memory.notes.capture import sanitize
from memory.notes.files import (
    ParsedFile,
    atomic_write,
    ensure_memory_layout,
    new_note_path,
    note_folder,
    parse_note,
    publish,
    render_note,
    safe_relpath,
    write_temp,
)
from memory.search import engine
from memory.search.filters import Filters, prefilter_most
from memory.search.keyword import Candidate, ParsedQuery
from memory.search.plan import QueryVector, SearchPlan
from memory.search.ranking import Scored
from memory.sqlite.file_sync import FileSync
from memory.sqlite.index import (
    NOTE_COLUMNS,
    SCHEMA_VERSION,
    TEXT_VERSION,
    Index,
    Narrowed,
    Statistics,
    count_rows,
    fts_rows,
    fts_rows_local,
    fts_rows_scope_index,
    fts_totals,
    fts_words,
    identifier_floor,
    list_rows,
    make_entry,
    narrowed,
    narrowed_ids,
    phrase_hits,
    trigram_rows,
    trigram_rows_of,
)
from memory.sqlite.index_json import write_index_json
from memory.sqlite.scope_index import (
    SCOPE_INDEX_CHARS,
    SCOPE_INDEX_MOST,
    SCOPE_INDEXES_KEPT,
    ScopeIndex,
)
from memory.sqlite.vectors import VectorIndex

if TYPE_CHECKING:  # loaded with an encoder: a keyword-only hook process never needs it
    from memory.encoders.models import Encoder

log = logging.getLogger(__name__)

ProgressFn = Callable[[str, int, int], None]
"""progress(stage, done, total); stages: "read" then "index"."""

_DF_CACHE: Final = 4096
"""Most words whose note counts a store keeps."""
_SEARCH_ROWS_KEPT: Final = 200_000
"""Most rows (a note's score for a phrase, a note id) a store keeps for scoped searches
(`_KeptForSearches`, ~100 bytes each)."""
JSON_GENERATION: Final = "index_json_generation"
"""meta key: the index generation `_index.json` was last written for (by any process)."""


def _note_from_row(row: sqlite3.Row) -> Note:
    access = int(row["access_count"]) + int(row["access_pending"])
    return core.note_from_row(row, tags=json.loads(row["tags"]), access_count=access)


class MemoryStore(core.StoreCore):
    """Markdown notes as the truth, a SQLite index for search. Open with `MemoryStore.open`."""

    vectors: VectorIndex

    def __init__(
        self,
        config: MemoryConfig,
        *,
        clock: Callable[[], datetime] | None = None,
        encoder: Encoder | None = None,
    ):
        self._init_core(config, clock, encoder)
        self.root = config.root
        self.index = Index(
            config.index_path,
            busy_timeout_ms=config.busy_timeout_ms,
            lock_timeout=config.lock_timeout,
        )
        self._json_lock = threading.Lock()
        self._json_generation = -1
        self._json_written_at = float("-inf")
        self._access_lock = threading.Lock()
        self._unsaved_access: Counter[int] = Counter()
        self._closed = False
        self.vectors = VectorIndex(self.index)
        self.files = FileSync(self)  # the index in step with the files
        self._sync_lock = self.files.lock
        # the index's generation -> notes ("") and notes holding each query word
        self._doc_freqs: tuple[int, dict[str, int]] = (-1, {})
        self._kept_searches: tuple[int, _KeptForSearches] = (-1, _KeptForSearches())

    # --- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        config: MemoryConfig,
        *,
        clock: Callable[[], datetime] | None = None,
        sync: bool = True,
        encoder: Encoder | None = None,
    ) -> MemoryStore:
        """Create the layout, migrate the index and sync it with the files.

        `sync=False` skips the opening scan (short-lived processes such as hooks on a large
        store): the index is used as it is, the files of returned notes are still checked,
        and a full rescan happens only if the store stays open past `rescan_interval`."""
        ensure_memory_layout(config.root)
        store = cls(config, clock=clock, encoder=encoder)
        try:
            try:
                needs_rebuild = store.index.migrate()
            except sqlite3.DatabaseError as exc:
                if exc.sqlite_errorcode not in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
                    raise
                # the index is derived data: set the damaged file aside and start over
                store.index.close()
                aside = config.index_path.with_name(
                    f"{config.index_path.name}.damaged-{int(time.time())}"
                )
                log.warning(
                    "memory index %s is damaged (%s); moved to %s, rebuilding",
                    config.index_path,
                    exc,
                    aside,
                )
                config.index_path.rename(aside)
                for suffix in ("-wal", "-shm"):
                    Path(f"{config.index_path}{suffix}").unlink(missing_ok=True)
                store = cls(config, clock=clock, encoder=encoder)
                needs_rebuild = store.index.migrate()
            if needs_rebuild:
                log.info("memory index text format changed; rebuilding from the notes")
                store.rebuild()
            elif sync:
                store.sync()
            else:
                store.files.assume_large()
        except BaseException:
            store.index.close()
            raise
        return store

    def close(self) -> None:
        """Write `_index.json` (and access counts once `access_flush_batch` hits are pending),
        then close the connections."""
        if self._closed:
            return
        try:
            if self._pending_access() >= self.config.access_flush_batch:
                self.flush_access_counts()
            else:
                with self.index.try_write(1.0) as tx:
                    if tx is not None:
                        self._flush_unsaved_access(tx)
            self._write_index_json(force=False, throttle=False)
        except (ClaudeMemoryError, sqlite3.Error, OSError) as exc:
            # counts stay in the index and the listing is rewritten next time: nothing is lost
            log.warning("memory store closed without flushing access counts/_index.json: %s", exc)
        finally:
            self._closed = True
            self._query_vectors.close()
            self._kept_searches[1].close()
            self.index.close()

    def abspath(self, relpath: str) -> Path:
        return self.root / relpath

    def generation(self) -> tuple[int, int]:
        """Moves whenever notes or vectors change (`VectorSync` polls it)."""
        return (self.index.generation(), self.vectors.generation())

    # --- sync --------------------------------------------------------------------------------

    def sync(self) -> SyncReport:
        """Bring the index up to date with every file (incremental: stat, then hash)."""
        report = self.files.sync()
        self._after_change(report.changed)
        return report

    def _ensure_fresh(self, scope: str | None = None) -> None:
        report = self.files.ensure_fresh(scope)
        if report is not None:
            self._after_change(report.changed)

    def _sync_paths(self, relpaths: list[str]) -> None:
        """Re-check a few files (e.g. the notes a search is about to return)."""
        self.files.sync_paths(relpaths)
        self._after_change(True)

    def rebuild(self, progress: ProgressFn | None = None) -> SyncReport:
        """Drop the index and rebuild it from the files (pending access counts are written
        to their notes first; those that cannot be, a note whose front matter is broken or an
        index too old or damaged to rewrite through, are carried over by path, so nothing is
        lost)."""
        report = self.files.rebuild(progress)
        self._write_index_json(force=True, throttle=False)
        return report

    # --- writes ------------------------------------------------------------------------------

    def _save(self, draft: NoteDraft) -> SaveResult:
        """Write a new note, or refresh the existing one if it is an (exact or near) duplicate
        (`memory.core.save_locked`). Text is sanitized first (`<private>` spans dropped,
        secrets redacted)."""
        now = self._now()
        note, text = core.draft_note(draft, now, self.config.max_note_bytes, None)
        chash = _text.content_hash(note.body)
        # Write (and fsync) the file before taking the lock: other processes wait less.
        rel = self._place(note, draft.path)
        tmp = write_temp((self.root / rel).parent, text, fsync=self.config.fsync)
        try:
            with self.index.write() as tx:
                self._flush_unsaved_access(tx)
                result = core.save_locked(
                    _SaveQueries(self, tx, draft.path, text, tmp, note.scope, now),
                    draft,
                    note,
                    content_hash=chash,
                    bands=_text.dedup_bands(note.body),
                    threshold=self.config.dedup_threshold,
                    now=now,
                )
        finally:
            tmp.unlink(missing_ok=True)
        self._after_change(True)
        return result

    def _publish(
        self, tx: sqlite3.Connection, note: Note, wanted: str | None, text: str, tmp: Path
    ) -> Note:
        """The new note's file in place (the temp file renamed) and indexed."""
        note = replace(note, path=self._place(note, wanted))
        path = self.root / note.path
        verified_ns = time.time_ns()
        if path.parent == tmp.parent:
            publish(tmp, path, exclusive=True)
        else:  # the wanted path was taken meanwhile: placed elsewhere
            atomic_write(path, text, fsync=self.config.fsync, exclusive=True)
        self._index_written(tx, note, text, path, verified_ns)
        return note

    def _place(self, note: Note, wanted: str | None) -> str:
        if wanted:
            rel = safe_relpath(wanted)
            if not (self.root / rel).exists():
                return rel
        return new_note_path(self.root, note_folder(note.type, note.scope), note)

    def _index_written(
        self, tx: sqlite3.Connection, note: Note, text: str, path: Path, verified_ns: int
    ) -> None:
        stat = path.stat()
        entry = make_entry(
            ParsedFile(note=note, ok=True),
            data_hash=_text.file_hash(text.encode("utf-8")),
            mtime_ns=stat.st_mtime_ns,
            size=stat.st_size,
            verified_ns=verified_ns,
            max_chars=self.config.max_indexed_chars,
            sanitized=True,
        )
        self.index.put(tx, entry, path_exists=self.files.exists)
        # our own write: do not make the next read rescan this folder
        self.files.own_write(note.path.rsplit("/", 1)[0] if "/" in note.path else "")

    def _rewrite(
        self,
        tx: sqlite3.Connection,
        row: sqlite3.Row,
        changes: dict[str, Any],
        *,
        extra_access: int = 0,
        lenient: bool = False,
        extra: dict[str, Any] | None = None,
    ) -> Note:
        """Read the file (the truth), apply changes, write it back and re-index it.

        Pending access counts are folded into the file. A file whose front matter is broken is
        never rewritten: InvalidInputError, or with `lenient` only the index count moves.
        """
        rel = row["path"]
        path = self.root / rel
        current = tx.execute(
            "SELECT nid, id, access_pending FROM notes WHERE path = ?", (rel,)
        ).fetchone()
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            if current is not None:
                self.index.delete(tx, current["nid"])
            raise NotFoundError("note", current["id"] if current else rel) from None
        parsed = parse_note(data, rel, path.stat().st_mtime)
        if not parsed.ok:
            if lenient and current is not None:
                self.index.add_access(tx, [current["nid"]] * max(extra_access, 0))
                return _note_from_row(self.index.row_by_path(rel) or row)
            raise InvalidInputError(
                f"note {rel} has broken front matter or invalid UTF-8 "
                f"({'; '.join(parsed.warnings)}); fix the file by hand, nothing was changed"
            )
        pending = int(current["access_pending"]) if current is not None else 0
        old = parsed.note
        # whatever we write is sanitized, hand-written text included
        old = replace(
            old,
            body=sanitize(old.body),
            title=sanitize(old.title),
            summary=sanitize(old.summary),
            tags=tuple(sanitize(t) for t in old.tags),
            source=sanitize(old.source) if old.source else None,
        )
        changes = core.changed(old, changes, rel, extra=extra)
        note = replace(
            old,
            id=current["id"] if current is not None else old.id,
            access_count=old.access_count + pending + extra_access,
            **changes,
        )
        text = render_note(note)
        verified_ns = time.time_ns()
        atomic_write(path, text, fsync=self.config.fsync)
        self._index_written(tx, note, text, path, verified_ns)
        tx.execute("UPDATE notes SET access_pending = 0 WHERE path = ?", (rel,))
        return note

    def get(self, note_id: str) -> Note:
        """The full note, read from its file (raises NotFoundError)."""
        return self._read(note_id).note

    def _readable(self, note_id: str) -> Note | None:
        parsed = self._read(note_id)
        return parsed.note if parsed.ok else None

    def _read(self, note_id: str) -> ParsedFile:
        row = self._row_or_sync(note_id)
        rel = row["path"]
        path = self.root / rel
        try:
            data = path.read_bytes()
            stat = path.stat()
        except FileNotFoundError:
            self._sync_paths([rel])
            raise NotFoundError("note", note_id) from None
        if stat.st_mtime_ns != row["mtime_ns"] or stat.st_size != row["size"]:
            self._sync_paths([rel])
            fresh = self.index.row_by_path(rel)
            if fresh is None or fresh["id"] != note_id:
                raise NotFoundError("note", note_id)
            row = fresh
            if stat.st_mtime_ns != row["mtime_ns"]:  # the sync rewrote it (a derived summary)
                data, stat = path.read_bytes(), path.stat()
        parsed = parse_note(data, rel, stat.st_mtime)
        note = replace(
            parsed.note,
            id=row["id"],
            access_count=parsed.note.access_count + int(row["access_pending"]),
        )
        return replace(parsed, note=note)

    def _row_or_sync(self, note_id: str) -> sqlite3.Row:
        if not isinstance(note_id, str) or not note_id:
            raise NotFoundError("note", str(note_id))
        row = self.index.row_by_id(note_id)
        if row is None:
            self._ensure_fresh()
            row = self.index.row_by_id(note_id)
        if row is None:
            raise NotFoundError("note", note_id)
        return row

    def _update(
        self, note_id: str, clean: dict[str, Any], extra: dict[str, Any] | None = None
    ) -> Note:
        row = self._row_or_sync(note_id)
        with self.index.write() as tx:
            self._flush_unsaved_access(tx)
            current = self.index.row_by_path(row["path"])
            if current is None or current["id"] != note_id:
                raise NotFoundError("note", note_id)
            note = self._rewrite(tx, current, {**clean, "updated": self._now()}, extra=extra)
        self._after_change(True)
        return note

    def _delete(self, note_id: str) -> None:
        """Delete the note's file and its index row (raises NotFoundError)."""
        row = self._row_or_sync(note_id)
        with self.index.write() as tx:
            current = tx.execute("SELECT nid, path FROM notes WHERE id = ?", (note_id,)).fetchone()
            if current is None:
                raise NotFoundError("note", note_id)
            (self.root / current["path"]).unlink(missing_ok=True)
            self.index.delete(tx, current["nid"])
            self.files.own_write(row["path"].rsplit("/", 1)[0] if "/" in row["path"] else "")
        with self._access_lock:
            self._unsaved_access.pop(int(current["nid"]), None)
        self._after_change(True)

    # --- reads -------------------------------------------------------------------------------

    def _list(
        self, filters: Filters, sort: SortKey, limit: int, offset: int
    ) -> builtins.list[Note]:
        rows = list_rows(self.index.conn(), filters, sort, limit, offset)
        return [_note_from_row(r) for r in rows]

    def _count(self, filters: Filters) -> int:
        return count_rows(self.index.conn(), filters)

    # --- search (the algorithm: memory.search.engine) ------------------------------------------

    def _before_read(self, scope: str | None = None) -> None:
        self._ensure_fresh(scope)

    @contextlib.contextmanager
    def search_queries(self, filters: Filters) -> Iterator[_SearchQueries]:
        """What the search engine asks of this index, for a search under `filters`."""
        yield _SearchQueries(self, self.index.conn(), filters)

    def _ranked_hits(
        self, plan: SearchPlan, filters: Filters, limit: int, now_ts: float, record: bool
    ) -> builtins.list[SearchHit]:
        def rank() -> builtins.list[Scored]:
            with self.search_queries(filters) as queries:
                weights = self.config.ranking
                return engine.rank(
                    queries, plan, filters, limit, now_ts, weights=weights, fusion=self.fusion
                )

        ranked = rank()
        # the files are the truth: a hit whose file changed since it was indexed is re-read
        stale = [s.row["path"] for s in ranked if not _same_file(self.root, s.row)]
        if stale:
            self._sync_paths(stale)
            ranked = rank()
        if record and ranked:
            self._record_access([int(s.row["nid"]) for s in ranked])
        return engine.hits(ranked, plan.parsed)

    def _df_counts(self) -> dict[str, int]:
        """The kept note counts (the index's generation -> notes ("") and notes holding each
        query word), emptied when the index changed: common words come back in most
        searches, and counting one walks up to `DF_CAP` matches."""
        generation = self.index.generation()
        known, counts = self._doc_freqs
        if known != generation or len(counts) > _DF_CACHE:
            counts = {}
            self._doc_freqs = (generation, counts)
        return counts

    def _kept_for_searches(self) -> _KeptForSearches:
        """What scoped searches keep until the index changes (`_KeptForSearches`)."""
        generation = self.index.generation()
        known, kept = self._kept_searches
        if known != generation or kept.rows > _SEARCH_ROWS_KEPT:
            # not closed here: a search in another thread may still walk its scope indexes
            # (an in-memory database goes with its last reference)
            kept = _KeptForSearches()
            self._kept_searches = (generation, kept)
        return kept

    def _doc_freqs_of(self, parsed: ParsedQuery) -> builtins.list[int]:
        """How many notes hold each query word in the whole index (counted up to `DF_CAP`,
        kept)."""
        counts = self._df_counts()
        found = []
        for term in parsed.terms:
            count = counts.get(term.fts)
            if count is None:
                row = (
                    self.index.conn()
                    .execute(
                        "SELECT count(*) FROM (SELECT 1 FROM notes_fts WHERE notes_fts MATCH ?"
                        " LIMIT ?)",
                        (term.fts, engine.DF_CAP),
                    )
                    .fetchone()
                )
                count = counts[term.fts] = int(row[0])
            found.append(count)
        return found

    def _ranking_cap(self, parsed: ParsedQuery, whole: Statistics) -> int:
        """`max_ranked_matches`, or 0 when the index holds no more notes than that, or the
        query's words are in fewer notes than that all together (their kept counts in the
        whole index tell, the ones `fts_rows_local` needs too): then the cap cannot apply, and
        finding its floor would walk every match. For searches whose filters leave few
        notes."""
        cap = self.config.max_ranked_matches
        if cap <= 0 or self._note_count() <= cap:
            # no counting of each word's notes: a hook process keeps no counts from one
            # prompt to the next, and each count walks up to `DF_CAP` matches
            return 0
        found = [whole.hits(term.fts) for term in parsed.terms]
        if sum(found) <= cap:
            return 0
        return cap

    def _identifier_floor(self, match: str) -> int:
        """The trigram query's `identifier_floor` (0 when `max_ranked_matches` cannot apply),
        kept until the index changes: finding it walks the newest matches of the whole index
        (every match when fewer), which every identifier search did, a scoped one too (1.3 ms
        a search on average at 100k notes; a scope with an index of its own no longer asks)."""
        cap = self.config.max_ranked_matches
        if cap <= 0 or self._note_count() <= cap:
            return 0
        conn = self.index.conn()
        return self._kept(
            self._df_counts(), f"tri\x00{match}", lambda: identifier_floor(conn, match, cap)
        )

    @staticmethod
    def _kept(counts: dict[str, int], key: str, count: Callable[[], int]) -> int:
        """A count kept in `counts` (`_df_counts`: until the index changes)."""
        if key not in counts:
            counts[key] = count()
        return counts[key]

    def _statistics(self, stats: Filters | None) -> Statistics:
        """BM25's statistics of the whole index as FTS5's `bm25()` reads them (None), or of
        the notes of `stats`; phrase counts kept until the index changes."""
        conn = self.index.conn()
        counts = self._df_counts()  # one look at the generation for the whole search
        kept = self._kept
        if stats is None:
            notes, words = fts_totals(conn)
            return Statistics(
                notes, words, lambda p: kept(counts, f"bm25\x00{p}", lambda: phrase_hits(conn, p))
            )
        key = f"\x00{stats!r}"
        words = kept(counts, f"words{key}", lambda: fts_words(conn, stats))
        return Statistics(
            self._note_count(stats),
            words,
            lambda p: kept(counts, f"bm25\x00{p}{key}", lambda: phrase_hits(conn, p, stats)),
        )

    def _note_count(self, stats: Filters | None = None) -> int:
        """Notes in the index (or those of `stats`), kept with the word counts (until the
        index changes)."""
        counts = self._df_counts()
        key = "" if stats is None else f"\x00{stats!r}"
        if key not in counts:
            conn = self.index.conn()
            counts[key] = self.index.count() if stats is None else count_rows(conn, stats)
        return counts[key]

    def _top_rows(
        self, filters: Filters, order: SortKey, limit: int
    ) -> builtins.list[tuple[sqlite3.Row, Note]]:
        rows = list_rows(self.index.conn(), filters, order, limit, 0)
        return [(r, _note_from_row(r)) for r in rows]

    def _counts(self, now: datetime) -> core.Counts:
        conn = self.index.conn()

        def grouped(column: str) -> dict[str, int]:
            rows = conn.execute(
                f"SELECT {column}, count(*) FROM notes GROUP BY {column} ORDER BY {column}"
            ).fetchall()
            return {r[0]: r[1] for r in rows}

        expired = conn.execute(
            "SELECT count(*) FROM notes WHERE expires_ts IS NOT NULL AND expires_ts <= ?",
            (now.timestamp(),),
        ).fetchone()[0]
        broken = conn.execute("SELECT count(*) FROM notes WHERE parse_ok = 0").fetchone()[0]
        pending = conn.execute("SELECT coalesce(sum(access_pending), 0) FROM notes").fetchone()[0]
        return core.Counts(
            total=self.index.count(),
            by_type=grouped("type"),
            by_scope=grouped("scope"),
            by_status=grouped("status"),
            expired=expired,
            broken_front_matter=broken,
            pending_access_counts=pending,
        )

    def _index_stats(self) -> tuple[str, dict[str, Any]]:
        size = sum(
            p.stat().st_size
            for p in (
                self.config.index_path,
                Path(f"{self.config.index_path}-wal"),
                Path(f"{self.config.index_path}-shm"),
            )
            if p.exists()
        )
        return str(self.root), {
            "path": str(self.config.index_path),
            "size_bytes": size,
            "schema_version": SCHEMA_VERSION,
            "text_version": TEXT_VERSION,
            "sqlite_version": sqlite3.sqlite_version,
            "keyword": "fts5 unicode61 (CJK per character) + trigram; query: rjieba",
            "last_sync": self.files.last_report.to_dict(),
        }

    def iter_notes(self) -> Iterator[Note]:
        """Every note, read from its file, in path order (for export)."""
        self._ensure_fresh()
        rows = self.index.conn().execute("SELECT path, id, access_pending FROM notes ORDER BY path")
        for row in rows.fetchall():
            path = self.root / row["path"]
            try:
                parsed = parse_note(path.read_bytes(), row["path"], path.stat().st_mtime)
            except FileNotFoundError:
                continue
            yield replace(
                parsed.note,
                id=row["id"],
                access_count=parsed.note.access_count + int(row["access_pending"]),
            )

    # --- access counts -----------------------------------------------------------------------

    def record_access(self, ids: Sequence[str]) -> None:
        self._check_open()
        rows = [self.index.row_by_id(note_id) for note_id in dict.fromkeys(ids)]
        nids = [int(row["nid"]) for row in rows if row is not None]
        if nids:
            self._record_access(nids)

    def _record_access(self, nids: builtins.list[int]) -> None:
        """Count hits in the index now (or in memory if the index is busy: a rebuild must not
        stall searches); they reach the files on `flush_access_counts`/`close`."""
        with self._access_lock:
            self._unsaved_access.update(nids)
        with self.index.try_write(0.05) as tx:
            if tx is not None:
                self._flush_unsaved_access(tx)

    def _flush_unsaved_access(self, tx: sqlite3.Connection) -> None:
        with self._access_lock:
            counts, self._unsaved_access = self._unsaved_access, Counter()
        if counts:
            tx.executemany(
                "UPDATE notes SET access_pending = access_pending + ? WHERE nid = ?",
                [(n, nid) for nid, n in counts.items()],
            )

    def _pending_access(self) -> int:
        with self._access_lock:
            unsaved = sum(self._unsaved_access.values())
        row = self.index.conn().execute("SELECT coalesce(sum(access_pending), 0) FROM notes")
        return unsaved + int(row.fetchone()[0])

    def flush_access_counts(self) -> int:
        """Write access counts kept in the index into the notes' front matter."""
        written = 0
        with self.index.write() as tx:
            self._flush_unsaved_access(tx)
            rows = tx.execute(
                "SELECT nid, id, path, access_pending FROM notes WHERE access_pending > 0"
            ).fetchall()
            for row in rows:
                try:
                    self._rewrite(tx, row, {}, lenient=False)
                    written += 1
                except (InvalidInputError, NotFoundError) as exc:
                    log.info("access count of %s stays in the index: %s", row["path"], exc)
        if written:
            self._after_change(True)
        return written

    def _flush_access_safely(self) -> None:
        try:
            self.flush_access_counts()
        except sqlite3.DatabaseError as exc:  # a damaged index is about to be rebuilt
            log.warning("could not write access counts before rebuilding: %s", exc)

    def _pending_by_path(self) -> dict[str, int]:
        """Access counts still only in the index, by note path (none if it cannot be read)."""
        with self._access_lock:
            unsaved, self._unsaved_access = self._unsaved_access, Counter()
        try:
            conn = self.index.conn()
            pending = {
                str(path): int(count)
                for path, count in conn.execute(
                    "SELECT path, access_pending FROM notes WHERE access_pending > 0"
                )
            }
            for nid, count in unsaved.items():
                row = conn.execute("SELECT path FROM notes WHERE nid = ?", (nid,)).fetchone()
                if row is not None:
                    pending[row[0]] = pending.get(row[0], 0) + count
        except sqlite3.DatabaseError as exc:
            log.warning("access counts not carried over the rebuild: %s", exc)
            return {}
        return pending

    # --- _index.json ---------------------------------------------------------------------------

    def _after_change(self, changed: bool) -> None:
        if changed:
            self._write_index_json(force=False, throttle=True)

    def _write_index_json(self, *, force: bool, throttle: bool) -> None:
        with self._json_lock:
            conn = self.index.conn()
            generation = self.index.generation()
            if self._json_generation < 0:  # written by any process for this generation?
                self._json_generation = int(Index.get_meta(conn, JSON_GENERATION) or -1)
            if not force and generation == self._json_generation:
                return
            now = time.monotonic()
            if throttle and now - self._json_written_at < self.config.index_json_interval:
                return
            write_index_json(conn, self.root, limit=self.config.index_json_limit)
            self._json_generation = generation
            self._json_written_at = now
            with self.index.try_write(0.05) as tx:
                if tx is not None:
                    Index.set_meta(tx, JSON_GENERATION, str(generation))
            self.files.own_write("")


class _KeptForSearches:
    """What searches under narrowing filters keep from one to the next until the index
    changes (`MemoryStore._kept_for_searches`). The same project is searched on every prompt
    (hooks, the chat agent, the MCP tools), and each of these reads repeats work or grows with
    the whole index rather than the scope (docs/search.md, "Filters first"):
    - `first`: the filters' notes counted, with their rowid span (`narrowed`);
    - `ids`: their note ids, for the vector side (`narrowed_ids`);
    - `walks`: each phrase's walk among them with FTS5's `bm25()` of the phrase alone, which
      first counts the phrase's notes in the whole index (~0.1-0.2 ms a common word at 10k
      notes);
    - `sizes`: a found note's id and word count (its FTS5 docsize record), for scoring;
    - `scope_indexes`: a scope searched again gets an FTS5 index of its own (`ScopeIndex`,
      built on its second search), which replaces `walks` and `sizes` for it; `searched`
      counts each scope's searches until then, `too_large` the scopes of too much text.
    `rows` counts what `ids`, `walks` and `sizes` hold, for the store's bound (a scope index
    adds its notes when built; its kept scores are bounded by its few notes)."""

    __slots__ = (
        "first",
        "ids",
        "rows",
        "scope_indexes",
        "searched",
        "sizes",
        "too_large",
        "walks",
    )

    def __init__(self) -> None:
        self.first: dict[str, Narrowed | None] = {}
        self.ids: dict[str, builtins.list[str]] = {}
        self.walks: dict[str, dict[str, dict[int, float]]] = {}
        self.sizes: dict[int, tuple[str, int]] = {}
        self.scope_indexes: dict[str, ScopeIndex] = {}
        self.searched: Counter[str] = Counter()
        self.too_large: set[str] = set()
        self.rows = 0

    def close(self) -> None:
        """Close the scope indexes' in-memory databases."""
        for index in self.scope_indexes.values():
            index.close()
        self.scope_indexes.clear()


class _SearchQueries:
    """`memory.search.engine.SearchQueries` on the SQLite index, for one search."""

    def __init__(self, store: MemoryStore, conn: sqlite3.Connection, filters: Filters) -> None:
        self._store = store
        self._conn = conn
        self._filters = filters
        self._first: tuple[Narrowed | None] | None = None
        self._kept = store._kept_for_searches()
        self._walked = self._kept.walks.setdefault(repr(filters), {})
        """Each phrase's scores among the few notes, for the search's next keyword query and
        the next searches under the same filters."""
        self._stats: dict[str, Statistics] = {}
        self._scope_index: tuple[ScopeIndex | None] | None = None

    def first(self) -> Narrowed | None:
        """The few notes that pass the filters (a scope of a few notes: only its matches are
        ranked and only its vectors compared; docs/search.md, "Filters first")."""
        if self._first is None:
            most = prefilter_most(self._store._note_count())
            key = f"{self._filters!r}\x00{most}"
            kept = self._kept.first
            if key not in kept:
                kept[key] = narrowed(self._conn, self._filters, most)
            self._first = (kept[key],)
        return self._first[0]

    def _statistics(self, stats: Filters | None) -> Statistics:
        """`MemoryStore._statistics`, once a search."""
        key = repr(stats)
        if key not in self._stats:
            self._stats[key] = self._store._statistics(stats)
        return self._stats[key]

    def _local(self) -> Filters | None:
        """The notes whose statistics rank this search (`Filters.statistics`) when its
        filters leave few notes, else None (the whole index's)."""
        return self._filters.statistics if self.first() is not None else None

    def scope_index(self) -> ScopeIndex | None:
        """The search's scope in an index of its own (`ScopeIndex`), when its statistics
        filters leave at most `SCOPE_INDEX_MOST` notes (and no more than the ranking cap) and
        it was searched before since the index last changed; built then. Else None."""
        if self._scope_index is None:
            self._scope_index = (self._find_scope_index(),)
        return self._scope_index[0]

    def _find_scope_index(self) -> ScopeIndex | None:
        stats = self._local()
        if stats is None:
            return None
        kept, key = self._kept, repr(stats)
        if key in kept.scope_indexes:
            return kept.scope_indexes[key]
        if key in kept.too_large:
            return None
        notes = self._store._note_count(stats)
        cap = self._store.config.max_ranked_matches
        if notes > SCOPE_INDEX_MOST or 0 < cap < notes:
            return None
        kept.searched[key] += 1
        if kept.searched[key] < 2:  # a hook process searches once: nothing to build
            return None
        where, params = stats.sql()
        size = self._conn.execute(
            "SELECT coalesce(sum(length(n.title) + length(n.summary) + length(n.body)), 0)"
            f" FROM notes n WHERE {where}",
            params,
        ).fetchone()[0]
        if size > SCOPE_INDEX_CHARS:  # huge notes: the walk in the home's index, not memory
            kept.too_large.add(key)
            return None
        rows = self._conn.execute(
            "SELECT n.nid, n.id, n.title, n.tags, n.summary, n.body, n.scope, n.status,"
            f" n.expires_ts FROM notes n WHERE {where}",
            params,
        ).fetchall()
        index = ScopeIndex(tuple(r) for r in rows)
        if len(kept.scope_indexes) >= SCOPE_INDEXES_KEPT:  # the oldest goes
            del kept.scope_indexes[next(iter(kept.scope_indexes))]
        kept.scope_indexes[key] = index
        kept.rows += index.notes
        return index

    def keyword_candidates(
        self, parsed: ParsedQuery, filters: Filters, limit: int, *, require_all: bool
    ) -> builtins.list[Candidate]:
        first = self.first()
        match = parsed.fts(require_all=require_all)
        local = self._local() if filters == self._filters else None
        index = self.scope_index() if local is not None else None
        if first is not None and index is not None:
            ranked = fts_rows_scope_index(
                self._conn,
                index,
                match,
                [t.fts for t in parsed.terms],
                filters.active_at,
                limit,
                require_all=require_all,
                plain=not parsed.excluded,
            )
            return [Candidate(r, bm25) for r, bm25 in ranked]
        cap = self._store.config.max_ranked_matches
        if first is not None:
            cap = self._store._ranking_cap(parsed, self._statistics(None))
        if first is not None and local is not None:
            kept = self._kept
            known, sized = set(self._walked), len(kept.sizes)
            ranked = fts_rows_local(
                self._conn,
                match,
                [t.fts for t in parsed.terms],
                filters,
                limit,
                cap,
                first=first,
                whole=self._statistics(None),
                local=self._statistics(local),
                require_all=require_all,
                plain=not parsed.excluded,
                walked=self._walked,
                sizes=kept.sizes,
            )
            walked = sum(len(self._walked[k]) for k in self._walked.keys() - known)
            kept.rows += walked + len(kept.sizes) - sized
            return [Candidate(r, bm25) for r, bm25 in ranked]
        rows = fts_rows(self._conn, match, filters, limit, cap, first=first)
        return [Candidate(r, float(r["bm25"])) for r in rows]

    def identifier_rows(
        self, parsed: ParsedQuery, filters: Filters, limit: int
    ) -> builtins.list[sqlite3.Row]:
        trigram = parsed.trigram()
        if not trigram:
            return []
        first = self.first()
        local = self._local() if filters == self._filters else None
        index = self.scope_index() if local is not None else None
        if first is not None and index is not None:
            # the scope's own index, every match of the scope, as its words are ranked
            # (`fts_rows_scope_index`): the home's walks its trigrams through every note
            return trigram_rows_of(self._conn, index.identifiers(trigram), filters, limit)
        floor = self._store._identifier_floor(trigram)
        return trigram_rows(self._conn, trigram, filters, limit, first=first, floor=floor)

    def doc_freqs(self, parsed: ParsedQuery) -> tuple[int, builtins.list[int]]:
        stats = self._local()
        index = self.scope_index()
        if index is not None:  # the scope's counts, from its own index
            return index.notes, [min(len(index.scores(t.fts)), engine.DF_CAP) for t in parsed.terms]
        if stats is not None:  # the scope's counts, the same as its BM25's
            local = self._statistics(stats)
            return local.notes, [min(local.hits(t.fts), engine.DF_CAP) for t in parsed.terms]
        return self._store._note_count(), self._store._doc_freqs_of(parsed)

    def nearest(
        self, vector: QueryVector, k: int, filters: Filters
    ) -> builtins.list[tuple[str, float]]:
        first = self.first()
        return self._store.vectors.search(
            vector.model,
            vector.vector,
            k,
            allowed=lambda ids: _ids_where(self._conn, ids, *filters.sql()),
            subset=lambda most: (
                self._narrowed_ids(first) if first is not None and first.count <= most else None
            ),
        )

    def _narrowed_ids(self, first: Narrowed) -> builtins.list[str]:
        """`narrowed_ids`, kept."""
        key = repr(self._filters)
        kept = self._kept
        if key not in kept.ids:
            kept.ids[key] = narrowed_ids(self._conn, self._filters, first)
            kept.rows += len(kept.ids[key])
        return kept.ids[key]

    def rows_by_id(self, ids: builtins.list[str]) -> dict[str, sqlite3.Row]:
        cols = ", ".join(f"n.{c.strip()}" for c in NOTE_COLUMNS.split(","))
        rows: dict[str, sqlite3.Row] = {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ", ".join("?" * len(part))
            sql = f"SELECT {cols} FROM notes n WHERE n.id IN ({marks})"
            for row in self._conn.execute(sql, part):
                rows[row["id"]] = row
        return rows


_ACTIVE: Final = (
    "n.scope = ? AND n.status = 'active' AND (n.expires_ts IS NULL OR n.expires_ts > ?)"
)
"""Dedup looks among the active, unexpired notes of the new note's scope."""


class _SaveQueries:
    """`memory.core.SaveQueries` inside the SQLite writer lock, for one save."""

    def __init__(
        self,
        store: MemoryStore,
        tx: sqlite3.Connection,
        wanted: str | None,
        text: str,
        tmp: Path,
        scope: str,
        now: datetime,
    ) -> None:
        self._store = store
        self._tx = tx
        self._wanted = wanted
        self._text = text
        self._tmp = tmp
        self._active = (scope, now.timestamp())

    def same_content(self, content_hash: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self._tx.execute(
            f"SELECT n.nid, n.path FROM notes n WHERE n.content_hash = ? AND {_ACTIVE}"
            " ORDER BY n.nid LIMIT 1",
            (content_hash, *self._active),
        ).fetchone()
        return row

    def sharing_bands(self, bands: builtins.list[int]) -> builtins.list[sqlite3.Row]:
        marks = ", ".join("?" * len(bands))
        # the notes sharing most bands first; only a few are compared in full
        return self._tx.execute(
            f"SELECT n.nid, n.id, n.path, n.type, n.body FROM (SELECT nid, count(*) AS shared"
            f" FROM note_bands WHERE band IN ({marks}) GROUP BY nid) b"
            f" JOIN notes n ON n.nid = b.nid WHERE {_ACTIVE}"
            f" ORDER BY b.shared DESC, n.nid LIMIT 10",
            (*bands, *self._active),
        ).fetchall()

    def exists(self, note_id: str) -> bool:
        found = self._tx.execute("SELECT 1 FROM notes WHERE id = ?", (note_id,)).fetchone()
        return found is not None

    def row_to_supersede(self, note_id: str) -> sqlite3.Row | None:
        # the writer lock is held until the save ends
        sql = "SELECT nid, id, path, type, body FROM notes WHERE id = ?"
        row: sqlite3.Row | None = self._tx.execute(sql, (note_id,)).fetchone()
        return row

    def refresh(self, row: sqlite3.Row, now: datetime) -> SaveResult:
        note = self._store._rewrite(self._tx, row, {"updated": now}, extra_access=1, lenient=True)
        return SaveResult(id=note.id, deduplicated=True, path=note.path)

    def insert(self, note: Note) -> Note:
        return self._store._publish(self._tx, note, self._wanted, self._text, self._tmp)

    def mark_superseded(self, row: sqlite3.Row, new_id: str, now: datetime) -> None:
        changes = {"status": "superseded", "superseded_by": new_id, "updated": now}
        self._store._rewrite(self._tx, row, changes)


def _ids_where(
    conn: sqlite3.Connection, ids: builtins.list[str], where: str, params: builtins.list[Any]
) -> set[str]:
    """Those of `ids` whose notes pass `where` (a condition on `notes n`)."""
    allowed: set[str] = set()
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        marks = ", ".join("?" * len(part))
        sql = f"SELECT n.id FROM notes n WHERE n.id IN ({marks}) AND {where}"
        allowed.update(r[0] for r in conn.execute(sql, [*part, *params]))
    return allowed


def _same_file(root: Path, row: sqlite3.Row) -> bool:
    try:
        stat = (root / row["path"]).stat()
    except OSError:
        return False
    return bool(stat.st_mtime_ns == row["mtime_ns"] and stat.st_size == row["size"])
