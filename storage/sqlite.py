"""The one SQLite helper for state databases: WAL, busy timeout, a writer lock, numbered
migrations per component. Used by memory state, conversations and the Feishu bridge."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


class SQLiteDB:
    """A thread-safe connection; writes take `BEGIN IMMEDIATE` (one writer across processes)."""

    def __init__(self, path: Path, *, busy_timeout_ms: int = 5000) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._conn = sqlite3.connect(
            path, check_same_thread=False, isolation_level=None, timeout=busy_timeout_ms / 1000
        )
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        self._conn.execute("PRAGMA journal_mode=WAL")
        # In WAL mode NORMAL syncs at checkpoints, not at every commit: a commit survives the
        # process crashing (it is in the WAL file); only a power loss or an OS crash can undo
        # the last commits, never corrupt the file. FULL cost every hook prompt two fsyncs
        # (2-4 ms quiet, more on a busy disk).
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._begin()
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def read(self, sql: str, params: Sequence[object] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, tuple(params)).fetchall()

    def migrate(self, component: str, migrations: Sequence[str]) -> None:
        """Apply `migrations[i]` as version i+1 of `component`, once, in order."""
        with self.write() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations"
                " (component TEXT NOT NULL, version INTEGER NOT NULL,"
                " PRIMARY KEY (component, version))"
            )
            done = {
                r[0]
                for r in db.execute(
                    "SELECT version FROM schema_migrations WHERE component = ?", (component,)
                )
            }
            for version, script in enumerate(migrations, start=1):
                if version in done:
                    continue
                for statement in filter(str.strip, script.split(";")):
                    db.execute(statement)
                db.execute(
                    "INSERT INTO schema_migrations(component, version) VALUES (?, ?)",
                    (component, version),
                )

    def _begin(self) -> None:
        # busy_timeout covers most waits; retry briefly if another process holds the lock longer.
        deadline = time.monotonic() + 30
        while True:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                busy = getattr(exc, "sqlite_errorcode", None) in _BUSY_CODES
                if not busy or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
