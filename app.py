"""Composition root: `create_app(settings)` builds everything; the lifespan owns it.
`run_bridge_alone(settings)` runs the Feishu bridge over the same container, without HTTP.

`uvicorn app:app` works too: the module-level `app` is created on first access, never at import.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI

from agent.conversations import ConversationBackend, ConversationStore
from agent.injection import MemoryInjector, memory_extras
from agent.logs import RequestLogs
from agent.options import prepare_workspace, protect_transcripts, write_cli_launcher
from agent.policy import PolicyConfig
from agent.recorder import MemoryRecorder
from agent.sessions import SessionManager, TurnLock
from agent.summarizer import model_summary
from errors import ConfigurationError
from memory.backend import MemoryBackend, StateBackend
from memory.clients.hook_process import announce_app
from memory.clients.hooks import HookService, create_hooks_router
from memory.clients.notes_watch import NoteFiles
from memory.clients.opening import open_memory, open_state
from memory.clients.rescans import RescanPolicy, Rescans
from memory.clients.vector_sync import VectorSync
from memory.encoders.client import EncoderClient, ThreadEncoder
from memory.history.conflicts import ConflictStore
from memory.history.store import HistoryStore
from memory.loop.entities import PendingStore
from memory.loop.episodes import EpisodeStore
from settings import Settings, load_settings
from storage.lanes import Lanes
from storage.private import private_process, tighten_home
from web import chat_api, embed, health, memory_api
from web.access import LoopbackOnly
from web.auth import require_token
from web.errors import install_error_handling
from web.page import mount_page

if TYPE_CHECKING:
    from claude_agent_sdk import SessionStore

    from bridge.feishu import FeishuBridge
    from bridge.state import BridgeStateBackend
    from storage.postgres import PostgresDatabase

logger = logging.getLogger(__name__)


@dataclass
class Container:
    """Everything the running app owns, built in the lifespan and closed on exit."""

    settings: Settings
    conversations: ConversationBackend
    sessions: SessionManager
    memory: MemoryBackend
    state: StateBackend
    episodes: EpisodeStore
    pending: PendingStore
    # With CLAUDE_MEMORY_DATABASE_URL: the shared database and the Feishu state kept there.
    database: PostgresDatabase | None = None
    feishu_state: BridgeStateBackend | None = None
    # The text encoder's worker process (docs/retrieval.md); disabled until the lifespan sets it.
    encoder: EncoderClient = field(default_factory=lambda: EncoderClient(None))
    # Threads by kind of blocking call (storage/lanes.py).
    lanes: Lanes = field(default_factory=lambda: Lanes.sized(state=4, memory=4))

    async def start(self) -> None:
        """What needs the running loop: the shared database's async pool."""
        if self.database is not None:
            await self.database.open_async()

    async def aclose(self) -> None:
        try:
            async with asyncio.timeout(self.settings.shutdown_timeout_seconds + 5):
                await self.sessions.aclose()
        except TimeoutError:
            logger.warning("sessions did not close within the time limit")
        self.conversations.close()
        self.state.close()
        await asyncio.to_thread(self.memory.close)
        if self.database is not None:
            await self.database.aclose()
        self.lanes.close()


@dataclass(frozen=True, slots=True)
class _SharedState:
    """The PostgreSQL side of a multi-instance deployment (docs/postgres.md)."""

    database: PostgresDatabase
    conversations: ConversationBackend
    session_store: SessionStore
    turn_lock: TurnLock
    feishu_state: BridgeStateBackend | None


def _open_shared_state(settings: Settings) -> _SharedState:
    """Blocking: connects and applies migrations."""
    from agent.pg_session_store import SHARED_PROJECT_KEY, PostgresSessionStore
    from agent.turn_lock_pg import PostgresTurnLock
    from bridge.state import BridgeState
    from storage.postgres import PostgresDatabase

    if settings.database_url is None:
        raise ConfigurationError("no database configured: set CLAUDE_MEMORY_DATABASE_URL")
    database = PostgresDatabase(
        settings.database_url.get_secret_value(),
        min_size=settings.database_pool_min_size,
        max_size=settings.database_pool_max_size,
        # Every running turn holds one connection for its conversation lock: they must never
        # starve the transcript writes the turn itself waits for.
        async_max_size=settings.database_pool_max_size + settings.max_concurrent_turns,
        timeout=settings.database_pool_timeout_seconds,
    )
    database.open()
    try:
        return _SharedState(
            database=database,
            conversations=ConversationStore(database),
            session_store=PostgresSessionStore(database, project_key=SHARED_PROJECT_KEY),
            turn_lock=PostgresTurnLock(database),
            feishu_state=BridgeState(database) if settings.feishu_enabled else None,
        )
    except BaseException:
        database.close()
        raise


def build_container(settings: Settings, *, rescans_in_background: bool = False) -> Container:
    """Blocking (opens databases, syncs the memory index): run it in a thread.
    `rescans_in_background`: no read rescans the note files on a timer; the caller runs
    `Rescans` (the web app: memory/clients/rescans.py)."""
    home = settings.home_dir
    home.mkdir(parents=True, exist_ok=True)
    prepare_workspace(settings.workspace_dir)
    protect_transcripts(settings.agent_config_dir, settings.workspace_dir)
    write_cli_launcher(settings)
    # The database first: a wrong URL fails before the (possibly long) memory index sync.
    shared = _open_shared_state(settings) if settings.database_url is not None else None
    database = shared.database if shared else None
    config = settings.memory_config()
    if rescans_in_background:
        config = replace(config, rescan_interval=math.inf)
    memory = open_memory(config, database=database)
    conversations = shared.conversations if shared else ConversationStore(settings.state_path)
    state = open_state(settings.state_path, database=database)
    memory.attach_history(HistoryStore(state))  # every change of a note kept, with its source
    episodes = EpisodeStore(state, memory)
    pending = PendingStore(state)
    # Windows in the state database: a restarted app does not repeat itself.
    injector = MemoryInjector(memory, episodes, budget_tokens=settings.context_budget_tokens)
    lanes = Lanes.sized(state=settings.state_threads, memory=settings.memory_threads)

    def is_resumed(conversation_id: str) -> bool:
        known = conversations.get(conversation_id)
        return known is not None and known.turns > 0

    sessions = SessionManager(
        settings,
        store=conversations,
        logs=RequestLogs(settings.logs_dir),
        policy=PolicyConfig.from_settings(settings),
        extras_factory=lambda cid, current: memory_extras(
            injector, memory, cid, current, is_resumed=is_resumed, pending=pending
        ),
        session_store=shared.session_store if shared else None,
        turn_lock=shared.turn_lock if shared else None,
        state_lane=lanes.state,
    )
    recorder = MemoryRecorder(
        memory,
        episodes,
        pending,
        summarizer=lambda text: model_summary(settings, text),
        run=lanes.state.run,
    )
    sessions.on_turn(recorder.on_turn)
    sessions.on_close(recorder.on_close)
    return Container(
        settings=settings,
        conversations=conversations,
        sessions=sessions,
        memory=memory,
        state=state,
        episodes=episodes,
        pending=pending,
        database=shared.database if shared else None,
        feishu_state=shared.feishu_state if shared else None,
        lanes=lanes,
    )


async def _recover_turns(container: Container) -> None:
    """Turns a crashed run of the app left running show as interrupted (agent/journal.py)."""
    try:
        await container.sessions.recover_interrupted()
    except Exception:  # the app starts anyway; the next turn of each conversation retries
        logger.exception("could not look for turns a crash interrupted")


def _vector_sync(container: Container) -> contextlib.AbstractAsyncContextManager[Any]:
    """Embeds notes without current vectors in the background (nothing without encoder)."""
    if container.encoder.spec is None:
        return contextlib.nullcontext()
    memory = container.memory
    return VectorSync(
        container.encoder, memory.vectors, memory.generation, written=memory.check_embedded
    )


def _rescans(
    app: FastAPI, settings: Settings, container: Container
) -> contextlib.AbstractAsyncContextManager[Any]:
    """Rescans the note files in the background, never in a request (nothing on PostgreSQL)."""
    if not isinstance(container.memory, NoteFiles):
        return contextlib.nullcontext()
    policy = RescanPolicy(interval=settings.memory_config().rescan_interval)
    rescans = Rescans(container.memory, policy)
    app.state.rescans = rescans
    return rescans


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    # However the app is started (`uvicorn app:app` too): what it and the Claude CLI it spawns
    # create is private, and an existing home is narrowed (storage/private.py).
    private_process()
    tighten_home(settings.home_dir)
    encoder = EncoderClient(  # parsed first: a bad encoder setting stops the start
        settings.encoder_spec(),
        log_path=settings.logs_dir / "encoder.log",
        request_timeout=settings.encoder_timeout_seconds,
    )
    container = await asyncio.to_thread(build_container, settings, rescans_in_background=True)
    container.encoder = encoder
    app.state.container = container
    app.state.memory_api = _memory_api(container, names=lambda open_id: _member_name(app, open_id))
    app.state.feishu = None
    try:
        await container.start()
        await _recover_turns(container)
        # The model loads in its own process: this returns at once, and until it is ready
        # searches answer with keywords (and say so). The model endpoint is probed in the
        # background: /health says "checking" until the answer comes (agent/endpoint.py).
        async with (
            encoder,
            _vector_sync(container),
            _rescans(app, settings, container),
            container.sessions.endpoint,
        ):
            if encoder.spec is not None:
                container.memory.attach_encoder(ThreadEncoder(encoder))
            async with _feishu(app, settings, container):
                # The hooks of this home find and prove this instance by its run file
                # (address and a fresh secret, 0600); removed again at a clean shutdown.
                with announce_app(settings.home_dir, settings.host, settings.port) as hooks:
                    app.state.hook_secret = hooks.secret
                    yield
                app.state.hook_secret = None
    finally:
        container.memory.attach_encoder(None)
        await container.aclose()


@contextlib.asynccontextmanager
async def _feishu(app: FastAPI, settings: Settings, container: Container) -> AsyncIterator[None]:
    try:
        if settings.feishu_enabled:
            app.state.feishu = _feishu_bridge(settings, container)
            await app.state.feishu.start()
        yield
    finally:
        if app.state.feishu is not None:  # the bridge feeds the sessions: close it first
            await app.state.feishu.aclose()


def _feishu_bridge(settings: Settings, container: Container) -> FeishuBridge:
    """The Feishu bridge over the container (lark-oapi imported only now)."""
    from bridge.feishu import FeishuBridge, memory_search

    return FeishuBridge(
        settings,
        container.sessions,
        search=memory_search(container.memory),
        state=container.feishu_state,
        memory=container.memory,
        pending=container.pending,
        conflicts=ConflictStore(container.state),
    )


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_settings()  # a bad env value: one ConfigurationError line
    app = FastAPI(
        title="claude-memory-system",
        description="A personal Claude agent with a long-term, bilingual memory.",
        version="0.1.0",
        lifespan=_lifespan,
    )
    app.state.settings = settings
    app.state.hook_secret = None
    app.state.rescans = None
    if settings.api_token is None:  # no token: loopback clients only (web/access.py)
        app.add_middleware(LoopbackOnly)

    install_error_handling(app)  # the one mapping from errors to answers (web/errors.py)
    app.include_router(health.router)
    app.include_router(embed.router)
    app.include_router(chat_api.router)
    _include_memory_api(app)
    app.include_router(  # `claude-memory hook` asks here, signed with the run file's secret
        create_hooks_router(
            lambda: HookService(
                app.state.container.state,
                lambda: app.state.container.memory,
                budget_tokens=settings.context_budget_tokens,
                native_memory=settings.native_memory,
                after_answer=True,
                home=settings.home_dir,
            ),
            lambda: app.state.hook_secret,
            lambda: _serving(app),
        )
    )
    mount_page(app)
    return app


def _serving(app: FastAPI) -> contextlib.AbstractContextManager[Any]:
    """A request that schedules the background rescan, as a hook request does: a note edited
    in place by hand shows in the next searches within seconds (memory/clients/rescans.py)."""
    rescans: Rescans | None = app.state.rescans
    return rescans.serving() if rescans is not None else contextlib.nullcontext()


def _include_memory_api(app: FastAPI) -> None:
    """The memory's routes (web/memory_api.py) behind the token; what they serve is the running
    container's (`app.state.memory_api`, set by the lifespan)."""

    async def memory_request() -> AsyncIterator[None]:
        with _serving(app):  # the page's searches and edits, as the hooks' requests
            yield

    token = [Depends(require_token)]
    # the fixed paths first, so the memory router's `/{note_id}` never captures them
    for router in (memory_api.pending_router, memory_api.supersessions_router):
        app.include_router(router, dependencies=token)
    app.include_router(memory_api.memory_router, dependencies=[*token, Depends(memory_request)])
    for router in (
        memory_api.history_router,
        memory_api.observations_router,
        memory_api.feedback_router,
    ):
        app.include_router(router, dependencies=token)


def _memory_api(
    container: Container, names: memory_api.NameLookup | None = None
) -> memory_api.MemoryApi:
    return memory_api.MemoryApi.over(
        container.memory,
        container.state,
        pending=container.pending,
        episodes=container.episodes,
        lane=container.lanes.memory,
        names=names,
    )


def _member_name(app: FastAPI, open_id: str) -> str | None:
    """A Feishu member's display name, if the running bridge has read it (whose a note is)."""
    bridge = app.state.feishu
    return bridge.known_name(open_id) if bridge is not None else None


_BRIDGE_WATCH_SECONDS = 1.0
"""How often `run_bridge_alone` looks whether the websocket client died."""


async def run_bridge_alone(settings: Settings, *, stop: asyncio.Event | None = None) -> int:
    """`claude-memory feishu`: the bridge alone, over the same container as the web app, no HTTP.

    Runs until SIGINT/SIGTERM (or `stop`), then closes the bridge before the container, each
    within its time limit. Returns 1 when the websocket client dies for good (e.g. the app
    credentials are rejected), else 0.
    """
    import signal

    bridge_log = logging.getLogger("bridge.feishu")  # the bridge's own log file
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # Windows, non-main thread
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
    container = await asyncio.to_thread(build_container, settings)
    code = 0
    try:
        await container.start()
        await _recover_turns(container)
        bridge = _feishu_bridge(settings, container)
        try:
            await bridge.start()
            if await bridge.wait_connected(30):
                bridge_log.info("Feishu bridge connected; press Ctrl+C to stop")
            else:
                bridge_log.warning("Feishu bridge not connected yet; it keeps retrying")
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_BRIDGE_WATCH_SECONDS):
                        await stop.wait()
                error = bridge.status()["error"]
                if error:
                    bridge_log.error("Feishu websocket client stopped: %s", error)
                    code = 1
                    break
        finally:
            await bridge.aclose()
    finally:
        await container.aclose()
        for sig in installed:
            loop.remove_signal_handler(sig)
    return code


@functools.cache
def _default_app() -> FastAPI:
    return create_app()


def __getattr__(name: str) -> Any:
    # `uvicorn app:app` support without building anything at import time: the app is built on
    # the first access and the same one returned after (an ASGI server may look it up twice).
    if name == "app":
        return _default_app()
    raise AttributeError(name)
