"""What the model is asked in a turn: the message's text (in a group, who said it), the message
it quotes and the chat it forwards (fetched, labelled, capped, never another chat's words), and
its attachments, saved in the workspace's inbox."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from datetime import datetime
from pathlib import Path

from bridge.events import IncomingMessage
from bridge.feishu.context import BridgeContext
from bridge.feishu.people import People
from bridge.inputs import (
    QUOTE_CHARS,
    ItemText,
    clip,
    forward_markdown,
    forward_tree,
    item_text,
    quoted_id,
)
from bridge.sender import FeishuAPIError
from bridge.strings import t

logger = logging.getLogger("bridge.feishu")

NAME_LOOKUPS = 10  # distinct speakers of a forward whose names are asked for
_SAFE_NAME = re.compile(r"[^\w.\-]+")


def quoted(msg: IncomingMessage) -> str | None:
    """The id of the message `msg` quotes, if any."""
    return quoted_id(parent_id=msg.parent_id, root_id=msg.root_id, thread_id=msg.thread_id)


class PromptBuilder:
    """A turn's prompt from its message."""

    def __init__(self, ctx: BridgeContext, people: People) -> None:
        self._ctx = ctx
        self._people = people

    async def prompt(self, msg: IncomingMessage) -> str:
        text = await self._spoken_by(msg)
        context = await self._context(msg)
        if context:
            text = "\n\n".join([*context, text] if text else context)
        if not msg.attachments:
            return text
        sender = self._ctx.api
        saved: list[str] = []
        for attachment in msg.attachments:
            try:
                download = await sender.download(msg.message_id, attachment.key, attachment.kind)
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
        return f"[{await self._people.display_name(msg.sender_open_id)}] {msg.text}"

    async def _context(self, msg: IncomingMessage) -> list[str]:
        """What the message brings beside its own text: the message it quotes, the chat it
        forwards (both fetched with "获取指定消息的内容"); labelled, capped, never the user's
        own words."""
        sender = self._ctx.api
        lang = msg.locale
        parts: list[str] = []
        quoted_message = quoted(msg)
        if quoted_message is not None:
            parts.append(await self._quote(msg, quoted_message))
        if msg.message_type == "merge_forward":
            try:
                items = await sender.get_message(msg.message_id)
            except FeishuAPIError as exc:
                logger.warning("forward %s not read: %s", msg.message_id, exc.message)
                return [*parts, t("forwarded_unreadable", lang, why=exc.message)]
            forward = forward_tree(items, msg.message_id)
            names: dict[str, str] = {}
            for _, said in forward.lines:  # names of the first few speakers only
                if said.sender and said.sender not in names and len(names) < NAME_LOOKUPS:
                    names[said.sender] = await self._people.display_name(said.sender)

            def name_of(said: ItemText) -> str:
                if said.is_app:
                    return t("the_bot", lang)
                return names.get(said.sender) or f"…{said.sender[-6:]}"

            lines = forward_markdown(forward, name_of, lambda n: t("forwarded_more", lang, count=n))
            parts.append(t("forwarded", lang, count=forward.total, lines=lines))
        return parts

    async def _quote(self, msg: IncomingMessage, quoted: str) -> str:
        lang = msg.locale
        try:
            items = await self._ctx.api.get_message(quoted)
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
            # Feishu does not return a JSON 2.0 card's content; an answer card the bridge
            # wrote is kept in its state (issue #33: the quote read "cannot be read")
            kept = await self._ctx.db(self._ctx.state.said, quoted) if said.is_app else None
            if kept is None:
                return t("quoted_card", lang)
            return t("quoted", lang, who=t("the_bot", lang), text=clip(kept, QUOTE_CHARS))
        if said.text is None:
            return t("quoted_unreadable", lang, why=said.why)
        who = t("the_bot", lang) if said.is_app else await self._people.display_name(said.sender)
        return t("quoted", lang, who=who, text=clip(said.text, QUOTE_CHARS))

    def _save_attachment(
        self, msg: IncomingMessage, kind: str, key: str, name: str, data: bytes
    ) -> str:
        workspace = self._ctx.settings.workspace_dir
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
