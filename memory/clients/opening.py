"""Which memory backend a process uses: the one place that chooses.

SQLite and files in the home (the default), or the shared PostgreSQL database when
`CLAUDE_MEMORY_DATABASE_URL` is set (docs/postgres.md). The app passes its own database (one
pool for everything); short-lived processes (the CLI, hooks run directly, the stand-alone MCP
server) pass the URL their caller read from the settings (`MemoryConfig.database_url`) and get
a small pool the returned object closes with itself. Nothing here reads the environment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from memory.backend import MemoryBackend, StateBackend
    from memory.config import MemoryConfig
    from memory.encoders.models import Encoder
    from storage.postgres import PostgresDatabase

log = logging.getLogger(__name__)

# A CLI command or a hook makes a few statements at a time: two connections are plenty.
_SMALL_POOL = 2


class _ClosesWith(Protocol):
    def close_with(self, release: Callable[[], None]) -> None: ...


_Opened = TypeVar("_Opened", bound=_ClosesWith)


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
        from memory.sqlite.store import MemoryStore

        return MemoryStore.open(config, sync=sync, encoder=encoder, clock=clock)
    from memory.postgres.store import PostgresMemoryStore

    return _on_database(
        database,
        url,
        lambda db: PostgresMemoryStore.open(db, config, encoder=encoder, clock=clock),
    )


def open_state(
    path: Path, *, database: PostgresDatabase | None = None, url: str | None = None
) -> StateBackend:
    """Episodes, pending entities and injection windows: `<home>/state.db`, or the shared
    database (as for `open_memory`)."""
    if database is None and url is None:
        from memory.sqlite.state import StateDB

        return StateDB(path)
    from memory.postgres.state import PostgresStateDB

    return _on_database(database, url, PostgresStateDB)


def _on_database(
    database: PostgresDatabase | None,
    url: str | None,
    make: Callable[[PostgresDatabase], _Opened],
) -> _Opened:
    """`make` on the caller's database, or on a small pool of its own at `url` that the
    made object closes with itself (and that is closed at once if making fails)."""
    if database is not None:
        return make(database)
    assert url is not None
    own = open_database(url)
    try:
        opened = make(own)
    except BaseException:
        own.close()
        raise
    opened.close_with(own.close)
    return opened
