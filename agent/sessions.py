"""Conversations -> session actors. One asyncio task owns one ClaudeSDKClient.

* Turns of one conversation run one at a time, in arrival order (the actor's queue).
* Different conversations run in parallel, up to `max_concurrent_turns` (a semaphore, no global
  lock).
* Idle actors disconnect after `idle_timeout_seconds`; at most `max_live_sessions` clients stay
  connected (the least recently used idle one goes first), checked when a conversation starts
  and again whenever a turn ends (conversations started at once may pass the limit while their
  turns run, never after); a replaced conversation keeps its client for
  `replace_grace_seconds`.
* The conversation -> SDK session id mapping is persisted, so after a restart the next message
  resumes the session and the model sees the earlier turns.
* A chat turn is on record from its start, its steps as they happen (agent/journal.py); a turn
  left running by a process that died shows as interrupted after a restart (found at start and
  before the conversation's next turn), and that next turn tells the model so.
* Several instances on one database (docs/postgres.md): transcripts go to a shared
  `SessionStore`, and a `TurnLock` orders one conversation's turns across instances; a client
  whose conversation moved on elsewhere is dropped and the next turn resumes from the store.

`SessionManager.run_agent` is the single pipeline every front door (HTTP, SSE, Feishu) uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, ParamSpec, Protocol, TypeVar

from claude_agent_sdk import ClaudeSDKClient, SessionKey, SessionStore

from agent._turn import EventSink, TurnState
from agent.conversations import ConversationBackend, OpenTurn
from agent.endpoint import EndpointChecker
from agent.events import TurnResult
from agent.journal import (
    TurnJournal,
    interrupted_note,
    read_transcript_file,
    recovered,
    transcript_tail,
)
from agent.logs import RequestLogs
from agent.options import (
    OptionsExtras,
    SessionStart,
    build_options,
    delete_transcripts,
    permission_gates,
)
from agent.policy import Allowed, Approver, Denied, PolicyConfig
from agent.replies import SHUTDOWN_STOP, Locale, Reply, TurnOutcome, build_reply
from errors import InvalidInputError
from memory.model import OWNER, Reader
from settings import Settings
from storage.lanes import Lane
from storage.public_text import clean_error
from storage.text import require_text
from storage.urls import safe_url

logger = logging.getLogger(__name__)
T = TypeVar("T")
P = ParamSpec("P")

DEFAULT_CONVERSATION = "main"
_DRAIN_SECONDS = 15.0

TurnKind = Literal["chat", "compact"]
ExtrasFactory = Callable[[str, Callable[[], TurnState | None]], OptionsExtras]
TurnListener = Callable[["TurnInfo"], Awaitable[None]]
CloseListener = Callable[[str, str], Awaitable[None]]


class TurnLock(Protocol):
    """Orders the turns of one conversation across app instances sharing one database (within
    an instance the actor's queue already does). Held from before the turn's client is used
    until its turn is recorded."""

    def hold(self, conversation_id: str) -> AbstractAsyncContextManager[None]: ...

    def hold_if_free(self, conversation_id: str) -> AbstractAsyncContextManager[bool]:
        """Holds the lock and yields True if no instance holds it; else yields False at once."""
        ...


@dataclass(frozen=True, slots=True)
class TurnInfo:
    """What a finished turn tells listeners (memory capture, episodes)."""

    conversation_id: str
    message: str
    result: TurnResult
    file_changes: int
    started: float
    reader: Reader = OWNER
    """Whose the turn's words are (captures and the session's summary are saved to
    `reader.saves_to`)."""


@dataclass(slots=True)
class _TurnRequest:
    message: str
    kind: TurnKind
    sink: EventSink | None
    future: asyncio.Future[TurnResult]
    enqueued: float = field(default_factory=time.monotonic)
    approver: Approver | None = None
    model: str | None = None  # None: the configured model (ANTHROPIC_MODEL, else the CLI's)
    locale: Locale = "en"
    """The language of the reply's own sentences (a Chinese Feishu chat: "zh")."""
    reader: Reader = OWNER
    """Whose memory the turn reads and saves to (a Feishu member's: `memory.model.Reader`)."""
    instructions: str = ""
    """What the front door adds to the system prompt when the conversation's client starts."""


class _Stop:
    """Queue sentinel: finish queued turns first, then disconnect."""


class _Wake:
    """Queue sentinel: re-check the stop deadline without stopping."""


_QueueItem = _TurnRequest | _Stop | _Wake


@dataclass(frozen=True, slots=True)
class LiveStatus:
    conversation_id: str
    session_id: str | None
    running: bool
    queued: int
    connected: bool
    last_used: float


class _Actor:
    """One conversation's task: owns its client from connect to disconnect."""

    def __init__(self, manager: SessionManager, conversation_id: str) -> None:
        self.manager = manager
        self.conversation_id = conversation_id
        self.queue: asyncio.Queue[_QueueItem] = asyncio.Queue()
        self.client: ClaudeSDKClient | None = None
        self.session_id: str | None = None
        self.model: str | None = None  # the model the connected client runs
        self.current: TurnState | None = None
        self.turns_seen = 0  # recorded turns our client's history holds (with a TurnLock)
        # The CLI reports a session's running cost total (also across a resume); a turn's own
        # cost is the difference from the total seen before it.
        self.cost_seen = 0.0
        self.last_used = time.monotonic()
        self.busy = False  # a turn taken from the queue and not finished (waiting for a slot too)
        self.stop_at: float | None = None
        self.stopping = False
        self.done = asyncio.Event()

    # --- control from other tasks --------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.current is not None

    @property
    def idle(self) -> bool:
        return not self.busy and self.queue.empty()

    def request_stop(self, after: float = 0.0) -> None:
        if after <= 0:
            self.stopping = True
            self.queue.put_nowait(_Stop())
        else:
            self.stop_at = time.monotonic() + after
            self.queue.put_nowait(_Wake())  # wake the loop so it re-reads stop_at

    async def interrupt(self, *, why: str | None = None) -> bool:
        """Stop the running turn; `why` (a sentence) goes into its reply."""
        state, client = self.current, self.client
        if state is None or client is None:
            return False
        state.interrupted = True
        if why:
            state.stop_reason = why
        try:
            await client.interrupt()
        except Exception:
            logger.warning("interrupt of %s failed", self.conversation_id, exc_info=True)
        return True

    # --- the task --------------------------------------------------------------------------------
    async def run(self) -> None:
        try:
            while True:
                item = await self._next()
                match item:
                    case None:
                        if self.stop_at is None:
                            await self.manager._notify_close(self.conversation_id, "idle")
                        break
                    case _Stop():
                        break
                    case _Wake():
                        continue
                    case _TurnRequest():
                        self.busy = True
                        self.last_used = time.monotonic()
                        try:
                            await self._handle(item)
                        finally:
                            self.busy = False
                        self.last_used = time.monotonic()
                        self.manager._evict_if_full(room=0)
        except asyncio.CancelledError:
            logger.info("conversation %s cancelled", self.conversation_id)
        except Exception:
            logger.exception("conversation %s actor failed", self.conversation_id)
        finally:
            await self._shutdown()

    async def _next(self) -> _QueueItem | None:
        settings = self.manager.settings
        while True:
            timeout = settings.idle_timeout_seconds
            if self.stop_at is not None:
                remaining = self.stop_at - time.monotonic()
                if remaining <= 0 and self.queue.empty():
                    return None
                timeout = min(timeout, max(remaining, 0.0))
            try:
                return await asyncio.wait_for(self.queue.get(), timeout=timeout)
            except TimeoutError:
                if self.stop_at is not None and time.monotonic() < self.stop_at:
                    continue
                if self.stop_at is None:
                    logger.info("conversation %s idle; disconnecting", self.conversation_id)
                return None

    async def _shutdown(self) -> None:
        self.stopping = True
        self.manager._forget(self)
        await self._disconnect()
        while not self.queue.empty():
            item = self.queue.get_nowait()
            if isinstance(item, _TurnRequest) and not item.future.done():
                # Never leave a caller hanging: hand the turn to a fresh actor.
                self.manager._requeue(self.conversation_id, item)
        self.done.set()

    async def _disconnect(self) -> None:
        client, self.client = self.client, None
        if client is None:
            return
        try:
            async with asyncio.timeout(self.manager.settings.shutdown_timeout_seconds):
                await client.disconnect()
        except BaseException:
            logger.warning("disconnect of %s did not finish cleanly", self.conversation_id)

    async def _connect(self, state: TurnState) -> None:
        manager = self.manager
        known = await manager.run_state(manager.store.get, self.conversation_id)
        resume = known.session_id if known else None
        self.turns_seen = known.turns if known else 0
        if resume:
            try:
                await self._open(SessionStart(resume=resume), state)
                self.session_id = resume
                turns = await manager.run_state(manager.store.turns, self.conversation_id)
                self.cost_seen = sum(t.cost_usd or 0.0 for t in turns if t.session_id == resume)
                return
            except Exception as exc:
                logger.warning(
                    "could not resume session %s of %s: %s", resume, self.conversation_id, exc
                )
                state.log.write("error", {"stage": "resume", "session_id": resume, "error": exc})
                state.notices.append(
                    f"(The earlier session {resume} could not be resumed; "
                    "this conversation continues in a fresh session without its history.)"
                )
        new_id = str(uuid.uuid4())
        await self._open(SessionStart(session_id=new_id), state)
        self.session_id = new_id
        self.cost_seen = 0.0

    async def _open(self, start: SessionStart, state: TurnState) -> None:
        manager = self.manager
        gates = permission_gates(manager.policy, _CurrentTurn(self))
        extras = (
            manager.extras_factory(self.conversation_id, lambda: self.current)
            if manager.extras_factory
            else None
        )
        if state.instructions:  # the front door's own (Feishu: how to send a file)
            extras = extras or OptionsExtras()
            joined = "\n\n".join(p for p in (extras.system_prompt, state.instructions) if p)
            extras = dataclasses.replace(extras, system_prompt=joined)
        options = build_options(
            manager.settings,
            start=start,
            gates=gates,
            extras=extras,
            session_store=manager.session_store,
        )
        client = ClaudeSDKClient(options)
        try:
            async with asyncio.timeout(manager.settings.connect_timeout_seconds):
                await client.connect()
        except BaseException:
            with contextlib.suppress(BaseException):
                await client.disconnect()
            raise
        self.client = client
        self.model = manager.settings.anthropic_model

    async def _handle(self, turn: _TurnRequest) -> None:
        manager = self.manager
        started = time.time()
        log = manager.logs.open(self.conversation_id)
        state = TurnState(log, turn.sink)
        state.approver = turn.approver
        state.reader = turn.reader
        state.instructions = turn.instructions
        log.write(
            "request",
            {"conversation_id": self.conversation_id, "message": turn.message, "kind": turn.kind},
        )
        journal: TurnJournal | None = None
        async with contextlib.AsyncExitStack() as held:
            try:
                await held.enter_async_context(manager.turn_slots)
                if manager.turn_lock is not None:
                    # Taken inside a slot, so at most max_concurrent_turns lock connections.
                    await held.enter_async_context(manager.turn_lock.hold(self.conversation_id))
                if turn.kind == "chat":
                    # No turn of this conversation runs anywhere now: one still on record as
                    # running was left by a process that died (counted: checked just below).
                    await manager.recover_interrupted(self.conversation_id)
                if manager.turn_lock is not None:
                    await self._drop_if_stale()
                if turn.kind == "chat":
                    journal = TurnJournal(
                        manager.store,
                        manager.run_state,
                        lambda: (state.text_so_far(), state.step_records(), self.session_id),
                    )
                    await journal.begin(
                        self.conversation_id,
                        started=started,
                        message=turn.message,
                        log_file=str(log.path),
                        session=self.session_id,
                    )
                    state.on_change = journal.changed
                    state.prompt_note = interrupted_note(journal.previous)
                self.current = state
                try:
                    async with journal.running() if journal else contextlib.nullcontext():
                        await self._run_turn(turn, state)
                finally:
                    self.current = None
                result = await self._finish(turn, state)
            except Exception as exc:
                logger.exception("turn of %s failed", self.conversation_id)
                log.write("error", {"stage": "turn", "error": exc})
                result = TurnResult(
                    reply=f"Execution failed: {clean_error(str(exc))}",
                    conversation_id=self.conversation_id,
                    session_id=self.session_id,
                    is_error=True,
                    log_file=str(log.path),
                    status="failed",
                )
            log.write("response", result.to_public())
            log.close()
            if turn.kind == "chat":
                await self._record(turn, state, result, started, journal)
        if turn.kind == "chat":
            # Recorded before the caller sees the reply, so its next message finds it.
            await manager._notify_turn(
                TurnInfo(
                    self.conversation_id,
                    turn.message,
                    result,
                    state.file_changes,
                    started,
                    turn.reader,
                )
            )
        if not turn.future.done():
            turn.future.set_result(result)

    async def _record(
        self,
        turn: _TurnRequest,
        state: TurnState,
        result: TurnResult,
        started: float,
        journal: TurnJournal | None,
    ) -> None:
        store = self.manager.store
        try:
            if journal is not None and journal.turn_id is not None:
                await self.manager.run_state(
                    store.finish_turn,
                    journal.turn_id,
                    reply=result.reply,
                    is_error=result.is_error,
                    session_id=result.session_id,
                    cost_usd=result.cost_usd,
                    injected=state.injected,
                    tools=list(result.steps),
                    status=result.status,
                )
            else:  # it could not be put on record when it started
                await self.manager.run_state(
                    store.record_turn,
                    self.conversation_id,
                    started=started,
                    message=turn.message,
                    reply=result.reply,
                    is_error=result.is_error,
                    log_file=result.log_file,
                    session_id=result.session_id,
                    cost_usd=result.cost_usd,
                    injected=state.injected,
                    tools=list(result.steps),
                    status=result.status,
                )
        except Exception:  # the caller still gets its reply; the history misses this turn
            logger.exception("could not record a turn of %s", self.conversation_id)
            return
        self.turns_seen += 1

    async def _drop_if_stale(self) -> None:
        """Under the turn lock: if another instance recorded turns of this conversation since
        our client last saw it, the client's history is behind; drop it, so this turn resumes
        the session from the shared store."""
        if self.client is None:
            return
        known = await self.manager.run_state(self.manager.store.get, self.conversation_id)
        if (known.turns if known else 0) != self.turns_seen:
            logger.info("conversation %s moved on elsewhere; resuming it", self.conversation_id)
            await self._disconnect()

    async def _run_turn(self, turn: _TurnRequest, state: TurnState) -> None:
        settings = self.manager.settings
        # --- endpoint check (agent/endpoint.py): a dead endpoint or a refused key answers the
        # turn in seconds, instead of after minutes of the CLI's retries.
        if state.endpoint_failed(await self.manager.endpoint.check()):
            return
        # --- end of the endpoint check
        if self.client is None:
            try:
                await self._connect(state)
            except Exception as exc:
                state.log.write("error", {"stage": "connect", "error": exc})
                state.crashed = f"could not start: {exc}"
                return
        client = self.client
        assert client is not None
        try:
            async with asyncio.timeout(settings.turn_timeout_seconds):
                # A conversation's own model (Feishu's /model) switches the live client; a
                # chat turn without one goes back to the configured model (a compaction keeps
                # whichever runs).
                wanted = turn.model or settings.anthropic_model
                if turn.kind == "chat" and wanted != self.model:
                    await client.set_model(wanted)
                    self.model = wanted
                await client.query(state.prompt_note + turn.message)
                async for message in client.receive_response():
                    await state.consume(message)
        except TimeoutError:
            state.timed_out = True
            state.log.write("error", {"stage": "timeout", "seconds": settings.turn_timeout_seconds})
            await self._interrupt_and_drain(state)
        except Exception as exc:
            state.crashed = f"{type(exc).__name__}: {exc}"
            state.log.write("error", {"stage": "receive", "error": exc})
            await self._disconnect()

    async def _interrupt_and_drain(self, state: TurnState) -> None:
        client = self.client
        if client is None:
            return
        try:
            async with asyncio.timeout(_DRAIN_SECONDS):
                await client.interrupt()
                async for message in client.receive_response():
                    await state.consume(message)
        except Exception as exc:
            # The client is in an unknown state: drop it; the next turn resumes the session.
            state.log.write("error", {"stage": "drain", "error": exc})
            await self._disconnect()

    async def _finish(self, turn: _TurnRequest, state: TurnState) -> TurnResult:
        settings = self.manager.settings
        if state.crashed is not None:
            # The next turn must reconnect (and resume) rather than reuse a dead client.
            self.client = None
        if state.session_id and state.result is not None:
            self.session_id = state.session_id
            await self.manager.run_state(
                self.manager.store.set_session, self.conversation_id, state.session_id
            )
        outcome = state.outcome(timeout_seconds=settings.turn_timeout_seconds)
        if turn.kind == "compact":
            reply = self._compact_reply(state, outcome)
        else:
            base_url = settings.anthropic_base_url
            reply = build_reply(
                outcome, base_url=safe_url(base_url) if base_url else None, locale=turn.locale
            )
        r = state.result
        return TurnResult(
            reply=reply.text,
            conversation_id=self.conversation_id,
            session_id=self.session_id,
            is_error=reply.is_error,
            log_file=str(state.log.path),
            cost_usd=self._turn_cost(r.total_cost_usd if r else None),
            duration_ms=r.duration_ms if r else None,
            num_turns=r.num_turns if r else None,
            notices=tuple(state.notices),
            status=reply.status,
            refused=tuple(f.to_public() for f in outcome.tool_failures if f.denied),
            failed=tuple(f.to_public() for f in outcome.tool_failures if not f.denied),
            steps=tuple(state.step_records()),
            memory_changes=tuple(state.memory_changes),
        )

    def _turn_cost(self, session_total: float | None) -> float | None:
        """This turn's cost from the session's running total (see `cost_seen`)."""
        if session_total is None:
            return None
        # A total below what we saw means the CLI counts from zero again (a fresh process
        # that does not carry the resumed session's total): all of it is this turn's.
        cost = session_total - self.cost_seen if session_total >= self.cost_seen else session_total
        self.cost_seen = session_total
        return round(cost, 10)

    @staticmethod
    def _compact_reply(state: TurnState, outcome: TurnOutcome) -> Reply:
        if state.compacted:
            return Reply("Compacted the conversation: earlier turns are now a summary.", False)
        reply = build_reply(outcome)
        if reply.is_error:
            return Reply(f"Compaction failed: {reply.text}", True, reply.status)
        return Reply("Nothing to compact yet.", False)


class _CurrentTurn:
    """Routes permission decisions to whichever turn of the actor is running."""

    def __init__(self, actor: _Actor) -> None:
        self.actor = actor

    def record_permission(self, *args: Any) -> None:
        state = self.actor.current
        if state is not None:
            state.record_permission(*args)

    async def approve(self, tool_name: str, tool_input: Mapping[str, Any]) -> Allowed | Denied:
        state = self.actor.current
        if state is None or state.approver is None:
            return Denied(
                f"`{tool_name}` needs the user's approval, which cannot be asked for here; "
                "do the task without it."
            )
        return await state.approver(tool_name, tool_input)


class SessionManager:
    """Owns every conversation actor; an async context manager owned by the app's lifespan."""

    def __init__(
        self,
        settings: Settings,
        *,
        store: ConversationBackend,
        logs: RequestLogs,
        policy: PolicyConfig,
        extras_factory: ExtrasFactory | None = None,
        session_store: SessionStore | None = None,
        turn_lock: TurnLock | None = None,
        state_lane: Lane | None = None,
    ) -> None:
        self.settings = settings
        self.state_lane = state_lane
        self.store = store
        self.session_store = session_store
        self.turn_lock = turn_lock
        self.logs = logs
        self.policy = policy
        self.extras_factory = extras_factory
        self.turn_slots = asyncio.Semaphore(settings.max_concurrent_turns)
        self.endpoint = EndpointChecker.for_settings(settings)  # asked before every turn
        self._actors: dict[str, _Actor] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._turn_listeners: list[TurnListener] = []
        self._close_listeners: list[CloseListener] = []
        self._closed = False
        self._stopping: asyncio.Task[None] | None = None

    # --- lifecycle -----------------------------------------------------------------------------
    async def __aenter__(self) -> SessionManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def stop_all_soon(self) -> None:
        """Interrupt every running turn now, saying the app is shutting down.

        For the server's signal handler (run on the loop's thread): the turns' replies reach
        their callers while the server still drains its connections, instead of the callers
        waiting for the drain to time out. `aclose` waits for it."""
        if self._stopping is None:
            self._stopping = asyncio.get_running_loop().create_task(self._interrupt_all())

    async def _interrupt_all(self) -> None:
        for actor in list(self._actors.values()):
            await actor.interrupt(why=SHUTDOWN_STOP)

    async def aclose(self) -> None:
        """Stop every actor: interrupt running turns, disconnect all within the time limit."""
        self._closed = True
        if self._stopping is not None:
            await self._stopping
        actors = list(self._actors.values())
        for actor in actors:
            await actor.interrupt(why=SHUTDOWN_STOP)
            actor.request_stop()
        tasks = list(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.settings.shutdown_timeout_seconds)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        for actor in actors:
            await self._notify_close(actor.conversation_id, "shutdown")

    def on_turn(self, listener: TurnListener) -> None:
        self._turn_listeners.append(listener)

    async def run_state(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """A blocking conversation-state call, off the loop: on the state lane (its own threads:
        a locked database never holds up other kinds of calls), else the default pool."""
        if self.state_lane is None:
            return await asyncio.to_thread(fn, *args, **kwargs)
        return await self.state_lane.run(fn, *args, **kwargs)

    async def recover_interrupted(self, conversation_id: str | None = None) -> int:
        """Mark turns left running by a process that died as interrupted, with the steps that
        ran and the text their transcript holds; returns how many.

        With `conversation_id` the caller knows no turn of it runs (it holds the turn's place);
        without, at start: a turn another live instance runs is left alone (on PostgreSQL its
        conversation lock is held; on SQLite its process is alive)."""
        found: list[OpenTurn] = await self.run_state(self.store.open_turns, conversation_id)
        marked = 0
        for turn in found:
            if conversation_id is not None:
                marked += await self._recover(turn)
            elif self.turn_lock is not None:
                async with self.turn_lock.hold_if_free(turn.conversation_id) as free:
                    if free:
                        marked += await self._recover(turn)
            elif turn.owner in (None, os.getpid()) or not _process_alive(turn.owner):
                marked += await self._recover(turn)
        return marked

    async def _recover(self, turn: OpenTurn) -> int:
        entries: list[Any] = []
        if turn.session_id:
            try:
                entries = await self._transcript(turn.session_id)
            except Exception:
                logger.warning("could not read the transcript of %s", turn.session_id)
        tail = transcript_tail(entries, turn.started)
        reply, tools = recovered(turn, tail)
        done = await self.run_state(
            self.store.mark_interrupted,
            turn.id,
            reply=reply,
            tools=tools,
            # The conversation resumes the session only if the CLI wrote it.
            session_id=turn.session_id if tail.found else None,
        )
        if done:
            logger.warning(
                "a turn of %s was left unfinished by a process that stopped; marked interrupted",
                turn.conversation_id,
            )
        return int(done)

    async def _transcript(self, session_id: str) -> list[Any]:
        if self.session_store is not None:
            key: SessionKey = {
                "project_key": str(self.settings.workspace_dir),
                "session_id": session_id,
            }
            return list(await self.session_store.load(key) or [])
        return await self.run_state(
            read_transcript_file,
            self.settings.agent_config_dir,
            self.settings.workspace_dir,
            session_id,
        )

    def on_close(self, listener: CloseListener) -> None:
        """`listener(conversation_id, reason)` when a conversation ends (memory episodes)."""
        self._close_listeners.append(listener)

    # --- the pipeline ----------------------------------------------------------------------------
    async def run_agent(
        self,
        message: str,
        *,
        conversation_id: str | None = None,
        new_conversation: bool = False,
        on_event: EventSink | None = None,
        source: str = "web",
        approver: Approver | None = None,
        model: str | None = None,
        locale: Locale = "en",
        reader: Reader = OWNER,
        instructions: str = "",
    ) -> TurnResult:
        """Run one turn and return its honest result. The single entry for every front door.

        `approver`: asks a person about the policy's "ask" calls (else they are refused);
        `model`: this turn's model (None: the configured one); `locale`: the language of the
        reply's own sentences (stops, refusals, errors; never the model's text); `reader`:
        whose memory the turn reads and saves to (the machine owner's unless a Feishu member
        speaks: docs/memory-format.md, "Whose a note is"), for its injection and its memory
        tools alike; `instructions`: what the front door adds to the system prompt of a
        conversation's client when it starts (Feishu: how to send a file to the chat)."""
        self.validate_message(message)
        conversation_id = await self.resolve_conversation(conversation_id, new_conversation)
        await self.run_state(
            self.store.ensure, conversation_id, title=_title(message), source=source
        )
        return await self._submit(
            conversation_id,
            message,
            "chat",
            on_event,
            approver,
            model,
            locale,
            reader=reader,
            instructions=instructions,
        )

    def validate_message(self, message: str) -> None:
        if not message or not message.strip():
            raise InvalidInputError("message is empty: send some text")
        require_text("message", message)
        if len(message) > self.settings.max_message_chars:
            raise InvalidInputError(
                f"message has {len(message)} characters; the limit is "
                f"{self.settings.max_message_chars} (CLAUDE_MEMORY_MAX_MESSAGE_CHARS)"
            )

    async def resolve_conversation(self, conversation_id: str | None, new: bool) -> str:
        """The id a message goes to: `main` by default; a fresh id (the old one retired after
        its grace period) when a new conversation is asked for."""
        if conversation_id is not None:
            require_text("conversation_id", conversation_id)
        if not new:
            return conversation_id or DEFAULT_CONVERSATION
        if conversation_id:
            await self.close_conversation(
                conversation_id, grace=self.settings.replace_grace_seconds, reason="replaced"
            )
        return f"c-{uuid.uuid4().hex[:12]}"

    async def compact(self, conversation_id: str, *, reader: Reader = OWNER) -> TurnResult:
        """Compact a conversation's session (Claude Code's /compact); `reader`: whose memory
        the conversation reads (the memory hook may run for the command too)."""
        known = await self.run_state(self.store.get, conversation_id)
        if known is None or not known.session_id:
            return TurnResult(
                reply="Nothing to compact yet.",
                conversation_id=conversation_id,
                session_id=None,
                is_error=False,
                log_file="",
            )
        return await self._submit(conversation_id, "/compact", "compact", None, reader=reader)

    async def interrupt(self, conversation_id: str, *, why: str | None = None) -> bool:
        """Stop the conversation's running turn; `why` replaces the reply's "Stopped."."""
        actor = self._actors.get(conversation_id)
        return await actor.interrupt(why=why) if actor else False

    async def close_conversation(
        self, conversation_id: str, *, grace: float = 0.0, reason: str = "closed"
    ) -> None:
        """Disconnect a conversation's client (after `grace` seconds); its history stays."""
        actor = self._actors.get(conversation_id)
        if actor is not None:
            actor.request_stop(after=grace)
        await self._notify_close(conversation_id, reason)

    async def delete_conversation(self, conversation_id: str) -> bool:
        actor = self._actors.get(conversation_id)
        if actor is not None:
            await actor.interrupt()
            actor.request_stop()
            await actor.done.wait()
        await self._notify_close(conversation_id, "deleted")
        known = await self.run_state(self.store.get, conversation_id)
        if known is None:
            return False
        # Deleting a conversation forgets it: its transcripts (the CLI's verbatim record of every
        # message) go too, on disk and in a shared session store.
        turns = await self.run_state(self.store.turns, conversation_id)
        sessions = {t.session_id for t in turns} | {known.session_id}
        sessions.discard(None)
        await asyncio.to_thread(
            delete_transcripts,
            self.settings.agent_config_dir,
            self.settings.workspace_dir,
            sorted(s for s in sessions if s),
        )
        if self.session_store is not None:
            for session_id in sorted(s for s in sessions if s):
                key: SessionKey = {
                    "project_key": str(self.settings.workspace_dir),
                    "session_id": session_id,
                }
                await self.session_store.delete(key)
        return await self.run_state(self.store.delete, conversation_id)

    def live(self) -> list[LiveStatus]:
        return [
            LiveStatus(
                a.conversation_id,
                a.session_id,
                a.running,
                a.queue.qsize(),
                a.client is not None,
                a.last_used,
            )
            for a in self._actors.values()
        ]

    def live_status(self, conversation_id: str) -> LiveStatus | None:
        return next((s for s in self.live() if s.conversation_id == conversation_id), None)

    # --- internals -------------------------------------------------------------------------------
    async def _submit(
        self,
        conversation_id: str,
        message: str,
        kind: TurnKind,
        sink: EventSink | None,
        approver: Approver | None = None,
        model: str | None = None,
        locale: Locale = "en",
        *,
        reader: Reader = OWNER,
        instructions: str = "",
    ) -> TurnResult:
        if self._closed:
            raise InvalidInputError("the app is shutting down; send the message again shortly")
        future: asyncio.Future[TurnResult] = asyncio.get_running_loop().create_future()
        turn = _TurnRequest(
            message,
            kind,
            sink,
            future,
            approver=approver,
            model=model,
            locale=locale,
            reader=reader,
            instructions=instructions,
        )
        self._requeue(conversation_id, turn)
        return await future

    def _requeue(self, conversation_id: str, turn: _TurnRequest) -> None:
        if self._closed:
            turn.future.set_exception(
                InvalidInputError("the app is shutting down; send the message again shortly")
            )
            return
        actor = self._actors.get(conversation_id)
        if actor is None or actor.stopping:
            actor = self._start_actor(conversation_id)
        elif actor.stop_at is not None:
            actor.stop_at = None  # a replaced conversation got a new message: keep it
        actor.queue.put_nowait(turn)

    def _start_actor(self, conversation_id: str) -> _Actor:
        self._evict_if_full(room=1)
        actor = _Actor(self, conversation_id)
        self._actors[conversation_id] = actor
        task = asyncio.get_running_loop().create_task(
            actor.run(), name=f"conversation:{conversation_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return actor

    def _evict_if_full(self, *, room: int) -> None:
        """Stop the least recently used idle actors until `room` more fit under
        `max_live_sessions` (1 when a conversation starts, 0 when a turn ends). An actor with a
        turn running, waiting for a slot or queued is never stopped: conversations started at
        once may pass the limit while their turns run, and the turn that ends brings it back."""
        live = [a for a in self._actors.values() if not a.stopping]
        excess = len(live) - self.settings.max_live_sessions + room
        if excess <= 0:
            return
        idle = sorted((a for a in live if a.idle), key=lambda a: a.last_used)
        for actor in idle[:excess]:
            logger.info("evicting idle conversation %s (live limit)", actor.conversation_id)
            actor.request_stop()

    def _forget(self, actor: _Actor) -> None:
        if self._actors.get(actor.conversation_id) is actor:
            del self._actors[actor.conversation_id]

    async def _notify_turn(self, info: TurnInfo) -> None:
        for listener in self._turn_listeners:
            try:
                await listener(info)
            except Exception:
                logger.exception("turn listener failed")

    async def _notify_close(self, conversation_id: str, reason: str) -> None:
        for listener in self._close_listeners:
            try:
                await listener(conversation_id, reason)
            except Exception:
                logger.exception("close listener failed")


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def _title(message: str) -> str:
    line = " ".join(message.split())
    return line[:60] + ("…" if len(line) > 60 else "")
