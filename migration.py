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


# --- conversations, transcripts, Feishu -----------------------------------------------------------


_CONVERSATION_COLUMNS: tuple[str, ...] = (
    *("id", "session_id", "title", "source", "created", "updated"),
    *("turns", "cost_usd"),
)
_TURN_COLUMNS: tuple[str, ...] = (
    *("conversation_id", "started", "message", "reply", "is_error", "log_file"),
    *("session_id", "cost_usd", "injected", "tools", "status"),
)


def _values(
    row: sqlite3.Row, columns: Sequence[str], convert: dict[str, Callable[[Any], Any]]
) -> tuple[Any, ...]:
    """The row's values for `columns`; text without NUL (PostgreSQL text cannot hold it; the
    live stores replace it the same way), `convert` for columns whose types differ. A column
    the home's older schema lacks is None (its converter supplies the default)."""
    out = []
    present = set(row.keys())
    for column in columns:
        value = row[column] if column in present else None
        if column in convert:
            value = convert[column](value)
        elif isinstance(value, str):
            value = _text(value)
        out.append(value)
    return tuple(out)


def _copy_conversations(db: PostgresDatabase, state: sqlite3.Connection | None) -> list[Count]:
    from psycopg.types.json import Json

    from agent.conversations import ConversationStore

    ConversationStore(db)  # creates the tables
    conversations = (
        _rows(state, "SELECT * FROM conversations ORDER BY created")
        if _has_table(state, "conversations")
        else []
    )
    turns = _rows(state, "SELECT * FROM turns ORDER BY id") if _has_table(state, "turns") else []
    _insert_rows(
        db,
        "conversations",
        _CONVERSATION_COLUMNS,
        [_values(r, _CONVERSATION_COLUMNS, {}) for r in conversations],
    )
    convert: dict[str, Callable[[Any], Any]] = {
        "is_error": bool,
        "injected": lambda v: Json(_json(v)),
        "tools": lambda v: Json(_json(v) if v is not None else []),
    }
    _insert_rows(
        db,
        "conversation_turns",
        _TURN_COLUMNS,
        [_values(r, _TURN_COLUMNS, convert) for r in turns],
    )
    return [
        Count("conversations", len(conversations), _pg_count(db, "conversations")),
        Count("turns", len(turns), _pg_count(db, "conversation_turns")),
    ]


def _text(value: str) -> str:
    return value.replace("\x00", "\ufffd")


def _json(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return []


def _copy_feishu(db: PostgresDatabase, feishu: sqlite3.Connection | None) -> list[Count]:
    from bridge.state import BridgeState

    BridgeState(db)
    chats = _rows(feishu, "SELECT * FROM chats") if _has_table(feishu, "chats") else []
    owner = _rows(feishu, "SELECT * FROM owner") if _has_table(feishu, "owner") else []
    # Generations decide which conversation a chat continues: keep them. Dedup keys are
    # short-lived (48 h) and stay behind.
    _insert_rows(
        db,
        "feishu_chats",
        ("chat_id", "generation", "updated"),
        [(r["chat_id"], r["generation"], r["updated"]) for r in chats],
        conflict="ON CONFLICT (chat_id) DO UPDATE SET generation = "
        "GREATEST(feishu_chats.generation, EXCLUDED.generation)",
    )
    _insert_rows(
        db,
        "feishu_owner",
        ("id", "open_id", "paired_at"),
        [(1, r["open_id"], r["paired_at"]) for r in owner],
        conflict="ON CONFLICT (id) DO NOTHING",
    )
    return [Count("feishu chats", len(chats), _pg_count(db, "feishu_chats"))]


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

# Same tables and columns on both sides (memory/sqlite/state.py, memory/postgres/state.py).
_STATE_TABLES: tuple[tuple[str, str], ...] = (
    ("mem_episodes", "episodes"),
    ("mem_episode_messages", "episode messages"),
    ("mem_pending", "pending entities"),
    ("mem_injections", "injection records"),
    ("mem_turns", "injection windows"),
)


def _copy_state(db: PostgresDatabase, state: sqlite3.Connection | None) -> list[Count]:
    from memory.postgres.state import PostgresStateDB

    PostgresStateDB(db)
    counts = []
    for table, what in _STATE_TABLES:
        rows = _rows(state, f"SELECT * FROM {table}") if _has_table(state, table) else []
        if rows:
            columns = tuple(rows[0].keys())
            _insert_rows(db, table, columns, [_values(r, columns, {}) for r in rows])
        counts.append(Count(what, len(rows), _pg_count(db, table)))
    # Message ids were kept (summaries and observations cite them): new ones continue after.
    db.fetch(
        "SELECT setval(pg_get_serial_sequence('mem_episode_messages', 'id'),"
        " GREATEST((SELECT max(id) FROM mem_episode_messages), 1))"
    )
    return counts


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
