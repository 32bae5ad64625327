"""The Feishu bridge's state in PostgreSQL: dedup, chat generations, owner, turns in flight and
the outbox, shared by every app instance, so the same event delivered to two instances is
answered once.

Same contract as the SQLite `BridgeState` (`tests/storage` runs one suite against both). Each
call is one statement, atomic on its own:

* `claim` inserts both dedup keys with `ON CONFLICT DO NOTHING ... RETURNING`: the claim is
  fresh only if both rows are new. Two instances claiming at once serialize on the unique index,
  so exactly one wins.
* `bump_generation` is one upsert that increments in place.
"""

from __future__ import annotations

import time

from bridge.state import (
    CONTROL_COLUMNS,
    CONTROL_KEEP_SECONDS,
    DEDUP_KEEP_SECONDS,
    OutboxItem,
    PendingTurn,
    SavedControl,
    control_from_row,
)
from storage.postgres import PostgresDatabase

COMPONENT = "feishu"
_PRUNE_EVERY_SECONDS = 3600.0

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE feishu_seen (
        key TEXT PRIMARY KEY,
        seen_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX feishu_seen_by_time ON feishu_seen(seen_at);
    CREATE TABLE feishu_chats (
        chat_id TEXT PRIMARY KEY,
        generation INTEGER NOT NULL,
        updated DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE feishu_owner (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        open_id TEXT NOT NULL,
        paired_at DOUBLE PRECISION NOT NULL
    );
    """,
    """
    CREATE TABLE feishu_turns (
        message_id TEXT PRIMARY KEY,
        chat_id TEXT NOT NULL,
        message TEXT NOT NULL,
        stage TEXT NOT NULL,
        card_id TEXT,
        accepted_at DOUBLE PRECISION NOT NULL,
        seq BIGSERIAL
    );
    CREATE TABLE feishu_outbox (
        key TEXT PRIMARY KEY,
        op TEXT NOT NULL,
        target TEXT NOT NULL,
        msg_type TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        attempts INTEGER NOT NULL,
        next_at DOUBLE PRECISION NOT NULL,
        seq BIGSERIAL
    );
    CREATE INDEX feishu_outbox_by_due ON feishu_outbox(next_at);
    """,
    # Which instance runs a turn, and which instances are alive (see bridge/state.py).
    """
    ALTER TABLE feishu_turns ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    CREATE TABLE feishu_instances (
        id TEXT PRIMARY KEY,
        seen_at DOUBLE PRECISION NOT NULL
    );
    """,
    # /resume and /model (see bridge/state.py).
    """
    ALTER TABLE feishu_chats ADD COLUMN latest INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE feishu_chats ADD COLUMN model TEXT;
    """,
    # card buttons that outlive a restart (see bridge/state.py)
    """
    CREATE TABLE feishu_controls (
        nonce TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        message_id TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        message TEXT NOT NULL,
        data TEXT NOT NULL,
        done BOOLEAN NOT NULL DEFAULT FALSE,
        created_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX feishu_controls_by_time ON feishu_controls(created_at);
    """,
)


class PostgresBridgeState:
    """`BridgeStateBackend` on the shared database's synchronous pool (thread-safe)."""

    def __init__(self, db: PostgresDatabase, *, keep_seconds: float = DEDUP_KEEP_SECONDS) -> None:
        self.keep_seconds = keep_seconds
        self._db = db
        db.migrate(COMPONENT, MIGRATIONS)
        self._pruned_at = 0.0
        self.prune()

    def close(self) -> None:
        """The pool belongs to the database owner; nothing of ours to release."""

    # --- dedup -----------------------------------------------------------------------------------
    def claim(self, event_id: str, message_id: str, *, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        with self._db.connection() as conn:
            inserted = conn.execute(
                "INSERT INTO feishu_seen(key, seen_at) VALUES (%s, %s), (%s, %s)"
                " ON CONFLICT (key) DO NOTHING RETURNING key",
                (f"event:{event_id}", now, f"message:{message_id}", now),
            ).fetchall()
        if now - self._pruned_at > _PRUNE_EVERY_SECONDS:
            self.prune(now=now)
        return len(inserted) == 2

    def release(self, event_id: str, message_id: str) -> None:
        with self._db.connection() as conn:
            conn.execute(
                "DELETE FROM feishu_seen WHERE key IN (%s, %s)",
                (f"event:{event_id}", f"message:{message_id}"),
            )

    def prune(self, *, now: float | None = None) -> int:
        now = time.time() if now is None else now
        self._pruned_at = now
        with self._db.connection() as conn:
            cursor = conn.execute(
                "DELETE FROM feishu_seen WHERE seen_at < %s", (now - self.keep_seconds,)
            )
            conn.execute(
                "DELETE FROM feishu_controls WHERE created_at < %s", (now - CONTROL_KEEP_SECONDS,)
            )
            return cursor.rowcount

    # --- chat generations ------------------------------------------------------------------------
    def generation(self, chat_id: str) -> int:
        rows = self._db.fetch("SELECT generation FROM feishu_chats WHERE chat_id = %s", (chat_id,))
        return int(rows[0]["generation"]) if rows else 1

    def bump_generation(self, chat_id: str) -> int:
        with self._db.connection() as conn:
            row = conn.execute(
                "INSERT INTO feishu_chats(chat_id, generation, latest, updated)"
                " VALUES (%s, 2, 2, %s) ON CONFLICT (chat_id) DO UPDATE SET"
                " generation = GREATEST(feishu_chats.generation, feishu_chats.latest) + 1,"
                " latest = GREATEST(feishu_chats.generation, feishu_chats.latest) + 1,"
                " updated = excluded.updated RETURNING generation",
                (chat_id, time.time()),
            ).fetchone()
        assert row is not None
        return int(row["generation"])

    def latest_generation(self, chat_id: str) -> int:
        rows = self._db.fetch(
            "SELECT GREATEST(generation, latest) AS latest FROM feishu_chats WHERE chat_id = %s",
            (chat_id,),
        )
        return int(rows[0]["latest"]) if rows else 1

    def set_generation(self, chat_id: str, generation: int) -> bool:
        if generation < 1:
            return False
        with self._db.connection() as conn:
            # One statement: only a generation within the chat's known ones is taken (a chat
            # never cleared has only generation 1, which needs no row).
            if generation == 1:
                conn.execute(
                    "INSERT INTO feishu_chats(chat_id, generation, latest, updated)"
                    " VALUES (%s, 1, 1, %s) ON CONFLICT (chat_id) DO UPDATE SET generation = 1,"
                    " latest = GREATEST(feishu_chats.generation, feishu_chats.latest),"
                    " updated = excluded.updated",
                    (chat_id, time.time()),
                )
                return True
            cursor = conn.execute(
                "UPDATE feishu_chats SET latest = GREATEST(generation, latest),"
                " generation = %s, updated = %s"
                " WHERE chat_id = %s AND GREATEST(generation, latest) >= %s",
                (generation, time.time(), chat_id, generation),
            )
            return cursor.rowcount == 1

    def model(self, chat_id: str) -> str | None:
        rows = self._db.fetch("SELECT model FROM feishu_chats WHERE chat_id = %s", (chat_id,))
        return str(rows[0]["model"]) if rows and rows[0]["model"] else None

    def set_model(self, chat_id: str, model: str | None) -> None:
        with self._db.connection() as conn:
            conn.execute(
                "INSERT INTO feishu_chats(chat_id, generation, latest, updated, model)"
                " VALUES (%s, 1, 1, %s, %s) ON CONFLICT (chat_id) DO UPDATE SET"
                " model = excluded.model, updated = excluded.updated",
                (chat_id, time.time(), model),
            )

    # --- owner -----------------------------------------------------------------------------------
    def owner(self) -> str | None:
        rows = self._db.fetch("SELECT open_id FROM feishu_owner WHERE id = 1")
        return str(rows[0]["open_id"]) if rows else None

    def set_owner(self, open_id: str) -> bool:
        with self._db.connection() as conn:
            cursor = conn.execute(
                "INSERT INTO feishu_owner(id, open_id, paired_at) VALUES (1, %s, %s)"
                " ON CONFLICT (id) DO NOTHING",
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
        with self._db.connection() as conn:
            conn.execute(
                "INSERT INTO feishu_turns(message_id, chat_id, message, stage, accepted_at, owner)"
                " VALUES (%s, %s, %s, 'accepted', %s, %s) ON CONFLICT (message_id) DO NOTHING",
                (message_id, chat_id, message, time.time() if now is None else now, owner),
            )

    def alive(self, instance: str, *, now: float | None = None) -> None:
        with self._db.connection() as conn:
            conn.execute(
                "INSERT INTO feishu_instances(id, seen_at) VALUES (%s, %s)"
                " ON CONFLICT (id) DO UPDATE SET seen_at = EXCLUDED.seen_at",
                (instance, time.time() if now is None else now),
            )

    def turn_started(self, message_id: str) -> None:
        with self._db.connection() as conn:
            conn.execute(
                "UPDATE feishu_turns SET stage = 'started' WHERE message_id = %s", (message_id,)
            )

    def turn_card(self, message_id: str, card_id: str) -> None:
        with self._db.connection() as conn:
            conn.execute(
                "UPDATE feishu_turns SET card_id = %s WHERE message_id = %s", (card_id, message_id)
            )

    def turn_finished(self, message_id: str) -> None:
        with self._db.connection() as conn:
            conn.execute("DELETE FROM feishu_turns WHERE message_id = %s", (message_id,))

    def unfinished_turns(
        self, *, owner: str | None = None, dead_before: float | None = None
    ) -> list[PendingTurn]:
        rows = self._db.fetch(
            "SELECT t.message_id, t.chat_id, t.message, t.stage, t.card_id, t.accepted_at"
            " FROM feishu_turns t LEFT JOIN feishu_instances i ON i.id = t.owner"
            " WHERE %s::text IS NULL OR t.owner IN ('', %s) OR i.seen_at IS NULL"
            " OR i.seen_at < %s ORDER BY t.accepted_at, t.seq",
            (owner, owner, dead_before if dead_before is not None else float("inf")),
        )
        return [
            PendingTurn(
                str(r["message_id"]),
                str(r["chat_id"]),
                str(r["message"]),
                r["stage"],
                r["card_id"],
                float(r["accepted_at"]),
            )
            for r in rows
        ]

    # --- outbox ----------------------------------------------------------------------------------
    def outbox_put(self, item: OutboxItem) -> None:
        with self._db.connection() as conn:
            conn.execute(
                "INSERT INTO feishu_outbox(key, op, target, msg_type, content, created_at,"
                " attempts, next_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (key) DO NOTHING",
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
        rows = self._db.fetch(
            "SELECT key, op, target, msg_type, content, created_at, attempts, next_at"
            " FROM feishu_outbox WHERE next_at <= %s ORDER BY created_at, seq LIMIT %s",
            (now, limit),
        )
        return [
            OutboxItem(
                str(r["key"]),
                r["op"],
                str(r["target"]),
                str(r["msg_type"]),
                str(r["content"]),
                float(r["created_at"]),
                int(r["attempts"]),
                float(r["next_at"]),
            )
            for r in rows
        ]

    def outbox_retry(self, key: str, next_at: float) -> None:
        with self._db.connection() as conn:
            conn.execute(
                "UPDATE feishu_outbox SET attempts = attempts + 1, next_at = %s WHERE key = %s",
                (next_at, key),
            )

    def outbox_done(self, key: str) -> None:
        with self._db.connection() as conn:
            conn.execute("DELETE FROM feishu_outbox WHERE key = %s", (key,))

    # --- card buttons ----------------------------------------------------------------------------
    def control_put(self, control: SavedControl) -> None:
        with self._db.connection() as conn:
            conn.execute(
                "INSERT INTO feishu_controls(nonce, kind, message_id, conversation_id, message,"
                " data, done, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (nonce) DO UPDATE SET kind = EXCLUDED.kind,"
                " message_id = EXCLUDED.message_id, conversation_id = EXCLUDED.conversation_id,"
                " message = EXCLUDED.message, data = EXCLUDED.data, done = EXCLUDED.done,"
                " created_at = EXCLUDED.created_at",
                (
                    control.nonce,
                    control.kind,
                    control.message_id,
                    control.conversation_id,
                    control.message,
                    control.data,
                    control.done,
                    control.created_at,
                ),
            )

    def control_get(self, nonce: str) -> SavedControl | None:
        rows = self._db.fetch(
            f"SELECT {', '.join(CONTROL_COLUMNS)} FROM feishu_controls WHERE nonce = %s",
            (nonce,),
        )
        return control_from_row([rows[0][c] for c in CONTROL_COLUMNS]) if rows else None

    def control_done(self, nonce: str) -> None:
        with self._db.connection() as conn:
            conn.execute("UPDATE feishu_controls SET done = TRUE WHERE nonce = %s", (nonce,))
