"""The Feishu/Lark bridge: websocket long connection in, the run_agent pipeline, replies out.

Flow of one message:

1. The lark websocket client (its own thread and loop, see `_lark.py`) calls `_on_payload`
   synchronously; the ack goes out only when it returns, and Feishu re-pushes after 3 s. So it
   only parses, filters (human senders; in groups only @-mentions of the bot), claims the event in
   the persistent dedup table and hands the message to the app loop, then returns.
2. On the app loop `_route` checks access, staleness and commands, and queues the work: one
   queue and worker per chat (answers in order within a chat, chats in parallel), plus one
   control worker for what must not wait behind a running turn (`/stop`, `/status`, notices).
3. A turn runs through `SessionManager.run_agent` under conversation `feishu:{chat_id}:v{N}`; a
   `TurnReply` shows progress and always writes the final state.

The bridge owns its tasks; `aclose()` stops the websocket, interrupts running turns, tells
queued senders to try again, and cancels what is left after the time limit.

Delivery and recovery (docs/feishu.md, "Delivery and recovery"):

* Each queued message has a row in the state (`accepted`, then `started` when the model is
  asked, plus its progress card) until it is answered. At start, rows left by a crash are
  recovered: a message that never reached the model runs again; one that did gets a plain notice
  that a restart interrupted it; every progress card left "working" is closed.
* What the platform would not take within the retry window goes to the outbox (the state) and is
  retried by a background task, also after a restart, under the same idempotency uuid.
* `im.message.recalled_v1`: a recalled message is dropped if queued, its turn interrupted if
  running; nothing is sent for it (a progress card already shown is closed).
* An answer that took longer than `FEISHU_PUSH_AFTER_SECONDS` and arrived by PATCH (which
  notifies nobody) is followed by a short reply so the user's phone rings.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import logging.handlers
import re
import secrets
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from dataclasses import replace as dataclasses_replace
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from agent._turn import summarize_tool_input
from agent.policy import Allowed as ToolAllowed
from agent.policy import Approver
from agent.policy import Denied as ToolDenied
from agent.sessions import SHUTDOWN_STOP, SessionManager
from bridge._lark import WsRunner, card_action_response, import_lark
from bridge.access import Granted, Refused, Unpaired, check_access
from bridge.commands import (
    Clear,
    Command,
    Compact,
    Forget,
    Help,
    MemorySearch,
    Model,
    Pair,
    Remember,
    Resume,
    Sessions,
    Status,
    Stop,
    Unknown,
    parse_command,
)
from bridge.events import (
    EventParseError,
    IncomingMessage,
    OtherEvent,
    Recalled,
    message_from_json,
    message_to_json,
    parse_event,
)
from bridge.inputs import (
    QUOTE_CHARS,
    ItemText,
    clip,
    forward_markdown,
    forward_tree,
    item_text,
    quoted_id,
)
from bridge.progress import TurnReply
from bridge.render import (
    MsgType,
    answer_cards,
    card_content,
    escape_card_markdown,
    plain_text,
    step_label,
    text_content,
)
from bridge.rights import Action, Denied, Right, command_right
from bridge.scopes import Scope, scope_of
from bridge.sender import QUICK_WINDOW, FeishuAPIError, RetryPolicy, Sender, send_uuid
from bridge.state import BridgeState, BridgeStateBackend, OutboxItem, SavedControl
from bridge.stream import StreamReply
from bridge.strings import Locale, both, t
from errors import ClaudeMemoryError, ConfigurationError
from memory.backend import MemoryBackend
from memory.conflicts import ConflictStore
from memory.history import ChangeSource, acting_as
from memory.loop.entities import PendingEntity, PendingStore, confirm_pending
from memory.model import NoteDraft, SaveResult
from memory.notes.capture import RedactingFilter
from settings import Settings
from storage.public_text import clean_error, exception_text, next_step

logger = logging.getLogger("bridge.feishu")
_T = TypeVar("_T")

SearchFn = Callable[[str, int], Awaitable[list[dict[str, Any]]]]

LOG_FILE_NAME = "feishu_ws_bridge.log"
SUPPORTED_TYPES = frozenset({"text", "post", "image", "file", "merge_forward"})
_MODEL_NAME = re.compile(r"[A-Za-z0-9._:\[\]-]{1,80}")
FORGET_MATCHES = 5  # notes a /forget by query offers
NAME_LOOKUPS = 10  # distinct speakers of a forward whose names are asked for
CHAT_IDLE_SECONDS = 300.0
PAIR_ATTEMPTS = 5
MEMORY_RESULTS = 5
NAMES_TTL_SECONDS = 3600.0  # how long a member's display name is reused
CHAT_ADMINS_TTL_SECONDS = 300.0  # how long a group's owner and managers are trusted as read
_INTERRUPT_RESERVE = 5.0  # seconds kept at shutdown to interrupt turns and write final cards
_SAFE_NAME = re.compile(r"[^\w.\-]+")
# The outbox keeps a send for at most this long: inside Feishu's 1 h uuid window, so a send that
# did arrive unseen is never doubled.
ALIVE_EVERY_SECONDS = 30.0  # how often this instance says it is alive in the bridge's state
INSTANCE_DEAD_SECONDS = 120.0  # an instance silent this long left its turns to be recovered
OUTBOX_KEEP_SECONDS = 3300.0
OUTBOX_POLL_SECONDS = 5.0
OUTBOX_MAX_DELAY_SECONDS = 300.0
DECIDED_KEPT = 200  # decided approval cards remembered (a late tap reads "already decided")
RECALLED_KEPT = 1000  # recalled message ids remembered (a recall may come before its message)


# Who may tap a card's buttons, per control kind (bridge/rights.py).
_MEMORY_CARDS = frozenset({"forget", "pending", "conflict"})  # taps that change the memory
_TAP_ACTIONS: dict[str, Action] = {
    "stop": "stop",
    "approval": "approve",
    "forget": "forget",
    "pending": "keep",
    "conflict": "keep",
}

# Commands that act on a turn, a conversation or the memory: in groups they need the right
# (bridge/rights.py).
_RIGHTS_NEEDED: dict[type[Command], Action] = {
    Stop: "stop",
    Clear: "clear",
    Compact: "compact",
    Resume: "resume",
    Model: "model",
    Forget: "forget",
}


@dataclass(frozen=True, slots=True)
class _Turn:
    msg: IncomingMessage


@dataclass(frozen=True, slots=True)
class _Run:
    """A command answered by the bridge (in the chat's order or at once)."""

    msg: IncomingMessage
    command: Command


@dataclass(frozen=True, slots=True)
class _Notice:
    """A one-line answer without a model turn (refusal, stale message, unsupported type)."""

    msg: IncomingMessage
    text: str
    part: str = "notice"  # the uuid's part: two notices to one message must not collide


@dataclass(frozen=True, slots=True)
class _Withdraw:
    """A running turn's message was recalled: interrupt it."""

    msg: IncomingMessage


@dataclass(frozen=True, slots=True)
class _Close:
    """Queue sentinel: the bridge is stopping; finish and exit."""


_Work = _Turn | _Run | _Notice | _Withdraw | _Close


@dataclass(slots=True)
class _Lane:
    """One chat's queue and its worker."""

    queue: asyncio.Queue[_Work] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    busy: bool = False
    current: IncomingMessage | None = None  # the message whose turn or command is running
    waiting: int = 0  # turns queued behind the running one (the cap: FEISHU_QUEUE_MAX)


@dataclass(slots=True)
class _Control:
    """A button the bridge put on a card: Stop on a streaming answer, approve/deny on an
    approval card, the notes of a `/forget` by query, keep/discard of a low-confidence capture.
    A tap counts only with this control's unguessable nonce, from this chat and this card's
    message, by someone with the right (`_card_action`)."""

    kind: str  # stop / approval / forget / pending / conflict
    msg: IncomingMessage  # the user's message whose turn (or command) it belongs to
    conversation_id: str
    message_id: str | None = None  # the card showing it, once sent
    tool: str = ""
    decision: asyncio.Future[ToolAllowed | ToolDenied] | None = None
    notes: tuple[tuple[str, str], ...] = ()  # forget: (note id, title) offered
    pending: PendingEntity | None = None  # pending: the capture asked about
    supersession: str = ""  # conflict: the pending supersession's id
    done: bool = False  # forget / pending: decided (a late tap reads "already decided")
    restored: bool = False  # read back from the bridge state: made before this process started
    sent: asyncio.Event = field(default_factory=asyncio.Event)  # set with message_id

    def shown(self, message_id: str) -> None:
        """The card showing this control was sent: taps on it count from now on."""
        self.message_id = message_id
        self.sent.set()


CARD_SENT_WAIT = 1.5
"""Seconds a tap waits for its card's send to return: Feishu shows a card as soon as it has it,
so a quick tap can arrive before the bot knows the card's message id (within the 2.5 s a tap
is answered in)."""


async def _card_sent(control: _Control) -> None:
    """Wait (at most CARD_SENT_WAIT) until the card showing `control` has its message id."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(control.sent.wait(), CARD_SENT_WAIT)


class FeishuBridge:
    """Feishu front door of the agent; an async context manager owned by the app's lifespan."""

    def __init__(
        self,
        settings: Settings,
        sessions: SessionManager,
        *,
        search: SearchFn | None = None,
        state_path: Path | None = None,
        state: BridgeStateBackend | None = None,
        memory: MemoryBackend | None = None,
        pending: PendingStore | None = None,
        conflicts: ConflictStore | None = None,
    ) -> None:
        """`state`: shared state (several instances on one database); default: the SQLite file
        `state_path` (default `<home>/feishu.db`). `memory` and `pending`: the memory store and
        its pending captures, for `/remember`, `/forget` and the "记住这个吗？" cards (without
        them those commands say the memory is not available)."""
        if not settings.feishu_enabled:
            raise ConfigurationError(
                "the Feishu bridge needs FEISHU_APP_ID and FEISHU_APP_SECRET; set both"
            )
        self.settings = settings
        self.sessions = sessions
        self.search = search
        self.memory = memory
        self.pending = pending
        self.conflicts = conflicts  # a /remember that contradicts a note: the choice card
        if state is None:
            state = BridgeState(state_path or settings.home_dir / "feishu.db")
        self.state: BridgeStateBackend = state
        self._owner: str | None = None  # read at start, cached: read on every message
        self._instance = ""  # this instance's id in a shared state (see `_instance_id`)
        self._alive_at = 0.0
        self.pairing_code: str | None = None
        self._pair_failures = 0
        self._bot_open_id: str | None = None
        self._names: dict[str, tuple[float, str]] = {}  # open_id -> (valid until, display name)
        self._sender: Sender | None = None
        self._runner: WsRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lanes: dict[str, _Lane] = {}
        self._control: asyncio.Queue[_Work] = asyncio.Queue()
        # Messages from the websocket thread, routed one by one in arrival order (routing reads
        # and writes the bridge's state, which happens in a thread, never on the loop).
        self._intake: asyncio.Queue[IncomingMessage | _Close] = asyncio.Queue()
        self._intake_task: asyncio.Task[None] | None = None
        self._control_task: asyncio.Task[None] | None = None
        self._started_at = 0.0
        self._last_event_at: float | None = None
        self._closing = False
        self._log_handler: logging.Handler | None = None
        self._chat_admins: dict[str, tuple[float, frozenset[str]]] = {}
        self._recalled: OrderedDict[str, None] = OrderedDict()
        self._outbox_task: asyncio.Task[None] | None = None
        self._outbox_wake: asyncio.Event | None = None
        self._controls: dict[str, _Control] = {}  # nonce -> the button's control
        self._decided: OrderedDict[str, _Control] = OrderedDict()  # approvals already decided
        self._reactions: dict[str, asyncio.Task[str | None]] = {}  # message_id -> "Typing"

    # --- lifecycle -------------------------------------------------------------------------------
    async def __aenter__(self) -> FeishuBridge:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Connect: API client, bot identity, websocket thread. Returns without waiting for it."""
        self._attach_log_file()
        self._loop = asyncio.get_running_loop()
        self._started_at = time.time()
        settings = self.settings
        app_id = settings.feishu_app_id or ""
        secret = settings.feishu_app_secret.get_secret_value() if settings.feishu_app_secret else ""
        domain = settings.feishu_domain.rstrip("/")
        lark = await asyncio.to_thread(import_lark)
        try:
            client = (
                lark.Client.builder()
                .app_id(app_id)
                .app_secret(secret)
                .domain(domain)
                .log_level(lark.LogLevel.WARNING)
                .build()
            )
        except ValueError as exc:
            raise ConfigurationError(
                f"FEISHU_DOMAIN {settings.feishu_domain!r} is not usable ({exc}); use "
                "https://open.feishu.cn, https://open.larksuite.com or an https origin"
            ) from exc
        self._sender = Sender(
            client, policy=RetryPolicy(window=settings.feishu_delivery_window_seconds)
        )
        try:
            self._bot_open_id = await self._sender.bot_open_id()
        except FeishuAPIError as exc:
            logger.warning(
                "could not read the bot's identity (%s); @-mentions are recognised by type only",
                exc.message,
            )
        self._owner = await self._db(self.state.owner)
        self._instance = await asyncio.to_thread(_instance_id, settings.home_dir)
        await self._db(self.state.alive, self._instance)
        self._control_task = self._loop.create_task(self._control_worker(), name="feishu-control")
        self._intake_task = self._loop.create_task(self._intake_worker(), name="feishu-intake")
        await self._recover()
        self._outbox_wake = asyncio.Event()
        self._outbox_task = self._loop.create_task(self._outbox_worker(), name="feishu-outbox")
        self._announce_pairing()
        self._runner = WsRunner(
            app_id=app_id,
            app_secret=secret,
            domain=domain,
            on_payload=self._on_payload,
            on_card_action=self._on_card_action,
            log_level=logging.getLogger("bridge").getEffectiveLevel(),
        )
        self._runner.start()
        logger.info("Feishu bridge started (domain %s, bot %s)", domain, self._bot_open_id)

    async def wait_connected(self, within: float = 10.0) -> bool:
        """True once the websocket is up; False after `within` s or if the client died."""
        deadline = time.monotonic() + within
        while not self.connected:
            if time.monotonic() > deadline or (self._runner and not self._runner.alive):
                return False
            await asyncio.sleep(0.02)
        return True

    @property
    def connected(self) -> bool:
        return self._runner is not None and self._runner.connected

    def status(self) -> dict[str, Any]:
        runner = self._runner
        return {
            "enabled": True,
            "connected": self.connected,
            "reconnects": runner.reconnects if runner else 0,
            "last_event_at": self._last_event_at,
            "bot_open_id": self._bot_open_id,
            "paired": self._paired(),
            "active_chats": len(self._lanes),
            "error": str(runner.error) if runner and runner.error else None,
        }

    async def aclose(self, time_limit: float | None = None) -> None:
        """Stop within `time_limit` seconds (default: the shutdown timeout + 5).

        No new events; queued messages get a "send it again" line; running turns may finish
        until `_INTERRUPT_RESERVE` seconds before the limit, then are interrupted so their cards
        still get a final state; whatever is left after the limit is cancelled.
        """
        if self._closing:
            return
        self._closing = True
        limit = time_limit if time_limit is not None else self.settings.shutdown_timeout_seconds + 5
        deadline = time.monotonic() + limit
        if self._runner is not None:
            stopped = await asyncio.to_thread(self._runner.stop, min(5.0, limit))
            if not stopped:
                logger.warning("the Feishu websocket thread did not stop in time")
        if self._intake_task is not None:  # the intake ends before the lanes close
            self._intake.put_nowait(_Close())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(deadline - time.monotonic(), 0.1)):
                    await asyncio.shield(self._intake_task)
        tasks = [lane.task for lane in self._lanes.values() if lane.task is not None]
        for lane in self._lanes.values():
            lane.queue.put_nowait(_Close())
        if self._control_task is not None:
            self._control.put_nowait(_Close())
            tasks.append(self._control_task)
        pending: set[asyncio.Task[None]] = set(tasks)
        if pending:
            finish_by = deadline - _INTERRUPT_RESERVE - time.monotonic()
            _, pending = await asyncio.wait(pending, timeout=max(finish_by, 0.1))
        if pending:
            for scope_key, lane in list(self._lanes.items()):
                if lane.busy:
                    await self.sessions.interrupt(
                        await self._conversation_id(scope_key), why=SHUTDOWN_STOP
                    )
            _, pending = await asyncio.wait(pending, timeout=max(deadline - time.monotonic(), 0.1))
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5)
        if self._outbox_task is not None:  # what it holds stays in the state for the next start
            self._outbox_task.cancel()
            await asyncio.wait({self._outbox_task}, timeout=5)
        self._lanes.clear()
        await self._db(self.state.close)
        logger.info("Feishu bridge stopped")
        self._detach_log_file()

    # --- intake (websocket thread) ---------------------------------------------------------------
    def _on_payload(self, payload: bytes) -> None:
        """Runs on the SDK's loop: parse, filter, dedup, hand over; never waits for a turn."""
        self._last_event_at = time.time()
        try:
            event = parse_event(payload, bot_open_id=self._bot_open_id)
        except EventParseError as exc:
            # Acked on purpose: a malformed payload re-pushed would fail the same way.
            logger.warning("unreadable Feishu event skipped: %s", exc.message)
            return
        if isinstance(event, OtherEvent):
            logger.debug("ignoring Feishu event %s (%s)", event.event_type, event.event_id)
            return
        if isinstance(event, Recalled):
            if self._loop is not None and not self._closing:
                self._loop.call_soon_threadsafe(self._recall, event)
            return
        msg = event
        if not msg.from_user:
            return  # other bots and system messages: never answer (no reply loops)
        if msg.is_group and not msg.mentions_bot:
            return
        if not self.state.claim(msg.event_id, msg.message_id):
            logger.info("duplicate delivery of %s (event %s) ignored", msg.message_id, msg.event_id)
            return
        loop = self._loop
        try:
            if loop is None or self._closing:
                raise RuntimeError("the bridge is shutting down")
            loop.call_soon_threadsafe(self._intake.put_nowait, msg)
        except RuntimeError:
            # Not handed over: forget it and fail the ack, so Feishu delivers it again later.
            self.state.release(msg.event_id, msg.message_id)
            raise

    async def _db(self, fn: Callable[..., _T], *args: Any) -> _T:
        """A call on the bridge's or the conversations' state, on the state lane's threads
        (storage/lanes.py): SQLite may wait for a lock and PostgreSQL is a round trip, and
        neither may hold up the loop that streams every chat's answer, nor other kinds of
        blocking calls."""
        result: _T = await self.sessions.run_state(fn, *args)
        return result

    # --- routing (app loop) ----------------------------------------------------------------------
    async def _intake_worker(self) -> None:
        while True:
            msg = await self._intake.get()
            if isinstance(msg, _Close):
                return
            await self._route(msg)

    async def _route(self, msg: IncomingMessage) -> None:
        try:
            await self._route_message(msg)
        except Exception:
            logger.exception("routing %s failed", msg.message_id)
            self._control.put_nowait(_Notice(msg, t("route_failed", msg.locale)))

    async def _route_message(self, msg: IncomingMessage) -> None:
        if self._closing:
            logger.warning("message %s arrived while stopping; not answered", msg.message_id)
            return
        command = parse_command(msg.text) if msg.message_type in ("text", "post") else None
        if isinstance(command, Pair):
            self._control.put_nowait(_Run(msg, command))
            return
        match await self._access(msg):
            case Refused(reason=reason):
                logger.info("refused %s in %s: %s", msg.sender_open_id, msg.chat_id, reason)
                self._control.put_nowait(_Notice(msg, t("refusal", msg.locale)))
                return
            case Unpaired():
                self._control.put_nowait(_Notice(msg, t("unpaired", msg.locale)))
                return
            case Granted():
                pass
        if self._is_stale(msg):
            self._control.put_nowait(_Notice(msg, t("stale", msg.locale)))
            return
        if command is None:
            # Every message gets exactly one answer: a voice message a line saying it cannot
            # be heard yet, a sticker a short "got it" (no turn: there is nothing to answer).
            if msg.message_type == "audio":
                self._control.put_nowait(_Notice(msg, t("audio", msg.locale)))
            elif msg.message_type == "sticker":
                self._control.put_nowait(_Notice(msg, t("sticker", msg.locale)))
            elif msg.message_type not in SUPPORTED_TYPES:
                kind = msg.message_type or "?"
                self._control.put_nowait(_Notice(msg, t("unsupported", msg.locale, kind=kind)))
            elif (
                not msg.text
                and not msg.attachments
                and msg.message_type != "merge_forward"
                and self._quoted(msg) is None
            ):
                self._control.put_nowait(_Notice(msg, t("empty", msg.locale)))
            else:
                await self._accept_turn(msg)
        elif command.ordered:
            self._lane(self._scope(msg).key).queue.put_nowait(_Run(msg, command))
        else:
            self._control.put_nowait(_Run(msg, command))

    async def _access(self, msg: IncomingMessage) -> Granted | Refused | Unpaired:
        if self._owner is None:  # another instance on the shared database may have paired
            self._owner = await self._db(self.state.owner)
        return check_access(
            msg.sender_open_id,
            msg.chat_id,
            allowed_users=self.settings.feishu_allowed_users,
            allowed_chats=self.settings.feishu_allowed_chats,
            owner=self._owner,
        )

    def _is_stale(self, msg: IncomingMessage) -> bool:
        if msg.create_time_ms <= 0:
            return False
        grace = self.settings.feishu_stale_grace_seconds
        return msg.create_time_ms / 1000 < self._started_at - grace

    def _scope(self, msg: IncomingMessage) -> Scope:
        """The conversation `msg` belongs to (bridge/scopes.py); topics get their replies."""
        if msg.thread_id and self._sender is not None:
            self._sender.in_topic(msg.message_id)
        return scope_of(
            chat_id=msg.chat_id,
            in_group=msg.is_group,
            sender=msg.sender_open_id,
            thread_id=msg.thread_id,
            mode=self.settings.feishu_group_conversations,
        )

    def _lane(self, scope_key: str) -> _Lane:
        """One queue and worker per conversation scope: a member or a topic in a group, or a
        direct chat. Turns of one conversation run in order; conversations run side by side."""
        lane = self._lanes.get(scope_key)
        if lane is None:
            lane = _Lane()
            assert self._loop is not None
            lane.task = self._loop.create_task(
                self._chat_worker(scope_key, lane), name=f"feishu-chat:{scope_key}"
            )
            self._lanes[scope_key] = lane
        return lane

    # --- workers ---------------------------------------------------------------------------------
    async def _chat_worker(self, chat_id: str, lane: _Lane) -> None:
        while True:
            try:
                work = await asyncio.wait_for(lane.queue.get(), timeout=CHAT_IDLE_SECONDS)
            except TimeoutError:
                if lane.queue.empty():  # nothing can arrive between this check and the return
                    if self._lanes.get(chat_id) is lane:
                        del self._lanes[chat_id]
                    return
                continue
            if isinstance(work, _Close):
                return
            if isinstance(work, _Turn):
                lane.waiting = max(lane.waiting - 1, 0)
            lane.busy = True
            lane.current = work.msg
            try:
                await self._do(work)
            except Exception:
                logger.exception("handling %s failed", work.msg.message_id)
            finally:
                lane.busy = False
                lane.current = None

    async def _control_worker(self) -> None:
        while True:
            work = await self._control.get()
            if isinstance(work, _Close):
                return
            try:
                await self._do(work)
            except Exception:
                logger.exception("handling %s failed", work.msg.message_id)

    async def _do(self, work: _Turn | _Run | _Notice | _Withdraw) -> None:
        match work:
            case _Turn(msg=msg) if msg.message_id in self._recalled:
                logger.info("%s was recalled while queued; not run", msg.message_id)
                await self._db(self.state.turn_finished, msg.message_id)
            case _Turn(msg=msg):
                if self._closing:
                    # Queued behind a turn at shutdown: a line instead of silence.
                    await self._notify(msg, t("restart_queued", msg.locale))
                    await self._db(self.state.turn_finished, msg.message_id)
                else:
                    await self._run_turn(msg)
            case _Withdraw(msg=msg):
                await self.sessions.interrupt(await self._conversation_id(self._scope(msg).key))
            case _Notice(msg=msg, text=text, part=part):
                await self._send(msg, "text", text_content(text), part=part)
            case _Run(msg=msg, command=command):
                await self._command(msg, command)

    # --- turns -----------------------------------------------------------------------------------
    async def _conversation_id(self, scope_key: str) -> str:
        """`feishu:<scope>:v<generation>`; /clear starts the scope's next generation."""
        return f"feishu:{scope_key}:v{await self._db(self.state.generation, scope_key)}"

    async def _run_turn(self, msg: IncomingMessage) -> None:
        assert self._sender is not None
        conversation_id = await self._conversation_id(self._scope(msg).key)
        settings = self.settings

        async def on_card(card_id: str) -> None:
            stop.shown(card_id)
            await self._keep_control(nonce, stop)
            await self._db(self.state.turn_card, msg.message_id, card_id)

        # Stop sits on the turn's card, streaming or progress, until the answer replaces it.
        nonce = secrets.token_urlsafe(12)
        stop = _Control("stop", msg, conversation_id)
        self._controls[nonce] = stop
        progress = TurnReply(
            self._sender,
            reply_to=msg.message_id,
            key=msg.message_id,
            interval=settings.feishu_card_update_interval_seconds,
            open_delay=settings.feishu_progress_delay_seconds,
            on_card=on_card,
            locale=msg.locale,
            stop_value={"cm": "stop", "n": nonce},
        )
        reply: TurnReply | StreamReply = progress
        if settings.feishu_streaming:
            reply = StreamReply(
                self._sender,
                progress,
                reply_to=msg.message_id,
                key=msg.message_id,
                locale=msg.locale,
                interval=settings.feishu_stream_interval_seconds,
                open_delay=settings.feishu_progress_delay_seconds,
                stop_value={"cm": "stop", "n": nonce},
                on_card=on_card,
            )
        started = time.monotonic()
        since = time.time()
        try:
            await self._answer(msg, conversation_id, reply)
        finally:
            self._controls.pop(nonce, None)
            await self._settle(msg, reply, time.monotonic() - started)
        await self._offer_captures(msg, conversation_id, since)

    async def _answer(
        self, msg: IncomingMessage, conversation_id: str, reply: TurnReply | StreamReply
    ) -> None:
        async with reply:
            prompt = await self._prompt(msg)
            if msg.message_id in self._recalled:
                await reply.withdraw(t("recalled_card", msg.locale))
                return
            # From here a crash cannot simply re-run it.
            await self._db(self.state.turn_started, msg.message_id)
            try:
                result = await self.sessions.run_agent(
                    prompt,
                    conversation_id=conversation_id,
                    on_event=reply.on_event,
                    source="feishu",
                    approver=self._approver(msg, conversation_id),
                    model=await self._db(self.state.model, self._scope(msg).key),
                )
            except ClaudeMemoryError as exc:
                await reply.finish(
                    t("execution_failed", msg.locale, error=exc.message), is_error=True
                )
                return
            except Exception as exc:
                logger.exception("turn for %s failed", msg.message_id)
                error = f"{exception_text(exc)}; {next_step(exc)}"  # cleaned as at every door
                await reply.finish(t("execution_crashed", msg.locale, error=error), is_error=True)
                return
            if msg.message_id in self._recalled:
                await reply.withdraw(t("recalled_card", msg.locale))
                return
            await reply.finish_turn(result)

    # --- queue and signals -----------------------------------------------------------------------
    async def _accept_turn(self, msg: IncomingMessage) -> None:
        """Queue a turn, at most FEISHU_QUEUE_MAX behind the running one; the sender sees a
        reaction at once and, when something runs before it, its place in the line."""
        lane = self._lane(self._scope(msg).key)
        limit = self.settings.feishu_queue_max
        if lane.waiting >= limit:
            logger.info("queue of %s is full; %s refused", msg.chat_id, msg.message_id)
            self._control.put_nowait(_Notice(msg, t("queue_full", msg.locale, limit=limit)))
            return
        await self._db(
            functools.partial(self.state.turn_accepted, owner=self._instance),
            msg.message_id,
            msg.chat_id,
            message_to_json(msg),
        )
        ahead = lane.waiting + (1 if lane.busy else 0)
        self._enqueue_turn(lane, msg)
        assert self._loop is not None
        self._reactions[msg.message_id] = self._loop.create_task(
            self._react(msg.message_id, "Typing"), name=f"feishu-react:{msg.message_id}"
        )
        if ahead:
            text = t("queued", msg.locale, ahead=ahead, position=lane.waiting)
            self._control.put_nowait(_Notice(msg, text, part="queued"))

    def _enqueue_turn(self, lane: _Lane, msg: IncomingMessage) -> None:
        lane.waiting += 1
        lane.queue.put_nowait(_Turn(msg))

    async def _react(self, message_id: str, emoji_type: str) -> str | None:
        """A reaction on the user's message (a nicety: a failure is logged, never raised)."""
        assert self._sender is not None
        try:
            return await self._sender.react(message_id, emoji_type)
        except FeishuAPIError as exc:
            logger.warning(
                "no %s reaction on %s (%s); the app needs im:message or "
                "im:message.reactions:write_only",
                emoji_type,
                message_id,
                exc.message,
            )
            return None

    async def _react_done(self, msg: IncomingMessage, *, delivered: bool) -> None:
        """The answer is out: the "Typing" reaction gives way to "DONE"."""
        task = self._reactions.pop(msg.message_id, None)
        if task is None:
            return
        reaction_id = await task
        assert self._sender is not None
        if reaction_id:
            try:
                await self._sender.unreact(msg.message_id, reaction_id)
            except FeishuAPIError as exc:
                logger.warning("reaction on %s not removed: %s", msg.message_id, exc.message)
        if delivered:
            await self._react(msg.message_id, "DONE")

    # --- card buttons: Stop, approve / deny ------------------------------------------------------
    def _on_card_action(self, data: Any) -> Any:
        """Runs on the websocket thread (lark's `register_p2_card_action_trigger`): decide on the
        app loop within Feishu's 3 s, answer with a toast and, for approvals, the new card."""
        event = getattr(data, "event", None)
        operator = str(getattr(getattr(event, "operator", None), "open_id", "") or "")
        context = getattr(event, "context", None)
        chat_id = str(getattr(context, "open_chat_id", "") or "")
        message_id = str(getattr(context, "open_message_id", "") or "")
        action = getattr(event, "action", None)
        value = getattr(action, "value", None)
        form = getattr(action, "form_value", None)
        loop = self._loop
        if loop is None or self._closing:
            return card_action_response(_toast("busy_try_again", "zh", "warning"), None)
        future = asyncio.run_coroutine_threadsafe(
            self._card_action(operator, chat_id, message_id, value, form), loop
        )
        try:
            toast, card = future.result(timeout=2.5)
        except Exception as exc:  # too slow or failed: the tap is answered, nothing changed
            future.cancel()
            logger.warning("card action from %s not handled in time: %s", operator, exc)
            toast, card = _toast("busy_try_again", "zh", "warning"), None
        return card_action_response(toast, card)

    async def _card_action(
        self, operator: str, chat_id: str, message_id: str, value: Any, form: Any = None
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """(toast, new card or None) for a tap. Refused unless the value carries one of our
        nonces and the tap comes from that control's chat and card, by someone with the right."""
        nonce = value.get("n") if isinstance(value, dict) else None
        control = None
        if isinstance(nonce, str):
            control = self._controls.get(nonce) or self._decided.get(nonce)
            control = control or await self._restored_control(nonce)
        if control is not None and control.message_id is None:
            await _card_sent(control)
        if (
            control is None
            or control.msg.chat_id != chat_id
            or control.message_id is None
            or control.message_id != message_id
        ):
            logger.warning("card action from %s in %s refused: not ours", operator, chat_id)
            return _toast("not_yours", "zh", "error"), None
        msg, locale = control.msg, control.msg.locale
        granted = check_access(
            operator,
            chat_id,
            allowed_users=self.settings.feishu_allowed_users,
            allowed_chats=self.settings.feishu_allowed_chats,
            owner=self._owner,
        )
        if not isinstance(granted, Granted):
            return _toast("not_yours", locale, "error"), None
        action: Action = _TAP_ACTIONS[control.kind]
        tap = dataclasses_replace(msg, sender_open_id=operator)
        right = self._tap_right(tap, control, action, frozenset())
        if isinstance(right, Denied):
            right = self._tap_right(tap, control, action, await self._group_admins(chat_id))
        if isinstance(right, Denied):
            logger.info("%s by %s refused in %s", action, operator, chat_id)
            toast = {
                "type": "error",
                "content": t(right.reason, locale),
                "i18n": both(right.reason),
            }
            return toast, None
        assert isinstance(nonce, str)
        if control.kind in _MEMORY_CARDS:
            edited = form.get("text") if isinstance(form, dict) else None
            answer = await self._memory_tap(
                control, value, operator, edited if isinstance(edited, str) else None
            )
            if control.done:
                await self._db(self.state.control_done, nonce)
            return answer
        if control.restored:  # its turn ended with the process that ran it
            key = "already_decided" if control.done else "nothing_running"
            return _toast(key, locale, "info"), None
        if control.kind == "stop":
            stopped = await self.sessions.interrupt(control.conversation_id)
            return _toast("stopping" if stopped else "nothing_running", locale, "info"), None
        assert control.decision is not None
        if control.decision.done():
            return _toast("already_decided", locale, "info"), None
        await self._db(self.state.control_done, nonce)
        approve = value.get("cm") == "approve"
        who = self._known_name(operator)
        if approve:
            control.decision.set_result(ToolAllowed())
        else:
            control.decision.set_result(
                ToolDenied(t("denied_reason_user", "en", tool=control.tool))
            )
        key = "approved_by" if approve else "denied_by"
        card = _decided_card(
            t("approved_title" if approve else "denied_title", locale),
            "green" if approve else "red",
            t(key, locale, tool=escape_card_markdown(control.tool), who=who),
        )
        return _toast("approved_title" if approve else "denied_title", locale, "success"), card

    def _tap_right(
        self, tap: IncomingMessage, control: _Control, action: Action, admins: frozenset[str]
    ) -> Right:
        return command_right(
            action,
            sender=tap.sender_open_id,
            in_group=tap.is_group,
            started_by=control.msg.sender_open_id,
            conversation_of=self._scope(control.msg).member,
            owners=self._owners(),
            chat_admins=admins,
        )

    def _known_name(self, open_id: str) -> str:
        known = self._names.get(open_id)
        return known[1] if known is not None else f"…{open_id[-6:]}"

    def _approver(self, msg: IncomingMessage, conversation_id: str) -> Approver:
        """Asks the chat about a tool call the policy marks "ask": an approval card with
        buttons; the first tap of someone with the right decides, no tap in time denies."""

        async def approve(tool_name: str, tool_input: Any) -> ToolAllowed | ToolDenied:
            assert self._sender is not None and self._loop is not None
            timeout = self.settings.feishu_approval_timeout_seconds
            minutes = max(round(timeout / 60), 1)
            nonce = secrets.token_urlsafe(12)
            control = _Control("approval", msg, conversation_id, tool=tool_name)
            control.decision = self._loop.create_future()
            summary = step_label(tool_name, summarize_tool_input(tool_name, tool_input))
            card = _approval_card(msg.locale, tool_name, summary, minutes, nonce)
            self._controls[nonce] = control
            try:
                card_id = await self._sender.reply(
                    msg.message_id,
                    "interactive",
                    card,
                    uuid=send_uuid(msg.message_id, "approval", nonce),
                    window=QUICK_WINDOW,
                )
                control.shown(card_id)
                await self._keep_control(nonce, control)
                try:
                    return await asyncio.wait_for(asyncio.shield(control.decision), timeout)
                except TimeoutError:
                    if control.decision.done():  # a tap just in time
                        return control.decision.result()
                    control.decision.set_result(
                        ToolDenied(t("denied_reason_timeout", "en", tool=tool_name))
                    )
                    await self._db(self.state.control_done, nonce)
                    closed = _decided_card(
                        t("timed_out_title", msg.locale),
                        "grey",
                        t(
                            "approval_timed_out",
                            msg.locale,
                            tool=escape_card_markdown(tool_name),
                            minutes=minutes,
                        ),
                    )
                    with contextlib.suppress(FeishuAPIError):
                        await self._sender.patch(card_id, closed)
                    return control.decision.result()
            except FeishuAPIError as exc:
                logger.warning("approval card for %s not sent: %s", tool_name, exc.message)
                return ToolDenied(t("denied_reason_timeout", "en", tool=tool_name))
            finally:
                # Kept a while, so a late tap reads "already decided" rather than "not ours".
                self._decided[nonce] = self._controls.pop(nonce, control)
                while len(self._decided) > DECIDED_KEPT:
                    self._decided.popitem(last=False)

        return approve

    # --- delivery and recovery -------------------------------------------------------------------
    async def _settle(
        self, msg: IncomingMessage, reply: TurnReply | StreamReply, elapsed: float
    ) -> None:
        """After a turn: hand what did not arrive to the outbox, close a card left "working",
        push a slow answer that came by PATCH, and forget the turn."""
        if not reply.finished:
            return  # cancelled before any final state: the next start recovers it
        try:
            key = msg.message_id
            if key in self._recalled:
                pass
            elif not reply.delivered and reply.final is not None:
                logger.warning("answer to %s goes to the outbox", key)
                await self._defer_answer(msg, reply.final, card_id=reply.card_id)
            elif reply.pending_from is not None and reply.final is not None:
                logger.warning("the rest of the answer to %s goes to the outbox", key)
                await self._defer_answer(msg, reply.final, card_id=None, start=reply.pending_from)
            elif reply.card_left_open is not None:
                card = card_content(escape_card_markdown(t("answer_below", msg.locale)))
                await self._outbox_put(
                    "patch", reply.card_left_open, card, key=send_uuid(key, "close")
                )
            elif (
                reply.card_id is not None
                and reply.delivered
                and elapsed >= self.settings.feishu_push_after_seconds
            ):
                push = text_content(t("ready_push", msg.locale))
                await self._send(msg, "text", push, part="ready")
            await self._db(self.state.turn_finished, key)
            await self._react_done(msg, delivered=reply.delivered or reply.final is not None)
        except Exception:  # bookkeeping must not take the chat's worker down
            logger.exception("settling the turn of %s failed", msg.message_id)

    async def _defer_answer(
        self,
        msg: IncomingMessage,
        cards: list[dict[str, Any]],
        *,
        card_id: str | None,
        start: int = 0,
    ) -> None:
        """Put the answer's cards (as the turn rendered them: within the documented limits, its
        header, trace and footer) in the outbox: the first into the progress card if there is
        one, the rest as replies under the uuids the turn used, so a send that did arrive
        unseen is not doubled."""
        for index, card in enumerate(cards[start:], start=start):
            if index == 0 and card_id is not None:
                await self._outbox_put(
                    "patch", card_id, card, key=send_uuid(msg.message_id, "close")
                )
            else:
                key = send_uuid(msg.message_id, "answer", index)
                await self._outbox_put("reply", msg.message_id, card, key=key)

    async def _outbox_put(
        self,
        op: str,
        target: str,
        content: dict[str, Any],
        *,
        key: str,
        msg_type: MsgType = "interactive",
    ) -> None:
        item = OutboxItem(
            key,
            "patch" if op == "patch" else "reply",
            target,
            msg_type,
            json.dumps(content, ensure_ascii=False),
            created_at=time.time(),
        )
        await self._db(self.state.outbox_put, item)
        if self._outbox_wake is not None:
            self._outbox_wake.set()

    async def _outbox_worker(self) -> None:
        assert self._outbox_wake is not None
        while True:
            try:
                if time.monotonic() - self._alive_at > ALIVE_EVERY_SECONDS:
                    await self._db(self.state.alive, self._instance)
                    self._alive_at = time.monotonic()
                await self._outbox_round()
            except Exception:  # a state or network surprise; the next round tries again
                logger.exception("outbox round failed")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(OUTBOX_POLL_SECONDS):
                    await self._outbox_wake.wait()
            self._outbox_wake.clear()

    async def _outbox_round(self) -> None:
        """Try every due send once; stop at the first transient failure (the platform is down)."""
        assert self._sender is not None
        now = time.time()
        for item in await self._db(functools.partial(self.state.outbox_due, now=now)):
            if now - item.created_at > OUTBOX_KEEP_SECONDS:
                logger.error(
                    "gave up delivering %s %s: undelivered for %d s",
                    item.op,
                    item.target,
                    now - item.created_at,
                )
                await self._db(self.state.outbox_done, item.key)
                continue
            content = json.loads(item.content)
            try:
                if item.op == "patch":
                    await self._sender.patch(item.target, content, window=QUICK_WINDOW)
                else:
                    await self._sender.reply(
                        item.target,
                        item.msg_type,  # type: ignore[arg-type]
                        content,
                        uuid=item.key,
                        window=QUICK_WINDOW,
                    )
            except FeishuAPIError as exc:
                if not exc.transient:
                    logger.error("outbox %s to %s dropped: %s", item.op, item.target, exc.message)
                    await self._db(self.state.outbox_done, item.key)
                    continue
                base = max(self.settings.feishu_delivery_window_seconds, OUTBOX_POLL_SECONDS)
                delay = min(OUTBOX_MAX_DELAY_SECONDS, base * 2**item.attempts)
                logger.warning(
                    "outbox %s to %s not delivered (%s); next try in %.0f s",
                    item.op,
                    item.target,
                    exc.message,
                    delay,
                )
                await self._db(self.state.outbox_retry, item.key, time.time() + delay)
                return
            logger.info("outbox %s to %s delivered", item.op, item.target)
            await self._db(self.state.outbox_done, item.key)

    async def _recover(self) -> None:
        """At start: answer or re-run what a crash left, and close its "working" cards."""
        now = time.time()
        # Only this instance's turns, and those of instances no longer alive: on a shared
        # database another instance may be answering the rest right now.
        unfinished = functools.partial(
            self.state.unfinished_turns,
            owner=self._instance,
            dead_before=now - INSTANCE_DEAD_SECONDS,
        )
        for turn in await self._db(unfinished):
            try:
                msg = message_from_json(turn.message)
            except (ValueError, TypeError, KeyError) as exc:
                logger.warning("unreadable unfinished turn %s dropped: %s", turn.message_id, exc)
                await self._db(self.state.turn_finished, turn.message_id)
                continue
            if turn.card_id is not None:
                card = card_content(
                    escape_card_markdown(t("restart_notice", msg.locale)),
                    title=t("restart_title", msg.locale),
                    template="red",
                )
                await self._outbox_put(
                    "patch", turn.card_id, card, key=send_uuid(msg.message_id, "close")
                )
            if turn.stage == "accepted" and now - turn.accepted_at < OUTBOX_KEEP_SECONDS:
                logger.warning(
                    "running %s again: the app stopped before it reached the model", msg.message_id
                )
                self._enqueue_turn(self._lane(self._scope(msg).key), msg)
                continue
            logger.warning("%s was interrupted by a restart; telling the sender", msg.message_id)
            await self._outbox_put(
                "reply",
                msg.message_id,
                text_content(t("restart_notice", msg.locale)),
                key=send_uuid(msg.message_id, "restart"),
                msg_type="text",
            )
            await self._db(self.state.turn_finished, msg.message_id)

    def _recall(self, event: Recalled) -> None:
        """A message was recalled: remember it (queued work skips it) and stop its turn."""
        self._recalled[event.message_id] = None
        while len(self._recalled) > RECALLED_KEPT:
            self._recalled.popitem(last=False)
        for lane in self._lanes.values():
            current = lane.current
            if lane.busy and current is not None and current.message_id == event.message_id:
                logger.info("%s recalled while running; stopping its turn", event.message_id)
                self._control.put_nowait(_Withdraw(current))

    def _quoted(self, msg: IncomingMessage) -> str | None:
        return quoted_id(parent_id=msg.parent_id, root_id=msg.root_id, thread_id=msg.thread_id)

    async def _context(self, msg: IncomingMessage) -> list[str]:
        """What the message brings beside its own text: the message it quotes, the chat it
        forwards (both fetched with "获取指定消息的内容"); labelled, capped, never the user's
        own words."""
        assert self._sender is not None
        lang = msg.locale
        parts: list[str] = []
        quoted = self._quoted(msg)
        if quoted is not None:
            parts.append(await self._quote(msg, quoted))
        if msg.message_type == "merge_forward":
            try:
                items = await self._sender.get_message(msg.message_id)
            except FeishuAPIError as exc:
                logger.warning("forward %s not read: %s", msg.message_id, exc.message)
                return [*parts, t("forwarded_unreadable", lang, why=exc.message)]
            forward = forward_tree(items, msg.message_id)
            names: dict[str, str] = {}
            for _, said in forward.lines:  # names of the first few speakers only
                if said.sender and said.sender not in names and len(names) < NAME_LOOKUPS:
                    names[said.sender] = await self._display_name(said.sender)

            def name_of(said: ItemText) -> str:
                if said.is_app:
                    return t("the_bot", lang)
                return names.get(said.sender) or f"…{said.sender[-6:]}"

            lines = forward_markdown(forward, name_of, lambda n: t("forwarded_more", lang, count=n))
            parts.append(t("forwarded", lang, count=forward.total, lines=lines))
        return parts

    async def _quote(self, msg: IncomingMessage, quoted: str) -> str:
        assert self._sender is not None
        lang = msg.locale
        try:
            items = await self._sender.get_message(quoted)
        except FeishuAPIError as exc:
            logger.warning("quoted message %s not read: %s", quoted, exc.message)
            return t("quoted_unreadable", lang, why=exc.message)
        item = next((i for i in items if i.get("message_id") == quoted), None)
        if item is None:
            return t("quoted_unreadable", lang, why="-")
        if item.get("chat_id") and item.get("chat_id") != msg.chat_id:
            # Never carry another chat's words into this one, whatever the event claims.
            logger.warning("%s quotes %s of another chat; not read", msg.message_id, quoted)
            return t("quoted_unreadable", lang, why="other chat")
        said = item_text(item)
        if said.why == "card":
            return t("quoted_card", lang)
        if said.text is None:
            return t("quoted_unreadable", lang, why=said.why)
        who = t("the_bot", lang) if said.is_app else await self._display_name(said.sender)
        return t("quoted", lang, who=who, text=clip(said.text, QUOTE_CHARS))

    async def _prompt(self, msg: IncomingMessage) -> str:
        text = await self._spoken_by(msg)
        context = await self._context(msg)
        if context:
            text = "\n\n".join([*context, text] if text else context)
        if not msg.attachments:
            return text
        assert self._sender is not None
        saved: list[str] = []
        for attachment in msg.attachments:
            try:
                download = await self._sender.download(
                    msg.message_id, attachment.key, attachment.kind
                )
                path = await asyncio.to_thread(
                    self._save_attachment,
                    msg,
                    attachment.kind,
                    attachment.key,
                    attachment.name or download.file_name,
                    download.data,
                )
                size = len(download.data)
                saved.append(f"- {path} ({attachment.kind}, {size} bytes)")
            except (FeishuAPIError, OSError) as exc:
                message = exc.message if isinstance(exc, FeishuAPIError) else str(exc)
                saved.append(f"- one {attachment.kind} could not be downloaded: {message}")
        lines = [text] if text else []
        lines.append(
            "[The user sent attachments through Feishu; they are saved in your workspace:\n"
            + "\n".join(saved)
            + "]"
        )
        return "\n\n".join(lines)

    async def _spoken_by(self, msg: IncomingMessage) -> str:
        """In a group the model is told who is speaking: `[Name] text`; direct chats as is."""
        if not msg.is_group or not msg.text:
            return msg.text
        return f"[{await self._display_name(msg.sender_open_id)}] {msg.text}"

    async def _display_name(self, open_id: str) -> str:
        """A member's Feishu name, cached; the end of their open_id when Feishu will not say."""
        now = time.monotonic()
        known = self._names.get(open_id)
        if known is not None and known[0] > now:
            return known[1]
        assert self._sender is not None
        name = await self._sender.user_name(open_id) if open_id else None
        # A name is the member's own text: one short line, no brackets to fake another speaker.
        shown = " ".join((name or f"member …{open_id[-6:]}").split())[:40]
        shown = shown.replace("[", "(").replace("]", ")")
        self._names[open_id] = (now + NAMES_TTL_SECONDS, shown)
        return shown

    def _save_attachment(
        self, msg: IncomingMessage, kind: str, key: str, name: str, data: bytes
    ) -> str:
        workspace = self.settings.workspace_dir
        folder = workspace / "inbox" / "feishu"
        folder.mkdir(parents=True, exist_ok=True)
        stamp = datetime.fromtimestamp((msg.create_time_ms or time.time() * 1000) / 1000)
        base = _SAFE_NAME.sub("_", Path(name).name).strip("._") if name else ""
        if not base:
            base = f"{kind}{_guess_extension(data)}"
        target = folder / f"{stamp:%Y%m%d-%H%M%S}-{key[-8:]}-{base}"
        tmp = target.with_suffix(target.suffix + ".part")
        tmp.write_bytes(data)
        tmp.replace(target)
        return target.relative_to(workspace).as_posix()

    # --- commands and notices --------------------------------------------------------------------
    async def _command(self, msg: IncomingMessage, command: Command) -> None:
        action = _RIGHTS_NEEDED.get(type(command))
        if action is not None and await self._refused(msg, action):
            return
        scope = self._scope(msg)
        conversation_id = await self._conversation_id(scope.key)
        lang = msg.locale
        match command:
            case Pair(code=code):
                await self._notify(msg, await self._pair(msg, code))
            case Clear():
                generation = await self._db(self.state.bump_generation, scope.key)
                await self.sessions.close_conversation(conversation_id, reason="cleared")
                await self._notify(msg, t("cleared", lang, generation=generation))
            case Compact():
                await self._compact(msg, conversation_id)
            case Stop():
                stopped = await self.sessions.interrupt(conversation_id)
                if not stopped and msg.is_group and await self._elevated(msg):
                    # The assistant's owners and the group's owner and admins may stop the
                    # group's other conversations too (members' own, topics').
                    stopped = await self._stop_group(msg.chat_id)
                await self._notify(msg, t("stop_done" if stopped else "stop_idle", lang))
            case Status():
                await self._notify_markdown(msg, await self._status_text(msg, conversation_id))
            case MemorySearch(query=query):
                await self._notify_markdown(msg, await self._memory_text(query, lang))
            case Remember(text=text):
                reply, saved = await self._remember(msg, text)
                await self._notify_markdown(msg, reply)
                if saved is not None and saved.pending and saved.conflicts_with:
                    await self._offer_conflict(msg, saved.id, saved.conflicts_with, saved.pending)
            case Forget(target=target):
                await self._forget(msg, target)
            case Model(name=name):
                await self._notify_markdown(msg, await self._model(msg, scope.key, name))
            case Sessions():
                await self._notify_markdown(msg, await self._sessions_text(msg, scope.key))
            case Resume(number=number):
                await self._notify_markdown(
                    msg, await self._resume(msg, scope.key, conversation_id, number)
                )
            case Help():
                await self._notify_markdown(msg, t("help", lang))
            case Unknown(name=name):
                await self._notify(msg, t("unknown_command", lang, name=name))

    # --- rights in groups (bridge/rights.py decides; this gathers what it needs) ------------------
    async def _refused(self, msg: IncomingMessage, action: Action) -> bool:
        """Refuse `action` with a line saying who may, unless the sender has the right."""
        right = self._right(msg, action, frozenset())
        if isinstance(right, Denied):  # ask Feishu about the group's owner and managers only now
            right = self._right(msg, action, await self._group_admins(msg.chat_id))
        if isinstance(right, Denied):
            logger.info("%s of %s refused in %s", action, msg.sender_open_id, msg.chat_id)
            await self._notify(msg, t(right.reason, msg.locale))
            return True
        return False

    def _right(self, msg: IncomingMessage, action: Action, admins: frozenset[str]) -> Right:
        scope = self._scope(msg)
        lane = self._lanes.get(scope.key)
        running = lane.current if lane is not None and lane.busy else None
        return command_right(
            action,
            sender=msg.sender_open_id,
            in_group=msg.is_group,
            started_by=running.sender_open_id if running is not None else None,
            conversation_of=scope.member,
            owners=self._owners(),
            chat_admins=admins,
        )

    async def _elevated(self, msg: IncomingMessage) -> bool:
        """The sender is one of the assistant's owners or the group's owner or admins."""
        sender = msg.sender_open_id
        return sender in self._owners() or sender in await self._group_admins(msg.chat_id)

    async def _stop_group(self, chat_id: str) -> bool:
        """Interrupt every running turn of the group's conversations; True if any ran."""
        stopped = False
        for key, lane in list(self._lanes.items()):
            if lane.busy and lane.current is not None and lane.current.chat_id == chat_id:
                conversation_id = await self._conversation_id(key)
                stopped = await self.sessions.interrupt(conversation_id) or stopped
        return stopped

    def _owners(self) -> frozenset[str]:
        """The assistant's owners: the users named in FEISHU_ALLOWED_USERS, else the paired one."""
        if self.settings.feishu_allowed_users:
            return frozenset(self.settings.feishu_allowed_users)
        return frozenset({self._owner}) if self._owner else frozenset()

    async def _group_admins(self, chat_id: str) -> frozenset[str]:
        """The group's owner and managers, cached; none when Feishu will not say (fail closed)."""
        now = time.monotonic()
        known = self._chat_admins.get(chat_id)
        if known is not None and known[0] > now:
            return known[1]
        assert self._sender is not None
        try:
            admins = await self._sender.chat_admins(chat_id)
        except FeishuAPIError as exc:
            logger.warning(
                "could not read the owner of group %s (%s); grant the app im:chat:readonly "
                "so group owners and admins may /stop and /clear",
                chat_id,
                exc.message,
            )
            admins = frozenset()
        self._chat_admins[chat_id] = (now + CHAT_ADMINS_TTL_SECONDS, admins)
        return admins

    async def _pair(self, msg: IncomingMessage, code: str) -> str:
        settings = self.settings
        lang = msg.locale
        if settings.feishu_allowed_users or settings.feishu_allowed_chats:
            return t("pair_off", lang)
        owner = self._owner
        if owner is not None:
            return t("pair_already" if owner == msg.sender_open_id else "refusal", lang)
        if self.pairing_code is None or not code:
            return t("pair_usage", lang)
        if not secrets.compare_digest(code, self.pairing_code):
            self._pair_failures += 1
            if self._pair_failures >= PAIR_ATTEMPTS:
                logger.warning("too many wrong pairing codes; issuing a new one")
                self._announce_pairing(force=True)
            return t("pair_wrong", lang)
        if not await self._db(self.state.set_owner, msg.sender_open_id):
            self._owner = await self._db(self.state.owner)
            return t("refusal", lang)
        self._owner = msg.sender_open_id
        self.pairing_code = None
        logger.warning("Feishu bridge paired: owner is %s", msg.sender_open_id)
        return t("paired", lang)

    def _paired(self) -> bool:
        settings = self.settings
        return bool(settings.feishu_allowed_users or settings.feishu_allowed_chats or self._owner)

    def _announce_pairing(self, *, force: bool = False) -> None:
        if self._paired() or (self.pairing_code is not None and not force):
            return
        self.pairing_code = f"{secrets.randbelow(10**8):08d}"
        self._pair_failures = 0
        logger.warning(
            "Feishu bridge is not paired. From your Feishu account, send the bot: /pair %s",
            self.pairing_code,
        )

    async def _compact(self, msg: IncomingMessage, conversation_id: str) -> None:
        assert self._sender is not None
        reply = TurnReply(
            self._sender,
            reply_to=msg.message_id,
            key=msg.message_id,
            interval=self.settings.feishu_card_update_interval_seconds,
            open_delay=self.settings.feishu_progress_delay_seconds,
            title=t("compacting", msg.locale),
            locale=msg.locale,
        )
        async with reply:
            try:
                result = await self.sessions.compact(conversation_id)
            except ClaudeMemoryError as exc:
                error = t("compact_failed", msg.locale, error=exc.message)
                await reply.finish(error, is_error=True)
                return
            await reply.finish(result.reply, is_error=result.is_error)

    def _model_name(self, chosen: str | None, lang: Locale) -> str:
        configured = self.settings.anthropic_model or t("model_cli_default", lang)
        return chosen or t("model_default", lang, name=configured)

    async def _status_text(self, msg: IncomingMessage, conversation_id: str) -> str:
        lang = msg.locale
        scope = self._scope(msg)
        known = await self._db(self.sessions.store.get, conversation_id)
        live = self.sessions.live_status(conversation_id)
        lane = self._lanes.get(scope.key)
        queued = lane.queue.qsize() if lane else 0
        running = (live is not None and live.running) or (lane is not None and lane.busy)
        state = t("running" if running else "idle", lang)
        if queued:
            state += t("queued_count", lang, count=queued)
        runner = self._runner
        session = f"`{known.session_id}`" if known and known.session_id else None
        return t(
            "status",
            lang,
            conversation=conversation_id,
            session=session or t("session_none", lang),
            turns=known.turns if known else 0,
            cost=f"{known.cost_usd if known else 0.0:.4f}",
            model=self._model_name(await self._db(self.state.model, scope.key), lang),
            state=state,
            connection=t("connected" if self.connected else "disconnected", lang),
            reconnects=runner.reconnects if runner else 0,
        )

    # --- memory in the chat ----------------------------------------------------------------------
    async def _search(self, query: str, limit: int) -> list[dict[str, Any]]:
        if self.search is not None:
            return await self.search(query, limit)
        if self.memory is not None:
            return await memory_search(self.memory)(query, limit)
        raise ConfigurationError("no memory store")

    async def _memory_text(self, query: str, lang: Locale) -> str:
        if not query:
            return t("recall_usage", lang)
        if self.search is None and self.memory is None:
            return t("memory_unavailable", lang)
        try:
            results = await self._search(query, MEMORY_RESULTS)
        except Exception as exc:  # the memory store is another package: report, do not crash
            logger.exception("memory search failed")
            return t("memory_failed", lang, error=_unexpected(exc))
        shown = clip(query, 80)
        if not results:
            return t("recall_none", lang, query=shown)
        lines = [t("recall_title", lang, query=shown)]
        for index, note in enumerate(results, start=1):
            lines.append(f"{index}. " + _note_line(note, lang))
        return "\n".join(lines)

    async def _remember(self, msg: IncomingMessage, text: str) -> tuple[str, SaveResult | None]:
        """`/remember <text>`: a note from this chat, through the store's one save (redaction,
        dedup, conflicts), like every other front door's. (reply, what was saved)."""
        lang = msg.locale
        text = text.strip()
        if not text:
            return t("remember_usage", lang), None
        if self.memory is None:
            return t("memory_unavailable", lang), None
        draft = NoteDraft(content=text, source=f"feishu:{msg.chat_id}")
        try:
            saved = await asyncio.to_thread(self.memory.save, draft)
        except ClaudeMemoryError as exc:
            return t("memory_failed", lang, error=clean_error(exc.message)), None
        except Exception as exc:  # the store is another package: say so, never fall silent
            logger.exception("remember failed in %s", msg.chat_id)
            return t("memory_failed", lang, error=_unexpected(exc)), None
        logger.info("%s remembered %s in %s", msg.sender_open_id, saved.id, msg.chat_id)
        key = "remembered_known" if saved.deduplicated else "remembered"
        return t(key, lang, id=saved.id), saved

    async def _offer_conflict(
        self, msg: IncomingMessage, new_id: str, old_id: str, supersession: str
    ) -> None:
        """A new note contradicts an older one (`memory.conflicts`): both stay until the user
        chooses on a card: keep the new one, the old one, or both."""
        if self.memory is None or self.conflicts is None or self._sender is None:
            return
        try:
            new, old = (
                await self._db(self.memory.get, new_id),
                await self._db(self.memory.get, old_id),
            )
        except ClaudeMemoryError as exc:  # one was deleted meanwhile: nothing to choose
            logger.info("conflict %s not offered: %s", supersession, exc.message)
            return
        nonce = secrets.token_urlsafe(12)
        control = _Control("conflict", msg, "", supersession=supersession)
        self._controls[nonce] = control
        card = _conflict_card(msg.locale, new.body, old.body, nonce)
        try:
            control.shown(
                await self._sender.reply(
                    msg.message_id,
                    "interactive",
                    card,
                    uuid=send_uuid(msg.message_id, "conflict", supersession),
                    window=QUICK_WINDOW,
                )
            )
            await self._keep_control(nonce, control)
        except FeishuAPIError as exc:
            self._controls.pop(nonce, None)
            logger.warning("conflict card for %s not sent: %s", supersession, exc.message)
            return
        self._keep_decided(nonce)

    async def _forget(self, msg: IncomingMessage, target: str) -> None:
        """`/forget <id>` deletes that note at once; `/forget <query>` answers with a card of
        the matches, each deleted by one tap (the tap's rights are checked again)."""
        lang = msg.locale
        target = target.strip()
        if not target:
            await self._notify(msg, t("forget_usage", lang))
            return
        memory = self.memory
        if memory is None:
            await self._notify(msg, t("memory_unavailable", lang))
            return
        if " " not in target:
            note = await self._db(_note_or_none, memory, target)
            if note is not None:
                await self._db(memory.delete, note.id)
                logger.info("%s deleted note %s in %s", msg.sender_open_id, note.id, msg.chat_id)
                title = clip(note.title or note.content, 60)
                await self._notify_markdown(msg, t("forgotten", lang, id=note.id, title=title))
                return
        try:
            hits = await self._search(target, FORGET_MATCHES)
        except Exception as exc:
            logger.exception("memory search failed")
            await self._notify(msg, t("memory_failed", lang, error=_unexpected(exc)))
            return
        notes = tuple(
            (str(h.get("id") or ""), str(h.get("title") or "")) for h in hits if h.get("id")
        )
        if not notes:
            await self._notify_markdown(msg, t("forget_none", lang, query=clip(target, 80)))
            return
        nonce = secrets.token_urlsafe(12)
        control = _Control("forget", msg, "", notes=notes)
        card = _forget_card(lang, clip(target, 80), hits[: len(notes)], nonce)
        self._controls[nonce] = control
        assert self._sender is not None
        try:
            control.shown(
                await self._sender.reply(
                    msg.message_id,
                    "interactive",
                    card,
                    uuid=send_uuid(msg.message_id, "forget"),
                    window=QUICK_WINDOW,
                )
            )
            await self._keep_control(nonce, control)
        except FeishuAPIError as exc:
            self._controls.pop(nonce, None)
            logger.warning("forget card for %s not sent: %s", msg.message_id, exc.message)
        self._keep_decided(nonce)

    async def _offer_captures(
        self, msg: IncomingMessage, conversation_id: str, since: float
    ) -> None:
        """The turn's low-confidence captures (the pending list: `capture_entities` queued them
        under this conversation before the reply came back) become "记住这个吗？" cards, one
        tap to keep or discard, for the person who said it."""
        if self.pending is None or self._sender is None:
            return
        source = f"conversation:{conversation_id}"
        try:
            waiting = await self._db(functools.partial(self.pending.list, "pending", 50))
        except Exception:
            logger.exception("pending captures not read")
            return
        for entity in waiting:
            if entity.source != source or entity.created < since:
                continue  # another conversation's, or asked about before
            nonce = secrets.token_urlsafe(12)
            control = _Control("pending", msg, conversation_id, pending=entity)
            self._controls[nonce] = control
            card = _pending_card(msg.locale, _pending_text(entity), nonce)
            try:
                control.shown(
                    await self._sender.reply(
                        msg.message_id,
                        "interactive",
                        card,
                        uuid=send_uuid(msg.message_id, "pending", entity.id),
                        window=QUICK_WINDOW,
                    )
                )
                await self._keep_control(nonce, control)
            except FeishuAPIError as exc:
                self._controls.pop(nonce, None)
                logger.warning("capture card for %s not sent: %s", entity.id, exc.message)
                continue
            self._keep_decided(nonce)

    async def _keep_control(self, nonce: str, control: _Control) -> None:
        """Keep a sent card's button in the bridge state, so a tap after a restart (or on
        another instance) still finds it (`_restored_control`)."""
        if control.message_id is None:
            return
        data = {
            "notes": [list(n) for n in control.notes],
            "pending": control.pending.id if control.pending else None,
            "tool": control.tool,
            "supersession": control.supersession,
        }
        saved = SavedControl(
            nonce=nonce,
            kind=control.kind,
            message_id=control.message_id,
            conversation_id=control.conversation_id,
            message=message_to_json(control.msg),
            data=json.dumps(data, ensure_ascii=False),
            done=control.done,
            created_at=time.time(),
        )
        try:
            await self._db(self.state.control_put, saved)
        except Exception:  # the button still works in this process
            logger.exception("button %s of %s not kept", control.kind, control.message_id)

    async def _restored_control(self, nonce: str) -> _Control | None:
        """A button this process did not make (it was restarted since): as kept, marked
        `restored`; a capture card's pending entity read again."""
        try:
            saved = await self._db(self.state.control_get, nonce)
            if saved is None:
                return None
            data = json.loads(saved.data)
            msg = message_from_json(saved.message)
            pending = None
            if saved.kind == "pending":
                if self.pending is None or not data.get("pending"):
                    return None
                pending = await self._db(self.pending.get, str(data["pending"]))
        except (ClaudeMemoryError, ValueError, KeyError, TypeError) as exc:
            logger.warning("button %s not restored: %s", nonce[:4], exc)
            return None
        control = _Control(
            saved.kind,
            msg,
            saved.conversation_id,
            message_id=saved.message_id,
            tool=str(data.get("tool") or ""),
            notes=tuple((str(i), str(title)) for i, title in data.get("notes") or ()),
            pending=pending,
            supersession=str(data.get("supersession") or ""),
            done=saved.done,
            restored=True,
        )
        if control.kind in _MEMORY_CARDS:  # live again in this process
            self._controls[nonce] = control
            self._keep_decided(nonce)
        return control

    def _keep_decided(self, nonce: str) -> None:
        """Forget the oldest memory cards beyond DECIDED_KEPT (their taps then read "not ours")."""
        kept = [n for n, c in self._controls.items() if c.kind in _MEMORY_CARDS]
        for old in kept[: max(len(kept) - DECIDED_KEPT, 0)]:
            if old != nonce:
                self._controls.pop(old, None)

    async def _memory_tap(
        self, control: _Control, value: dict[str, Any], operator: str, edited: str | None = None
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """A tap on a `/forget` card (one note, all, cancel) or a capture card (keep,
        discard, keep as `edited`), once the tapper's right was checked. The card changes in
        place."""
        lang = control.msg.locale
        if control.done:
            return _toast("already_decided", lang, "info"), None
        memory, pending = self.memory, self.pending
        choice = str(value.get("cm") or "")
        if control.kind == "conflict":
            return await self._conflict_tap(control, choice)
        if control.kind == "forget":
            if choice == "cancel":
                control.done = True
                card = _decided_card(
                    t("cancelled_title", lang), "grey", t("forget_cancelled", lang)
                )
                return _toast("cancelled_title", lang, "info"), card
            index = value.get("i")
            if choice == "forget_all":
                chosen = list(control.notes)
            elif isinstance(index, int) and 0 <= index < len(control.notes):
                chosen = [control.notes[index]]
            else:
                return _toast("not_yours", lang, "error"), None
            assert memory is not None
            control.done = True
            for note_id, _title in chosen:
                with contextlib.suppress(ClaudeMemoryError):  # already gone: fine
                    await self._db(memory.delete, note_id)
            logger.info("%s deleted notes %s", operator, [n for n, _ in chosen])
            listed = "\n".join(
                f"- `{n}` {escape_card_markdown(clip(title, 60))}" for n, title in chosen
            )
            card = _decided_card(
                t("forget_done_title", lang), "red", t("forget_done", lang, notes=listed)
            )
            return _toast("forget_done_title", lang, "success"), card
        entity = control.pending
        assert entity is not None and pending is not None and memory is not None
        content = escape_card_markdown(clip(entity.content, 500))
        try:
            if choice == "edit" and not (edited or "").strip():
                return _toast("edit_empty", lang, "error"), None
            if choice in ("keep", "edit"):
                corrected = edited if choice == "edit" else None
                # the person's own tap: their history door (a model's change becomes theirs)
                with acting_as(ChangeSource("feishu-user", control.conversation_id)):
                    _resolved, note_id, _dup = await self._db(
                        functools.partial(confirm_pending, content=corrected),
                        memory,
                        pending,
                        entity.id,
                    )
                if corrected is not None:
                    content = escape_card_markdown(clip(corrected.strip(), 500))
                control.done = True
                card = _decided_card(
                    t("kept_title", lang), "green", t("kept", lang, content=content, id=note_id)
                )
                return _toast("kept_title", lang, "success"), card
            if choice == "discard":
                await self._db(pending.resolve, entity.id, "rejected")
                control.done = True
                card = _decided_card(
                    t("discarded_title", lang), "grey", t("discarded", lang, content=content)
                )
                return _toast("discarded_title", lang, "info"), card
        except ClaudeMemoryError as exc:  # decided elsewhere (the web page): that stands
            control.done = True
            logger.info("capture %s: %s", entity.id, exc.message)
            known = await self._db(pending.get, entity.id)
            toast = {
                "type": "info",
                "content": t("already_decided_as", lang, status=known.status),
                "i18n": both("already_decided_as", status=known.status),
            }
            return toast, None
        return _toast("not_yours", lang, "error"), None

    async def _conflict_tap(
        self, control: _Control, choice: str
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Keep the new note, the old one or both (`ConflictStore.resolve`: final; both notes'
        histories record it). A choice made elsewhere first (web page, MCP) stands."""
        lang = control.msg.locale
        keep = {"keep_new": "new", "keep_old": "old", "keep_both": "both"}.get(choice)
        if keep is None or self.conflicts is None or self.memory is None:
            return _toast("not_yours", lang, "error"), None
        try:
            await self._db(self.conflicts.resolve, self.memory, control.supersession, keep)
        except ClaudeMemoryError as exc:
            control.done = True
            logger.info("conflict %s: %s", control.supersession, exc.message)
            return _toast("already_decided", lang, "info"), None
        control.done = True
        key = f"conflict_{choice}"
        return _toast(key, lang, "success"), _decided_card(
            t(key, lang), "green", t("conflict_decided", lang)
        )

    # --- conversations: /model, /sessions, /resume -----------------------------------------------
    async def _model(self, msg: IncomingMessage, scope_key: str, name: str) -> str:
        lang = msg.locale
        name = name.strip()
        if not name:
            chosen = await self._db(self.state.model, scope_key)
            return t("model_now", lang, model=self._model_name(chosen, lang))
        if name.lower() in ("default", "reset", "默认"):
            await self._db(self.state.set_model, scope_key, None)
            shown = self.settings.anthropic_model or t("model_cli_default", lang)
            return t("model_reset", lang, model=shown)
        if not _MODEL_NAME.fullmatch(name):
            return t("model_bad", lang)
        await self._db(self.state.set_model, scope_key, name)
        logger.info("%s chose model %s for %s", msg.sender_open_id, name, scope_key)
        return t("model_set", lang, model=name)

    async def _sessions_text(self, msg: IncomingMessage, scope_key: str) -> str:
        """This chat's conversations (`feishu:<scope>:v1 … vN`), numbered by generation, with
        their date, turns and first message; the current one marked."""
        lang = msg.locale
        current = await self._db(self.state.generation, scope_key)
        latest = await self._db(self.state.latest_generation, scope_key)
        lines = [t("sessions_title", lang)]
        for number in range(max(latest, current), 0, -1)[:20]:
            known = await self._db(self.sessions.store.get, f"feishu:{scope_key}:v{number}")
            when = datetime.fromtimestamp(known.created) if known else None
            title = clip(known.title, 50) if known and known.title else ""
            lines.append(
                t(
                    "sessions_line",
                    lang,
                    n=number,
                    date=f"{when:%Y-%m-%d %H:%M}" if when else "—",
                    turns=known.turns if known else 0,
                    title=title or t("sessions_empty_title", lang),
                    current=t("sessions_current", lang) if number == current else "",
                )
            )
        lines.append(t("sessions_hint", lang))
        return "\n".join(lines)

    async def _resume(
        self, msg: IncomingMessage, scope_key: str, conversation_id: str, number: int | None
    ) -> str:
        """Back to conversation `number` of this chat: its id is made from this chat's own
        scope, so no number can reach another chat's conversation. The next message resumes
        its SDK session (the conversation keeps its session id)."""
        lang = msg.locale
        if number is None:
            return t("resume_usage", lang)
        if number == await self._db(self.state.generation, scope_key):
            return t("already_current", lang, n=number)
        known = await self._db(self.sessions.store.get, f"feishu:{scope_key}:v{number}")
        if known is None or not await self._db(self.state.set_generation, scope_key, number):
            return t("resume_unknown", lang, n=number)
        await self.sessions.close_conversation(conversation_id, reason="resumed another")
        logger.info("%s resumed v%d in %s", msg.sender_open_id, number, scope_key)
        title = clip(known.title, 50) or t("sessions_empty_title", lang)
        return t("resumed", lang, n=number, title=title)

    async def _notify(self, msg: IncomingMessage, text: str) -> None:
        """A one-line text reply to the user's message."""
        await self._send(msg, "text", text_content(text))

    async def _notify_markdown(self, msg: IncomingMessage, markdown: str) -> None:
        """A short markdown answer as a card within the documented limits (`answer_cards`); as
        plain text if it needs more than one card or the card is refused."""
        cards = answer_cards(markdown)
        if len(cards) > 1 or not await self._send(msg, "interactive", cards[0].card):
            await self._send(msg, "text", text_content(plain_text(markdown)), part="text")

    async def _send(
        self,
        msg: IncomingMessage,
        msg_type: MsgType,
        content: dict[str, Any],
        *,
        part: str = "notice",
    ) -> bool:
        assert self._sender is not None
        key = send_uuid(msg.message_id, part)
        try:
            await self._sender.reply(msg.message_id, msg_type, content, uuid=key)
        except FeishuAPIError as exc:
            if exc.transient:  # the platform is down: the outbox delivers it later
                logger.warning("answer to %s goes to the outbox: %s", msg.message_id, exc.message)
                await self._outbox_put("reply", msg.message_id, content, key=key, msg_type=msg_type)
                return True
            logger.error("could not answer %s: %s", msg.message_id, exc.message)
            return False
        return True

    # --- logging ---------------------------------------------------------------------------------
    def _attach_log_file(self) -> None:
        path = self.settings.logs_dir / LOG_FILE_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=5_000_000, backupCount=3, encoding="utf-8"
        )
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.setLevel(logging.INFO)
        handler.addFilter(RedactingFilter())  # message text reaches log lines: no secret on disk
        for name in ("bridge", "Lark"):
            log = logging.getLogger(name)
            log.addHandler(handler)
            if log.level == logging.NOTSET or log.level > logging.INFO:
                log.setLevel(logging.INFO)
        self._log_handler = handler

    def _detach_log_file(self) -> None:
        handler, self._log_handler = self._log_handler, None
        if handler is None:
            return
        for name in ("bridge", "Lark"):
            logging.getLogger(name).removeHandler(handler)
        with contextlib.suppress(Exception):
            handler.close()


def _toast(key: str, locale: Locale, kind: str) -> dict[str, Any]:
    """A card action's toast: the tapper's language chosen by their client (`i18n`)."""
    return {"type": kind, "content": t(key, locale), "i18n": both(key)}


def _approval_card(
    locale: Locale, tool: str, summary: str, minutes: int, nonce: str
) -> dict[str, Any]:
    """Approve / deny buttons for one "ask" call (JSON 2.0: buttons straight in the elements,
    callback values are objects, as lark-oapi can only read those)."""

    def button(kind: str, label: str, style: str) -> dict[str, Any]:
        return {
            "tag": "button",
            "element_id": f"{kind}_btn",
            "type": style,
            "text": {"tag": "plain_text", "content": t(label, locale)},
            "behaviors": [{"type": "callback", "value": {"cm": kind, "n": nonce}}],
        }

    body = t(
        "approval_body", locale, tool=escape_card_markdown(tool), summary=summary, minutes=minutes
    )
    return {
        "schema": "2.0",
        "config": {"update_multi": True},
        "header": {
            "title": {"tag": "plain_text", "content": t("approval_title", locale)},
            "template": "orange",
        },
        "body": {
            "elements": [
                {"tag": "markdown", "content": body},
                button("approve", "approve_button", "primary"),
                button("deny", "deny_button", "danger"),
            ]
        },
    }


def _button(label: str, style: str, value: dict[str, Any], element_id: str) -> dict[str, Any]:
    return {
        "tag": "button",
        "element_id": element_id,
        "type": style,
        "text": {"tag": "plain_text", "content": label},
        "behaviors": [{"type": "callback", "value": value}],
    }


def _note_line(note: dict[str, Any], lang: Locale) -> str:
    """One note in a list, as markdown: title, id, the start of its summary (unescaped: the
    card or text it goes into escapes it, see bridge/render.py)."""
    title = clip(" ".join(str(note.get("title") or t("untitled", lang)).split()), 80)
    ident = str(note.get("id") or "")
    summary = " ".join(str(note.get("summary") or "").split())
    line = f"**{title}**" + (f" (`{ident}`)" if ident else "")
    if summary:
        line += f"\n   {clip(summary, 160)}"
    return line


def _note_or_none(memory: MemoryBackend, note_id: str) -> Any:
    try:
        return memory.get(note_id)
    except ClaudeMemoryError:
        return None


def _forget_card(
    lang: Locale, query: str, hits: list[dict[str, Any]], nonce: str
) -> dict[str, Any]:
    """The matches of a `/forget` by query: one delete button per note, delete all, cancel."""
    notes = "\n".join(f"{i}. {_note_line(h, lang)}" for i, h in enumerate(hits, start=1))
    buttons = [
        _button(
            t("forget_one_button", lang, n=i + 1),
            "default",
            {"cm": "forget", "i": i, "n": nonce},
            f"forget_{i}",
        )
        for i in range(len(hits))
    ]
    buttons.append(
        _button(
            t("forget_all_button", lang), "danger", {"cm": "forget_all", "n": nonce}, "forget_all"
        )
    )
    buttons.append(
        _button(t("cancel_button", lang), "default", {"cm": "cancel", "n": nonce}, "cancel")
    )
    body = escape_card_markdown(t("forget_body", lang, query=query, notes=notes))
    return {
        "schema": "2.0",
        "config": {"update_multi": True},
        "header": {
            "title": {"tag": "plain_text", "content": t("forget_title", lang)},
            "template": "red",
        },
        "body": {"elements": [{"tag": "markdown", "content": body}, *buttons]},
    }


def _conflict_card(lang: Locale, new: str, old: str, nonce: str) -> dict[str, Any]:
    """A new note that contradicts an older one: both shown, three choices."""
    body = t(
        "conflict_body",
        lang,
        new=escape_card_markdown(clip(new, 400)),
        old=escape_card_markdown(clip(old, 400)),
    )
    buttons = [
        _button(t(f"conflict_{c}", lang), style, {"cm": c, "n": nonce}, f"{c}_btn")
        for c, style in (("keep_new", "primary"), ("keep_old", "default"), ("keep_both", "default"))
    ]
    return {
        "schema": "2.0",
        "config": {"update_multi": True},
        "header": {
            "title": {"tag": "plain_text", "content": t("conflict_title", lang)},
            "template": "orange",
        },
        "body": {"elements": [{"tag": "markdown", "content": body}, *buttons]},
    }


EDIT_MAX_CHARS = 1000  # an input holds at most 1,000 characters ("输入框", max_length)


def _pending_text(entity: PendingEntity) -> str:
    """A capture's words, or what a model's change would do and why it waits for the person
    (memory.reach)."""
    if not entity.proposed:
        return entity.content
    return f"{entity.title}\n{entity.content}\n\n(waits for you: it {entity.why})"


def _pending_card(lang: Locale, content: str, nonce: str) -> dict[str, Any]:
    """ "记住这个吗？": a low-confidence capture, kept, discarded or corrected in one tap."""
    body = t("pending_body", lang, content=escape_card_markdown(clip(content, 500)))
    return {
        "schema": "2.0",
        "config": {"update_multi": True},
        "header": {
            "title": {"tag": "plain_text", "content": t("pending_title", lang)},
            "template": "blue",
        },
        "body": {
            "elements": [
                {"tag": "markdown", "content": body},
                _button(t("keep_button", lang), "primary", {"cm": "keep", "n": nonce}, "keep_btn"),
                _button(
                    t("discard_button", lang),
                    "default",
                    {"cm": "discard", "n": nonce},
                    "discard_btn",
                ),
                # Edit: the wording in an input, kept as corrected with one tap ("表单容器":
                # the input and its submit button need a `name`; the tap carries `form_value`).
                {
                    "tag": "form",
                    "name": "edit_form",
                    "elements": [
                        {
                            "tag": "input",
                            "name": "text",
                            "element_id": "edit_input",
                            "max_length": EDIT_MAX_CHARS,
                            "default_value": clip(content, EDIT_MAX_CHARS),
                            "placeholder": {
                                "tag": "plain_text",
                                "content": t("edit_placeholder", lang),
                            },
                        },
                        {
                            **_button(
                                t("edit_button", lang),
                                "default",
                                {"cm": "edit", "n": nonce},
                                "edit_btn",
                            ),
                            "name": "edit_submit",
                            "form_action_type": "submit",
                        },
                    ],
                },
            ]
        },
    }


def _decided_card(title: str, template: str, markdown: str) -> dict[str, Any]:
    """An approval card once decided: recoloured, its buttons gone."""
    return {
        "schema": "2.0",
        "config": {"update_multi": True},
        "header": {"title": {"tag": "plain_text", "content": title}, "template": template},
        "body": {"elements": [{"tag": "markdown", "content": markdown}]},
    }


def _instance_id(home: Path) -> str:
    """This instance's id, kept in the home: a restart is the same instance (it recovers its own
    unfinished turns at once); another home on the same database is another instance."""
    path = home / "run" / "feishu-instance"
    try:
        known = path.read_text(encoding="utf-8").strip()
    except OSError:
        known = ""
    if known:
        return known
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    made = f"{socket.gethostname()}-{secrets.token_hex(6)}"
    path.write_text(made, encoding="utf-8")
    return made


def _guess_extension(data: bytes) -> str:
    if data.startswith(b"\x89PNG"):
        return ".png"
    if data.startswith(b"\xff\xd8"):
        return ".jpg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return ".gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    if data.startswith(b"%PDF"):
        return ".pdf"
    return ".bin"


def _unexpected(exc: BaseException) -> str:
    """An unexpected error for a card: its cleaned text (no URL credential, no server path:
    `storage.public_text`, as at every door) and what to do; the traceback is in the log."""
    return f"{exception_text(exc)}; {next_step(exc)}"


def memory_search(store: Any) -> SearchFn:
    """Adapt the memory store's (blocking) search to the bridge's `/memory` command."""

    async def search(query: str, limit: int) -> list[dict[str, Any]]:
        def run() -> list[dict[str, Any]]:
            return [hit.to_dict() for hit in store.search(query, limit)]

        return await asyncio.to_thread(run)

    return search
