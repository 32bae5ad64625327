"""Event intake: from the websocket to the lanes, and what each piece of work does.

1. The lark websocket client (its own thread and loop, see `_lark.py`) calls `on_payload`
   synchronously; the ack goes out only when it returns, and Feishu re-pushes after 3 s. So it
   only parses, filters (human senders; in groups only @-mentions of the bot), claims the event
   in the persistent dedup table and hands the message to the app loop, then returns.
2. On the app loop `_route` checks access, staleness and commands, and queues the work
   (bridge/feishu/lanes.py); `handle` runs it: a turn (bridge/feishu/turns.py), a command
   (bridge/feishu/chat_commands.py), a notice, a recalled turn's interrupt.
3. At start, `recover` answers or re-runs what a crash left (docs/feishu.md, "Delivery and
   recovery").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time

from bridge.access import Granted, Refused, Unpaired
from bridge.commands import Pair, parse_command
from bridge.events import (
    EventParseError,
    IncomingMessage,
    OtherEvent,
    Recalled,
    message_from_json,
    message_to_json,
    parse_event,
)
from bridge.feishu.chat_commands import ChatCommands
from bridge.feishu.context import BridgeContext
from bridge.feishu.controls import Controls
from bridge.feishu.delivery import OUTBOX_KEEP_SECONDS, Delivery
from bridge.feishu.lanes import Close, Lanes, Notice, Run, Turn, Withdraw, Work
from bridge.feishu.people import People
from bridge.feishu.prompt import quoted
from bridge.feishu.turns import Turns
from bridge.render import card_content, escape_card_markdown, text_content
from bridge.sender import send_uuid
from bridge.stream import shown_answer
from bridge.strings import t

logger = logging.getLogger("bridge.feishu")

SUPPORTED_TYPES = frozenset({"text", "post", "image", "file", "merge_forward"})
INSTANCE_DEAD_SECONDS = 120.0  # an instance silent this long left its turns to be recovered


class Intake:
    """Receives, claims, routes and handles; the lanes call `handle`."""

    def __init__(
        self,
        ctx: BridgeContext,
        people: People,
        lanes: Lanes,
        delivery: Delivery,
        turns: Turns,
        commands: ChatCommands,
        controls: Controls,
    ) -> None:
        self._ctx = ctx
        self._controls = controls
        self._people = people
        self._lanes = lanes
        self._delivery = delivery
        self._turns = turns
        self._commands = commands
        self.bot_open_id: str | None = None
        self.last_event_at: float | None = None
        # Messages from the websocket thread, routed one by one in arrival order (routing reads
        # and writes the bridge's state, which happens in a thread, never on the loop).
        self._queue: asyncio.Queue[IncomingMessage | Close] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = self._ctx.task(self._worker(), name="feishu-intake")

    async def aclose(self, deadline: float) -> None:
        """Route what arrived, then stop (before the lanes close)."""
        if self._task is None:
            return
        self._queue.put_nowait(Close())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(deadline - time.monotonic(), 0.1)):
                await asyncio.shield(self._task)

    # --- the websocket thread --------------------------------------------------------------------
    def on_payload(self, payload: bytes) -> None:
        """Runs on the SDK's loop: parse, filter, dedup, hand over; never waits for a turn."""
        ctx = self._ctx
        self.last_event_at = time.time()
        try:
            event = parse_event(payload, bot_open_id=self.bot_open_id)
        except EventParseError as exc:
            # Acked on purpose: a malformed payload re-pushed would fail the same way.
            logger.warning("unreadable Feishu event skipped: %s", exc.message)
            return
        if isinstance(event, OtherEvent):
            logger.debug("ignoring Feishu event %s (%s)", event.event_type, event.event_id)
            return
        if isinstance(event, Recalled):
            if ctx.loop is not None and not ctx.closing:
                ctx.loop.call_soon_threadsafe(self._recall, event)
            return
        msg = event
        if not msg.from_user:
            return  # other bots and system messages: never answer (no reply loops)
        if msg.is_group and not msg.mentions_bot:
            return
        if not ctx.state.claim(msg.event_id, msg.message_id):
            logger.info("duplicate delivery of %s (event %s) ignored", msg.message_id, msg.event_id)
            return
        loop = ctx.loop
        try:
            if loop is None or ctx.closing:
                raise RuntimeError("the bridge is shutting down")
            loop.call_soon_threadsafe(self._queue.put_nowait, msg)
        except RuntimeError:
            # Not handed over: forget it and fail the ack, so Feishu delivers it again later.
            ctx.state.release(msg.event_id, msg.message_id)
            raise

    def _recall(self, event: Recalled) -> None:
        """A message was recalled: remember it (queued work skips it) and stop its turn."""
        self._ctx.mark_recalled(event.message_id)
        current = self._lanes.running(event.message_id)
        if current is not None:
            logger.info("%s recalled while running; stopping its turn", event.message_id)
            self._lanes.control(Withdraw(current))

    # --- routing (app loop) ----------------------------------------------------------------------
    async def _worker(self) -> None:
        while True:
            msg = await self._queue.get()
            if isinstance(msg, Close):
                return
            await self._route(msg)

    async def _route(self, msg: IncomingMessage) -> None:
        try:
            await self._route_message(msg)
        except Exception:
            logger.exception("routing %s failed", msg.message_id)
            self._lanes.notice(msg, t("route_failed", msg.locale))

    async def _route_message(self, msg: IncomingMessage) -> None:
        lanes = self._lanes
        if self._ctx.closing:
            logger.warning("message %s arrived while stopping; not answered", msg.message_id)
            return
        command = parse_command(msg.text) if msg.message_type in ("text", "post") else None
        if isinstance(command, Pair):
            lanes.control(Run(msg, command))
            return
        match await self._people.access(msg):
            case Refused(reason=reason):
                logger.info("refused %s in %s: %s", msg.sender_open_id, msg.chat_id, reason)
                lanes.notice(msg, t("refusal", msg.locale))
                return
            case Unpaired():
                lanes.notice(msg, t("unpaired", msg.locale))
                return
            case Granted():
                pass
        if self._is_stale(msg):
            lanes.notice(msg, t("stale", msg.locale))
            return
        if command is None:
            # Every message gets exactly one answer: a voice message a line saying it cannot
            # be heard yet, a sticker a short "got it" (no turn: there is nothing to answer).
            if msg.message_type == "audio":
                lanes.notice(msg, t("audio", msg.locale))
            elif msg.message_type == "sticker":
                lanes.notice(msg, t("sticker", msg.locale))
            elif msg.message_type not in SUPPORTED_TYPES:
                kind = msg.message_type or "?"
                lanes.notice(msg, t("unsupported", msg.locale, kind=kind))
            elif (
                not msg.text
                and not msg.attachments
                and msg.message_type != "merge_forward"
                and quoted(msg) is None
            ):
                lanes.notice(msg, t("empty", msg.locale))
            else:
                await self._accept_turn(msg)
        elif command.ordered:
            lanes.lane(self._ctx.scope(msg).key).queue.put_nowait(Run(msg, command))
        else:
            lanes.control(Run(msg, command))

    def _is_stale(self, msg: IncomingMessage) -> bool:
        if msg.create_time_ms <= 0:
            return False
        grace = self._ctx.settings.feishu_stale_grace_seconds
        return msg.create_time_ms / 1000 < self._ctx.started_at - grace

    async def _accept_turn(self, msg: IncomingMessage) -> None:
        """Queue a turn, at most FEISHU_QUEUE_MAX behind the running one; the sender sees a
        reaction at once and, when something runs before it, its place in the line."""
        ctx = self._ctx
        lane = self._lanes.lane(ctx.scope(msg).key)
        limit = ctx.settings.feishu_queue_max
        if lane.waiting >= limit:
            logger.info("queue of %s is full; %s refused", msg.chat_id, msg.message_id)
            self._lanes.notice(msg, t("queue_full", msg.locale, limit=limit))
            return
        await ctx.db(
            functools.partial(ctx.state.turn_accepted, owner=ctx.instance),
            msg.message_id,
            msg.chat_id,
            message_to_json(msg),
        )
        ahead = lane.waiting + (1 if lane.busy else 0)
        self._lanes.enqueue_turn(lane, msg)
        self._delivery.typing(msg.message_id)
        if ahead:
            text = t("queued", msg.locale, ahead=ahead, position=lane.waiting)
            self._lanes.notice(msg, text, part="queued")
        elif ctx.sessions.turn_slots.locked():
            # nothing ahead in this conversation, but every turn slot of the app is taken (the
            # 5th member of a busy group waited with only a Typing reaction, issue #33): ahead
            # of it, the turns that must end first, one running and those told so before it
            limit = ctx.settings.max_concurrent_turns
            ahead = len(ctx.slot_waiting) + 1
            ctx.slot_waiting.add(msg.message_id)
            text = t("slots_full", msg.locale, ahead=ahead, limit=limit)
            self._lanes.notice(msg, text, part="queued")

    # --- what each piece of work does -------------------------------------------------------------
    async def handle(self, work: Work) -> None:
        ctx = self._ctx
        match work:
            case Turn(msg=msg) if ctx.recalled(msg.message_id):
                logger.info("%s was recalled while queued; not run", msg.message_id)
                await ctx.db(ctx.state.turn_finished, msg.message_id)
            case Turn(msg=msg):
                if ctx.closing:
                    # Queued behind a turn at shutdown: a line instead of silence.
                    await self._delivery.notify(msg, t("restart_queued", msg.locale))
                    await ctx.db(ctx.state.turn_finished, msg.message_id)
                else:
                    await self._turns.run(msg)
            case Withdraw(msg=msg):
                await ctx.sessions.interrupt(await ctx.conversation_id(ctx.scope(msg).key))
            case Notice(msg=msg, text=text, part=part):
                await self._delivery.send(msg, "text", text_content(text), part=part)
            case Run(msg=msg, command=command):
                await self._commands.run(msg, command)

    # --- crash recovery --------------------------------------------------------------------------
    async def recover(self) -> None:
        """At start: answer or re-run what a crash left, and close its "working" cards."""
        ctx, delivery = self._ctx, self._delivery
        now = time.time()
        # Only this instance's turns, and those of instances no longer alive: on a shared
        # database another instance may be answering the rest right now.
        unfinished = functools.partial(
            ctx.state.unfinished_turns,
            owner=ctx.instance,
            dead_before=now - INSTANCE_DEAD_SECONDS,
        )
        ended: set[str] = set()  # the users' messages whose turns this start ends
        for turn in await ctx.db(unfinished):
            ended.add(turn.message_id)
            try:
                msg = message_from_json(turn.message)
            except (ValueError, TypeError, KeyError) as exc:
                logger.warning("unreadable unfinished turn %s dropped: %s", turn.message_id, exc)
                await ctx.db(ctx.state.turn_finished, turn.message_id)
                continue
            if turn.card_id is not None:
                # The card keeps what it showed under a red title; the one notice is the reply
                # below (issue #33: the card said the notice again, over the partial answer).
                shown = shown_answer(turn.partial, msg.locale)
                card = card_content(
                    shown or escape_card_markdown(t("restart_nothing_yet", msg.locale)),
                    title=t("restart_title", msg.locale),
                    template="red",
                )
                key = send_uuid(msg.message_id, "close")
                if turn.entity is not None:  # a streamed card: closed through CardKit
                    await delivery.outbox_put("card", turn.entity, card, key=key)
                else:
                    await delivery.outbox_put("patch", turn.card_id, card, key=key)
            if turn.stage == "accepted" and now - turn.accepted_at < OUTBOX_KEEP_SECONDS:
                logger.warning(
                    "running %s again: the app stopped before it reached the model", msg.message_id
                )
                self._lanes.enqueue_turn(self._lanes.lane(ctx.scope(msg).key), msg)
                continue
            logger.warning("%s was interrupted by a restart; telling the sender", msg.message_id)
            await delivery.outbox_put(
                "reply",
                msg.message_id,
                text_content(t("restart_notice", msg.locale)),
                key=send_uuid(msg.message_id, "restart"),
                msg_type="text",
            )
            await ctx.db(ctx.state.turn_finished, msg.message_id)
        for card_message, card in await self._controls.ended_by_restart(ended):
            await delivery.outbox_put(
                "patch", card_message, card, key=send_uuid(card_message, "restart")
            )
