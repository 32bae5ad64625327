"""One turn's answer in Feishu: a progress card updated in place, then the final answer.

* The card is a reply to the user's message. It appears after `open_delay` seconds (or at the
  first tool step), so quick answers arrive as one message without a "working" flash.
* Updates are throttled: at least `interval` seconds apart (Feishu allows 5 PATCHes per second
  per message), plus a slow heartbeat so the elapsed time moves.
* `finish()` always writes the final state: the answer (or the error, plainly) goes into the card;
  an answer too big for one card (bytes, tables, components: `render.answer_cards`) continues in
  further replies. The last card keeps the turn's tool steps (a collapsible panel, refused and
  failed steps marked) and a footer (time taken, this turn's cost). A stopped turn reads
  "Stopped" under a neutral header, a failed one "Error" under a red one.
* A card the platform refuses never becomes a raw wall: the rest of the answer is packed again
  within stricter limits, then sent as posts (rich text), and as plain text only as the last
  resort. If the card cannot be patched the answer is sent as a new reply. The user is never left
  with a card stuck on "working".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agent.events import Retrying, TextDelta, ToolStep, TurnEvent
from bridge.render import (
    CARD_LIMITS,
    STEP_ICONS,
    STRICT_CARD_LIMITS,
    answer_cards,
    card_content,
    chunk_budget,
    escape_card_markdown,
    plain_text,
    post_contents,
    split_markdown,
    stop_button,
    text_content,
)
from bridge.reply import Step, final_answer, header_for, turn_footer, unfinished_text
from bridge.sender import QUICK_WINDOW, FeishuAPIError, Sender, send_uuid
from bridge.strings import Locale, t

if TYPE_CHECKING:
    from agent.events import TurnResult
    from agent.replies import TurnStatus

logger = logging.getLogger("bridge.feishu.progress")

HEARTBEAT_SECONDS = 10.0
MAX_STEPS_SHOWN = 8
_ICONS = STEP_ICONS
# Codes by which the platform refuses a card's content (documented in bridge/render.py): the
# answer is packed again within stricter limits, then sent as a post, then as text.
_REFUSED_CONTENT = frozenset({230099, 230025, 230001, 11310, 200570, 200621})


class TurnReply:
    """The reply side of one turn (a `bridge.reply.LiveReply`); `on_event` is the run_agent
    event sink."""

    def __init__(
        self,
        sender: Sender,
        *,
        reply_to: str,
        key: str,
        interval: float = 0.5,
        open_delay: float = 1.0,
        title: str | None = None,
        on_card: Callable[[str], Awaitable[object]] | None = None,
        locale: Locale = "zh",
        stop_value: dict[str, Any] | None = None,
    ) -> None:
        """`on_card(message_id)`: told when the progress card is shown (the bridge records it,
        so a restart after a crash can close it). `stop_value`: the card shows a Stop button
        with it until the answer replaces the card."""
        self._stop_value = stop_value
        self._sender = sender
        self._on_card = on_card
        self._reply_to = reply_to
        self._key = key
        self._interval = max(interval, 0.2)  # never above 5 updates per second
        self._open_delay = open_delay
        self._locale = locale
        self._title = title or t("progress_title", locale)
        self._steps: dict[str, Step] = {}
        self._writing = False
        self._retry: Retrying | None = None  # the model request being retried, if any
        self._started = time.monotonic()
        self._last_write = 0.0
        self._card_id: str | None = None
        self._card_closed = False  # the progress card shows a final state
        self._changed = asyncio.Event()
        self._closing = False
        self._painter: asyncio.Task[None] | None = None
        self.finished = False
        self.sent_ids: list[str] = []
        # Delivery, read by the bridge after finish(): did the answer's first part arrive, and
        # is there a progress card whose final PATCH failed (still "working")?
        self.delivered = False
        self.card_left_open: str | None = None
        self.final: list[dict[str, Any]] | None = None
        """The cards finish() was asked to write (the outbox sends them if delivery failed)."""
        self.pending_from: int | None = None
        """The first of `final` not delivered when the platform failed mid-answer (the outbox
        sends it and the rest); None when every card went out or none did."""

    # --- lifecycle -------------------------------------------------------------------------------
    async def __aenter__(self) -> TurnReply:
        self._painter = asyncio.get_running_loop().create_task(
            self._paint(), name=f"feishu-progress:{self._key}"
        )
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        await self._stop_painter()
        if not self.finished:
            # The turn raised or was cancelled before finish(): never leave "working" behind.
            text, status = unfinished_text(exc_type, self._locale)
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await self.finish(text, is_error=True, status=status)

    async def on_event(self, event: TurnEvent) -> None:
        match event:
            case ToolStep(tool_use_id=tid, name=name, summary=summary, status=status):
                # a step's result arrives without its input: keep what it was running
                known = self._steps.get(tid)
                if known is not None and not summary:
                    summary = known.summary
                self._steps[tid] = Step(name, summary, status)
                self._changed.set()
            case Retrying():
                self._retry = event
                self._changed.set()
            case TextDelta() if not self._writing:
                self._writing = True
                self._retry = None  # an answer is coming: the retry is over
                self._changed.set()
            case _:
                pass

    # --- the painter ---------------------------------------------------------------------------
    async def _paint(self) -> None:
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._open_delay):
                    while not self._steps and not self._closing:  # a tool step opens at once
                        await self._changed.wait()
                        self._changed.clear()
            while not self._closing:
                self._changed.clear()
                await self._write_progress()
                if self._closing:
                    break
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(HEARTBEAT_SECONDS):
                        await self._changed.wait()
                gap = self._interval - (time.monotonic() - self._last_write)
                if gap > 0 and not self._closing:
                    await asyncio.sleep(gap)
        except FeishuAPIError as exc:
            # Progress is a nicety; finish() still delivers the answer.
            logger.warning("progress card for %s not updated: %s", self._reply_to, exc.message)

    async def _write_progress(self) -> None:
        card = card_content(self._progress_markdown(), title=self._title, template="wathet")
        if self._stop_value is not None:
            card["body"]["elements"].append(stop_button(self._stop_value, self._locale))
        if self._card_id is None:
            self._card_id = await self._sender.reply(
                self._reply_to,
                "interactive",
                card,
                uuid=send_uuid(self._key, "progress"),
                window=QUICK_WINDOW,  # progress is a nicety: never hold the answer back long
            )
            self.sent_ids.append(self._card_id)
            if self._on_card is not None:
                await self._on_card(self._card_id)
        else:
            await self._sender.patch(self._card_id, card)
        self._last_write = time.monotonic()

    def _progress_markdown(self) -> str:
        elapsed = int(time.monotonic() - self._started)
        lines = [t("working_seconds", self._locale, seconds=elapsed)]
        steps = list(self._steps.values())
        if len(steps) > MAX_STEPS_SHOWN:
            lines.append(t("earlier_steps", self._locale, count=len(steps) - MAX_STEPS_SHOWN))
            steps = steps[-MAX_STEPS_SHOWN:]
        for step in steps:
            summary = step.summary.replace("`", "'").replace("\n", " ")
            label = step.name if summary in ("", step.name) else f"{step.name} `{summary}`"
            lines.append(f"- {_ICONS.get(step.status, '•')} {escape_card_markdown(label)}")
        if self._retry is not None:
            r = self._retry
            lines.append(
                t(
                    "retrying",
                    self._locale,
                    attempt=r.attempt,
                    limit=r.max_retries,
                    seconds=round(r.wait_seconds),
                    reason=escape_card_markdown(r.reason),
                )
            )
        if self._writing:
            lines.append(t("writing", self._locale))
        return "\n".join(lines)

    async def _stop_painter(self) -> None:
        self._closing = True
        self._changed.set()
        painter, self._painter = self._painter, None
        if painter is None:
            return
        try:
            # Let a request in flight complete (a cancelled send could be lost or doubled).
            await asyncio.wait_for(asyncio.shield(painter), timeout=30)
        except TimeoutError:
            painter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await painter
        except asyncio.CancelledError:
            painter.cancel()
            raise

    # --- the final state --------------------------------------------------------------------------
    @property
    def card_id(self) -> str | None:
        """The progress card, once shown."""
        return self._card_id

    async def withdraw(self, markdown: str) -> None:
        """End without an answer (the user recalled the message): a card already shown gets
        `markdown` as its final state; without a card nothing is sent."""
        await self._stop_painter()
        if self._card_id is None:
            self.finished = True
            return
        await self.finish(markdown)

    async def finish_turn(self, result: TurnResult) -> None:
        """The turn's final state from its result: the reply, its status, the tool steps as
        they ended and a footer with the time taken and this turn's cost."""
        await self.finish(
            result.reply,
            is_error=result.is_error,
            status=result.status,
            steps=result.steps,
            footer=turn_footer(self._started, result),
        )

    async def finish(
        self,
        markdown: str,
        *,
        is_error: bool = False,
        status: TurnStatus | None = None,
        steps: tuple[dict[str, str], ...] | None = None,
        footer: dict[str, Any] | None = None,
    ) -> None:
        """Write the answer (or error) into the card and any further parts as replies.

        `status` picks the header (default: failed when `is_error`); `steps` default to the
        tool steps this reply saw."""
        await self._stop_painter()
        self.finished = True
        answer = final_answer(
            markdown,
            is_error=is_error,
            status=status,
            seen=self._steps.values(),
            steps=steps,
            footer=footer,
            locale=self._locale,
        )
        self.final = answer.cards
        await self._deliver(answer.markdown, answer.status, answer.tail)

    async def _deliver(self, markdown: str, status: str, tail: list[dict[str, Any]]) -> None:
        """Cards within the documented limits; after a refusal, the rest within stricter ones,
        then as posts, then as text."""
        title, template = header_for(status, self._locale)
        remaining = markdown
        for rung, limits in (("answer", CARD_LIMITS), ("strict", STRICT_CARD_LIMITS)):
            cards = answer_cards(
                remaining,
                title=title,
                template=template,
                tail=tail,
                limits=limits,
                locale=self._locale,
            )
            for index, item in enumerate(cards):
                try:
                    await self._send_card(item.card, rung, index)
                except FeishuAPIError as exc:
                    if exc.transient:  # the platform is down, not the card: the bridge's outbox
                        logger.warning("answer to %s not delivered yet: %s", self._key, exc.message)
                        if rung == "answer" and self.delivered:
                            self.pending_from = index  # later parts of a long answer too
                        return
                    remaining = "\n\n".join(c.source for c in cards[index:])
                    refused = exc.code in _REFUSED_CONTENT
                    logger.warning("card %s refused (%s)", rung, exc.message)
                    break
            else:
                return
            if not refused:
                break
            title = title if index == 0 else None  # the header went out with the first card
        if refused and await self._send_as_posts(remaining):
            await self._close_card(status)
            return
        await self._send_as_text(remaining)
        await self._close_card(status)

    async def _send_card(self, card: dict[str, Any], rung: str, index: int) -> None:
        if self._card_id is not None and not self._card_closed:
            await self._patch_final(card)
        elif rung == "answer":
            await self._reply_card(card, index)
        else:
            message_id = await self._sender.reply(
                self._reply_to, "interactive", card, uuid=send_uuid(self._key, rung, index)
            )
            self.sent_ids.append(message_id)

    async def _close_card(self, status: str) -> None:
        """A progress card still "working" after the answer went another way gets a final line."""
        if self._card_id is None or self._card_closed:
            return
        title, template = header_for(status, self._locale)
        card = card_content(
            t("answer_in_messages_below", self._locale), title=title, template=template
        )
        try:
            await self._sender.patch(self._card_id, card)
            self._card_closed = True
        except FeishuAPIError as exc:
            logger.warning("progress card %s not closed: %s", self._card_id, exc.message)

    async def _send_as_posts(self, markdown: str) -> bool:
        """The answer as posts (tables as aligned text, headings bold); False if refused."""
        for index, post in enumerate(post_contents(markdown)):
            try:
                message_id = await self._sender.reply(
                    self._reply_to, "post", post, uuid=send_uuid(self._key, "post", index)
                )
            except FeishuAPIError as exc:
                if index == 0:
                    logger.warning("post refused (%s); falling back to text", exc.message)
                    return False
                logger.error("could not deliver the answer to %s: %s", self._reply_to, exc.message)
                return True
            self.sent_ids.append(message_id)
            self.delivered = self.delivered or index == 0
        return True

    async def _patch_final(self, card: dict[str, object]) -> None:
        assert self._card_id is not None
        gap = self._interval - (time.monotonic() - self._last_write)
        if gap > 0:
            await asyncio.sleep(gap)
        try:
            await self._sender.patch(self._card_id, card)
            self.delivered = True
            self._card_closed = True
        except FeishuAPIError as exc:
            if exc.code in _REFUSED_CONTENT:
                raise  # the card, not the message: a new reply would be refused the same way
            logger.warning(
                "final patch of %s failed (%s); replying anew", self._card_id, exc.message
            )
            self.card_left_open = self._card_id
            await self._reply_card(card, 0)
        self._last_write = time.monotonic()

    async def _reply_card(self, card: dict[str, object], index: int) -> None:
        message_id = await self._sender.reply(
            self._reply_to, "interactive", card, uuid=send_uuid(self._key, "answer", index)
        )
        self.sent_ids.append(message_id)
        self.delivered = self.delivered or index == 0

    async def _send_as_text(self, markdown: str) -> None:
        for index, chunk in enumerate(split_markdown(plain_text(markdown), chunk_budget("text"))):
            try:
                message_id = await self._sender.reply(
                    self._reply_to,
                    "text",
                    text_content(chunk),
                    uuid=send_uuid(self._key, "text", index),
                )
                self.sent_ids.append(message_id)
                self.delivered = self.delivered or index == 0
            except FeishuAPIError as exc:
                logger.error("could not deliver the answer to %s: %s", self._reply_to, exc.message)
                return
