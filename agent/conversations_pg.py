"""Conversation state in PostgreSQL, shared by every app instance on the database.

`PostgresConversationStore` is the `ConversationBackend` twin of the SQLite `ConversationStore`
(same contract, same suite in `tests/storage`): conversation id -> SDK session id, counters and
turn history, a turn on record from its start. `PostgresTurnLock` keeps the turns of one
conversation in order across instances: a session-level advisory lock per conversation, held
while a turn runs; a lock that is free says no live instance runs a turn of it.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator
from typing import Any

from psycopg.rows import DictRow
from psycopg.types.json import Json

from agent.conversations import INTERRUPTED, RUNNING, Conversation, OpenTurn, TurnRecord
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
    # A turn is on record while it runs (status 'running'); `owner` is the pid that began it.
    "ALTER TABLE conversation_turns ADD COLUMN owner INTEGER;"
    " CREATE INDEX conversation_turns_open ON conversation_turns(status)"
    " WHERE status = 'running';",
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

    def begin_turn(
        self,
        conversation_id: str,
        *,
        started: float,
        message: str,
        log_file: str,
        session_id: str | None,
    ) -> tuple[int, TurnRecord | None]:
        with self._db.transaction() as conn:
            before = conn.execute(
                "SELECT * FROM conversation_turns WHERE conversation_id = %s"
                " ORDER BY id DESC LIMIT 1",
                (conversation_id,),
            ).fetchone()
            row = conn.execute(
                "INSERT INTO conversation_turns(conversation_id, started, message, reply,"
                " is_error, log_file, session_id, status, owner)"
                " VALUES (%s, %s, %s, '', false, %s, %s, %s, %s) RETURNING id",
                (
                    conversation_id,
                    started,
                    _text(sanitize(message)),
                    _text(log_file),
                    session_id,
                    RUNNING,
                    os.getpid(),
                ),
            ).fetchone()
            conn.execute(
                "UPDATE conversations SET updated = %s WHERE id = %s",
                (time.time(), conversation_id),
            )
        assert row is not None
        return int(row["id"]), _turn(before) if before is not None else None

    def update_turn(
        self,
        turn_id: int,
        *,
        reply: str,
        tools: builtins.list[dict[str, Any]],
        session_id: str | None,
    ) -> None:
        with self._db.connection() as conn:
            conn.execute(
                "UPDATE conversation_turns SET reply = %s, tools = %s,"
                " session_id = COALESCE(%s, session_id) WHERE id = %s AND status = %s",
                (_text(sanitize(reply)), _tools(tools), session_id, turn_id, RUNNING),
            )

    def finish_turn(
        self,
        turn_id: int,
        *,
        reply: str,
        is_error: bool,
        session_id: str | None,
        cost_usd: float | None,
        injected: builtins.list[dict[str, Any]],
        tools: builtins.list[dict[str, Any]],
        status: str,
    ) -> None:
        with self._db.transaction() as conn:
            row = conn.execute(
                "SELECT conversation_id, status FROM conversation_turns WHERE id = %s FOR UPDATE",
                (turn_id,),
            ).fetchone()
            if row is None:  # the conversation was deleted meanwhile
                return
            conn.execute(
                "UPDATE conversation_turns SET reply = %s, is_error = %s,"
                " session_id = COALESCE(%s, session_id), cost_usd = %s, injected = %s,"
                " tools = %s, status = %s WHERE id = %s",
                (
                    _text(sanitize(reply)),
                    is_error,
                    session_id,
                    cost_usd,
                    Json(injected),
                    _tools(tools),
                    status,
                    turn_id,
                ),
            )
            count = 1 if row["status"] == RUNNING else 0  # marked interrupted: counted then
            conn.execute(
                "UPDATE conversations SET updated = %s, turns = turns + %s,"
                " cost_usd = cost_usd + %s, session_id = COALESCE(%s, session_id) WHERE id = %s",
                (time.time(), count, cost_usd or 0.0, session_id, row["conversation_id"]),
            )

    def open_turns(self, conversation_id: str | None = None) -> builtins.list[OpenTurn]:
        rows = self._db.fetch(
            "SELECT * FROM conversation_turns WHERE status = %s"
            " AND (%s::text IS NULL OR conversation_id = %s) ORDER BY id",
            (RUNNING, conversation_id, conversation_id),
        )
        return [
            OpenTurn(
                id=int(r["id"]),
                conversation_id=r["conversation_id"],
                started=r["started"],
                session_id=r["session_id"],
                reply=r["reply"],
                tools=r["tools"],
                owner=r["owner"],
            )
            for r in rows
        ]

    def mark_interrupted(
        self,
        turn_id: int,
        *,
        reply: str,
        tools: builtins.list[dict[str, Any]],
        session_id: str | None,
    ) -> bool:
        with self._db.transaction() as conn:
            row = conn.execute(
                "UPDATE conversation_turns SET reply = %s, tools = %s, is_error = true,"
                " status = %s, session_id = COALESCE(%s, session_id)"
                " WHERE id = %s AND status = %s RETURNING conversation_id",
                (_text(sanitize(reply)), _tools(tools), INTERRUPTED, session_id, turn_id, RUNNING),
            ).fetchone()
            if row is None:
                return False
            conn.execute(
                "UPDATE conversations SET updated = %s, turns = turns + 1,"
                " session_id = COALESCE(%s, session_id) WHERE id = %s",
                (time.time(), session_id, row["conversation_id"]),
            )
        return True

    def turns(self, conversation_id: str, limit: int = 500) -> builtins.list[TurnRecord]:
        rows = self._db.fetch(
            "SELECT * FROM conversation_turns WHERE conversation_id = %s ORDER BY id LIMIT %s",
            (conversation_id, limit),
        )
        return [_turn(r) for r in rows]

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
    async def hold_if_free(self, conversation_id: str) -> AsyncIterator[bool]:
        """Yields True holding the lock if no instance holds it, else False at once."""
        key = (LOCK_CLASS_CONVERSATION_TURN, conversation_id)
        async with self._db.aconnection() as conn:
            cur = await conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s)) AS held", key)
            row = await cur.fetchone()
            held = bool(row and row["held"])
            try:
                yield held
            finally:
                if held:
                    try:
                        await conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", key)
                    except Exception:  # the connection is gone, and the lock with it
                        logger.warning("could not unlock conversation %s", conversation_id)

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


def _turn(r: DictRow) -> TurnRecord:
    return TurnRecord(
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


def _tools(tools: builtins.list[dict[str, Any]]) -> Json:
    return Json(sanitize_data(tools))


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
