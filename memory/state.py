"""Memory state that is *not* derived from the notes: episodes, their messages, pending entities
and the hooks' injection windows. Lives in `<home>/state.db` (deleting `index.db` must lose
nothing; this file is not rebuildable, so it is kept apart from the index).

Tables carry a `mem_` prefix and their own migration table, so the agent's conversation tables
can share the file.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE mem_episodes (
        id TEXT PRIMARY KEY,
        key TEXT NOT NULL,
        project TEXT NOT NULL DEFAULT '',
        scope TEXT NOT NULL DEFAULT 'user',
        title TEXT NOT NULL,
        source TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'active',
        started REAL NOT NULL,
        ended REAL,
        turns INTEGER NOT NULL DEFAULT 0,
        file_changes INTEGER NOT NULL DEFAULT 0,
        summary TEXT NOT NULL DEFAULT '',
        summary_note_id TEXT
    );
    CREATE INDEX mem_episodes_by_key ON mem_episodes(key, status);
    CREATE INDEX mem_episodes_by_time ON mem_episodes(started);
    CREATE TABLE mem_episode_messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        episode_id TEXT NOT NULL,
        role TEXT NOT NULL,
        kind TEXT NOT NULL DEFAULT 'message',
        title TEXT NOT NULL DEFAULT '',
        content TEXT NOT NULL,
        created REAL NOT NULL
    );
    CREATE INDEX mem_messages_by_episode ON mem_episode_messages(episode_id, id);
    CREATE TABLE mem_pending (
        id TEXT PRIMARY KEY,
        type TEXT NOT NULL,
        title TEXT NOT NULL,
        content TEXT NOT NULL,
        confidence REAL NOT NULL,
        scope TEXT NOT NULL DEFAULT 'user',
        source TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'pending',
        created REAL NOT NULL,
        note_id TEXT
    );
    CREATE TABLE mem_injections (
        key TEXT NOT NULL,
        note_id TEXT NOT NULL,
        turn INTEGER NOT NULL,
        PRIMARY KEY (key, note_id)
    );
    CREATE TABLE mem_turns (
        key TEXT PRIMARY KEY,
        turn INTEGER NOT NULL DEFAULT 0,
        previous TEXT NOT NULL DEFAULT ''
    );
    """,
)


_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


class StateDB:
    """A small SQLite connection shared by the episode and entity stores (thread-safe)."""

    def __init__(self, path: Path, *, busy_timeout_ms: int = 5000) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._conn = sqlite3.connect(
            path, check_same_thread=False, isolation_level=None, timeout=busy_timeout_ms / 1000
        )
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        self._migrate()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE: one writer across processes)."""
        with self._lock:
            self._begin()
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def read(self, sql: str, params: tuple[object, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

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

    def _migrate(self) -> None:
        with self.write() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS mem_state_migrations (version INTEGER PRIMARY KEY)"
            )
            done = {r[0] for r in db.execute("SELECT version FROM mem_state_migrations")}
            for version, script in enumerate(_MIGRATIONS, start=1):
                if version in done:
                    continue
                for statement in filter(str.strip, script.split(";")):
                    db.execute(statement)
                db.execute("INSERT INTO mem_state_migrations(version) VALUES (?)", (version,))
