"""SDK session transcripts in PostgreSQL: one `SessionStore` shared by every app instance.

The CLI still writes its transcript under its own `CLAUDE_CONFIG_DIR`; with
`ClaudeAgentOptions(session_store=...)` the SDK mirrors every line here (flushed before each
`result` message), and a client started with `resume=<id>` on *any* instance loads the
transcript from here into a temporary config dir. So a conversation started on instance A
continues on instance B with its history, and an instance keeps no transcript of its own.

Entries are opaque JSON kept in `json` columns (text and key order preserved). An entry's
`uuid` is its idempotency key (a retried batch lands once). Appends to one key serialize on
that key's row in `agent_sessions`, which also makes the summary sidecar's read-fold-write
safe across processes. `mtime` is the database clock in epoch milliseconds, strictly
increasing per key.
"""

from __future__ import annotations

from typing import Any

from claude_agent_sdk import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStore,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
    fold_session_summary,
)
from psycopg.types.json import Json

from storage.postgres import PostgresDatabase

COMPONENT = "agent_sessions"

# The project key every transcript of this app is stored under (see `PostgresSessionStore`).
SHARED_PROJECT_KEY = "claude-memory"

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE agent_sessions (
        project_key TEXT NOT NULL,
        session_id TEXT NOT NULL,
        subpath TEXT NOT NULL DEFAULT '',
        mtime_ms BIGINT NOT NULL,
        PRIMARY KEY (project_key, session_id, subpath)
    );
    CREATE TABLE agent_session_entries (
        id BIGSERIAL PRIMARY KEY,
        project_key TEXT NOT NULL,
        session_id TEXT NOT NULL,
        subpath TEXT NOT NULL DEFAULT '',
        uuid TEXT,
        entry JSON NOT NULL
    );
    CREATE INDEX agent_session_entries_by_key
        ON agent_session_entries(project_key, session_id, subpath, id);
    CREATE UNIQUE INDEX agent_session_entries_by_uuid
        ON agent_session_entries(project_key, session_id, subpath, uuid)
        WHERE uuid IS NOT NULL;
    CREATE TABLE agent_session_summaries (
        project_key TEXT NOT NULL,
        session_id TEXT NOT NULL,
        mtime_ms BIGINT NOT NULL,
        data JSON NOT NULL,
        PRIMARY KEY (project_key, session_id)
    );
    """,
)

_NOW_MS = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"

_TOUCH = f"""
INSERT INTO agent_sessions(project_key, session_id, subpath, mtime_ms)
VALUES (%s, %s, %s, {_NOW_MS})
ON CONFLICT (project_key, session_id, subpath)
DO UPDATE SET mtime_ms = GREATEST(excluded.mtime_ms, agent_sessions.mtime_ms + 1)
RETURNING mtime_ms
"""

_INSERT_ENTRY = """
INSERT INTO agent_session_entries(project_key, session_id, subpath, uuid, entry)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (project_key, session_id, subpath, uuid) WHERE uuid IS NOT NULL DO NOTHING
"""

_TABLES = ("agent_session_entries", "agent_sessions", "agent_session_summaries")


class PostgresSessionStore(SessionStore):
    """`SessionStore` on the app's PostgreSQL database (async pool).

    `project_key`: when set, every key is stored under it instead of the key the SDK derives
    from the client's working directory. App instances whose workspaces live at different paths
    (different homes or machines) then still find each other's transcripts; session ids are
    UUIDs, so one project per database loses nothing. Leave it None for the SDK's own scoping.
    """

    def __init__(self, db: PostgresDatabase, *, project_key: str | None = None) -> None:
        self._db = db
        self._project_key = project_key
        db.migrate(COMPONENT, MIGRATIONS)

    def _where(self, key: SessionKey | SessionListSubkeysKey) -> tuple[str, str]:
        return self._project_key or key["project_key"], key["session_id"]

    # --- required ------------------------------------------------------------------------------
    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        if not entries:
            return
        project, session = self._where(key)
        subpath = key.get("subpath") or ""
        async with self._db.aconnection() as conn, conn.transaction():
            # The row lock taken here orders concurrent appends to this key until commit.
            touched = await (await conn.execute(_TOUCH, (project, session, subpath))).fetchone()
            assert touched is not None
            mtime = int(touched["mtime_ms"])
            async with conn.cursor() as cur:
                await cur.executemany(
                    _INSERT_ENTRY,
                    [(project, session, subpath, _uuid(e), Json(e)) for e in entries],
                )
            if subpath:
                return  # subagent transcripts never feed the main session's summary
            prev_row = await (
                await conn.execute(
                    "SELECT data FROM agent_session_summaries"
                    " WHERE project_key = %s AND session_id = %s",
                    (project, session),
                )
            ).fetchone()
            prev: SessionSummaryEntry | None = (
                {"session_id": session, "mtime": mtime, "data": prev_row["data"]}
                if prev_row is not None
                else None
            )
            folded = fold_session_summary(prev, key, entries)
            await conn.execute(
                "INSERT INTO agent_session_summaries(project_key, session_id, mtime_ms, data)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (project_key, session_id)"
                " DO UPDATE SET mtime_ms = excluded.mtime_ms, data = excluded.data",
                (project, session, mtime, Json(folded["data"])),
            )

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        project, session = self._where(key)
        subpath = key.get("subpath") or ""
        async with self._db.aconnection() as conn:
            known = await (
                await conn.execute(
                    "SELECT 1 FROM agent_sessions"
                    " WHERE project_key = %s AND session_id = %s AND subpath = %s",
                    (project, session, subpath),
                )
            ).fetchone()
            if known is None:
                return None
            rows = await (
                await conn.execute(
                    "SELECT entry FROM agent_session_entries"
                    " WHERE project_key = %s AND session_id = %s AND subpath = %s ORDER BY id",
                    (project, session, subpath),
                )
            ).fetchall()
        return [row["entry"] for row in rows]

    # --- optional ------------------------------------------------------------------------------
    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        async with self._db.aconnection() as conn:
            rows = await (
                await conn.execute(
                    "SELECT session_id, mtime_ms FROM agent_sessions"
                    " WHERE project_key = %s AND subpath = ''",
                    (self._project_key or project_key,),
                )
            ).fetchall()
        return [{"session_id": r["session_id"], "mtime": int(r["mtime_ms"])} for r in rows]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        async with self._db.aconnection() as conn:
            rows = await (
                await conn.execute(
                    "SELECT session_id, mtime_ms, data FROM agent_session_summaries"
                    " WHERE project_key = %s",
                    (self._project_key or project_key,),
                )
            ).fetchall()
        return [
            {"session_id": r["session_id"], "mtime": int(r["mtime_ms"]), "data": r["data"]}
            for r in rows
        ]

    async def delete(self, key: SessionKey) -> None:
        project, session = self._where(key)
        subpath = key.get("subpath")
        async with self._db.aconnection() as conn, conn.transaction():
            if subpath:  # one subagent transcript only
                for table in ("agent_session_entries", "agent_sessions"):
                    await conn.execute(
                        f"DELETE FROM {table}"
                        " WHERE project_key = %s AND session_id = %s AND subpath = %s",
                        (project, session, subpath),
                    )
                return
            for table in _TABLES:  # the main transcript cascades to its subkeys and summary
                await conn.execute(
                    f"DELETE FROM {table} WHERE project_key = %s AND session_id = %s",
                    (project, session),
                )

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        project, session = self._where(key)
        async with self._db.aconnection() as conn:
            rows = await (
                await conn.execute(
                    "SELECT subpath FROM agent_sessions"
                    " WHERE project_key = %s AND session_id = %s AND subpath <> ''"
                    " ORDER BY subpath",
                    (project, session),
                )
            ).fetchall()
        return [str(r["subpath"]) for r in rows]

    # --- maintenance ---------------------------------------------------------------------------
    async def clear(self) -> None:
        """Forget every transcript (tests; a fresh deployment)."""
        async with self._db.aconnection() as conn:
            await conn.execute(f"TRUNCATE {', '.join(_TABLES)}")


def _uuid(entry: SessionStoreEntry) -> str | None:
    value: Any = entry.get("uuid")
    return value if isinstance(value, str) and value else None
