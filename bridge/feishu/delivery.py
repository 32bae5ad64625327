"""Delivery: short answers to a message, the outbox that retries what the platform would not
take (also after a restart, under the same idempotency uuid), the reactions on the user's
message, and this instance's "alive" mark in a shared state (docs/feishu.md, "Delivery and
recovery")."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from typing import Any

from bridge.events import IncomingMessage
from bridge.feishu.context import BridgeContext
from bridge.render import MsgType, answer_cards, plain_text, text_content
from bridge.sender import QUICK_WINDOW, FeishuAPIError, late_sequence, send_uuid
from bridge.state import OutboxItem, OutboxOp

logger = logging.getLogger("bridge.feishu")

# The outbox keeps a send for at most this long: inside Feishu's 1 h uuid window, so a send that
# did arrive unseen is never doubled.
OUTBOX_KEEP_SECONDS = 3300.0
OUTBOX_POLL_SECONDS = 5.0
OUTBOX_MAX_DELAY_SECONDS = 300.0
ALIVE_EVERY_SECONDS = 30.0  # how often this instance says it is alive in the bridge's state


class Delivery:
    """Sends and the outbox; `start()` runs its worker, `aclose()` stops it (what it holds stays
    in the state for the next start)."""

    def __init__(self, ctx: BridgeContext) -> None:
        self._ctx = ctx
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._alive_at = 0.0
        self._reactions: dict[str, asyncio.Task[str | None]] = {}  # message_id -> "Typing"

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = self._ctx.task(self._worker(), name="feishu-outbox")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=5)

    # --- short answers ---------------------------------------------------------------------------
    async def notify(self, msg: IncomingMessage, text: str) -> None:
        """A one-line text reply to the user's message."""
        await self.send(msg, "text", text_content(text))

    async def notify_markdown(self, msg: IncomingMessage, markdown: str) -> None:
        """A short markdown answer as a card within the documented limits (`answer_cards`); as
        plain text if it needs more than one card or the card is refused."""
        cards = answer_cards(markdown)
        if len(cards) > 1 or not await self.send(msg, "interactive", cards[0].card):
            await self.send(msg, "text", text_content(plain_text(markdown)), part="text")

    async def send(
        self,
        msg: IncomingMessage,
        msg_type: MsgType,
        content: dict[str, Any],
        *,
        part: str = "notice",
    ) -> bool:
        key = send_uuid(msg.message_id, part)
        try:
            await self._ctx.api.reply(msg.message_id, msg_type, content, uuid=key)
        except FeishuAPIError as exc:
            if exc.transient:  # the platform is down: the outbox delivers it later
                logger.warning("answer to %s goes to the outbox: %s", msg.message_id, exc.message)
                await self.outbox_put("reply", msg.message_id, content, key=key, msg_type=msg_type)
                return True
            logger.error("could not answer %s: %s", msg.message_id, exc.message)
            return False
        return True

    # --- the outbox ------------------------------------------------------------------------------
    async def defer_answer(
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
                await self.outbox_put(
                    "patch", card_id, card, key=send_uuid(msg.message_id, "close")
                )
            else:
                key = send_uuid(msg.message_id, "answer", index)
                await self.outbox_put("reply", msg.message_id, card, key=key)

    async def outbox_put(
        self,
        op: OutboxOp,
        target: str,
        content: dict[str, Any],
        *,
        key: str,
        msg_type: MsgType = "interactive",
    ) -> None:
        item = OutboxItem(
            key,
            op,
            target,
            msg_type,
            json.dumps(content, ensure_ascii=False),
            created_at=time.time(),
        )
        await self._ctx.db(self._ctx.state.outbox_put, item)
        if self._wake is not None:
            self._wake.set()

    async def _worker(self) -> None:
        assert self._wake is not None
        ctx = self._ctx
        while True:
            try:
                if time.monotonic() - self._alive_at > ALIVE_EVERY_SECONDS:
                    await ctx.db(ctx.state.alive, ctx.instance)
                    self._alive_at = time.monotonic()
                await self._round()
            except Exception:  # a state or network surprise; the next round tries again
                logger.exception("outbox round failed")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(OUTBOX_POLL_SECONDS):
                    await self._wake.wait()
            self._wake.clear()

    async def _round(self) -> None:
        """Try every due send once; stop at the first transient failure (the platform is down)."""
        ctx = self._ctx
        sender = ctx.api
        now = time.time()
        for item in await ctx.db(functools.partial(ctx.state.outbox_due, now=now)):
            if now - item.created_at > OUTBOX_KEEP_SECONDS:
                logger.error(
                    "gave up delivering %s %s: undelivered for %d s",
                    item.op,
                    item.target,
                    now - item.created_at,
                )
                await ctx.db(ctx.state.outbox_done, item.key)
                continue
            content = json.loads(item.content)
            try:
                if item.op == "patch":
                    await sender.patch(item.target, content, window=QUICK_WINDOW)
                elif item.op == "card":  # a streamed card's final state, through CardKit
                    sequence = late_sequence()
                    await sender.card_update(item.target, content, sequence, window=QUICK_WINDOW)
                    await sender.card_settings(
                        item.target, {"streaming_mode": False}, sequence + 1, window=QUICK_WINDOW
                    )
                else:
                    await sender.reply(
                        item.target,
                        item.msg_type,  # type: ignore[arg-type]
                        content,
                        uuid=item.key,
                        window=QUICK_WINDOW,
                    )
            except FeishuAPIError as exc:
                if not exc.transient:
                    logger.error("outbox %s to %s dropped: %s", item.op, item.target, exc.message)
                    await ctx.db(ctx.state.outbox_done, item.key)
                    continue
                base = max(ctx.settings.feishu_delivery_window_seconds, OUTBOX_POLL_SECONDS)
                delay = min(OUTBOX_MAX_DELAY_SECONDS, base * 2**item.attempts)
                logger.warning(
                    "outbox %s to %s not delivered (%s); next try in %.0f s",
                    item.op,
                    item.target,
                    exc.message,
                    delay,
                )
                await ctx.db(ctx.state.outbox_retry, item.key, time.time() + delay)
                return
            logger.info("outbox %s to %s delivered", item.op, item.target)
            await ctx.db(ctx.state.outbox_done, item.key)

    # --- reactions -------------------------------------------------------------------------------
    def typing(self, message_id: str) -> None:
        """ "Typing" on a queued message at once (the answer replaces it with "DONE")."""
        self._reactions[message_id] = self._ctx.task(
            self._react(message_id, "Typing"), name=f"feishu-react:{message_id}"
        )

    async def _react(self, message_id: str, emoji_type: str) -> str | None:
        """A reaction on the user's message (a nicety: a failure is logged, never raised)."""
        try:
            return await self._ctx.api.react(message_id, emoji_type)
        except FeishuAPIError as exc:
            logger.warning(
                "no %s reaction on %s (%s); the app needs im:message or "
                "im:message.reactions:write_only",
                emoji_type,
                message_id,
                exc.message,
            )
            return None

    async def react_done(self, msg: IncomingMessage, *, delivered: bool) -> None:
        """The answer is out: the "Typing" reaction gives way to "DONE"."""
        task = self._reactions.pop(msg.message_id, None)
        if task is None:
            return
        reaction_id = await task
        if reaction_id:
            try:
                await self._ctx.api.unreact(msg.message_id, reaction_id)
            except FeishuAPIError as exc:
                logger.warning("reaction on %s not removed: %s", msg.message_id, exc.message)
        if delivered:
            await self._react(msg.message_id, "DONE")
