"""The bridge's queues: one lane (queue and worker) per conversation scope, so turns of one
conversation run in order and conversations run side by side, plus one control queue for what
must not wait behind a running turn (`/stop`, `/status`, notices). What a piece of work does is
the handler's business (`bridge/feishu/intake.py`); this module only queues and runs it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from agent.replies import SHUTDOWN_STOP
from bridge.commands import Command
from bridge.events import IncomingMessage
from bridge.feishu.context import BridgeContext

logger = logging.getLogger("bridge.feishu")

CHAT_IDLE_SECONDS = 300.0
INTERRUPT_RESERVE = 5.0  # seconds kept at shutdown to interrupt turns and write final cards


@dataclass(frozen=True, slots=True)
class Turn:
    msg: IncomingMessage


@dataclass(frozen=True, slots=True)
class Run:
    """A command answered by the bridge (in the chat's order or at once)."""

    msg: IncomingMessage
    command: Command


@dataclass(frozen=True, slots=True)
class Notice:
    """A one-line answer without a model turn (refusal, stale message, unsupported type)."""

    msg: IncomingMessage
    text: str
    part: str = "notice"  # the uuid's part: two notices to one message must not collide


@dataclass(frozen=True, slots=True)
class Withdraw:
    """A running turn's message was recalled: interrupt it."""

    msg: IncomingMessage


@dataclass(frozen=True, slots=True)
class Close:
    """Queue sentinel: the bridge is stopping; finish and exit."""


Work = Turn | Run | Notice | Withdraw
Handler = Callable[[Work], Awaitable[None]]


@dataclass(slots=True)
class Lane:
    """One conversation's queue and its worker."""

    queue: asyncio.Queue[Work | Close] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    busy: bool = False
    current: IncomingMessage | None = None  # the message whose turn or command is running
    waiting: int = 0  # turns queued behind the running one (the cap: FEISHU_QUEUE_MAX)


class Lanes:
    """The lanes by scope key and the control queue; `handle` runs each piece of work."""

    def __init__(self, ctx: BridgeContext, handle: Handler) -> None:
        self._ctx = ctx
        self._handle = handle
        self._lanes: dict[str, Lane] = {}
        self._control: asyncio.Queue[Work | Close] = asyncio.Queue()
        self._control_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._control_task = self._ctx.task(self._control_worker(), name="feishu-control")

    def __len__(self) -> int:
        return len(self._lanes)

    def items(self) -> Iterator[tuple[str, Lane]]:
        """(scope key, lane), a snapshot: lanes may come and go meanwhile."""
        return iter(list(self._lanes.items()))

    def get(self, scope_key: str) -> Lane | None:
        return self._lanes.get(scope_key)

    def lane(self, scope_key: str) -> Lane:
        """One queue and worker per conversation scope: a member or a topic in a group, or a
        direct chat. Turns of one conversation run in order; conversations run side by side."""
        lane = self._lanes.get(scope_key)
        if lane is None:
            lane = Lane()
            lane.task = self._ctx.task(
                self._chat_worker(scope_key, lane), name=f"feishu-chat:{scope_key}"
            )
            self._lanes[scope_key] = lane
        return lane

    def control(self, work: Work) -> None:
        """Run `work` at once, not behind a conversation's turn."""
        self._control.put_nowait(work)

    def notice(self, msg: IncomingMessage, text: str, part: str = "notice") -> None:
        self.control(Notice(msg, text, part))

    def enqueue_turn(self, lane: Lane, msg: IncomingMessage) -> None:
        lane.waiting += 1
        lane.queue.put_nowait(Turn(msg))

    def running(self, message_id: str) -> IncomingMessage | None:
        """The message whose work runs now in some lane, if it is `message_id`."""
        for lane in self._lanes.values():
            current = lane.current
            if lane.busy and current is not None and current.message_id == message_id:
                return current
        return None

    # --- workers ---------------------------------------------------------------------------------
    async def _chat_worker(self, chat_id: str, lane: Lane) -> None:
        while True:
            try:
                work = await asyncio.wait_for(lane.queue.get(), timeout=CHAT_IDLE_SECONDS)
            except TimeoutError:
                if lane.queue.empty():  # nothing can arrive between this check and the return
                    if self._lanes.get(chat_id) is lane:
                        del self._lanes[chat_id]
                    return
                continue
            if isinstance(work, Close):
                return
            if isinstance(work, Turn):
                lane.waiting = max(lane.waiting - 1, 0)
            lane.busy = True
            lane.current = work.msg
            try:
                await self._handle(work)
            except Exception:
                logger.exception("handling %s failed", work.msg.message_id)
            finally:
                lane.busy = False
                lane.current = None

    async def _control_worker(self) -> None:
        while True:
            work = await self._control.get()
            if isinstance(work, Close):
                return
            try:
                await self._handle(work)
            except Exception:
                logger.exception("handling %s failed", work.msg.message_id)

    # --- shutdown --------------------------------------------------------------------------------
    async def close(self, deadline: float) -> None:
        """Let running turns finish until INTERRUPT_RESERVE seconds before `deadline`
        (monotonic), then interrupt them so their cards still get a final state; cancel
        whatever is left at the deadline."""
        tasks = [lane.task for lane in self._lanes.values() if lane.task is not None]
        for lane in self._lanes.values():
            lane.queue.put_nowait(Close())
        if self._control_task is not None:
            self._control.put_nowait(Close())
            tasks.append(self._control_task)
        pending: set[asyncio.Task[None]] = set(tasks)
        if pending:
            finish_by = deadline - INTERRUPT_RESERVE - time.monotonic()
            _, pending = await asyncio.wait(pending, timeout=max(finish_by, 0.1))
        if pending:
            for scope_key, lane in list(self._lanes.items()):
                if lane.busy:
                    await self._ctx.sessions.interrupt(
                        await self._ctx.conversation_id(scope_key), why=SHUTDOWN_STOP
                    )
            _, pending = await asyncio.wait(pending, timeout=max(deadline - time.monotonic(), 0.1))
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5)

    def clear(self) -> None:
        self._lanes.clear()
