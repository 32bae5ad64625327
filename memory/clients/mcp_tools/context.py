"""What the MCP tools share: the configuration, the memory opened on first use, the project
the server was started in, the client session it serves, and the change budget.

Built once per server, off the protocol's thread (`memory.clients.mcp_server`), and closed when
the client closes stdin. Every tool runs in a worker thread, so what is shared is guarded here.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from memory._record import record
from memory.backend import MemoryBackend, StateBackend
from memory.clients.opening import open_database, open_memory, open_state
from memory.clients.project import ProjectIdentity, identify
from memory.config import MemoryConfig
from memory.history.store import HistoryStore
from memory.loop.entities import PendingStore
from memory.loop.episodes import Episode, EpisodeStore
from memory.loop.reach import MCP_WINDOW_SECONDS, ChangeBudget, Waits

if TYPE_CHECKING:
    from memory.encoders.models import Encoder, EncoderSpec
    from storage.postgres import PostgresDatabase


@record(slots=False)
class McpConfig:
    """What the stand-alone server needs; `claude-memory mcp` builds it from the settings."""

    home: Path
    memory: MemoryConfig
    """The notes and index (and `database_url`: the shared PostgreSQL database, if any)."""
    encoder: EncoderSpec | None = None
    """The text encoder the server runs in its worker; None: keyword search only."""
    encoder_timeout: float = 10.0
    """Longest wait for a query's vector before the search answers with keywords."""
    logs_dir: Path | None = None
    """Where `mcp.log` and `encoder.log` go; default `<home>/logs`."""
    client_session: str | None = None
    """The client session that started this server, as the hooks key it
    (`claude-code:<session id>`): Claude Code tells its MCP servers in
    `CLAUDE_CODE_SESSION_ID`. Codex says it on every tool call instead (`_meta.threadId`)."""

    @classmethod
    def for_home(cls, home: Path, *, database_url: str | None = None) -> McpConfig:
        """Keyword search on the standard layout of `home` (tests, tools)."""
        return cls(home, MemoryConfig.for_home(home, database_url=database_url))

    @property
    def log_folder(self) -> Path:
        return self.logs_dir or self.home / "logs"


class ToolContext:
    """The memory and state the tools share: opened on first use, closed on exit."""

    def __init__(self, config: McpConfig, *, cwd: str | None = None) -> None:
        self.config = config
        self.home = config.home
        self.project: ProjectIdentity = identify(cwd or os.getcwd())
        self.client_session: str | None = config.client_session
        """The hooks' key of our client session, once known: its episode is ours."""
        self._lock = threading.Lock()
        self._budget_lock = threading.Lock()
        self._store: MemoryBackend | None = None
        self._state: StateBackend | None = None
        self._encoder: Encoder | None = None
        # PostgreSQL mode (docs/postgres.md): one small pool for the notes and the state
        self._database_url = config.memory.database_url
        self._database: PostgresDatabase | None = None
        # a model calls these tools: more than a few changes of existing notes within an hour
        # wait for the person (memory.loop.reach)
        self._budget = ChangeBudget(window_seconds=MCP_WINDOW_SECONDS)

    def attach_encoder(self, encoder: Encoder | None) -> None:
        """The encoder searches and saves use from now on (the store gets it when it opens)."""
        with self._lock:
            self._encoder = encoder
            if self._store is not None:
                self._store.attach_encoder(encoder)

    def _shared(self) -> PostgresDatabase | None:
        if self._database_url and self._database is None:
            self._database = open_database(self._database_url)
        return self._database

    def _open_state(self) -> StateBackend:
        if self._state is None:
            self._state = open_state(self.home / "state.db", database=self._shared())
        return self._state

    @property
    def store(self) -> MemoryBackend:
        with self._lock:
            if self._store is None:
                store = open_memory(
                    self.config.memory, database=self._shared(), encoder=self._encoder
                )
                # every change made through the tools (and any hand edit this process reads
                # first) is kept in the note's history, as the state database's other tables
                store.attach_history(HistoryStore(self._open_state()))
                self._store = store
            return self._store

    @property
    def state(self) -> StateBackend:
        with self._lock:
            return self._open_state()

    @property
    def episodes(self) -> EpisodeStore:
        return EpisodeStore(self.state, self.store)

    @property
    def pending(self) -> PendingStore:
        return PendingStore(self.state)

    def budget(self, waits: Waits | None) -> Waits | None:
        """`ChangeBudget.review` for one change, one tool call at a time."""
        with self._budget_lock:
            return self._budget.review(waits)

    def give_back(self) -> None:
        with self._budget_lock:
            self._budget.give_back()

    def proposer(self) -> str:
        return f"mcp:{self.client_session or self.project.name}"

    def current_episode(self) -> Episode | None:
        """The episode of the session this server serves (the one the hooks record into);
        when the client does not say which session it is, the project's most recently started
        active episode (ties: the larger id), which with two sessions in one project may be
        the other one's."""
        episodes = self.episodes
        if self.client_session:
            return episodes.active(self.client_session)
        active = episodes.active_for_project(self.project.key)
        return max(active, key=lambda e: (e.started, e.id)) if active else None

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None
            if self._state is not None:
                self._state.close()
                self._state = None
            if self._database is not None:
                self._database.close()
                self._database = None
