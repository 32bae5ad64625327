"""One turn's answer in Feishu: a progress card updated in place, then the final answer.

* The card is a reply to the user's message. It appears after `open_delay` seconds (or at the
  first tool step), so quick answers arrive as one message without a "working" flash.
* Updates are throttled: at least `interval` seconds apart (Feishu allows 5 PATCHes per second
  per message), plus a slow heartbeat so the elapsed time moves.
* `finish()` always writes the final state: the answer (or the error, plainly) goes into the card;
  an answer too long for one card continues in further replies, each under the byte limit.
  If the card cannot be patched the answer is sent as a new reply; if cards fail altogether, as
  plain text. The user is never left with a card stuck on "working".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from agent.events import Retrying, TextDelta, ToolStep, TurnEvent
from bridge.render import (
    card_content,
    chunk_budget,
    escape_card_markdown,
    plain_text,
    split_markdown,
    text_content,
)
from bridge.sender import QUICK_WINDOW, FeishuAPIError, Sender, send_uuid

logger = logging.getLogger("bridge.feishu.progress")

HEARTBEAT_SECONDS = 10.0
MAX_STEPS_SHOWN = 8
_ICONS = {"started": "⏳", "ok": "✅", "error": "❌", "denied": "🚫"}


@dataclass(slots=True)
class _Step:
    name: str
    summary: str
    status: str


class TurnReply:
    """The reply side of one turn; `on_event` is the run_agent event sink."""

    def __init__(
        self,
        sender: Sender,
        *,
        reply_to: str,
        key: str,
        interval: float = 0.5,
        open_delay: float = 1.0,
        title: str = "Working…",
        on_card: Callable[[str], None] | None = None,
    ) -> None:
        """`on_card(message_id)`: told when the progress card is shown (the bridge records it,
        so a restart after a crash can close it)."""
        self._sender = sender
        self._on_card = on_card
        self._reply_to = reply_to
        self._key = key
        self._interval = max(interval, 0.2)  # never above 5 updates per second
        self._open_delay = open_delay
        self._title = title
        self._steps: dict[str, _Step] = {}
        self._writing = False
        self._retry: Retrying | None = None  # the model request being retried, if any
        self._started = time.monotonic()
        self._last_write = 0.0
        self._card_id: str | None = None
        self._changed = asyncio.Event()
        self._closing = False
        self._painter: asyncio.Task[None] | None = None
        self.finished = False
        self.sent_ids: list[str] = []
        # Delivery, read by the bridge after finish(): did the answer's first part arrive, and
        # is there a progress card whose final PATCH failed (still "working")?
        self.delivered = False
        self.card_left_open: str | None = None
        self.final: tuple[str, bool] | None = None  # what finish() was asked to write

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
            text = (
                "Stopped: the server is shutting down. Send the message again in a moment."
                if exc_type is asyncio.CancelledError
                else "Execution failed: the bridge hit an internal error; see the server log."
            )
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await self.finish(text, is_error=True)

    async def on_event(self, event: TurnEvent) -> None:
        match event:
            case ToolStep(tool_use_id=tid, name=name, summary=summary, status=status):
                # a step's result arrives without its input: keep what it was running
                known = self._steps.get(tid)
                if known is not None and not summary:
                    summary = known.summary
                self._steps[tid] = _Step(name, summary, status)
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
                self._on_card(self._card_id)
        else:
            await self._sender.patch(self._card_id, card)
        self._last_write = time.monotonic()

    def _progress_markdown(self) -> str:
        elapsed = int(time.monotonic() - self._started)
        lines = [f"⏳ working… {elapsed} s"]
        steps = list(self._steps.values())
        if len(steps) > MAX_STEPS_SHOWN:
            lines.append(f"… {len(steps) - MAX_STEPS_SHOWN} earlier steps")
            steps = steps[-MAX_STEPS_SHOWN:]
        for step in steps:
            summary = step.summary.replace("`", "'").replace("\n", " ")
            label = step.name if summary in ("", step.name) else f"{step.name} `{summary}`"
            lines.append(f"- {_ICONS.get(step.status, '•')} {escape_card_markdown(label)}")
        if self._retry is not None:
            r = self._retry
            lines.append(
                f"🔁 retrying ({r.attempt}/{r.max_retries}) in {round(r.wait_seconds)} s: "
                + escape_card_markdown(r.reason)
            )
        if self._writing:
            lines.append("✍️ writing the answer…")
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

    async def finish(self, markdown: str, *, is_error: bool = False) -> None:
        """Write the answer (or error) into the card and any further parts as replies."""
        await self._stop_painter()
        self.finished = True
        self.final = (markdown, is_error)
        chunks = split_markdown(escape_card_markdown(markdown), chunk_budget("interactive"))
        if not chunks:
            chunks = ["(no text)"]
        total = len(chunks)
        for index, chunk in enumerate(chunks):
            note = f"part {index + 1}/{total}" if total > 1 else None
            title = "Error" if is_error and index == 0 else None
            card = card_content(chunk, title=title, template="red", note=note)
            try:
                if index == 0 and self._card_id is not None:
                    await self._patch_final(card)
                else:
                    await self._reply_card(card, index)
            except FeishuAPIError as exc:
                if exc.transient:  # the platform is down, not the card: the bridge's outbox
                    logger.warning("answer to %s not delivered yet: %s", self._key, exc.message)
                    return
                logger.warning("card send failed (%s); falling back to text", exc.message)
                await self._send_as_text(markdown if index == 0 else "\n\n".join(chunks[index:]))
                return

    async def _patch_final(self, card: dict[str, object]) -> None:
        assert self._card_id is not None
        gap = self._interval - (time.monotonic() - self._last_write)
        if gap > 0:
            await asyncio.sleep(gap)
        try:
            await self._sender.patch(self._card_id, card)
            self.delivered = True
        except FeishuAPIError as exc:
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
