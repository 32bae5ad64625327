"""The SQLite index in step with the note files (the truth): `FileSync`, the job of
`memory.sqlite.store.MemoryStore` that scans the files, reads what changed and indexes it.

Incremental: a file whose stat (mtime, size) is what the index last verified is not read; one
whose stat moved is hashed, and parsed and re-indexed only when its bytes changed. A read
checks the folders' mtimes (new, deleted or renamed files), and rescans every file on a small
store or once the last scan is older than the rescan interval (at most ~5% of the time on a
large one). A body edited by hand brings the title and summary derived from it along, written
into the file (`ranking.rederived`, the one rule), and the notes' history hears of every hand
edit. `rebuild` drops the index and reads every file again. See docs/search.md.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from errors import ClaudeMemoryError
from memory import _text
from memory.model import Note, SyncIssue, SyncReport
from memory.notes.files import (
    is_note_name,
    iter_note_files,
    list_dirs,
    note_folder,
    parse_note,
)
from memory.search.ranking import rederived
from memory.sqlite.index import Entry, make_entry
from storage.refused import refusal

if TYPE_CHECKING:
    from collections.abc import Callable

    from memory.sqlite.store import MemoryStore

log = logging.getLogger(__name__)

RACY_NS: Final = 1_000_000_000
"""A file modified less than this before we last read it is re-hashed on the next scan:
an edit within the file system's timestamp granularity would otherwise go unnoticed."""
BATCH: Final = 500
"""Files indexed per write transaction in a sync (other writers get their turn between)."""


class FileSync:
    """One store's scans: what it last saw of each folder and when, under one lock (a sync or
    a rebuild at a time; reads wait briefly, then go ahead on the index as it is)."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self.root = store.root
        self.config = store.config
        self.index = store.index
        self.lock = threading.RLock()
        self.dir_mtimes = _Folders()
        self._last_scan_end = float("-inf")
        self._last_scan_cost = float("inf")
        self._last_scan_files = 0
        self.last_report = SyncReport()

    def sync(self) -> SyncReport:
        """Bring the index up to date with every file (incremental: stat, then hash)."""
        with self.lock:
            return self._sync(None)

    def assume_large(self) -> None:
        """No opening scan (`MemoryStore.open(sync=False)`): treat the store as large and just
        scanned, so the next full rescan waits for the rescan interval."""
        self._last_scan_end = time.monotonic()
        self._last_scan_cost = self.config.rescan_interval / 20
        self._last_scan_files = self.config.rescan_every_read_below

    def own_write(self, folder: str) -> None:
        """The store wrote or deleted a file in `folder`: not a change the next read rescans."""
        if folder in self.dir_mtimes:
            self.dir_mtimes[folder] = _dir_mtime(self.root, folder)

    def ensure_fresh(self, scope: str | None = None) -> SyncReport | None:
        """Sync what a read in `scope` needs checked (the module doc); the report, or None
        when nothing was scanned."""
        # A long sync or rebuild in another thread must not stall reads: after a short wait
        # they go ahead on the index as it is (WAL readers see the last committed state).
        if not self.lock.acquire(timeout=0.2):
            return None
        try:
            report = self._fresh_locked(scope)
        except (sqlite3.Error, OSError) as exc:
            if refusal(exc) is None:
                raise
            # a home that takes no writes (read-only, full disk) is read as it was indexed;
            # tried again after the rescan interval, not on every read
            log.warning("index not brought up to date, read as it is: %s", exc)
            self._last_scan_end = time.monotonic()
            report = None
        finally:
            self.lock.release()
        return report

    def _fresh_locked(self, scope: str | None = None) -> SyncReport | None:
        elapsed = time.monotonic() - self._last_scan_end
        # rescans cost at most ~5% of the time on large stores
        interval = max(self.config.rescan_interval, 20 * self._last_scan_cost)
        small = self._last_scan_files < self.config.rescan_every_read_below
        if small or elapsed >= interval:
            return self._sync(None)
        root = os.fspath(self.root)
        other = _other_projects(scope)
        known = self.dir_mtimes
        changed = [d for d in known.checked(other) if _dir_mtime(root, d) != known[d]]
        return self._sync(changed) if changed else None

    def _scan(self, dirs: list[str] | None) -> tuple[dict[str, os.stat_result], list[str] | None]:
        """Files to compare and the folders whose index rows they cover (None: all)."""
        if dirs is None:
            folders: list[str] = []
            files = dict(iter_note_files(self.root, dirs=folders))
            self.dir_mtimes = _Folders({d: _dir_mtime(self.root, d) for d in folders})
            return files, None
        files = {}
        covered: list[str] = []
        pending = list(dirs)
        while pending:
            rel = pending.pop()
            covered.append(rel)
            folder = self.root / rel if rel else self.root
            mtime = _dir_mtime(self.root, rel)
            if mtime < 0:  # folder gone: its known subfolders too
                self.dir_mtimes.drop(rel)
                prefix = rel + "/"
                gone = [d for d in self.dir_mtimes if d.startswith(prefix)]
                for d in gone:
                    self.dir_mtimes.drop(d)
                covered.extend(gone)
                continue
            self.dir_mtimes[rel] = mtime
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                child = f"{rel}/{entry.name}" if rel else entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if child not in self.dir_mtimes:
                            pending.append(child)
                    elif is_note_name(entry.name) and entry.is_file():
                        files[child] = entry.stat()
                except FileNotFoundError:
                    continue
        return files, covered

    def _sync(self, dirs: list[str] | None) -> SyncReport:
        started = time.perf_counter()
        files, covered = self._scan(dirs)
        known = self.index.file_states(covered)
        issues: list[SyncIssue] = []
        unchanged = 0
        entries: list[Entry] = []
        verified: list[tuple[str, int, int, int]] = []
        for rel in sorted(files):
            stat = files[rel]
            row = known.get(rel)
            if (
                row is not None
                and row["mtime_ns"] == stat.st_mtime_ns
                and row["size"] == stat.st_size
                and stat.st_mtime_ns + RACY_NS <= row["verified_ns"]
            ):
                unchanged += 1
                continue
            outcome = self.prepare(rel, row, issues)
            if outcome is None:
                continue
            if isinstance(outcome, Entry):
                entries.append(outcome)
            else:
                verified.append(outcome)
                unchanged += 1
        entries.sort(key=_insert_order)
        gone = [row for rel, row in known.items() if rel not in files]
        added = updated = removed = 0
        by_hand: list[tuple[Note, bool]] = []  # for the notes' history
        gone_ids: list[str] = []
        if entries or verified or gone:
            for start in range(0, max(len(entries), 1), BATCH):
                with self.index.write() as tx:
                    for entry in entries[start : start + BATCH]:
                        if not _same_stat(self.root / entry.note.path, entry):
                            continue  # changed again while we read it: next sync
                        follow = self._derived_to_follow(tx, entry)
                        put, placed = self.index.put(tx, entry, path_exists=self.exists)
                        if placed.parse_ok:
                            by_hand.append((self._follow(tx, placed.note, follow), put == "added"))
                        if put == "added":
                            added += 1
                        else:
                            updated += 1
                    if start == 0:
                        for rel, mtime_ns, size, verified_ns in verified:
                            tx.execute(
                                "UPDATE notes SET mtime_ns = ?, size = ?, verified_ns = ?"
                                " WHERE path = ?",
                                (mtime_ns, size, verified_ns, rel),
                            )
                        for row in gone:
                            if not self.exists(row["path"]):
                                # by path: a move above may have deleted this row already
                                current = tx.execute(
                                    "SELECT nid, id FROM notes WHERE path = ?", (row["path"],)
                                ).fetchone()
                                if current is not None:
                                    self.index.delete(tx, current["nid"])
                                    gone_ids.append(current["id"])
                                    removed += 1
        self._store._saw_on_disk(by_hand, gone_ids)
        report = SyncReport(
            added=added,
            updated=updated,
            removed=removed,
            unchanged=unchanged,
            issues=tuple(issues),
            seconds=time.perf_counter() - started,
        )
        if dirs is None:
            self._last_scan_end = time.monotonic()
            self._last_scan_cost = report.seconds
            self._last_scan_files = len(files)
            self.last_report = report
        return report

    def exists(self, relpath: str) -> bool:
        return (self.root / relpath).is_file()

    def prepare(
        self, rel: str, row: sqlite3.Row | None, issues: list[SyncIssue]
    ) -> Entry | tuple[str, int, int, int] | None:
        """Read one file: an Entry to index, a (path, stat, verified) when only the stat
        changed, or None (unreadable; recorded in `issues`)."""
        path = self.root / rel
        verified_ns = time.time_ns()
        try:
            stat = path.stat()
            with open(path, "rb") as handle:
                data = handle.read(self.config.max_note_bytes)
        except OSError as exc:
            issues.append(SyncIssue(rel, f"unreadable: {exc.strerror or exc}"))
            log.warning("memory note %s is unreadable: %s", rel, exc)
            return None
        digest = _text.file_hash(data)
        if row is not None and digest == row["file_hash"]:
            return (rel, stat.st_mtime_ns, stat.st_size, verified_ns)
        parsed = parse_note(data, rel, stat.st_mtime)
        warnings = list(parsed.warnings)
        if stat.st_size > self.config.max_note_bytes:
            warnings.append(f"larger than {self.config.max_note_bytes} bytes; indexed in part")
        for warning in warnings:
            issues.append(SyncIssue(rel, warning))
            log.warning("memory note %s: %s", rel, warning)
        parsed = replace(parsed, warnings=tuple(warnings))
        return make_entry(
            parsed,
            data_hash=digest,
            mtime_ns=stat.st_mtime_ns,
            size=stat.st_size,
            verified_ns=verified_ns,
            max_chars=self.config.max_indexed_chars,
        )

    def sync_paths(self, relpaths: list[str]) -> None:
        """Re-check a few files (e.g. the notes a search is about to return)."""
        issues: list[SyncIssue] = []
        by_hand: list[tuple[Note, bool]] = []  # for the notes' history
        gone_ids: list[str] = []
        with self.index.write() as tx:
            for rel in relpaths:
                row = tx.execute(
                    "SELECT nid, id, file_hash FROM notes WHERE path = ?", (rel,)
                ).fetchone()
                if not self.exists(rel):
                    if row is not None:
                        self.index.delete(tx, row["nid"])
                        gone_ids.append(row["id"])
                    continue
                outcome = self.prepare(rel, row, issues)
                if isinstance(outcome, Entry):
                    follow = self._derived_to_follow(tx, outcome)
                    put, placed = self.index.put(tx, outcome, path_exists=self.exists)
                    if placed.parse_ok:
                        by_hand.append((self._follow(tx, placed.note, follow), put == "added"))
                elif outcome is not None:
                    _, mtime_ns, size, verified_ns = outcome
                    tx.execute(
                        "UPDATE notes SET mtime_ns = ?, size = ?, verified_ns = ? WHERE path = ?",
                        (mtime_ns, size, verified_ns, rel),
                    )
        self._store._saw_on_disk(by_hand, gone_ids)

    def _derived_to_follow(self, tx: sqlite3.Connection, entry: Entry) -> dict[str, Any]:
        """A body changed by hand: the title and summary that were derived from the old body
        (equal to its derivation, and left as they were by the edit) and now follow the new
        one, as for an update through the store (`ranking.rederived`, the one rule)."""
        if not entry.parse_ok:
            return {}
        old = tx.execute(
            "SELECT title, summary, body FROM notes WHERE path = ? AND parse_ok = 1",
            (entry.note.path,),
        ).fetchone()
        if old is None or old["body"] == entry.body:
            return {}
        new = entry.note
        before = replace(new, title=old["title"], summary=old["summary"], body=old["body"])
        follows = rederived(before, {"body": entry.body}, new.path)
        return {
            key: follows[key]
            for key in ("title", "summary")
            if key in follows and getattr(new, key) == old[key] != follows[key]
        }

    def _follow(self, tx: sqlite3.Connection, note: Note, changes: dict[str, Any]) -> Note:
        """Write the re-derived title/summary into the hand-edited file (the truth: a rebuild
        must find them there) and the index; the note as it now is."""
        if not changes:
            return note
        row = tx.execute("SELECT path FROM notes WHERE path = ?", (note.path,)).fetchone()
        if row is None:
            return note
        try:
            return self._store._rewrite(tx, row, changes)
        except ClaudeMemoryError as exc:  # gone or broken since: the next sync sees it
            log.info("derived summary of %s not refreshed: %s", note.path, exc.message)
            return note

    def rebuild(self, progress: Callable[[str, int, int], None] | None = None) -> SyncReport:
        """Drop the index and rebuild it from the files (pending access counts are written
        to their notes first; those that cannot be, a note whose front matter is broken or an
        index too old or damaged to rewrite through, are carried over by path, so nothing is
        lost)."""
        started = time.perf_counter()
        with self.lock:
            self._store._flush_access_safely()
            carried = self._store._pending_by_path()
            files = sorted(iter_note_files(self.root))
            issues: list[SyncIssue] = []
            entries: list[Entry] = []
            total = len(files)
            for done, (rel, _stat) in enumerate(files, 1):
                entry = self.prepare(rel, None, issues)
                if isinstance(entry, Entry):
                    entries.append(entry)
                if progress:
                    progress("read", done, total)
            entries.sort(key=_insert_order)
            with self.index.write() as tx:
                self.index.delete_all(tx)
                for done, entry in enumerate(entries, 1):
                    self.index.put(tx, entry, path_exists=self.exists)
                    if progress and (done % 100 == 0 or done == len(entries)):
                        progress("index", done, len(entries))
                tx.executemany(
                    "UPDATE notes SET access_pending = access_pending + ? WHERE path = ?",
                    [(count, path) for path, count in carried.items()],
                )
            self.dir_mtimes = _Folders({d: _dir_mtime(self.root, d) for d in list_dirs(self.root)})
            self._last_scan_end = time.monotonic()
            report = SyncReport(
                added=len(entries),
                issues=tuple(issues),
                seconds=time.perf_counter() - started,
            )
            self._last_scan_cost = report.seconds / 4  # a plain sync costs a fraction
            self._last_scan_files = total
            self.last_report = report
        return report


def _insert_order(entry: Entry) -> tuple[datetime, str, str]:
    """Index oldest changes first, so row ids follow `updated` (see `fts_rows(cap=...)`)."""
    return (entry.note.updated, entry.note.id, entry.note.path)


def _other_projects(scope: str | None) -> str | None:
    """For a read in a project scope: that project's folder (`projects/<key>`), whose
    siblings hold other projects' notes the read cannot show; their mtimes are left to the
    next read without that scope or the next full rescan (a 100-project home checked 100
    folders on every read: ~1 ms a search). None: every folder is checked."""
    if scope is None or not scope.startswith("project:"):
        return None
    return note_folder("project", scope)


class _Folders(dict[str, int]):
    """The home's folders and their mtimes, with the list a read in a project checks kept
    until a folder comes or goes: its own project's folders and the shared ones. Walking
    every folder to pick them cost a home of 1,000 projects ~2 ms a search (docs/search.md,
    "Filters first")."""

    def __init__(self, known: dict[str, int] | None = None) -> None:
        super().__init__(known or {})
        self._checked: dict[str | None, list[str]] = {}

    def __setitem__(self, folder: str, mtime: int) -> None:
        if folder not in self:
            self._checked.clear()
        super().__setitem__(folder, mtime)

    def __delitem__(self, folder: str) -> None:
        self._checked.clear()
        super().__delitem__(folder)

    def drop(self, folder: str) -> None:
        if folder in self:
            del self[folder]

    def checked(self, project: str | None) -> list[str]:
        """The folders a read checks: all of them, or with `project` (`projects/<key>`) its
        own and those outside `projects/`."""
        found = self._checked.get(project)
        if found is None:
            found = [
                d
                for d in self
                if not (project and d.startswith("projects/") and not _within(d, project))
            ]
            if len(self._checked) >= 64:
                self._checked.clear()
            self._checked[project] = found
        return found


def _within(rel: str, folder: str) -> bool:
    return rel == folder or rel.startswith(folder + "/")


def _dir_mtime(root: Path | str, rel: str) -> int:
    # plain strings: every read stats each folder of the home (one per scope), and building
    # a Path per folder cost more than the stat itself
    try:
        return os.stat(os.path.join(root, rel) if rel else root).st_mtime_ns
    except OSError:
        return -1


def _same_stat(path: Path, entry: Entry) -> bool:
    try:
        stat = path.stat()
    except OSError:
        return False
    return stat.st_mtime_ns == entry.mtime_ns and stat.st_size == entry.size
