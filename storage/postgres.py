"""One PostgreSQL database shared by several app instances: pools, migrations, advisory locks.

`PostgresDatabase` owns two psycopg 3 pools over one URL:

* a synchronous pool for the small synchronous stores (conversations, Feishu state, memory
  state: one class each for both databases, through `PostgresTables` below and
  `storage.sql`) whose every call is one or a few short statements;
* an asynchronous pool for the SDK session store (transcript mirroring) and the per-conversation
  turn locks, which live on the event loop.

Numbered migrations per component are recorded in `schema_migrations` (the same shape as the
SQLite one) and applied under an advisory lock, so instances starting together apply each
migration exactly once.

Importing this module needs the `postgres` extra (psycopg and psycopg-pool).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

from errors import ConfigurationError
from storage.sql import Dialect

try:
    import psycopg
    from psycopg import Cursor
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.rows import DictRow, dict_row
    from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ConfigurationError(
        "CLAUDE_MEMORY_DATABASE_URL needs psycopg: install the postgres extra "
        "(uv sync --extra postgres, or pip install 'claude-memory-system[postgres]')"
    ) from exc

Connection = psycopg.Connection[DictRow]
AsyncConnection = psycopg.AsyncConnection[DictRow]

# Advisory locks use the two-key form (class, object): these classes keep our locks apart from
# each other and from other applications sharing the database ("CM" = claude-memory).
LOCK_CLASS_MIGRATIONS = 0x434D_0001
LOCK_CLASS_CONVERSATION_TURN = 0x434D_0002

_SCHEMA_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    component TEXT NOT NULL,
    version INTEGER NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (component, version)
)
"""

_CONNECTION_KWARGS: dict[str, Any] = {
    "autocommit": True,  # explicit `conn.transaction()` blocks where several statements belong
    "row_factory": dict_row,
    "application_name": "claude-memory",
}


@dataclass(frozen=True, slots=True)
class DatabaseProbe:
    """What `doctor` and `/health` say about the database."""

    where: str
    server_version: str
    vector_available: str | None  # pgvector version the server could install, if any
    vector_installed: str | None  # pgvector version installed in this database, if any


def describe_url(url: str) -> str:
    """The URL without its password, for logs and `doctor`."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "<unparsable database URL>"
    host = str(parts.get("host") or "localhost")
    port = f":{parts['port']}" if parts.get("port") else ""
    user = f"{parts['user']}@" if parts.get("user") else ""
    return f"postgresql://{user}{host}{port}/{parts.get('dbname', '')}"


def probe(url: str, *, timeout: float = 5.0) -> DatabaseProbe:
    """Connect once (no pool) and report the server and the vector extension. Raises on error."""
    with psycopg.connect(
        url, connect_timeout=max(1, int(timeout)), autocommit=True, row_factory=dict_row
    ) as conn:
        row = conn.execute(
            "SELECT current_setting('server_version') AS version,"
            " (SELECT default_version FROM pg_available_extensions WHERE name = 'vector')"
            "   AS available,"
            " (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS installed"
        ).fetchone()
    assert row is not None
    return DatabaseProbe(
        where=describe_url(url),
        server_version=str(row["version"]),
        vector_available=row["available"],
        vector_installed=row["installed"],
    )


async def _release_session_locks(conn: AsyncConnection) -> None:
    # Runs whenever a connection goes back to the pool: a turn lock whose holder was cancelled
    # at the wrong moment must not stay held by an idle pooled connection.
    await conn.execute("SELECT pg_advisory_unlock_all()")


class PostgresDatabase:
    """Both pools and the migration runner; owned by the app container (open, then close)."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        async_max_size: int | None = None,
        timeout: float = 10.0,
        url_source: str = "CLAUDE_MEMORY_DATABASE_URL",
    ) -> None:
        """`url_source`: where the URL came from, named when it leads nowhere."""
        self.url = url
        self.where = describe_url(url)
        self.url_source = url_source
        self.timeout = timeout
        self.pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            kwargs=dict(_CONNECTION_KWARGS),
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            check=ConnectionPool.check_connection,  # a restarted server costs no failed call
            name="claude-memory-sync",
            open=False,
        )
        self.apool: AsyncConnectionPool[AsyncConnection] = AsyncConnectionPool(
            url,
            kwargs=dict(_CONNECTION_KWARGS),
            min_size=min_size,
            max_size=async_max_size or max_size,
            timeout=timeout,
            check=AsyncConnectionPool.check_connection,
            reset=_release_session_locks,
            name="claude-memory-async",
            open=False,
        )

    # --- lifecycle -----------------------------------------------------------------------------
    def open(self) -> None:
        """Open the synchronous pool and wait for a first connection (blocking: use a thread)."""
        try:
            self.pool.open(wait=True, timeout=self.timeout)
        except PoolTimeout as exc:
            self.pool.close()
            raise self._unreachable() from exc

    async def open_async(self) -> None:
        """Open the asynchronous pool (on the loop that will use it)."""
        try:
            await self.apool.open(wait=True, timeout=self.timeout)
        except PoolTimeout as exc:
            await self.apool.close()
            raise self._unreachable() from exc

    def _unreachable(self) -> ConfigurationError:
        return ConfigurationError(
            f"could not connect to the database {self.where} within {self.timeout:g} s: "
            f"check {self.url_source} and that the server is running"
        )

    def close(self) -> None:
        self.pool.close()

    async def aclose(self) -> None:
        await self.apool.close()
        await asyncio.to_thread(self.pool.close)

    # --- synchronous use ----------------------------------------------------------------------
    @contextmanager
    def connection(self) -> Iterator[Connection]:
        with self.pool.connection() as conn:
            yield conn

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        with self.pool.connection() as conn, conn.transaction():
            yield conn

    def fetch(self, sql: str, params: Sequence[object] = ()) -> list[DictRow]:
        with self.pool.connection() as conn:
            return conn.execute(sql, tuple(params)).fetchall()

    def migrate(self, component: str, migrations: Sequence[str]) -> None:
        """Apply `migrations[i]` as version i+1 of `component`, once, in order, atomically."""
        with self.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_CLASS_MIGRATIONS,))
            conn.execute(_SCHEMA_MIGRATIONS)
            done = {
                int(r["version"])
                for r in conn.execute(
                    "SELECT version FROM schema_migrations WHERE component = %s", (component,)
                )
            }
            for version, script in enumerate(migrations, start=1):
                if version in done:
                    continue
                conn.execute(script)  # several statements, no params
                conn.execute(
                    "INSERT INTO schema_migrations(component, version) VALUES (%s, %s)",
                    (component, version),
                )

    # --- asynchronous use ---------------------------------------------------------------------
    @asynccontextmanager
    async def aconnection(self) -> AsyncIterator[AsyncConnection]:
        async with self.apool.connection() as conn:
            yield conn


class PostgresTables:
    """`storage.sql.Tables` on the shared database's synchronous pool (thread-safe).

    Text parameters lose their NUL characters (U+FFFD instead): PostgreSQL text cannot hold one.
    With `lock_class`, every `write()` first takes that transaction-level advisory lock, so the
    store's writers run one at a time across instances, as SQLite's `BEGIN IMMEDIATE` makes
    them in one file: a read then an insert in one transaction ("start an episode unless one
    is active") cannot race, which READ COMMITTED alone would let two instances do.
    """

    def __init__(
        self, db: PostgresDatabase, dialect: Dialect, *, lock_class: int | None = None
    ) -> None:
        self.db = db
        self.dialect = dialect
        self._lock_class = lock_class
        self._on_close: list[Callable[[], None]] = []

    def close_with(self, release: Callable[[], None]) -> None:
        """Call `release` on close (a pool opened for this object alone)."""
        self._on_close.append(release)

    def close(self) -> None:
        """The pool belongs to the database owner, unless one was handed to `close_with`."""
        while self._on_close:
            self._on_close.pop()()

    def read(self, sql: str, params: Sequence[object] = ()) -> list[DictRow]:
        return self.db.fetch(self.dialect.sql(sql), _clean(params))

    @contextmanager
    def write(self) -> Iterator[_Writer]:
        with self.db.transaction() as conn:
            if self._lock_class is not None:
                # Under READ COMMITTED each later statement sees what the last holder committed.
                conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (self._lock_class,))
            yield _Writer(conn, self.dialect)

    def migrate(self, component: str, migrations: Sequence[str]) -> None:
        self.db.migrate(component, [self.dialect.script(m) for m in migrations])


class _Writer:
    """The `storage.sql.Writer` of one transaction: the store's SQL on a psycopg connection."""

    def __init__(self, conn: Connection, dialect: Dialect) -> None:
        self._conn = conn
        self._dialect = dialect

    def execute(self, sql: str, params: Sequence[object] = (), /) -> Cursor[DictRow]:
        # The cursor has fetched everything by now (client-side), so it stays readable after
        # the connection goes back to the pool: `cur.rowcount` after the `with` block works.
        return self._conn.execute(self._dialect.sql(sql), _clean(params))

    def executemany(self, sql: str, params: Iterable[Sequence[object]], /) -> Cursor[DictRow]:
        with self._conn.cursor() as cursor:
            cursor.executemany(self._dialect.sql(sql), [_clean(p) for p in params])
        return cursor


def _clean(params: Sequence[object]) -> tuple[object, ...]:
    return tuple(p.replace("\x00", "\ufffd") if isinstance(p, str) else p for p in params)
