"""`PostgresTurnLock`: the turns of one conversation in order across instances sharing the
PostgreSQL database. A session-level advisory lock per conversation, held while a turn runs; a
lock that is free says no live instance runs a turn of it. (The conversations themselves are
`agent.conversations.ConversationStore`, on either database.)
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from storage.postgres import LOCK_CLASS_CONVERSATION_TURN, PostgresDatabase

logger = logging.getLogger(__name__)


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
