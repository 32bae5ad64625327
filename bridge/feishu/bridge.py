"""The Feishu/Lark bridge: websocket long connection in, the run_agent pipeline, replies out.

`FeishuBridge` is the facade the app owns (an async context manager of its lifespan): it builds
the pieces, each with one job (docs/architecture.md, "bridge/, by job"), connects them at
`start()` and stops them in order at `aclose()`:

* `intake.Intake`: the websocket's events parsed, filtered, claimed once, routed; crash recovery;
* `lanes.Lanes`: one queue and worker per conversation, one control queue;
* `turns.Turns`: a turn through `SessionManager.run_agent` and its live reply
  (bridge/reply.py), settled after;
* `controls.Controls`: the buttons on cards, the taps on them, approvals;
* `chat_commands.ChatCommands` and `memory_chat.MemoryCommands`: the chat's commands;
* `delivery.Delivery`: short answers, the outbox, reactions;
* `people.People` (owner, pairing, names, admins) and `prompt.PromptBuilder` (quotes,
  forwards, attachments), over `context.BridgeContext` (what they all share).

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
import logging
import logging.handlers
import secrets
import socket
import time
from pathlib import Path
from typing import Any

from agent.sessions import SessionManager
from bridge._lark import WsRunner, import_lark
from bridge.feishu.chat_commands import ChatCommands
from bridge.feishu.context import BridgeContext
from bridge.feishu.controls import Controls
from bridge.feishu.delivery import Delivery
from bridge.feishu.intake import Intake
from bridge.feishu.lanes import Lanes, Work
from bridge.feishu.memory_chat import MemoryCommands, SearchFn
from bridge.feishu.people import People
from bridge.feishu.prompt import PromptBuilder
from bridge.feishu.turns import Turns
from bridge.sender import FeishuAPIError, RetryPolicy, Sender
from bridge.state import BridgeState, BridgeStateBackend
from errors import ConfigurationError
from memory.backend import MemoryBackend
from memory.history.conflicts import ConflictStore
from memory.loop.entities import PendingStore
from memory.notes.capture import RedactingFilter
from settings import Settings

logger = logging.getLogger("bridge.feishu")

LOG_FILE_NAME = "feishu_ws_bridge.log"


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
        ctx = self._ctx = BridgeContext(settings, sessions, state)
        self._people = People(ctx)
        self._delivery = Delivery(ctx)
        self._controls = Controls(ctx, self._people, pending)
        self._memory = MemoryCommands(
            ctx,
            self._controls,
            self._delivery,
            self._people,
            search=search,
            memory=memory,
            pending=pending,
            conflicts=conflicts,
        )
        self._controls.memory_taps = self._memory
        self._lanes = Lanes(ctx, self._handle)
        turns = Turns(
            ctx,
            self._controls,
            self._delivery,
            PromptBuilder(ctx, self._people),
            self._memory,
        )
        commands = ChatCommands(ctx, self._people, self._lanes, self._delivery, self._memory)
        self._intake = Intake(
            ctx, self._people, self._lanes, self._delivery, turns, commands, self._controls
        )
        self._log_handler: logging.Handler | None = None

    async def _handle(self, work: Work) -> None:
        await self._intake.handle(work)

    def known_name(self, open_id: str) -> str | None:
        """A member's display name if the bridge has read it (None: not yet)."""
        return self._people.name_if_known(open_id)

    @property
    def pairing_code(self) -> str | None:
        """The code to send with `/pair` while nobody is paired (logged at start)."""
        return self._people.pairing_code

    # --- lifecycle -------------------------------------------------------------------------------
    async def __aenter__(self) -> FeishuBridge:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Connect: API client, bot identity, websocket thread. Returns without waiting for it."""
        self._attach_log_file()
        ctx = self._ctx
        ctx.loop = asyncio.get_running_loop()
        ctx.started_at = time.time()
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
        ctx.sender = Sender(
            client, policy=RetryPolicy(window=settings.feishu_delivery_window_seconds)
        )
        try:
            self._intake.bot_open_id = await ctx.sender.bot_open_id()
        except FeishuAPIError as exc:
            logger.warning(
                "could not read the bot's identity (%s); @-mentions are recognised by type only",
                exc.message,
            )
        await self._people.load_owner()
        ctx.instance = await asyncio.to_thread(_instance_id, settings.home_dir)
        await ctx.db(self.state.alive, ctx.instance)
        self._lanes.start()
        self._intake.start()
        await self._intake.recover()
        self._delivery.start()
        self._people.announce_pairing()
        ctx.runner = WsRunner(
            app_id=app_id,
            app_secret=secret,
            domain=domain,
            on_payload=self._intake.on_payload,
            on_card_action=self._controls.on_card_action,
            log_level=logging.getLogger("bridge").getEffectiveLevel(),
        )
        ctx.runner.start()
        logger.info("Feishu bridge started (domain %s, bot %s)", domain, self._intake.bot_open_id)

    async def wait_connected(self, within: float = 10.0) -> bool:
        """True once the websocket is up; False after `within` s or if the client died."""
        deadline = time.monotonic() + within
        while not self.connected:
            runner = self._ctx.runner
            if time.monotonic() > deadline or (runner and not runner.alive):
                return False
            await asyncio.sleep(0.02)
        return True

    @property
    def connected(self) -> bool:
        runner = self._ctx.runner
        return runner is not None and runner.connected

    def status(self) -> dict[str, Any]:
        runner = self._ctx.runner
        return {
            "enabled": True,
            "connected": self.connected,
            "reconnects": runner.reconnects if runner else 0,
            "last_event_at": self._intake.last_event_at,
            "bot_open_id": self._intake.bot_open_id,
            "paired": self._people.paired(),
            "active_chats": len(self._lanes),
            "error": str(runner.error) if runner and runner.error else None,
        }

    async def aclose(self, time_limit: float | None = None) -> None:
        """Stop within `time_limit` seconds (default: the shutdown timeout + 5).

        No new events; queued messages get a "send it again" line; running turns may finish
        until `lanes.INTERRUPT_RESERVE` seconds before the limit, then are interrupted so their
        cards still get a final state; whatever is left after the limit is cancelled.
        """
        ctx = self._ctx
        if ctx.closing:
            return
        ctx.closing = True
        limit = time_limit if time_limit is not None else self.settings.shutdown_timeout_seconds + 5
        deadline = time.monotonic() + limit
        if ctx.runner is not None:
            stopped = await asyncio.to_thread(ctx.runner.stop, min(5.0, limit))
            if not stopped:
                logger.warning("the Feishu websocket thread did not stop in time")
        await self._intake.aclose(deadline)  # the intake ends before the lanes close
        await self._lanes.close(deadline)
        await self._delivery.aclose()  # what it holds stays in the state for the next start
        self._lanes.clear()
        await ctx.db(self.state.close)
        logger.info("Feishu bridge stopped")
        self._detach_log_file()

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
