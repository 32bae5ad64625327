"""Persistent conversation state: conversation id -> SDK session id, counters and turn history.

Lives in `<home>/state.db` (SQLite, WAL), or in the shared PostgreSQL database (tables
`conversations`, `conversation_turns`) when several instances serve one person. This is what
lets a conversation continue after a restart: the next message resumes the recorded SDK session.
One class, `ConversationStore`, for both databases: its SQL is written once (`storage.sql`).

A turn is on record from the moment it starts (`begin_turn`: status `running`, the user's
message), its steps and text are written as they happen (`update_turn`), and `finish_turn`
gives it its end. A turn still `running` whose process is gone (a crash, SIGKILL) is found by
`open_turns` and marked `interrupted` (`mark_interrupted`; agent/journal.py decides when).
"""

from __future__ import annotations

import builtins
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memory.notes.capture import sanitize, sanitize_data
from storage.sql import Dialect, Row, json_value, open_tables

if TYPE_CHECKING:
    from storage.postgres import PostgresDatabase

COMPONENT = "conversations"

# Written once for both databases (storage.sql): `{turns}` is `turns` in state.db and
# `conversation_turns` in the shared PostgreSQL database; `{REAL}` and the others are types.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE {conversations} (
        id TEXT PRIMARY KEY,
        session_id TEXT,
        title TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL DEFAULT 'web',
        created {REAL} NOT NULL,
        updated {REAL} NOT NULL,
        turns INTEGER NOT NULL DEFAULT 0,
        cost_usd {REAL} NOT NULL DEFAULT 0
    );
    CREATE TABLE {turns} (
        id {SERIAL},
        conversation_id TEXT NOT NULL,
        started {REAL} NOT NULL,
        message TEXT NOT NULL,
        reply TEXT NOT NULL,
        is_error {BOOL} NOT NULL,
        log_file TEXT NOT NULL,
        session_id TEXT,
        cost_usd {REAL},
        injected {JSON} NOT NULL DEFAULT '[]'
    );
    CREATE INDEX {turns}_by_conversation ON {turns}(conversation_id, id);
    """,
    # The turn's tool steps with their final state, so a reload shows refused and failed steps.
    "ALTER TABLE {turns} ADD COLUMN tools {JSON} NOT NULL DEFAULT '[]';"
    " ALTER TABLE {turns} ADD COLUMN status TEXT;",
    # A turn is on record while it runs (status 'running'); `owner` is the pid of the process
    # running it, so a restart tells a dead process's turn from another live process's.
    "ALTER TABLE {turns} ADD COLUMN owner INTEGER;"
    " CREATE INDEX {turns}_open ON {turns}(status) WHERE status = 'running';",
    # The list, most recent first (PostgreSQL had it from its first version; SQLite now too).
    "CREATE INDEX IF NOT EXISTS conversations_by_updated ON {conversations}(updated DESC);",
)

SQLITE = Dialect.sqlite("conversations", "turns")
POSTGRESQL = Dialect.postgresql("conversations", "turns", turns="conversation_turns")

RUNNING = "running"
INTERRUPTED = "interrupted"


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    session_id: str | None
    title: str
    source: str
    created: float
    updated: float
    turns: int
    cost_usd: float

    def to_public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "title": self.title,
            "source": self.source,
            "created": self.created,
            "updated": self.updated,
            "turns": self.turns,
            "cost_usd": self.cost_usd,
        }


@dataclass(frozen=True, slots=True)
class TurnRecord:
    started: float
    message: str
    reply: str
    is_error: bool
    log_file: str
    session_id: str | None
    cost_usd: float | None
    injected: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    status: str | None = None
    """completed, stopped, timed_out or failed (agent.replies.TurnStatus); running while the
    turn runs; interrupted when its process died before it finished; None before 0.2."""

    def to_public(self) -> dict[str, Any]:
        return {
            "started": self.started,
            "message": self.message,
            "reply": self.reply,
            "is_error": self.is_error,
            "log_file": self.log_file,
            "session_id": self.session_id,
            "cost_usd": self.cost_usd,
            "injected": self.injected,
            "tools": self.tools,
            "status": self.status or ("failed" if self.is_error else "completed"),
        }


@dataclass(frozen=True, slots=True)
class OpenTurn:
    """A turn on record as running: its process may still run it, or may have died."""

    id: int
    conversation_id: str
    started: float
    session_id: str | None
    reply: str
    """The text written so far."""
    tools: list[dict[str, Any]]
    """The steps written so far, as `TurnRecord.tools`."""
    owner: int | None
    """The pid of the process that began it (None for a turn begun before 0.3)."""


class ConversationBackend(Protocol):
    """What the sessions and the web API need from conversation state: `ConversationStore`, on
    SQLite (one instance) or PostgreSQL (shared by several instances); `tests/storage` runs one
    contract suite against both. Calls are short and synchronous, so the async side calls them
    directly.
    """

    def close(self) -> None: ...

    def get(self, conversation_id: str) -> Conversation | None: ...

    def list(self, limit: int = 200) -> list[Conversation]:
        """Most recently updated first."""
        ...

    def ensure(self, conversation_id: str, *, title: str, source: str) -> None:
        """Create the conversation unless it exists (an existing one is left as it is)."""
        ...

    def set_session(self, conversation_id: str, session_id: str | None) -> None: ...

    def record_turn(
        self,
        conversation_id: str,
        *,
        started: float,
        message: str,
        reply: str,
        is_error: bool,
        log_file: str,
        session_id: str | None,
        cost_usd: float | None,
        injected: builtins.list[dict[str, Any]],
        tools: builtins.list[dict[str, Any]] | None = None,
        status: str | None = None,
    ) -> None:
        """Append a turn; count it, add its cost, and adopt its session id when it has one.
        `cost_usd` is this turn's own cost; the conversation's total is the sum."""
        ...

    def begin_turn(
        self,
        conversation_id: str,
        *,
        started: float,
        message: str,
        log_file: str,
        session_id: str | None,
    ) -> tuple[int, TurnRecord | None]:
        """Put a starting turn on record (status `running`, not yet counted); returns its id and
        the conversation's turn before it (None for the first)."""
        ...

    def update_turn(
        self,
        turn_id: int,
        *,
        reply: str,
        tools: builtins.list[dict[str, Any]],
        session_id: str | None,
    ) -> None:
        """What a running turn has done so far (no change once it is no longer running)."""
        ...

    def finish_turn(
        self,
        turn_id: int,
        *,
        reply: str,
        is_error: bool,
        session_id: str | None,
        cost_usd: float | None,
        injected: builtins.list[dict[str, Any]],
        tools: builtins.list[dict[str, Any]],
        status: str,
    ) -> None:
        """A begun turn's end, as `record_turn` records one (counted once, even if it was
        marked interrupted meanwhile)."""
        ...

    def open_turns(self, conversation_id: str | None = None) -> builtins.list[OpenTurn]:
        """Turns still `running` (of one conversation, or all), oldest first."""
        ...

    def mark_interrupted(
        self,
        turn_id: int,
        *,
        reply: str,
        tools: builtins.list[dict[str, Any]],
        session_id: str | None,
    ) -> bool:
        """A running turn whose process died: status `interrupted`, an error, counted; its
        conversation adopts `session_id` when given. False if it was no longer running."""
        ...

    def turns(self, conversation_id: str, limit: int = 500) -> builtins.list[TurnRecord]:
        """Oldest first."""
        ...

    def delete(self, conversation_id: str) -> bool:
        """Remove the conversation and its turns; True if it existed."""
        ...


class ConversationStore:
    """`ConversationBackend` in the SQLite file `where` or the shared PostgreSQL database
    `where`. Small and synchronous; calls are short, so the async side may call it directly.
    Counters move in one statement (`turns = turns + 1`): concurrent instances never lose one."""

    def __init__(self, where: Path | PostgresDatabase) -> None:
        self._sql = open_tables(where, sqlite=SQLITE, postgresql=POSTGRESQL)
        self._sql.migrate(COMPONENT, MIGRATIONS)

    def close(self) -> None:
        self._sql.close()

    # --- conversations -----------------------------------------------------------------------
    def get(self, conversation_id: str) -> Conversation | None:
        rows = self._sql.read("SELECT * FROM {conversations} WHERE id = ?", (conversation_id,))
        return _conversation(rows[0]) if rows else None

    def list(self, limit: int = 200) -> list[Conversation]:
        rows = self._sql.read(
            "SELECT * FROM {conversations} ORDER BY updated DESC, id LIMIT ?", (limit,)
        )
        return [_conversation(r) for r in rows]

    def ensure(self, conversation_id: str, *, title: str, source: str) -> None:
        now = time.time()
        with self._sql.write() as db:
            db.execute(
                "INSERT INTO {conversations}(id, title, source, created, updated)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (conversation_id, sanitize(title)[:80], source, now, now),
            )

    def set_session(self, conversation_id: str, session_id: str | None) -> None:
        with self._sql.write() as db:
            db.execute(
                "UPDATE {conversations} SET session_id = ? WHERE id = ?",
                (session_id, conversation_id),
            )

    def record_turn(
        self,
        conversation_id: str,
        *,
        started: float,
        message: str,
        reply: str,
        is_error: bool,
        log_file: str,
        session_id: str | None,
        cost_usd: float | None,
        injected: builtins.list[dict[str, Any]],
        tools: builtins.list[dict[str, Any]] | None = None,
        status: str | None = None,
    ) -> None:
        with self._sql.write() as db:
            db.execute(
                "INSERT INTO {turns}(conversation_id, started, message, reply, is_error, log_file,"
                " session_id, cost_usd, injected, tools, status)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, CAST(? AS {JSON}), CAST(? AS {JSON}), ?)",
                (
                    conversation_id,
                    started,
                    sanitize(message),  # history is stored text: no secrets, no <private>
                    sanitize(reply),
                    is_error,
                    log_file,
                    session_id,
                    cost_usd,
                    json.dumps(injected, ensure_ascii=False),
                    _tools_json(tools or []),
                    status,
                ),
            )
            db.execute(
                "UPDATE {conversations} SET updated = ?, turns = turns + 1,"
                " cost_usd = cost_usd + ?, session_id = COALESCE(?, session_id) WHERE id = ?",
                (time.time(), cost_usd or 0.0, session_id, conversation_id),
            )

    def begin_turn(
        self,
        conversation_id: str,
        *,
        started: float,
        message: str,
        log_file: str,
        session_id: str | None,
    ) -> tuple[int, TurnRecord | None]:
        with self._sql.write() as db:
            before = db.execute(
                "SELECT * FROM {turns} WHERE conversation_id = ? ORDER BY id DESC LIMIT 1",
                (conversation_id,),
            ).fetchone()
            row = db.execute(
                "INSERT INTO {turns}(conversation_id, started, message, reply, is_error, log_file,"
                " session_id, status, owner) VALUES (?, ?, ?, '', FALSE, ?, ?, ?, ?) RETURNING id",
                (
                    conversation_id,
                    started,
                    sanitize(message),
                    log_file,
                    session_id,
                    RUNNING,
                    os.getpid(),
                ),
            ).fetchone()
            db.execute(
                "UPDATE {conversations} SET updated = ? WHERE id = ?",
                (time.time(), conversation_id),
            )
        return int(row["id"]), _turn(before) if before is not None else None

    def update_turn(
        self,
        turn_id: int,
        *,
        reply: str,
        tools: builtins.list[dict[str, Any]],
        session_id: str | None,
    ) -> None:
        with self._sql.write() as db:
            db.execute(
                "UPDATE {turns} SET reply = ?, tools = CAST(? AS {JSON}),"
                " session_id = COALESCE(?, session_id) WHERE id = ? AND status = ?",
                (sanitize(reply), _tools_json(tools), session_id, turn_id, RUNNING),
            )

    def finish_turn(
        self,
        turn_id: int,
        *,
        reply: str,
        is_error: bool,
        session_id: str | None,
        cost_usd: float | None,
        injected: builtins.list[dict[str, Any]],
        tools: builtins.list[dict[str, Any]],
        status: str,
    ) -> None:
        with self._sql.write() as db:
            row = db.execute(
                "SELECT conversation_id, status FROM {turns} WHERE id = ? {FOR_UPDATE}",
                (turn_id,),
            ).fetchone()
            if row is None:  # the conversation was deleted meanwhile
                return
            db.execute(
                "UPDATE {turns} SET reply = ?, is_error = ?, session_id = COALESCE(?, session_id),"
                " cost_usd = ?, injected = CAST(? AS {JSON}), tools = CAST(? AS {JSON}),"
                " status = ? WHERE id = ?",
                (
                    sanitize(reply),
                    is_error,
                    session_id,
                    cost_usd,
                    json.dumps(injected, ensure_ascii=False),
                    _tools_json(tools),
                    status,
                    turn_id,
                ),
            )
            count = 1 if row["status"] == RUNNING else 0  # marked interrupted: counted then
            db.execute(
                "UPDATE {conversations} SET updated = ?, turns = turns + ?,"
                " cost_usd = cost_usd + ?, session_id = COALESCE(?, session_id) WHERE id = ?",
                (time.time(), count, cost_usd or 0.0, session_id, row["conversation_id"]),
            )

    def open_turns(self, conversation_id: str | None = None) -> builtins.list[OpenTurn]:
        rows = self._sql.read(
            "SELECT * FROM {turns} WHERE status = ?"
            " AND (CAST(? AS TEXT) IS NULL OR conversation_id = ?) ORDER BY id",
            (RUNNING, conversation_id, conversation_id),
        )
        return [
            OpenTurn(
                id=int(r["id"]),
                conversation_id=r["conversation_id"],
                started=r["started"],
                session_id=r["session_id"],
                reply=r["reply"],
                tools=json_value(r["tools"]),
                owner=r["owner"],
            )
            for r in rows
        ]

    def mark_interrupted(
        self,
        turn_id: int,
        *,
        reply: str,
        tools: builtins.list[dict[str, Any]],
        session_id: str | None,
    ) -> bool:
        with self._sql.write() as db:
            row = db.execute(
                "UPDATE {turns} SET reply = ?, tools = CAST(? AS {JSON}), is_error = TRUE,"
                " status = ?, session_id = COALESCE(?, session_id)"
                " WHERE id = ? AND status = ? RETURNING conversation_id",
                (sanitize(reply), _tools_json(tools), INTERRUPTED, session_id, turn_id, RUNNING),
            ).fetchone()
            if row is None:
                return False
            db.execute(
                "UPDATE {conversations} SET updated = ?, turns = turns + 1,"
                " session_id = COALESCE(?, session_id) WHERE id = ?",
                (time.time(), session_id, row["conversation_id"]),
            )
        return True

    def turns(self, conversation_id: str, limit: int = 500) -> builtins.list[TurnRecord]:
        rows = self._sql.read(
            "SELECT * FROM {turns} WHERE conversation_id = ? ORDER BY id LIMIT ?",
            (conversation_id, limit),
        )
        return [_turn(r) for r in rows]

    def delete(self, conversation_id: str) -> bool:
        with self._sql.write() as db:
            cur = db.execute("DELETE FROM {conversations} WHERE id = ?", (conversation_id,))
            db.execute("DELETE FROM {turns} WHERE conversation_id = ?", (conversation_id,))
            return cur.rowcount > 0


def _turn(r: Row) -> TurnRecord:
    return TurnRecord(
        started=r["started"],
        message=r["message"],
        reply=r["reply"],
        is_error=bool(r["is_error"]),
        log_file=r["log_file"],
        session_id=r["session_id"],
        cost_usd=r["cost_usd"],
        injected=json_value(r["injected"]),
        tools=json_value(r["tools"]),
        status=r["status"],
    )


def _tools_json(tools: builtins.list[dict[str, Any]]) -> str:
    return json.dumps(sanitize_data(tools), ensure_ascii=False)


def _conversation(row: Row) -> Conversation:
    return Conversation(
        id=row["id"],
        session_id=row["session_id"],
        title=row["title"],
        source=row["source"],
        created=row["created"],
        updated=row["updated"],
        turns=row["turns"],
        cost_usd=row["cost_usd"],
    )
