"""What `claude-memory doctor` says about the memory in a PostgreSQL database: its schema, its
notes, the state and size of its indexes (a failed `CREATE INDEX` leaves one invalid, and every
search then reads the table instead), the vector models and their HNSW indexes, and how many
connections the server allows beside how many are open.

One connection of its own (no pool), read-only: `doctor` runs beside the app.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from memory._record import record
from memory.postgres.store import COMPONENT, SCHEMA_VERSION, TEXT_VERSION


@record
class IndexState:
    """One index of the memory's tables."""

    name: str
    valid: bool
    """False after a failed or interrupted build: the planner ignores it."""
    size_bytes: int


@record
class VectorModel:
    """A model whose vectors are stored, and the HNSW index that searches them."""

    model: str
    dim: int
    notes: int
    index: str | None
    """None: searched exactly (more dimensions than HNSW takes), or the index is missing."""


@record
class MemoryDatabase:
    """The memory's state in one database."""

    schema_version: int
    """Migrations applied (0: the memory tables are not there yet)."""
    notes: int
    stale_text: int
    """Notes whose derived columns an older version wrote (recomputed on the next start)."""
    indexes: tuple[IndexState, ...]
    models: tuple[VectorModel, ...]
    max_connections: int
    connections: int
    """Connections to the server now, every database and client."""
    shared_buffers_bytes: int = 0
    notes_bytes: int = 0
    """The notes table with its indexes (what a keyword search reads)."""

    @property
    def current(self) -> bool:
        return self.schema_version == SCHEMA_VERSION and self.stale_text == 0


def inspect(url: str, *, timeout: float = 5.0) -> MemoryDatabase:
    """Read the memory's state (raises psycopg.Error when the server cannot answer)."""
    with psycopg.connect(
        url, connect_timeout=max(1, int(timeout)), autocommit=True, row_factory=dict_row
    ) as conn:
        conn.execute(
            "SELECT set_config('statement_timeout', %s, false)", (f"{int(timeout * 1000)}ms",)
        )
        server = _one(
            conn,
            "SELECT current_setting('max_connections')::int AS max,"
            " (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')"
            "   AS open,"
            " pg_size_bytes(current_setting('shared_buffers')) AS buffers",
        )
        if _one(conn, "SELECT to_regclass('memory_notes') IS NOT NULL AS made")["made"] is False:
            return MemoryDatabase(0, 0, 0, (), (), int(server["max"]), int(server["open"]))
        version = _one(
            conn,
            "SELECT coalesce(max(version), 0) AS v FROM schema_migrations WHERE component = %s",
            (COMPONENT,),
        )["v"]
        notes = _one(
            conn,
            "SELECT count(*) AS n, count(*) FILTER (WHERE text_version <> %s) AS stale"
            " FROM memory_notes",
            (TEXT_VERSION,),
        )
        indexes = conn.execute(
            "SELECT c.relname AS name, i.indisvalid AND i.indisready AS valid,"
            " pg_relation_size(c.oid) AS size FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE i.indrelid IN ('memory_notes'::regclass, 'memory_note_vectors'::regclass,"
            "   to_regclass('memory_note_terms'))"
            " ORDER BY c.relname"
        ).fetchall()
        # what a keyword search reads: the notes and, since migration 5, their postings
        table = _one(
            conn,
            "SELECT pg_total_relation_size('memory_notes')"
            " + coalesce(pg_total_relation_size(to_regclass('memory_note_terms')), 0) AS size",
        )["size"]
        models = conn.execute(
            "SELECT m.model, m.dim, CASE WHEN to_regclass(m.index_name) IS NOT NULL"
            "   THEN m.index_name END AS index,"
            " (SELECT count(*) FROM memory_note_vectors v WHERE v.model = m.model"
            "   AND v.chunk = 0) AS notes"
            " FROM memory_vector_models m ORDER BY m.model"
        ).fetchall()
    return MemoryDatabase(
        schema_version=int(version),
        notes=int(notes["n"]),
        stale_text=int(notes["stale"]),
        indexes=tuple(IndexState(r["name"], bool(r["valid"]), int(r["size"])) for r in indexes),
        models=tuple(
            VectorModel(r["model"], int(r["dim"]), int(r["notes"]), r["index"]) for r in models
        ),
        max_connections=int(server["max"]),
        connections=int(server["open"]),
        shared_buffers_bytes=int(server["buffers"]),
        notes_bytes=int(table),
    )


def _one(conn: psycopg.Connection[Any], sql: str, params: tuple[object, ...] = ()) -> Any:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return row


def doctor_lines(state: MemoryDatabase, pool_max: int) -> list[tuple[bool, str, str]]:
    """(ok, what, hint) lines: the schema and notes, the indexes, each vector model, the pool
    (`pool_max`: the most connections each of an instance's two pools opens)."""
    if state.schema_version == 0:
        lines = [(True, "memory on PostgreSQL: not created yet (the first start creates it)", "")]
    else:
        stale = f", {state.stale_text:,} notes of an older text format" if state.stale_text else ""
        lines = [
            (
                state.current,
                f"memory on PostgreSQL: {state.notes:,} notes, schema"
                f" {state.schema_version}/{SCHEMA_VERSION}{stale}",
                "start the app (or `claude-memory memory reindex`) once to bring it up to date",
            )
        ]
        invalid = [i.name for i in state.indexes if not i.valid]
        size = sum(i.size_bytes for i in state.indexes)
        lines.append(
            (
                not invalid,
                f"memory indexes: {len(state.indexes) - len(invalid)} of {len(state.indexes)}"
                f" valid, {size / 1e6:,.1f} MB"
                + (f"; invalid: {', '.join(invalid)}" if invalid else ""),
                "an interrupted build leaves an index invalid and searches read the whole"
                " table: REINDEX INDEX <name> (docs/postgres.md)",
            )
        )
        for model in state.models:
            where = (
                f"HNSW index {model.index}"
                if model.index
                else "no HNSW index: searched exactly"
                + (" (more than 2,000 dimensions)" if model.dim > 2000 else "")
            )
            lines.append(
                (
                    model.index is not None or model.dim > 2000,
                    f"memory vectors: {model.model} ({model.dim} dimensions), {model.notes:,}"
                    f" notes, {where}",
                    "the index is made with the model's first vectors; delete the model's row"
                    " of memory_vector_models to have it made again (docs/postgres.md)",
                )
            )
    if state.schema_version and state.notes_bytes > state.shared_buffers_bytes:
        lines.append(
            (
                False,
                f"database memory: shared_buffers {state.shared_buffers_bytes / 1e6:,.0f} MB,"
                f" the notes and their indexes {state.notes_bytes / 1e6:,.0f} MB",
                "searches read the notes from disk or the OS cache on every search (100k"
                " notes: 30 % slower at 128 MB than at 1 GB); give shared_buffers more than the"
                " notes (docs/postgres.md)",
            )
        )
    free = state.max_connections - state.connections
    lines.append(
        (
            2 * pool_max <= free,
            f"database pool: up to {pool_max} connections in each of an instance's two pools;"
            f" the server allows {state.max_connections}, {state.connections} open now",
            "each instance may open 2 x CLAUDE_MEMORY_DATABASE_POOL_MAX_SIZE connections: lower"
            " it or raise the server's max_connections",
        )
    )
    return lines
