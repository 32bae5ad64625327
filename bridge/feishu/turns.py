"""A turn: one message through `SessionManager.run_agent` under conversation
`feishu:<scope>:v<N>`, its live reply (a streaming card, or the progress card) with a Stop
button, approvals asked on the way, and what is settled after: what did not arrive goes to the
outbox, a card left "working" is closed, a slow answer that came by PATCH (which notifies
nobody) is followed by a short reply so the user's phone rings, the turn is forgotten in the
state, and its low-confidence captures are offered."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from agent.events import TextDelta, TurnEvent
from bridge.events import IncomingMessage
from bridge.feishu.cards import image_card
from bridge.feishu.context import BridgeContext
from bridge.feishu.controls import Control, Controls
from bridge.feishu.delivery import Delivery
from bridge.feishu.memory_chat import MemoryCommands
from bridge.feishu.prompt import PromptBuilder
from bridge.outputs import FILES_INSTRUCTIONS, Refused, named_files, read_checked, resolve
from bridge.progress import TurnReply
from bridge.render import card_content, escape_card_markdown, text_content
from bridge.reply import LiveReply
from bridge.sender import FeishuAPIError, send_uuid
from bridge.stream import StreamReply
from bridge.strings import t
from bridge.whose import WHOSE_INSTRUCTIONS
from errors import ClaudeMemoryError
from storage.public_text import exception_text, next_step

logger = logging.getLogger("bridge.feishu")


class Turns:
    """Runs the turns the lanes hand it."""

    def __init__(
        self,
        ctx: BridgeContext,
        controls: Controls,
        delivery: Delivery,
        prompts: PromptBuilder,
        memory: MemoryCommands,
    ) -> None:
        self._ctx = ctx
        self._controls = controls
        self._delivery = delivery
        self._prompts = prompts
        self._memory = memory

    async def run(self, msg: IncomingMessage) -> None:
        ctx = self._ctx
        conversation_id = await ctx.conversation_id(ctx.scope(msg).key)

        async def on_card(card_id: str) -> None:
            await self._controls.show(nonce, stop, card_id)
            # a streamed card is a CardKit entity: a restart closes it through CardKit
            entity = reply.card_entity if isinstance(reply, StreamReply) else None
            await ctx.db(ctx.state.turn_card, msg.message_id, card_id, entity)

        # Stop sits on the turn's card, streaming or progress, until the answer replaces it.
        stop = Control("stop", msg, conversation_id)
        nonce = self._controls.add(stop)
        reply, progress = self._reply(msg, {"cm": "stop", "n": nonce}, on_card)
        started = time.monotonic()
        since = time.time()
        try:
            answer = await self._answer(msg, conversation_id, reply)
            if answer:
                sent = [*reply.sent_ids, *(progress.sent_ids if progress is not reply else ())]
                await self._keep_said(sent, answer)
                await self._send_files(msg, answer)
        finally:
            ctx.slot_waiting.discard(msg.message_id)
            self._controls.drop(nonce)
            await self._controls.close_approvals(msg)
            await self._settle(msg, reply, time.monotonic() - started)
        await self._memory.offer_captures(msg, conversation_id, since)

    async def _send_files(self, msg: IncomingMessage, answer: str) -> None:
        """The files the answer names in the workspace, after it (bridge/outputs.py): images
        uploaded and shown in a card, other files as file messages; what may not go is said in
        one line. A link to a path that does not exist is no file the agent made: skipped."""
        named = named_files(answer)
        if not named:
            return
        api, delivery = self._ctx.api, self._delivery
        workspace = self._ctx.settings.workspace_dir
        found = await asyncio.to_thread(lambda: [resolve(workspace, n) for n in named])
        lines: list[str] = []
        for index, item in enumerate(found):
            if isinstance(item, Refused):
                if item.why != "missing":
                    why = t(f"file_{item.why.replace(' ', '_')}", msg.locale)
                    lines.append(f"- {item.named.target}: {why}")
                continue
            part = f"file:{index}"
            try:
                data = await asyncio.to_thread(read_checked, item)
                if item.kind == "image":
                    key = await api.upload_image(data, item.path.name)
                    await delivery.send(
                        msg, "interactive", image_card(item.named.label, key), part=part
                    )
                else:
                    key = await api.upload_file(data, item.path.name, item.file_type)
                    await delivery.send(msg, "file", {"file_key": key}, part=part)
            except (FeishuAPIError, OSError) as exc:
                logger.warning("%s not sent: %s", item.named.target, exc)
                error = exc.message if isinstance(exc, FeishuAPIError) else type(exc).__name__
                failed = t("file_upload_failed", msg.locale, error=error)
                lines.append(f"- {item.named.target}: {failed}")
        if lines:
            text = t("files_refused", msg.locale, lines="\n".join(lines))
            await delivery.send(msg, "text", text_content(text), part="files")

    async def _keep_said(self, message_ids: list[str], answer: str) -> None:
        """What the answer's cards said, for a member who quotes one later: Feishu does not
        return a JSON 2.0 card's content (issue #33: the quote read "cannot be read")."""
        if not message_ids:
            return
        try:
            await self._ctx.db(self._ctx.state.said_put, message_ids, answer[:SAID_CHARS])
        except Exception:  # a nicety for a later quote: never in the way of the turn
            logger.exception("what %s said was not kept", message_ids[0])

    def _reply(
        self,
        msg: IncomingMessage,
        stop_value: dict[str, str],
        on_card: Callable[[str], Awaitable[object]],
    ) -> tuple[LiveReply, TurnReply]:
        """The turn's live reply: streamed into a CardKit card when FEISHU_STREAMING is on,
        the progress card otherwise (and as the stream's fallback); and that progress card."""
        settings = self._ctx.settings
        progress = TurnReply(
            self._ctx.api,
            reply_to=msg.message_id,
            key=msg.message_id,
            interval=settings.feishu_card_update_interval_seconds,
            open_delay=settings.feishu_progress_delay_seconds,
            on_card=on_card,
            locale=msg.locale,
            stop_value=stop_value,
        )
        if not settings.feishu_streaming:
            return progress, progress
        stream = StreamReply(
            self._ctx.api,
            progress,
            reply_to=msg.message_id,
            key=msg.message_id,
            locale=msg.locale,
            interval=settings.feishu_stream_interval_seconds,
            open_delay=settings.feishu_progress_delay_seconds,
            stop_value=stop_value,
            on_card=on_card,
        )
        return stream, progress

    async def _answer(
        self, msg: IncomingMessage, conversation_id: str, reply: LiveReply
    ) -> str | None:
        """The turn; the answer's text when it ended with one (not an error or a recall)."""
        ctx = self._ctx
        async with reply:
            prompt = await self._prompts.prompt(msg)
            if ctx.recalled(msg.message_id):
                await reply.withdraw(t("recalled_card", msg.locale))
                return None
            # From here a crash cannot simply re-run it.
            await ctx.db(ctx.state.turn_started, msg.message_id)
            partial = _Partial(ctx, msg.message_id)

            async def on_event(event: TurnEvent) -> None:
                ctx.slot_waiting.discard(msg.message_id)  # it holds a slot now
                await reply.on_event(event)
                await partial.seen(event)

            try:
                result = await ctx.sessions.run_agent(
                    prompt,
                    conversation_id=conversation_id,
                    on_event=on_event,
                    source="feishu",
                    approver=self._controls.approver(msg, conversation_id),
                    model=await ctx.db(ctx.state.model, ctx.scope(msg).key),
                    locale=msg.locale,  # stops, refusals and errors in the chat's language
                    # whose memory: the sender's own (and their group's team notes), never
                    # the machine owner's unless they speak (bridge/whose.py)
                    reader=self._memory.reader(msg),
                    # how the model sends a file here, and whose memory it reads
                    instructions=f"{FILES_INSTRUCTIONS}\n\n{WHOSE_INSTRUCTIONS}",
                )
            except ClaudeMemoryError as exc:
                await reply.finish(
                    t("execution_failed", msg.locale, error=exc.message), is_error=True
                )
                return None
            except Exception as exc:
                logger.exception("turn for %s failed", msg.message_id)
                error = f"{exception_text(exc)}; {next_step(exc)}"  # cleaned as at every door
                await reply.finish(t("execution_crashed", msg.locale, error=error), is_error=True)
                return None
            if ctx.recalled(msg.message_id):
                await reply.withdraw(t("recalled_card", msg.locale))
                return None
            await reply.finish_turn(result)
            return None if result.is_error else result.reply

    async def _settle(self, msg: IncomingMessage, reply: LiveReply, elapsed: float) -> None:
        """After a turn: hand what did not arrive to the outbox, close a card left "working",
        push a slow answer that came by PATCH, and forget the turn."""
        if not reply.finished:
            return  # cancelled before any final state: the next start recovers it
        ctx, delivery = self._ctx, self._delivery
        try:
            key = msg.message_id
            if ctx.recalled(key):
                pass
            elif not reply.delivered and reply.final is not None:
                logger.warning("answer to %s goes to the outbox", key)
                await delivery.defer_answer(msg, reply.final, card_id=reply.card_id)
            elif reply.pending_from is not None and reply.final is not None:
                logger.warning("the rest of the answer to %s goes to the outbox", key)
                await delivery.defer_answer(
                    msg, reply.final, card_id=None, start=reply.pending_from
                )
            elif reply.card_left_open is not None:
                card = card_content(escape_card_markdown(t("answer_below", msg.locale)))
                await delivery.outbox_put(
                    "patch", reply.card_left_open, card, key=send_uuid(key, "close")
                )
            elif (
                reply.card_id is not None
                and reply.delivered
                and elapsed >= ctx.settings.feishu_push_after_seconds
            ):
                push = text_content(t("ready_push", msg.locale))
                await delivery.send(msg, "text", push, part="ready")
            if isinstance(reply, StreamReply) and (left := reply.stream_left_open) is not None:
                # the platform still refused to close the streamed card after the answer: the
                # outbox closes it once it answers again
                entity, closing = left
                await delivery.outbox_put("card", entity, closing, key=send_uuid(key, "cut"))
            await ctx.db(ctx.state.turn_finished, key)
            await delivery.react_done(msg, delivered=reply.delivered or reply.final is not None)
        except Exception:  # bookkeeping must not take the chat's worker down
            logger.exception("settling the turn of %s failed", msg.message_id)


PARTIAL_EVERY_SECONDS = 2.0
SAID_CHARS = 20_000  # an answer kept for a quote, at most (a quote reads QUOTE_CHARS of it)


class _Partial:
    """The answer's text so far, saved in the turn's row at most every PARTIAL_EVERY_SECONDS:
    a restart closes the turn's card with what it showed (issue #33: it wrote over it)."""

    def __init__(self, ctx: BridgeContext, message_id: str) -> None:
        self._ctx = ctx
        self._message_id = message_id
        self._text = ""
        self._saved_at = 0.0
        self._saved = ""

    async def seen(self, event: TurnEvent) -> None:
        """Text is saved when PARTIAL_EVERY_SECONDS have passed, and at any other event (a tool
        step: the text before it is complete, and an approval may keep the turn waiting)."""
        if isinstance(event, TextDelta):
            self._text += event.text
            if time.monotonic() - self._saved_at < PARTIAL_EVERY_SECONDS:
                return
        elif self._text == self._saved:
            return
        self._saved_at, self._saved = time.monotonic(), self._text
        try:
            await self._ctx.db(self._ctx.state.turn_partial, self._message_id, self._text)
        except Exception:  # a nicety for a crash later: never in the way of the answer
            logger.exception("partial answer of %s not saved", self._message_id)
