"""Which memory backend a process uses: the one place that chooses.

SQLite and files in the home (the default), or the shared PostgreSQL database when
`CLAUDE_MEMORY_DATABASE_URL` is set (docs/postgres.md). The app passes its own database (one
pool for everything); short-lived processes (the CLI, hooks run directly, the stand-alone MCP
server) pass the URL and get a small pool the returned object closes with itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory.backend import MemoryBackend
    from memory.config import MemoryConfig
    from memory.embeddings import Encoder
    from memory.state import StateBackend
    from storage.postgres import PostgresDatabase

log = logging.getLogger(__name__)

DATABASE_URL_ENV = "CLAUDE_MEMORY_DATABASE_URL"
# A CLI command or a hook makes a few statements at a time: two connections are plenty.
_SMALL_POOL = 2


def database_url(environ: dict[str, str] | Any) -> str | None:
    """The shared database's URL from an environment mapping, if one is set."""
    value = str(environ.get(DATABASE_URL_ENV) or "").strip()
    return value or None


def open_database(url: str, *, max_size: int = _SMALL_POOL) -> PostgresDatabase:
    """A small pool of one's own on the shared database (blocking: connects)."""
    from storage.postgres import PostgresDatabase

    database = PostgresDatabase(url, min_size=1, max_size=max_size, async_max_size=1)
    database.open()
    return database


def open_memory(
    config: MemoryConfig,
    *,
    database: PostgresDatabase | None = None,
    sync: bool = True,
    encoder: Encoder | None = None,
    clock: Callable[[], datetime] | None = None,
) -> MemoryBackend:
    """The notes store: on `database` (shared, the caller closes it), on a pool of its own
    at `config.database_url` (closed with the store), else the SQLite index over the files
    in the home."""
    url = config.database_url
    if database is None and url is None:
        from memory.store import MemoryStore

        return MemoryStore.open(config, sync=sync, encoder=encoder, clock=clock)
    from memory.pg_store import PostgresMemoryStore

    own = open_database(url) if database is None and url is not None else None
    db = database if database is not None else own
    assert db is not None
    try:
        store = PostgresMemoryStore.open(db, config, encoder=encoder, clock=clock)
    except BaseException:
        if own is not None:
            own.close()
        raise
    if own is not None:
        store.close_with(own.close)
    return store


def open_state(
    path: Path, *, database: PostgresDatabase | None = None, url: str | None = None
) -> StateBackend:
    """Episodes, pending entities and injection windows: `<home>/state.db`, or the shared
    database (as for `open_memory`)."""
    if database is None and url is None:
        from memory.state import StateDB

        return StateDB(path)
    from memory.state_pg import PostgresStateDB

    own = open_database(url) if database is None and url is not None else None
    db = database if database is not None else own
    assert db is not None
    try:
        state = PostgresStateDB(db)
    except BaseException:
        if own is not None:
            own.close()
        raise
    if own is not None:
        state.close_with(own.close)
    return state
