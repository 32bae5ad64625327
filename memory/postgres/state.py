"""The memory state (episodes and their messages, pending entities, the hooks' injection
windows, note versions, supersessions) in the shared PostgreSQL database, so every instance
sees the same episodes, the same pending list and the same dedup windows.

`PostgresStateDB` is the `StateBackend` of the shared database: the tables of
`memory.state_tables` (the SQLite `StateDB` applies the same migrations), and the consumers' SQL
runs unchanged (see `memory.sqlite.state` for the portable subset) through
`storage.postgres.PostgresTables`: `?` becomes `%s`, text parameters lose their NUL characters,
and every `write()` transaction first takes one advisory lock, so memory-state writers run one
at a time across instances, exactly as SQLite's `BEGIN IMMEDIATE` makes them in one file. The
consumers rely on it: "start an episode unless one is active" and "queue a candidate unless the
same one is pending" are a read then an insert in one transaction, and READ COMMITTED alone
would let two instances both insert. The transactions are a few short statements, so the
serialization costs little.

Importing this module needs the `postgres` extra (psycopg); the hooks' SQLite path never does.
"""

from __future__ import annotations

from memory.state_tables import MIGRATIONS
from storage.postgres import PostgresDatabase, PostgresTables
from storage.sql import Dialect

COMPONENT = "memory_state"  # not "memory": the memory index keeps its own migrations

# The two-key advisory lock (class, object) every memory-state write holds ("CM" =
# claude-memory). Taken: 0x434D_0001-0002 (storage.postgres), 0x434D_0003-0004 (the memory
# index, memory.postgres.store); 0x434D_0010 keeps clear of that range as it grows.
LOCK_CLASS_MEMORY_STATE = 0x434D_0010

POSTGRESQL = Dialect.postgresql()  # the consumers name the tables themselves (`mem_*`)


class PostgresStateDB(PostgresTables):
    """`StateBackend` on the shared database's synchronous pool (thread-safe)."""

    def __init__(self, db: PostgresDatabase) -> None:
        super().__init__(db, POSTGRESQL, lock_class=LOCK_CLASS_MEMORY_STATE)
        self.migrate(COMPONENT, MIGRATIONS)
