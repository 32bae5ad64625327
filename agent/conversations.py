"""Persistent conversation state: conversation id -> SDK session id, counters and turn history.

Lives in `<home>/state.db` (SQLite, WAL). This is what lets a conversation continue after a
restart: the next message resumes the recorded SDK session.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from memory.notes.capture import sanitize, sanitize_data
from storage.sqlite import SQLiteDB

_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        session_id TEXT,
        title TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL DEFAULT 'web',
        created REAL NOT NULL,
        updated REAL NOT NULL,
        turns INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0
    );
    CREATE TABLE turns (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        conversation_id TEXT NOT NULL,
        started REAL NOT NULL,
        message TEXT NOT NULL,
        reply TEXT NOT NULL,
        is_error INTEGER NOT NULL,
        log_file TEXT NOT NULL,
        session_id TEXT,
        cost_usd REAL,
        injected TEXT NOT NULL DEFAULT '[]'
    );
    CREATE INDEX turns_by_conversation ON turns(conversation_id, id);
    """,
    # The turn's tool steps with their final state, so a reload shows refused and failed steps.
    "ALTER TABLE turns ADD COLUMN tools TEXT NOT NULL DEFAULT '[]';"
    " ALTER TABLE turns ADD COLUMN status TEXT;",
)


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
    """completed, stopped, timed_out or failed (agent.replies.TurnStatus); None before 0.2."""

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


class ConversationBackend(Protocol):
    """What the sessions and the web API need from conversation state. Two implementations:
    `ConversationStore` (SQLite, one instance) and `agent.conversations_pg.
    PostgresConversationStore` (shared by several instances); `tests/storage` runs one contract
    suite against both. Calls are short and synchronous, so the async side calls them directly.
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

    def turns(self, conversation_id: str, limit: int = 500) -> builtins.list[TurnRecord]:
        """Oldest first."""
        ...

    def delete(self, conversation_id: str) -> bool:
        """Remove the conversation and its turns; True if it existed."""
        ...


class ConversationStore:
    """Small synchronous store; calls are short, so the async side may call it directly."""

    def __init__(self, path: Path) -> None:
        self._db = SQLiteDB(path)
        self._db.migrate("conversations", _MIGRATIONS)

    def close(self) -> None:
        self._db.close()

    # --- conversations -----------------------------------------------------------------------
    def get(self, conversation_id: str) -> Conversation | None:
        rows = self._db.read("SELECT * FROM conversations WHERE id = ?", (conversation_id,))
        return _conversation(rows[0]) if rows else None

    def list(self, limit: int = 200) -> list[Conversation]:
        rows = self._db.read("SELECT * FROM conversations ORDER BY updated DESC LIMIT ?", (limit,))
        return [_conversation(r) for r in rows]

    def ensure(self, conversation_id: str, *, title: str, source: str) -> None:
        now = time.time()
        with self._db.write() as db:
            db.execute(
                "INSERT OR IGNORE INTO conversations(id, title, source, created, updated)"
                " VALUES (?, ?, ?, ?, ?)",
                (conversation_id, sanitize(title)[:80], source, now, now),
            )

    def set_session(self, conversation_id: str, session_id: str | None) -> None:
        with self._db.write() as db:
            db.execute(
                "UPDATE conversations SET session_id = ? WHERE id = ?",
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
        with self._db.write() as db:
            db.execute(
                "INSERT INTO turns(conversation_id, started, message, reply, is_error, log_file,"
                " session_id, cost_usd, injected, tools, status)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    conversation_id,
                    started,
                    sanitize(message),  # history is stored text: no secrets, no <private>
                    sanitize(reply),
                    int(is_error),
                    log_file,
                    session_id,
                    cost_usd,
                    json.dumps(injected, ensure_ascii=False),
                    json.dumps(sanitize_data(tools or []), ensure_ascii=False),
                    status,
                ),
            )
            db.execute(
                "UPDATE conversations SET updated = ?, turns = turns + 1,"
                " cost_usd = cost_usd + ?, session_id = COALESCE(?, session_id) WHERE id = ?",
                (time.time(), cost_usd or 0.0, session_id, conversation_id),
            )

    def turns(self, conversation_id: str, limit: int = 500) -> builtins.list[TurnRecord]:
        rows = self._db.read(
            "SELECT * FROM turns WHERE conversation_id = ? ORDER BY id LIMIT ?",
            (conversation_id, limit),
        )
        return [
            TurnRecord(
                started=r["started"],
                message=r["message"],
                reply=r["reply"],
                is_error=bool(r["is_error"]),
                log_file=r["log_file"],
                session_id=r["session_id"],
                cost_usd=r["cost_usd"],
                injected=json.loads(r["injected"]),
                tools=json.loads(r["tools"]),
                status=r["status"],
            )
            for r in rows
        ]

    def delete(self, conversation_id: str) -> bool:
        with self._db.write() as db:
            cur = db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
            db.execute("DELETE FROM turns WHERE conversation_id = ?", (conversation_id,))
        return cur.rowcount > 0


def _conversation(row: sqlite3.Row) -> Conversation:
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
