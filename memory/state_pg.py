"""The memory state (episodes and their messages, pending entities, the hooks' injection
windows) in the shared PostgreSQL database, so every instance sees the same episodes, the same
pending list and the same dedup windows.

`PostgresStateDB` is the `StateBackend` twin of the SQLite `StateDB`: the same tables
(`mem_*`), and the consumers' SQL runs unchanged (see `memory.state` for the portable subset):

* `?` placeholders become `%s` (and a literal `%` becomes `%%`, which psycopg expects
  everywhere once parameters are passed), outside quoted strings, identifiers and comments;
* text parameters lose their NUL characters (U+FFFD instead): PostgreSQL text cannot hold one;
* every `write()` transaction first takes one transaction-level advisory lock, so memory-state
  writers run one at a time across instances, exactly as SQLite's `BEGIN IMMEDIATE` makes them
  in one file. The consumers rely on it: "start an episode unless one is active" and "queue a
  candidate unless the same one is pending" are a read then an insert in one transaction, and
  READ COMMITTED alone would let two instances both insert. The transactions are a few short
  statements, so the serialization costs little.

Importing this module needs the `postgres` extra (psycopg); the hooks' SQLite path never does.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from psycopg import Cursor
from psycopg.rows import DictRow

from storage.postgres import Connection, PostgresDatabase

COMPONENT = "memory_state"  # not "memory": the memory index keeps its own migrations

# The two-key advisory lock (class, object) every memory-state write holds ("CM" =
# claude-memory; storage.postgres owns 0x434D_0001 and 0x434D_0002).
LOCK_CLASS_MEMORY_STATE = 0x434D_0003

# The SQLite tables, typed for PostgreSQL: REAL -> DOUBLE PRECISION (PostgreSQL's REAL is 4
# bytes and would round timestamps to minutes), AUTOINCREMENT -> an identity column.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE mem_episodes (
        id TEXT PRIMARY KEY,
        key TEXT NOT NULL,
        project TEXT NOT NULL DEFAULT '',
        scope TEXT NOT NULL DEFAULT 'user',
        title TEXT NOT NULL,
        source TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'active',
        started DOUBLE PRECISION NOT NULL,
        ended DOUBLE PRECISION,
        turns INTEGER NOT NULL DEFAULT 0,
        file_changes INTEGER NOT NULL DEFAULT 0,
        summary TEXT NOT NULL DEFAULT '',
        summary_note_id TEXT
    );
    CREATE INDEX mem_episodes_by_key ON mem_episodes(key, status);
    CREATE INDEX mem_episodes_by_project ON mem_episodes(project, status);
    CREATE INDEX mem_episodes_by_time ON mem_episodes(started);
    CREATE TABLE mem_episode_messages (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        episode_id TEXT NOT NULL,
        role TEXT NOT NULL,
        kind TEXT NOT NULL DEFAULT 'message',
        title TEXT NOT NULL DEFAULT '',
        content TEXT NOT NULL,
        created DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX mem_messages_by_episode ON mem_episode_messages(episode_id, id);
    CREATE TABLE mem_pending (
        id TEXT PRIMARY KEY,
        type TEXT NOT NULL,
        title TEXT NOT NULL,
        content TEXT NOT NULL,
        confidence DOUBLE PRECISION NOT NULL,
        scope TEXT NOT NULL DEFAULT 'user',
        source TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'pending',
        created DOUBLE PRECISION NOT NULL,
        note_id TEXT
    );
    CREATE INDEX mem_pending_by_status ON mem_pending(status, created);
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


class PostgresStateDB:
    """`StateBackend` on the shared database's synchronous pool (thread-safe)."""

    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db
        db.migrate(COMPONENT, MIGRATIONS)

    def close(self) -> None:
        """The pool belongs to the database owner; nothing of ours to release."""

    def read(self, sql: str, params: Sequence[object] = ()) -> list[DictRow]:
        return self._db.fetch(to_pyformat(sql), _params(params))

    @contextmanager
    def write(self) -> Iterator[_Writer]:
        with self._db.transaction() as conn:
            # Under READ COMMITTED each later statement sees what the previous holder committed.
            conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_CLASS_MEMORY_STATE,))
            yield _Writer(conn)


class _Writer:
    """The `StateWriter` of one transaction: the consumers' `?` SQL on a psycopg connection."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[object] = (), /) -> Cursor[DictRow]:
        # The cursor has fetched everything by now (client-side), so it stays readable after
        # the connection goes back to the pool: `cur.rowcount` after the `with` block works.
        return self._conn.execute(to_pyformat(sql), _params(params))

    def executemany(self, sql: str, params: Iterable[Sequence[object]], /) -> Cursor[DictRow]:
        with self._conn.cursor() as cursor:
            cursor.executemany(to_pyformat(sql), [_params(p) for p in params])
        return cursor


def _params(params: Sequence[object]) -> tuple[object, ...]:
    return tuple(p.replace("\x00", "\ufffd") if isinstance(p, str) else p for p in params)


@functools.lru_cache(maxsize=512)
def to_pyformat(sql: str) -> str:
    """`?` placeholders -> `%s`, `%` -> `%%`; `?` in quotes or comments stays as it is.

    The consumers' SQL is a fixed set of literals (plus `IN (?, ?, ...)` lists of a few
    lengths), hence the cache.
    """
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        char = sql[i]
        if char in "'\"":  # a string or a quoted identifier; a doubled quote escapes itself
            end = i + 1
            while end < n:
                if sql[end] == char:
                    if end + 1 < n and sql[end + 1] == char:
                        end += 2
                        continue
                    break
                end += 1
            out.append(sql[i : end + 1].replace("%", "%%"))
            i = end + 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            out.append(sql[i:end].replace("%", "%%"))
            i = end
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(sql[i:end].replace("%", "%%"))
            i = end
        elif char == "?":
            out.append("%s")
            i += 1
        elif char == "%":
            out.append("%%")
            i += 1
        else:
            out.append(char)
            i += 1
    return "".join(out)
