"""A real PostgreSQL for the storage tests: one server per session (per xdist worker), one
database shared by its tests and emptied after each (`EmbeddedPostgres.empty_database`)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest

from memory.config import MemoryConfig
from memory.postgres.store import PostgresMemoryStore
from memory.sqlite.store import MemoryStore
from storage.postgres import PostgresDatabase
from tests.fakes.postgres import EmbeddedPostgres


@contextmanager
def sqlite_and_postgres(
    home: Path, database_url: str, now: datetime
) -> Iterator[tuple[MemoryStore, PostgresMemoryStore]]:
    """An empty SQLite store in `home` and a PostgreSQL store on `database_url`, one clock:
    the pair the parity tests fill alike and compare."""
    config = MemoryConfig.for_home(home, fsync=False)
    db = PostgresDatabase(database_url, min_size=1, max_size=2)
    db.open()
    try:
        with (
            MemoryStore.open(config, clock=lambda: now) as sqlite_store,
            PostgresMemoryStore.open(db, config, clock=lambda: now) as postgres_store,
        ):
            yield sqlite_store, postgres_store
    finally:
        db.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[EmbeddedPostgres]:
    # Not under pytest's basetemp: another pytest session starting meanwhile prunes old
    # basetemps, and would delete the data directory under the running server.
    root = Path(tempfile.mkdtemp(prefix="claude-memory-pg-"))
    server = EmbeddedPostgres(root).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root)


@pytest.fixture(scope="session")
def _session_database(postgres_server: EmbeddedPostgres) -> str:
    return postgres_server.create_database()


@pytest.fixture
def database_url(postgres_server: EmbeddedPostgres, _session_database: str) -> Iterator[str]:
    """An empty database for this test: the session's, emptied after the test (its
    migrations stay applied, so a store opens without running them again)."""
    try:
        yield _session_database
    finally:
        postgres_server.empty_database(_session_database)


@pytest.fixture
def fresh_database_url(postgres_server: EmbeddedPostgres) -> Iterator[str]:
    """A database of this test's own, created for it and never migrated: for a test of what
    happens on a database nothing has touched."""
    url = postgres_server.create_database()
    try:
        yield url
    finally:
        postgres_server.drop_database(url)


@pytest.fixture
def pg_sync_db(database_url: str) -> Iterator[PostgresDatabase]:
    """The synchronous pool only (what the conversation and Feishu stores use)."""
    db = PostgresDatabase(database_url, min_size=1, max_size=8)
    db.open()
    try:
        yield db
    finally:
        db.close()


@pytest.fixture
async def pg_db(database_url: str) -> AsyncIterator[PostgresDatabase]:
    """Both pools open on this test's database (the async one on the test's loop)."""
    db = PostgresDatabase(database_url, min_size=1, max_size=4)
    db.open()
    await db.open_async()
    try:
        yield db
    finally:
        await db.aclose()
