"""Conversation state in PostgreSQL, shared by every app instance on the database.

`PostgresConversationStore` is the `ConversationBackend` twin of the SQLite `ConversationStore`
(same contract, same suite in `tests/storage`): conversation id -> SDK session id, counters and
turn history. `PostgresTurnLock` keeps the turns of one conversation in order across instances:
a session-level advisory lock per conversation, held while a turn runs.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from psycopg.rows import DictRow
from psycopg.types.json import Json

from agent.conversations import Conversation, TurnRecord
from memory.notes.capture import sanitize, sanitize_data
from storage.postgres import LOCK_CLASS_CONVERSATION_TURN, PostgresDatabase

logger = logging.getLogger(__name__)

COMPONENT = "conversations"

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        session_id TEXT,
        title TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL DEFAULT 'web',
        created DOUBLE PRECISION NOT NULL,
        updated DOUBLE PRECISION NOT NULL,
        turns INTEGER NOT NULL DEFAULT 0,
        cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0
    );
    CREATE INDEX conversations_by_updated ON conversations(updated DESC);
    CREATE TABLE conversation_turns (
        id BIGSERIAL PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        started DOUBLE PRECISION NOT NULL,
        message TEXT NOT NULL,
        reply TEXT NOT NULL,
        is_error BOOLEAN NOT NULL,
        log_file TEXT NOT NULL,
        session_id TEXT,
        cost_usd DOUBLE PRECISION,
        injected JSON NOT NULL DEFAULT '[]'
    );
    CREATE INDEX conversation_turns_by_conversation ON conversation_turns(conversation_id, id);
    """,
    # The turn's tool steps with their final state, so a reload shows refused and failed steps.
    "ALTER TABLE conversation_turns ADD COLUMN tools JSON NOT NULL DEFAULT '[]';"
    " ALTER TABLE conversation_turns ADD COLUMN status TEXT;",
)


class PostgresConversationStore:
    """`ConversationBackend` on the shared database's synchronous pool."""

    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db
        db.migrate(COMPONENT, MIGRATIONS)

    def close(self) -> None:
        """The pool belongs to the database owner; nothing of ours to release."""

    # --- conversations -----------------------------------------------------------------------
    def get(self, conversation_id: str) -> Conversation | None:
        rows = self._db.fetch("SELECT * FROM conversations WHERE id = %s", (conversation_id,))
        return _conversation(rows[0]) if rows else None

    def list(self, limit: int = 200) -> list[Conversation]:
        rows = self._db.fetch(
            "SELECT * FROM conversations ORDER BY updated DESC, id LIMIT %s", (limit,)
        )
        return [_conversation(r) for r in rows]

    def ensure(self, conversation_id: str, *, title: str, source: str) -> None:
        now = time.time()
        with self._db.connection() as conn:
            conn.execute(
                "INSERT INTO conversations(id, title, source, created, updated)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                (conversation_id, _text(sanitize(title)[:80]), _text(source), now, now),
            )

    def set_session(self, conversation_id: str, session_id: str | None) -> None:
        with self._db.connection() as conn:
            conn.execute(
                "UPDATE conversations SET session_id = %s WHERE id = %s",
                (session_id, conversation_id),
            )

    def record_turn(
        self,
        conversation_id: str,
        *,
        started: float,
        message: str,
        reply: str,
        is_error: bool,
        log_file: str,
        session_id: str | None,
        cost_usd: float | None,
        injected: builtins.list[dict[str, Any]],
        tools: builtins.list[dict[str, Any]] | None = None,
        status: str | None = None,
    ) -> None:
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO conversation_turns(conversation_id, started, message, reply,"
                " is_error, log_file, session_id, cost_usd, injected, tools, status)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    conversation_id,
                    started,
                    _text(sanitize(message)),  # history is stored text: no secrets
                    _text(sanitize(reply)),
                    is_error,
                    _text(log_file),
                    session_id,
                    cost_usd,
                    Json(injected),
                    Json(sanitize_data(tools or [])),
                    status,
                ),
            )
            # `turns = turns + 1` in one statement: concurrent instances never lose a count.
            conn.execute(
                "UPDATE conversations SET updated = %s, turns = turns + 1,"
                " cost_usd = cost_usd + %s, session_id = COALESCE(%s, session_id) WHERE id = %s",
                (time.time(), cost_usd or 0.0, session_id, conversation_id),
            )

    def turns(self, conversation_id: str, limit: int = 500) -> builtins.list[TurnRecord]:
        rows = self._db.fetch(
            "SELECT * FROM conversation_turns WHERE conversation_id = %s ORDER BY id LIMIT %s",
            (conversation_id, limit),
        )
        return [
            TurnRecord(
                started=r["started"],
                message=r["message"],
                reply=r["reply"],
                is_error=bool(r["is_error"]),
                log_file=r["log_file"],
                session_id=r["session_id"],
                cost_usd=r["cost_usd"],
                injected=r["injected"],
                tools=r["tools"],
                status=r["status"],
            )
            for r in rows
        ]

    def delete(self, conversation_id: str) -> bool:
        with self._db.transaction() as conn:
            cur = conn.execute("DELETE FROM conversations WHERE id = %s", (conversation_id,))
            conn.execute(
                "DELETE FROM conversation_turns WHERE conversation_id = %s", (conversation_id,)
            )
        return cur.rowcount > 0


class PostgresTurnLock:
    """`TurnLock` across instances: `pg_advisory_lock(class, hashtext(conversation_id))`.

    Held on one pooled connection for the whole turn (and released explicitly; the pool also
    runs `pg_advisory_unlock_all()` on every returned connection, so a cancelled turn cannot
    leave a lock behind). If the holder's process dies, its connection closes and the server
    releases the lock. A hash collision only makes two conversations wait for each other.
    """

    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db

    @contextlib.asynccontextmanager
    async def hold(self, conversation_id: str) -> AsyncIterator[None]:
        key = (LOCK_CLASS_CONVERSATION_TURN, conversation_id)
        async with self._db.aconnection() as conn:
            await conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", key)
            try:
                yield
            finally:
                try:
                    await conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", key)
                except Exception:  # the connection is gone, and the lock with it
                    logger.warning("could not unlock conversation %s", conversation_id)


def _text(value: str) -> str:
    # PostgreSQL text cannot hold NUL characters (SQLite can): keep the rest of the text.
    return value.replace("\x00", "\ufffd")


def _conversation(row: DictRow) -> Conversation:
    return Conversation(
        id=row["id"],
        session_id=row["session_id"],
        title=row["title"],
        source=row["source"],
        created=row["created"],
        updated=row["updated"],
        turns=row["turns"],
        cost_usd=row["cost_usd"],
    )
