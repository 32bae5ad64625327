"""The bridge's own SQLite file (`<home>/feishu.db`): dedup, chat generations, owner.

* Dedup keys on the event id **and** the message id: Feishu re-pushes with the same event id,
  and a reconnect backfill can deliver the same message under a new event id. Rows are kept
  48 h (Feishu retries for at most ~7 h), so a restart never answers a message twice.
* A chat's generation N names its conversation `feishu:{chat_id}:v{N}`; `/clear` bumps it.
* The owner is the first user who sent the right `/pair <code>` when no allowlist is set.

The websocket thread claims events while the app loop reads generations: one `SQLiteDB`
connection (WAL, busy timeout, a writer lock). Every call is a single short statement.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Protocol

from memory.sqlite import SQLiteDB

DEDUP_KEEP_SECONDS = 48 * 3600
_PRUNE_EVERY_SECONDS = 3600.0

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE seen (
        key TEXT PRIMARY KEY,
        seen_at REAL NOT NULL
    );
    CREATE INDEX seen_by_time ON seen(seen_at);
    CREATE TABLE chats (
        chat_id TEXT PRIMARY KEY,
        generation INTEGER NOT NULL,
        updated REAL NOT NULL
    );
    CREATE TABLE owner (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        open_id TEXT NOT NULL,
        paired_at REAL NOT NULL
    );
    """,
)


class BridgeStateBackend(Protocol):
    """What the Feishu bridge needs from its state. Two implementations: `BridgeState` (SQLite,
    one instance) and `bridge.state_pg.PostgresBridgeState` (shared, so an event re-delivered to
    another instance is still answered once); `tests/storage` runs one contract suite against
    both. Every call is short and synchronous and may come from the websocket thread."""

    def close(self) -> None: ...

    def claim(self, event_id: str, message_id: str, *, now: float | None = None) -> bool:
        """Record an event; True if neither its event id nor its message id was seen before."""
        ...

    def release(self, event_id: str, message_id: str) -> None:
        """Forget a claim (the event could not be handed over; Feishu will push it again)."""
        ...

    def prune(self, *, now: float | None = None) -> int:
        """Forget claims older than the keep window; returns how many rows went."""
        ...

    def generation(self, chat_id: str) -> int:
        """The chat's current generation (1 for a chat never cleared)."""
        ...

    def bump_generation(self, chat_id: str) -> int:
        """Start the chat's next conversation; returns the new generation."""
        ...

    def owner(self) -> str | None: ...

    def set_owner(self, open_id: str) -> bool:
        """Make `open_id` the owner unless there already is one; True if it became the owner."""
        ...


class BridgeState:
    """Persistent state of the Feishu bridge; safe to call from several threads."""

    def __init__(self, path: Path, *, keep_seconds: float = DEDUP_KEEP_SECONDS) -> None:
        self.path = path
        self.keep_seconds = keep_seconds
        self._db = SQLiteDB(path)
        self._db.migrate("feishu", MIGRATIONS)
        self._pruned_at = 0.0
        self.prune()

    def close(self) -> None:
        self._db.close()

    # --- dedup -----------------------------------------------------------------------------------
    def claim(self, event_id: str, message_id: str, *, now: float | None = None) -> bool:
        """Record an event; True if neither its event id nor its message id was seen before."""
        now = time.time() if now is None else now
        keys = [f"event:{event_id}", f"message:{message_id}"]
        with self._db.write() as conn:
            fresh = all(
                conn.execute("SELECT 1 FROM seen WHERE key = ?", (key,)).fetchone() is None
                for key in keys
            )
            conn.executemany(
                "INSERT OR IGNORE INTO seen(key, seen_at) VALUES (?, ?)",
                [(key, now) for key in keys],
            )
        if now - self._pruned_at > _PRUNE_EVERY_SECONDS:
            self.prune(now=now)
        return fresh

    def release(self, event_id: str, message_id: str) -> None:
        """Forget a claim (the event could not be handed over; Feishu will push it again)."""
        with self._db.write() as conn:
            conn.executemany(
                "DELETE FROM seen WHERE key = ?",
                [(f"event:{event_id}",), (f"message:{message_id}",)],
            )

    def prune(self, *, now: float | None = None) -> int:
        now = time.time() if now is None else now
        self._pruned_at = now
        with self._db.write() as conn:
            cursor = conn.execute("DELETE FROM seen WHERE seen_at < ?", (now - self.keep_seconds,))
            return cursor.rowcount

    # --- chat generations ------------------------------------------------------------------------
    def generation(self, chat_id: str) -> int:
        rows = self._db.read("SELECT generation FROM chats WHERE chat_id = ?", (chat_id,))
        return int(rows[0][0]) if rows else 1

    def bump_generation(self, chat_id: str) -> int:
        """Start the chat's next conversation; returns the new generation."""
        with self._db.write() as conn:
            row = conn.execute(
                "SELECT generation FROM chats WHERE chat_id = ?", (chat_id,)
            ).fetchone()
            new = (int(row[0]) if row else 1) + 1
            conn.execute(
                "INSERT INTO chats(chat_id, generation, updated) VALUES (?, ?, ?) "
                "ON CONFLICT(chat_id) DO UPDATE SET generation = excluded.generation, "
                "updated = excluded.updated",
                (chat_id, new, time.time()),
            )
        return new

    # --- owner -----------------------------------------------------------------------------------
    def owner(self) -> str | None:
        rows = self._db.read("SELECT open_id FROM owner WHERE id = 1")
        return str(rows[0][0]) if rows else None

    def set_owner(self, open_id: str) -> bool:
        """Make `open_id` the owner unless there already is one; True if it became the owner."""
        with self._db.write() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO owner(id, open_id, paired_at) VALUES (1, ?, ?)",
                (open_id, time.time()),
            )
            return cursor.rowcount == 1
