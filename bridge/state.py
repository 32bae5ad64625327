"""The bridge's own SQLite file (`<home>/feishu.db`): dedup, chat generations, owner, the turns
in flight and the outbox.

* Dedup keys on the event id **and** the message id: Feishu re-pushes with the same event id,
  and a reconnect backfill can deliver the same message under a new event id. Rows are kept
  48 h (Feishu retries for at most ~7 h), so a restart never answers a message twice.
* A chat's generation N names its conversation `feishu:{chat_id}:v{N}`; `/clear` starts the
  one after the latest, `/resume <n>` goes back to an earlier one (`latest` keeps the highest
  ever used, so a `/clear` after a resume never lands on an existing conversation). The chat's
  model (`/model`) is kept beside it (NULL: the configured one).
* The owner is the first user who sent the right `/pair <code>` when no allowlist is set.
* A turn in flight has a row from the moment it is queued (`accepted`) through the model being
  asked (`started`, plus its progress card once shown) until it is answered; the rows left at
  start are what a crash interrupted (`FeishuBridge` recovers them).
* The outbox holds sends not yet delivered, keyed by their idempotency `uuid`; a row goes when
  the platform has accepted it.
* The buttons the bridge put on cards (`controls`, keyed by their unguessable nonce) outlive a
  restart: a `/forget` or "记住这个吗？" card tapped tomorrow still does what it says, and a Stop
  or approval button whose turn a restart ended says so instead of "not yours". Kept 7 days.

The websocket thread claims events while the app loop reads generations: one `SQLiteDB`
connection (WAL, busy timeout, a writer lock). Every call is a single short statement.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from storage.sqlite import SQLiteDB

DEDUP_KEEP_SECONDS = 48 * 3600
CONTROL_KEEP_SECONDS = 7 * 24 * 3600
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
    """
    CREATE TABLE turns (
        message_id TEXT PRIMARY KEY,
        chat_id TEXT NOT NULL,
        message TEXT NOT NULL,
        stage TEXT NOT NULL,
        card_id TEXT,
        accepted_at REAL NOT NULL
    );
    CREATE TABLE outbox (
        key TEXT PRIMARY KEY,
        op TEXT NOT NULL,
        target TEXT NOT NULL,
        msg_type TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at REAL NOT NULL,
        attempts INTEGER NOT NULL,
        next_at REAL NOT NULL
    );
    CREATE INDEX outbox_by_due ON outbox(next_at);
    """,
    # Several instances may share the state (PostgreSQL): each turn names the instance that
    # runs it, and instances say they are alive, so a start recovers only what a dead one left.
    """
    ALTER TABLE turns ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    CREATE TABLE instances (
        id TEXT PRIMARY KEY,
        seen_at REAL NOT NULL
    );
    """,
    # /resume and /model: the highest generation a chat ever had, and its chosen model.
    """
    ALTER TABLE chats ADD COLUMN latest INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE chats ADD COLUMN model TEXT;
    """,
    # card buttons that outlive a restart
    """
    CREATE TABLE controls (
        nonce TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        message_id TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        message TEXT NOT NULL,
        data TEXT NOT NULL,
        done INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    );
    CREATE INDEX controls_by_time ON controls(created_at);
    """,
)

TurnStage = Literal["accepted", "started"]
OutboxOp = Literal["reply", "patch"]


@dataclass(frozen=True, slots=True)
class PendingTurn:
    """A user's message taken for a turn and not answered yet."""

    message_id: str
    chat_id: str
    message: str  # the parsed message as JSON (bridge.events.message_to_json)
    stage: TurnStage  # accepted: nothing reached the model yet; started: the model was asked
    card_id: str | None  # the progress card, once shown
    accepted_at: float


@dataclass(frozen=True, slots=True)
class SavedControl:
    """A button on a card the bridge sent: its kind (stop / approval / forget / pending), the
    card's message id, the user's message it answered (JSON, as in `PendingTurn`) and what the
    kind needs to act (JSON: the notes a `/forget` card offers, the capture's pending id)."""

    nonce: str
    kind: str
    message_id: str
    conversation_id: str
    message: str
    data: str
    done: bool
    created_at: float


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """One send the platform has not accepted yet: a reply to `target`, or a PATCH of card
    `target`. `key` is the send's idempotency uuid (Feishu keeps one message per uuid for 1 h)."""

    key: str
    op: OutboxOp
    target: str
    msg_type: str
    content: str  # JSON, as sent
    created_at: float
    attempts: int = 0
    next_at: float = 0.0


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
        """Start the chat's next conversation (after the latest it ever had); returns the new
        generation."""
        ...

    def latest_generation(self, chat_id: str) -> int:
        """The highest generation the chat ever had (1 for a chat never cleared)."""
        ...

    def set_generation(self, chat_id: str, generation: int) -> bool:
        """Go back to an earlier conversation of the chat; False (nothing changes) unless
        1 <= generation <= the latest."""
        ...

    def model(self, chat_id: str) -> str | None:
        """The chat's chosen model (None: the configured one)."""
        ...

    def set_model(self, chat_id: str, model: str | None) -> None: ...

    def owner(self) -> str | None: ...

    def set_owner(self, open_id: str) -> bool:
        """Make `open_id` the owner unless there already is one; True if it became the owner."""
        ...

    def turn_accepted(
        self,
        message_id: str,
        chat_id: str,
        message: str,
        *,
        now: float | None = None,
        owner: str = "",
    ) -> None:
        """A message was queued for a turn (stage `accepted`) by instance `owner`."""
        ...

    def alive(self, instance: str, *, now: float | None = None) -> None:
        """Instance `instance` is running (a heartbeat)."""
        ...

    def turn_started(self, message_id: str) -> None:
        """The message is on its way to the model (stage `started`)."""
        ...

    def turn_card(self, message_id: str, card_id: str) -> None:
        """The turn's progress card was shown."""
        ...

    def turn_finished(self, message_id: str) -> None:
        """The message got its answer (or a notice); forget it."""
        ...

    def unfinished_turns(
        self, *, owner: str | None = None, dead_before: float | None = None
    ) -> list[PendingTurn]:
        """Turns accepted and never finished, oldest first. With `owner`: only that instance's,
        those of no instance, and those of instances last alive before `dead_before` (the
        others are still being answered elsewhere)."""
        ...

    def outbox_put(self, item: OutboxItem) -> None:
        """Keep a send for later; a second put with the same key changes nothing."""
        ...

    def outbox_due(self, *, now: float | None = None, limit: int = 20) -> list[OutboxItem]:
        """Sends whose next attempt is due, oldest first."""
        ...

    def outbox_retry(self, key: str, next_at: float) -> None:
        """Count a failed attempt and schedule the next one."""
        ...

    def outbox_done(self, key: str) -> None:
        """The send was delivered (or given up); forget it."""
        ...

    def control_put(self, control: SavedControl) -> None:
        """Keep a card's button (the same nonce again replaces it)."""
        ...

    def control_get(self, nonce: str) -> SavedControl | None:
        """The button with this nonce, if kept (CONTROL_KEEP_SECONDS)."""
        ...

    def control_done(self, nonce: str) -> None:
        """The button's choice was made: later taps read "already decided"."""
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
            conn.execute("DELETE FROM controls WHERE created_at < ?", (now - CONTROL_KEEP_SECONDS,))
            return cursor.rowcount

    # --- chat generations ------------------------------------------------------------------------
    def generation(self, chat_id: str) -> int:
        rows = self._db.read("SELECT generation FROM chats WHERE chat_id = ?", (chat_id,))
        return int(rows[0][0]) if rows else 1

    def bump_generation(self, chat_id: str) -> int:
        """Start the chat's next conversation; returns the new generation."""
        with self._db.write() as conn:
            row = conn.execute(
                "SELECT MAX(generation, latest) FROM chats WHERE chat_id = ?", (chat_id,)
            ).fetchone()
            new = (int(row[0]) if row else 1) + 1
            conn.execute(
                "INSERT INTO chats(chat_id, generation, latest, updated) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(chat_id) DO UPDATE SET generation = excluded.generation, "
                "latest = excluded.latest, updated = excluded.updated",
                (chat_id, new, new, time.time()),
            )
        return new

    def latest_generation(self, chat_id: str) -> int:
        rows = self._db.read(
            "SELECT MAX(generation, latest) FROM chats WHERE chat_id = ?", (chat_id,)
        )
        return int(rows[0][0]) if rows else 1

    def set_generation(self, chat_id: str, generation: int) -> bool:
        with self._db.write() as conn:
            row = conn.execute(
                "SELECT MAX(generation, latest) FROM chats WHERE chat_id = ?", (chat_id,)
            ).fetchone()
            latest = int(row[0]) if row else 1
            if not 1 <= generation <= latest:
                return False
            conn.execute(
                "INSERT INTO chats(chat_id, generation, latest, updated) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(chat_id) DO UPDATE SET generation = excluded.generation, "
                "latest = excluded.latest, updated = excluded.updated",
                (chat_id, generation, latest, time.time()),
            )
        return True

    def model(self, chat_id: str) -> str | None:
        rows = self._db.read("SELECT model FROM chats WHERE chat_id = ?", (chat_id,))
        return str(rows[0][0]) if rows and rows[0][0] else None

    def set_model(self, chat_id: str, model: str | None) -> None:
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO chats(chat_id, generation, latest, updated, model) "
                "VALUES (?, 1, 1, ?, ?) "
                "ON CONFLICT(chat_id) DO UPDATE SET model = excluded.model, "
                "updated = excluded.updated",
                (chat_id, time.time(), model),
            )

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

    # --- turns in flight -------------------------------------------------------------------------
    def turn_accepted(
        self,
        message_id: str,
        chat_id: str,
        message: str,
        *,
        now: float | None = None,
        owner: str = "",
    ) -> None:
        with self._db.write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO turns(message_id, chat_id, message, stage, accepted_at, "
                "owner) VALUES (?, ?, ?, 'accepted', ?, ?)",
                (message_id, chat_id, message, time.time() if now is None else now, owner),
            )

    def alive(self, instance: str, *, now: float | None = None) -> None:
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO instances(id, seen_at) VALUES (?, ?) "
                "ON CONFLICT(id) DO UPDATE SET seen_at = excluded.seen_at",
                (instance, time.time() if now is None else now),
            )

    def turn_started(self, message_id: str) -> None:
        with self._db.write() as conn:
            conn.execute("UPDATE turns SET stage = 'started' WHERE message_id = ?", (message_id,))

    def turn_card(self, message_id: str, card_id: str) -> None:
        with self._db.write() as conn:
            conn.execute("UPDATE turns SET card_id = ? WHERE message_id = ?", (card_id, message_id))

    def turn_finished(self, message_id: str) -> None:
        with self._db.write() as conn:
            conn.execute("DELETE FROM turns WHERE message_id = ?", (message_id,))

    def unfinished_turns(
        self, *, owner: str | None = None, dead_before: float | None = None
    ) -> list[PendingTurn]:
        rows = self._db.read(
            "SELECT t.message_id, t.chat_id, t.message, t.stage, t.card_id, t.accepted_at "
            "FROM turns t LEFT JOIN instances i ON i.id = t.owner "
            "WHERE ? IS NULL OR t.owner IN ('', ?) OR i.seen_at IS NULL OR i.seen_at < ? "
            "ORDER BY t.accepted_at, t.rowid",
            (owner, owner, dead_before if dead_before is not None else float("inf")),
        )
        return [PendingTurn(str(r[0]), str(r[1]), str(r[2]), r[3], r[4], float(r[5])) for r in rows]

    # --- outbox ----------------------------------------------------------------------------------
    def outbox_put(self, item: OutboxItem) -> None:
        with self._db.write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO outbox(key, op, target, msg_type, content, created_at, "
                "attempts, next_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    item.key,
                    item.op,
                    item.target,
                    item.msg_type,
                    item.content,
                    item.created_at,
                    item.attempts,
                    item.next_at,
                ),
            )

    def outbox_due(self, *, now: float | None = None, limit: int = 20) -> list[OutboxItem]:
        now = time.time() if now is None else now
        rows = self._db.read(
            "SELECT key, op, target, msg_type, content, created_at, attempts, next_at FROM outbox "
            "WHERE next_at <= ? ORDER BY created_at, rowid LIMIT ?",
            (now, limit),
        )
        return [
            OutboxItem(
                str(r[0]),
                r[1],
                str(r[2]),
                str(r[3]),
                str(r[4]),
                float(r[5]),
                int(r[6]),
                float(r[7]),
            )
            for r in rows
        ]

    def outbox_retry(self, key: str, next_at: float) -> None:
        with self._db.write() as conn:
            conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, next_at = ? WHERE key = ?",
                (next_at, key),
            )

    def outbox_done(self, key: str) -> None:
        with self._db.write() as conn:
            conn.execute("DELETE FROM outbox WHERE key = ?", (key,))

    # --- card buttons ----------------------------------------------------------------------------
    def control_put(self, control: SavedControl) -> None:
        with self._db.write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO controls(nonce, kind, message_id, conversation_id, "
                "message, data, done, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    control.nonce,
                    control.kind,
                    control.message_id,
                    control.conversation_id,
                    control.message,
                    control.data,
                    int(control.done),
                    control.created_at,
                ),
            )

    def control_get(self, nonce: str) -> SavedControl | None:
        rows = self._db.read(
            f"SELECT {', '.join(CONTROL_COLUMNS)} FROM controls WHERE nonce = ?",
            (nonce,),
        )
        return control_from_row(rows[0]) if rows else None

    def control_done(self, nonce: str) -> None:
        with self._db.write() as conn:
            conn.execute("UPDATE controls SET done = 1 WHERE nonce = ?", (nonce,))


CONTROL_COLUMNS = (
    "nonce", "kind", "message_id", "conversation_id", "message", "data", "done", "created_at",
)  # fmt: skip


def control_from_row(row: Sequence[Any]) -> SavedControl:
    return SavedControl(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        str(row[3]),
        str(row[4]),
        str(row[5]),
        bool(row[6]),
        float(row[7]),
    )
