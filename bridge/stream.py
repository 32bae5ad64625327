"""One turn's answer streamed into a Feishu CardKit card, the progress card as its fallback.

The documented flow ("流式更新卡片", cardkit-v1/streaming-updates-openapi-overview):

1. create a card entity with `streaming_mode` on: the answer's markdown element, the tool steps
   in a collapsible panel, a Stop button; send it as the reply to the user's message (in a topic
   too: a card entity is valid content for "回复消息" and `reply_in_thread` is a plain flag);
2. stream: the answer's *full* text so far into its element (`…/elements/:id/content`), every
   call with a strictly increasing `sequence`, at most every `interval` seconds and at most two
   calls a tick (answer, steps), far under the 10 operations per second one card allows;
3. at the end: the whole card replaced by the final answer (trace panel, footer, no button),
   then streaming switched off, so the chat list stops showing "[生成中...]".

Streaming closes by itself 10 minutes after it was switched on: it is switched on again before
that (and once more if the platform says it closed). The answer shown while streaming is kept
under a byte budget (a card entity holds 30 KB and 200 components); an answer too long for one
card continues in further replies (`render.answer_cards`), as the progress path does.

Any CardKit failure falls back to the progress-card path (`TurnReply`), which has seen every
event: the streamed card is closed with a line pointing below when the platform lets it, and the
answer is sent by `TurnReply`, under the same idempotency uuids, so it arrives exactly once; what
the platform does not take goes to the bridge's outbox as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agent.events import TextDelta, ToolStep, TurnEvent
from bridge.progress import TurnReply
from bridge.render import (
    STEP_ICONS,
    body_cost,
    escape_card_markdown,
    images_as_links,
    step_label,
    stop_button,
)
from bridge.reply import Step, final_answer, turn_footer, unfinished_text
from bridge.sender import QUICK_WINDOW, STREAM_WINDOW, FeishuAPIError, Sender, send_uuid
from bridge.strings import Locale, t

if TYPE_CHECKING:
    from agent.events import TurnResult
    from agent.replies import TurnStatus

logger = logging.getLogger("bridge.feishu.stream")

ANSWER_ELEMENT = "answer"
STEPS_ELEMENT = "steps"
STREAM_TEXT_BYTES = 20_000  # shown while streaming; the card entity holds 30 KB in all
STREAM_STEPS_SHOWN = 8
REOPEN_AFTER_SECONDS = 540.0  # streaming closes 10 min after it was switched on: reopen before
_STREAM_CLOSED = frozenset({200850, 200510, 300309})  # "Card streaming timeout" / "closed"


def shown_answer(text: str, locale: Locale) -> str:
    """Model text as a streamed card shows it: escaped, images as links, within the byte budget
    (a note says it continues below when cut); "" for no text."""
    shown = escape_card_markdown(images_as_links(text))
    if body_cost(shown) > STREAM_TEXT_BYTES:
        while body_cost(shown) > STREAM_TEXT_BYTES:
            shown = shown[: len(shown) * 9 // 10]
        shown += "\n\n" + t("continued_below", locale)
    return shown


def _closing_card(line: str) -> dict[str, Any]:
    """A streamed card's last state when CardKit failed: one markdown line, streaming off."""
    return {
        "schema": "2.0",
        "config": {"update_multi": True, "streaming_mode": False},
        "body": {"elements": [{"tag": "markdown", "content": line}]},
    }


class StreamReply:
    """The reply side of one turn when streaming: a `bridge.reply.LiveReply`, as `TurnReply`."""

    def __init__(
        self,
        sender: Sender,
        fallback: TurnReply,
        *,
        reply_to: str,
        key: str,
        locale: Locale = "zh",
        interval: float = 0.4,
        open_delay: float = 1.0,
        stop_value: dict[str, Any] | None = None,
        on_card: Callable[[str], Awaitable[object]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sender = sender
        self._fb = fallback
        self._reply_to = reply_to
        self._key = key
        self._locale = locale
        self._interval = max(interval, 0.2)
        self._open_delay = open_delay
        self._stop_value = stop_value
        self._on_card = on_card
        self._clock = clock
        self._started = clock()
        self._text = ""
        self._steps: dict[str, Step] = {}
        self._changed = asyncio.Event()
        self._closing = False
        self._painter: asyncio.Task[None] | None = None
        self._card: str | None = None  # the card entity
        self._message_id: str | None = None  # the reply showing it
        self._sequence = 0
        self._opened_at = 0.0
        self._shown_text = ""
        self._shown_steps = ""
        self._fell_back = False  # CardKit failed: the progress card answers
        self._left_open = False  # the streamed card could not be closed when CardKit failed
        self._fb_entered = False
        self._own_finished = False
        self._delivered = False
        self._final: list[dict[str, Any]] | None = None
        self._pending_from: int | None = None
        self.sent_ids: list[str] = []

    # --- what the bridge reads after the turn (as from TurnReply) ---------------------------------
    @property
    def streaming(self) -> bool:
        """The answer is (still) going into a CardKit card, not the fallback."""
        return not self._fell_back

    @property
    def message_id(self) -> str | None:
        """The reply showing the streaming card, once sent."""
        return self._message_id

    @property
    def card_entity(self) -> str | None:
        """The CardKit card entity being streamed into (None once the progress card answers):
        after a crash it is closed through CardKit, as it was streamed."""
        return None if self._fell_back else self._card

    @property
    def finished(self) -> bool:
        return self._fb.finished if self._fell_back else self._own_finished

    @property
    def delivered(self) -> bool:
        return self._fb.delivered if self._fell_back else self._delivered

    @property
    def final(self) -> list[dict[str, Any]] | None:
        return self._fb.final if self._fell_back else self._final

    @property
    def pending_from(self) -> int | None:
        return self._fb.pending_from if self._fell_back else self._pending_from

    @property
    def card_left_open(self) -> str | None:
        return self._fb.card_left_open if self._fell_back else None

    @property
    def card_id(self) -> str | None:
        """The message a late answer may be patched into: none for a streamed card (the
        outbox then replies anew; a CardKit card is not patched as an IM card)."""
        return self._fb.card_id if self._fell_back else None

    # --- lifecycle -------------------------------------------------------------------------------
    async def __aenter__(self) -> StreamReply:
        self._painter = asyncio.get_running_loop().create_task(
            self._paint(), name=f"feishu-stream:{self._key}"
        )
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        await self._stop_painter()
        if self._fb_entered:
            await self._fb.__aexit__(exc_type, exc, tb)
            with contextlib.suppress(Exception):
                await self._close_left_open()
            return
        if not self.finished:
            text, status = unfinished_text(exc_type, self._locale)
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await self.finish(text, is_error=True, status=status)

    async def on_event(self, event: TurnEvent) -> None:
        await self._fb.on_event(event)  # the fallback always knows the steps
        match event:
            case ToolStep(tool_use_id=tid, name=name, summary=summary, status=status):
                known = self._steps.get(tid)
                if known is not None and not summary:
                    summary = known.summary
                self._steps[tid] = Step(name, summary, status)
                self._changed.set()
            case TextDelta(text=piece):
                self._text += piece
                self._changed.set()
            case _:
                pass

    # --- streaming -------------------------------------------------------------------------------
    async def _paint(self) -> None:
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._open_delay):
                    while not self._steps and not self._closing:
                        await self._changed.wait()
                        self._changed.clear()
            if self._closing:
                return  # a quick answer: one card, sent by finish()
            await self._open()
            while not self._closing:
                self._changed.clear()
                await self._push()
                if self._closing:
                    break
                await self._changed.wait()
                await asyncio.sleep(self._interval)  # batch what arrives meanwhile
        except FeishuAPIError as exc:
            logger.warning(
                "streaming card for %s failed (%s); falling back to the progress card",
                self._reply_to,
                exc.message,
            )
            await self._fall_back()

    def _next(self) -> int:
        self._sequence += 1
        return self._sequence

    async def _open(self) -> None:
        card = self._streaming_card()
        self._card = await self._sender.card_create(card)
        self._opened_at = self._clock()
        self._message_id = await self._sender.reply(
            self._reply_to,
            "interactive",
            {"type": "card", "data": {"card_id": self._card}},
            uuid=send_uuid(self._key, "stream"),
            window=5.0,
        )
        self.sent_ids.append(self._message_id)
        if self._on_card is not None:
            await self._on_card(self._message_id)

    async def _push(self) -> None:
        """One tick: the answer's text and the steps, each only when it changed."""
        assert self._card is not None
        text = self._shown_answer()
        steps = self._steps_markdown()
        if text != self._shown_text:
            await self._content(ANSWER_ELEMENT, text)
            self._shown_text = text
        if steps != self._shown_steps:
            await self._content(STEPS_ELEMENT, steps)
            self._shown_steps = steps

    async def _content(self, element_id: str, text: str) -> None:
        assert self._card is not None
        if self._clock() - self._opened_at > REOPEN_AFTER_SECONDS:
            await self._reopen()
        try:
            await self._sender.card_content(self._card, element_id, text, self._next())
        except FeishuAPIError as exc:
            if exc.code not in _STREAM_CLOSED:
                raise
            await self._reopen()  # closed by itself (10 min): switch it on again, once
            await self._sender.card_content(self._card, element_id, text, self._next())

    async def _reopen(self) -> None:
        assert self._card is not None
        await self._sender.card_settings(self._card, {"streaming_mode": True}, self._next())
        self._opened_at = self._clock()

    def _shown_answer(self) -> str:
        return shown_answer(self._text, self._locale) or t("working", self._locale)

    def _steps_markdown(self) -> str:
        steps = list(self._steps.values())
        lines: list[str] = []
        if len(steps) > STREAM_STEPS_SHOWN:
            lines.append(f"… {len(steps) - STREAM_STEPS_SHOWN}")
            steps = steps[-STREAM_STEPS_SHOWN:]
        for step in steps:
            lines.append(
                f"- {STEP_ICONS.get(step.status, '•')} {step_label(step.name, step.summary)}"
            )
        return "\n".join(lines) or "…"

    def _streaming_card(self) -> dict[str, Any]:
        elements: list[dict[str, Any]] = [
            {
                "tag": "markdown",
                "element_id": ANSWER_ELEMENT,
                "content": t("working", self._locale),
            },
            {
                "tag": "collapsible_panel",
                "element_id": "steps_panel",
                "expanded": False,
                "header": {
                    "title": {
                        "tag": "plain_text",
                        "content": t("steps_title", self._locale, count="…"),
                    }
                },
                "elements": [{"tag": "markdown", "element_id": STEPS_ELEMENT, "content": "…"}],
            },
        ]
        if self._stop_value is not None:
            elements.append(stop_button(self._stop_value, self._locale))
        return {
            "schema": "2.0",
            "config": {
                "update_multi": True,
                "streaming_mode": True,
                "summary": {"content": ""},
                "streaming_config": {
                    "print_frequency_ms": {"default": 30},
                    "print_step": {"default": 2},
                    "print_strategy": "fast",
                },
            },
            "body": {"elements": elements},
        }

    async def _stop_painter(self) -> None:
        self._closing = True
        self._changed.set()
        painter, self._painter = self._painter, None
        if painter is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(painter), timeout=30)
        except TimeoutError:
            painter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await painter

    async def _fall_back(self) -> None:
        """CardKit failed mid-turn: close the streamed card if possible; the progress card
        answers from here (it has seen every event)."""
        self._fell_back = True
        await self._close_streamed(self._cut_line())
        if not self._closing and not self._fb_entered:
            self._fb_entered = True
            await self._fb.__aenter__()

    def _cut_line(self) -> str:
        """The streamed card's last words when CardKit failed: what it showed, then where the
        answer continues (the progress path's new reply)."""
        shown = self._shown_text if self._shown_text != t("working", self._locale) else ""
        pointer = t("stream_cut", self._locale)
        return f"{shown}\n\n---\n{pointer}" if shown else pointer

    async def _close_streamed(self, line: str, *, window: float = STREAM_WINDOW) -> None:
        """Replace the streamed card by `line` and switch streaming off; on failure the card is
        left open (`_left_open`) for `_close_left_open` to try again once the answer is out."""
        if self._card is None:
            return
        card = _closing_card(line)
        attempts: tuple[Callable[[], Awaitable[Any]], ...] = (
            lambda: self._sender.card_update(self._card or "", card, self._next(), window=window),
            lambda: self._sender.card_settings(
                self._card or "", {"streaming_mode": False}, self._next(), window=window
            ),
        )
        for attempt in attempts:
            try:
                await attempt()
            except FeishuAPIError as exc:
                logger.warning("streamed card %s not closed: %s", self._card, exc.message)
                self._left_open = True
                return
        self._left_open = False

    @property
    def stream_left_open(self) -> tuple[str, dict[str, Any]] | None:
        """(card entity, its closing card) when the streamed card is still open after the turn
        (the platform refused even after the answer went out): the bridge's outbox closes it."""
        if not self._left_open or self._card is None:
            return None
        return self._card, _closing_card(self._cut_line())

    async def _close_left_open(self) -> None:
        """A streamed card the platform would not close when CardKit failed (an outage in
        mid-answer) is closed after the answer went out another way: by then the platform
        answers again. Issue #33: it stayed "streaming" with its first paragraph for good."""
        if self._left_open:
            await self._close_streamed(self._cut_line(), window=QUICK_WINDOW)

    # --- the final state --------------------------------------------------------------------------
    async def withdraw(self, markdown: str) -> None:
        await self._stop_painter()
        if self._fell_back or self._card is None:
            await self._fb.withdraw(markdown)
            return
        await self.finish(markdown)

    async def finish_turn(self, result: TurnResult) -> None:
        await self.finish(
            result.reply,
            is_error=result.is_error,
            status=result.status,
            steps=result.steps,
            footer=turn_footer(self._started, result, now=self._clock()),
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
        """The final card into the streamed card entity (streaming then off); the rest of a
        long answer as replies. Without a streamed card, or on a CardKit failure, `TurnReply`."""
        await self._stop_painter()
        if self._fell_back or self._card is None:
            # a quick answer (no streamed card yet) is the progress reply's: what the turn's
            # settling reads (finished, delivered, final) is the fallback's then too; it read
            # this reply's own and saw nothing finished, so a queued message's Typing reaction
            # never gave way to DONE and the turn was never marked done (issue #33)
            self._fell_back = True
            await self._fb.finish(
                markdown, is_error=is_error, status=status, steps=steps, footer=footer
            )
            await self._close_left_open()
            return
        answer = final_answer(
            markdown,
            is_error=is_error,
            status=status,
            seen=self._steps.values(),
            steps=steps,
            footer=footer,
            locale=self._locale,
        )
        markdown, status, cards = answer.markdown, answer.status, answer.cards
        first = {**cards[0], "config": {**cards[0].get("config", {}), "streaming_mode": False}}
        try:
            await self._sender.card_update(self._card, first, self._next())
        except FeishuAPIError as exc:
            logger.warning(
                "final update of streamed card %s failed (%s); answering as a new reply",
                self._card,
                exc.message,
            )
            self._fell_back = True
            await self._close_streamed(self._cut_line())
            await self._fb.finish(
                markdown, is_error=is_error, status=status, steps=steps, footer=footer
            )
            await self._close_left_open()
            return
        self._own_finished = True
        self._final = cards
        self._delivered = True
        try:  # the documented way to end streaming ("[生成中...]" in the chat list goes)
            await self._sender.card_settings(self._card, {"streaming_mode": False}, self._next())
        except FeishuAPIError as exc:
            logger.warning("streaming of %s not switched off: %s", self._card, exc.message)
        for index, card in enumerate(cards[1:], start=1):
            try:
                message_id = await self._sender.reply(
                    self._reply_to, "interactive", card, uuid=send_uuid(self._key, "answer", index)
                )
            except FeishuAPIError as exc:
                logger.warning(
                    "part %d of the answer to %s not sent: %s", index, self._key, exc.message
                )
                if exc.transient:
                    self._pending_from = index  # the outbox sends it and the rest
                return
            self.sent_ids.append(message_id)
