"""`claude-memory memory migrate --to postgresql://...`: move a SQLite home onto PostgreSQL.

Copies everything an instance keeps in its home that the shared database holds in PostgreSQL
mode (docs/postgres.md): the notes (raw text, every field, ids kept) and their vectors, the
memory state (episodes and their messages, pending entities, injection windows),
conversations with their turns and SDK transcripts, and the Feishu chat generations and
owner. Then counts both sides and says what differs.

The destination must hold no notes and no conversations yet: copying twice would duplicate
turns and messages, and merging two memories is `memory import`'s job (with dedup). The home
keeps everything (its state databases are opened read-only; only its derived index is first
brought up to date with the note files), so a failed migration loses nothing; fix the cause
and run it again into a fresh database.

A composition-level module (like app.py): it uses the memory, agent and bridge stores.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errors import ClaudeMemoryError
from storage.sql import created_tables

if TYPE_CHECKING:
    from settings import Settings
    from storage.postgres import PostgresDatabase

log = logging.getLogger(__name__)

ProgressFn = Callable[[str, int, int], None]


class MigrationError(ClaudeMemoryError):
    """The migration could not start or did not copy everything."""


@dataclass(frozen=True, slots=True)
class Count:
    """One kind of record: how many the home has and how many the database has after."""

    what: str
    source: int
    target: int

    @property
    def ok(self) -> bool:
        return self.source == self.target


@dataclass
class MigrationReport:
    counts: list[Count] = field(default_factory=list)
    missing_transcripts: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.counts)

    def table(self) -> str:
        lines = ["what                 home   database", "-" * 38]
        for c in self.counts:
            mark = "" if c.ok else "   <- differs"
            lines.append(f"{c.what:<18} {c.source:>7} {c.target:>10}{mark}")
        return "\n".join(lines)


# --- reading the SQLite home --------------------------------------------------------------------


@contextmanager
def _read_only(path: Path) -> Iterator[sqlite3.Connection | None]:
    """The database file opened read-only, or None when the home never created it."""
    if not path.exists():
        yield None
        return
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        conn.row_factory = sqlite3.Row
        yield conn


def _has_table(conn: sqlite3.Connection | None, table: str) -> bool:
    if conn is None:
        return False
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
    return row.fetchone() is not None


def _rows(conn: sqlite3.Connection | None, sql: str) -> list[sqlite3.Row]:
    return [] if conn is None else conn.execute(sql).fetchall()


def _pg_count(db: PostgresDatabase, table: str) -> int:
    return int(db.fetch(f"SELECT count(*) AS n FROM {table}")[0]["n"])


def _insert_rows(
    db: PostgresDatabase,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    conflict: str = "",
) -> None:
    """Rows into `table` in one transaction, in batches (executemany)."""
    if not rows:
        return
    marks = ", ".join(["%s"] * len(columns))
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) {conflict}"
    with db.transaction() as conn, conn.cursor() as cur:
        for start in range(0, len(rows), 1000):
            cur.executemany(sql, [tuple(r) for r in rows[start : start + 1000]])


# --- state tables: conversations, memory state, Feishu --------------------------------------------

# What the report calls each table (the store's name for it); any other is named as it is.
_LABELS = {
    "conversations": "conversations",
    "turns": "turns",
    "mem_episodes": "episodes",
    "mem_episode_messages": "episode messages",
    "mem_pending": "pending entities",
    "mem_injections": "injection records",
    "mem_turns": "injection windows",
    "mem_note_versions": "note versions",
    "mem_supersessions": "supersessions",
    "mem_feedback": "not-relevant feedback",
    "mem_native_imports": "native imports",
    "chats": "feishu chats",
    "owner": "feishu owner",
}


def _copy_table(
    db: PostgresDatabase,
    source: sqlite3.Connection | None,
    tables: tuple[str, str],
    *,
    conflict: str = "",
) -> Count:
    """Every row of one table, from the home's name for it to the database's. The columns are
    those both sides have (the database's migrations made its table from the same source as
    the home's, `storage.sql`; a home whose older schema lacks a column leaves the database's
    default); ids are kept, and the id sequence moved past them."""
    source_table, target_table = tables
    rows = (
        _rows(source, f"SELECT * FROM {source_table}") if _has_table(source, source_table) else []
    )
    types = {
        r["column_name"]: r["data_type"]
        for r in db.fetch(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = %s",
            (target_table,),
        )
    }
    if rows:
        columns = [c for c in rows[0].keys() if c in types]  # noqa: SIM118 (a Row iterates values)
        _insert_rows(
            db,
            target_table,
            columns,
            [tuple(_value(r[c], types[c]) for c in columns) for r in rows],
            conflict=conflict,
        )
        if "id" in columns and types["id"] in ("bigint", "integer"):
            # Summaries and observations cite message ids: new ones continue after the copies.
            db.fetch(
                f"SELECT setval(pg_get_serial_sequence('{target_table}', 'id'),"
                f" GREATEST((SELECT max(id) FROM {target_table}), 1))"
            )
    label = _LABELS.get(source_table, source_table)
    return Count(label, len(rows), _pg_count(db, target_table))


def _value(value: Any, data_type: str) -> Any:
    """A SQLite value as the PostgreSQL column takes it: SQLite keeps booleans as 0/1 and JSON
    as text; text loses its NUL characters (PostgreSQL text cannot hold one; the live stores
    replace it the same way)."""
    from psycopg.types.json import Json

    if value is None:
        return None
    if data_type == "boolean":
        return bool(value)
    if data_type in ("json", "jsonb"):
        return Json(_json(value))
    return _text(value) if isinstance(value, str) else value


def _text(value: str) -> str:
    return value.replace("\x00", "\ufffd")


def _json(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return []


def _copy_conversations(db: PostgresDatabase, state: sqlite3.Connection | None) -> list[Count]:
    from agent import conversations

    conversations.ConversationStore(db)  # creates the tables
    return [
        _copy_table(db, state, (conversations.SQLITE.table(t), conversations.POSTGRESQL.table(t)))
        for t in created_tables(conversations.MIGRATIONS)
    ]


def _copy_feishu(db: PostgresDatabase, feishu: sqlite3.Connection | None) -> list[Count]:
    from bridge import state

    state.BridgeState(db)  # creates the tables
    # Generations decide which conversation a chat continues, the owner who may use the bot:
    # keep them. Dedup keys (48 h), turns in flight, the outbox and card buttons are
    # short-lived and stay behind.
    chats = (state.SQLITE.table("chats"), state.POSTGRESQL.table("chats"))
    owner = (state.SQLITE.table("owner"), state.POSTGRESQL.table("owner"))
    return [
        _copy_table(
            db,
            feishu,
            chats,
            conflict=f"ON CONFLICT (chat_id) DO UPDATE SET generation ="
            f" GREATEST({chats[1]}.generation, EXCLUDED.generation),"
            f" latest = GREATEST({chats[1]}.latest, EXCLUDED.latest)",
        ),
        _copy_table(db, feishu, owner, conflict="ON CONFLICT (id) DO NOTHING"),
    ]


async def _copy_transcripts(
    db: PostgresDatabase, session_ids: Sequence[str], workspace: Path
) -> tuple[int, list[str]]:
    """Each conversation's SDK transcript into the shared session store, so any instance can
    resume it. Returns (imported, session ids whose transcript file was not found)."""
    from claude_agent_sdk import import_session_to_store

    from agent.pg_session_store import SHARED_PROJECT_KEY, PostgresSessionStore

    await db.open_async()
    try:
        store = PostgresSessionStore(db, project_key=SHARED_PROJECT_KEY)
        imported, missing = 0, []
        for session_id in session_ids:
            try:
                await import_session_to_store(session_id, store, directory=str(workspace))
            except (FileNotFoundError, ValueError):
                missing.append(session_id)
            else:
                imported += 1
        return imported, missing
    finally:
        await db.apool.close()


# --- memory state ---------------------------------------------------------------------------------


def _copy_state(db: PostgresDatabase, state: sqlite3.Connection | None) -> list[Count]:
    """Every table of the memory state (`memory.state_tables`: the same names on both sides)."""
    from memory.postgres.state import PostgresStateDB
    from memory.state_tables import MIGRATIONS

    PostgresStateDB(db)  # creates the tables
    return [_copy_table(db, state, (t, t)) for t in created_tables(MIGRATIONS)]


# --- notes and vectors -----------------------------------------------------------------------


def _copy_notes(
    db: PostgresDatabase, settings: Settings, progress: ProgressFn | None
) -> list[Count]:
    """Notes as they are (ids, paths, dates, status), then the vectors of every model whose
    chunks still match; a note whose vectors do not match is embedded again by the app."""
    from memory.postgres.store import PostgresMemoryStore
    from memory.sqlite.store import MemoryStore

    config = settings.memory_config()
    source_config = dataclasses.replace(config, database_url=None)
    with MemoryStore.open(source_config) as source:  # syncs hand edits into the index first
        notes = list(source.iter_notes())
        with PostgresMemoryStore.open(db, config) as target:
            target.restore(notes)
            if progress:
                progress("notes", len(notes), len(notes))
            counts = [Count("notes", len(notes), target.count())]
            with _read_only(config.index_path) as index:
                for model, expected in source.vectors.models().items():
                    copied = _copy_vectors(index, target, model, progress)
                    counts.append(Count(f"vectors: {_short(model)}", expected, copied))
    return counts


def _short(model: str) -> str:
    return model if len(model) <= 40 else model[:37] + "..."


def _copy_vectors(
    index: sqlite3.Connection | None,
    target: Any,
    model: str,
    progress: ProgressFn | None,
    *,
    batch: int = 200,
) -> int:
    import numpy as np

    if index is None:
        return 0
    pending = target.vectors.pending(model)
    copied = 0
    for start in range(0, len(pending), batch):
        part = pending[start : start + batch]
        marks = ", ".join("?" * len(part))
        found: dict[str, list[sqlite3.Row]] = {}
        for row in index.execute(
            f"SELECT id, chunk, doc_key, dim, vec FROM note_vectors"
            f" WHERE model = ? AND id IN ({marks}) ORDER BY id, chunk",
            [model, *(p.id for p in part)],
        ):
            found.setdefault(row["id"], []).append(row)
        items = []
        for note in part:
            rows = found.get(note.id, [])
            if len(rows) != len(note.chunks) or any(r["doc_key"] != note.doc_key for r in rows):
                continue  # changed since it was embedded: the app embeds it again
            dim = int(rows[0]["dim"])
            matrix = np.frombuffer(b"".join(r["vec"] for r in rows), dtype="<f4")
            items.append((note, matrix.reshape(len(rows), dim).astype(np.float32)))
        copied += target.vectors.write(model, items)
        if progress:
            progress("vectors", min(start + batch, len(pending)), len(pending))
    return copied


# --- the whole home --------------------------------------------------------------------------


def _ensure_empty(db: PostgresDatabase) -> None:
    found = db.fetch(
        "SELECT to_regclass('memory_notes') AS notes, to_regclass('conversations') AS convs"
    )[0]
    busy = []
    if found["notes"] and db.fetch(
        "SELECT 1 FROM memory_notes WHERE path <> 'user/profile.md' LIMIT 1"
    ):
        busy.append("notes")
    if found["convs"] and db.fetch("SELECT 1 FROM conversations LIMIT 1"):
        busy.append("conversations")
    if busy:
        raise MigrationError(
            f"the database {db.where} already holds {' and '.join(busy)}: migrate into an "
            "empty database (to merge memories into a used one, export here and run "
            "`claude-memory memory import` there)"
        )


def migrate_home(
    settings: Settings, url: str, *, progress: ProgressFn | None = None
) -> MigrationReport:
    """Copy the SQLite home of `settings` into the database at `url` (see the module doc)."""
    from storage.postgres import PostgresDatabase

    db = PostgresDatabase(
        url,
        min_size=1,
        max_size=2,
        async_max_size=2,
        timeout=settings.database_pool_timeout_seconds,
        url_source="--to",
    )
    db.open()
    report = MigrationReport()
    try:
        _ensure_empty(db)
        report.counts += _copy_notes(db, settings, progress)
        with _read_only(settings.state_path) as state:
            report.counts += _copy_state(db, state)
            report.counts += _copy_conversations(db, state)
            sessions = [
                r["session_id"]
                for r in _rows(state, "SELECT DISTINCT session_id FROM conversations")
                if _has_table(state, "conversations") and r["session_id"]
            ]
        with _read_only(settings.home_dir / "feishu.db") as feishu:
            report.counts += _copy_feishu(db, feishu)
        imported, missing = asyncio.run(_copy_transcripts(db, sessions, settings.workspace_dir))
        # A transcript gone from this machine is not the database's loss: that conversation
        # starts afresh on its next turn and says so (as it would here); listed, not failed.
        report.counts.append(Count("transcripts", len(sessions) - len(missing), imported))
        report.missing_transcripts = missing
    finally:
        db.close()
    return report
