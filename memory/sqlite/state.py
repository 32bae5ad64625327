"""Memory state that is *not* derived from the notes: episodes, their messages, pending entities
and the hooks' injection windows. Lives in `<home>/state.db` (deleting `index.db` must lose
nothing; this file is not rebuildable, so it is kept apart from the index), or in the shared
PostgreSQL database (`memory.postgres.state.PostgresStateDB`) when several instances run as one.

The tables (`memory.state_tables`, written once for both databases) carry a `mem_` prefix and
migrate as component "memory" (see `storage.sqlite`), so the agent's conversation tables can
share the file.

The consumers (`EpisodeStore`, `PendingStore`, the hooks, the MCP server) write their SQL once,
against `StateBackend`, in a subset both databases run unchanged:

* `?` placeholders (`storage.postgres.PostgresTables` turns them into `%s`);
* upserts as `INSERT ... ON CONFLICT (...) DO UPDATE`, never `INSERT OR REPLACE`;
* new message ids from `INSERT ... RETURNING id`, never `cursor.lastrowid`;
* rows read by column name only, and every name selected once (PostgreSQL rows are dicts: a
  second `title` would silently replace the first);
* `LIKE` folds ASCII case on SQLite only: compare `lower(...)` on both sides, and name the
  escape character (PostgreSQL's default is a backslash, SQLite has none).
"""

from __future__ import annotations

from pathlib import Path

from memory.state_tables import MIGRATIONS
from storage.sql import Dialect
from storage.sqlite import SQLiteDB

SQLITE = Dialect.sqlite()


class StateDB(SQLiteDB):
    """`<home>/state.db` with the memory tables migrated."""

    def __init__(self, path: Path, *, busy_timeout_ms: int = 5000) -> None:
        super().__init__(path, busy_timeout_ms=busy_timeout_ms)
        self.migrate("memory", [SQLITE.script(m) for m in MIGRATIONS])
