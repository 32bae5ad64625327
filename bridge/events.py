"""Feishu event payloads: raw shapes as TypedDicts, parsed once at the edge into frozen dataclasses.

`im.message.receive_v1` (schema 2.0) becomes an `IncomingMessage`, `im.message.recalled_v1` a
`Recalled`; every other event type becomes an `OtherEvent` (logged at debug level and acked by
the bridge). Notes on the payload
(docs and observation): timestamps are strings of milliseconds, `content` is a JSON string,
mentions appear in text as placeholders (`@_user_1`) resolved through `message.mentions`, and
`@_all` stands for "everyone".

Input is never trusted to be clean text: bytes that are not UTF-8 are decoded with U+FFFD in
their place, and lone surrogates (a `\ud800` escape in the JSON, which Python accepts but which
no UTF-8 writer downstream does) become U+FFFD too, in every string of the payload.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypedDict

from bridge.strings import Locale, locale_of
from errors import InvalidInputError
from storage.text import repaired

ChatType = Literal["p2p", "group"]
AttachmentKind = Literal["image", "file"]

MESSAGE_RECEIVED = "im.message.receive_v1"
# "撤回消息" event: https://open.feishu.cn/document/uAjLw4CM/ukTMukTMukTM/reference/im-v1/message/
# events/recalled: `event` = {message_id, chat_id, recall_time (ms, string), recall_type}.
MESSAGE_RECALLED = "im.message.recalled_v1"
ALL_MENTION = "@_all"


# --- raw payloads (what Feishu sends) ------------------------------------------------------------
class RawUserId(TypedDict, total=False):
    open_id: str
    union_id: str
    user_id: str


class RawSender(TypedDict, total=False):
    sender_id: RawUserId
    sender_type: str
    tenant_key: str


class RawMention(TypedDict, total=False):
    key: str
    id: RawUserId
    name: str
    tenant_key: str
    mentioned_type: str


class RawMessage(TypedDict, total=False):
    message_id: str
    root_id: str
    parent_id: str
    thread_id: str
    create_time: str
    update_time: str
    chat_id: str
    chat_type: str
    message_type: str
    content: str
    mentions: list[RawMention]
    user_agent: str


class RawMessageEvent(TypedDict, total=False):
    sender: RawSender
    message: RawMessage


class RawRecalled(TypedDict, total=False):
    message_id: str
    chat_id: str
    recall_time: str
    recall_type: str  # message_owner / group_owner / group_manager / enterprise_manager


class RawHeader(TypedDict, total=False):
    event_id: str
    event_type: str
    create_time: str
    token: str
    app_id: str
    tenant_key: str


class RawEnvelope(TypedDict, total=False):
    schema: str
    header: RawHeader
    event: dict[str, Any]


# --- parsed shapes --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Attachment:
    """An image or file of a message; the bridge downloads it into the workspace inbox."""

    kind: AttachmentKind
    key: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """A user's message, as the bridge needs it."""

    event_id: str
    message_id: str
    chat_id: str
    chat_type: ChatType
    sender_open_id: str
    sender_type: str
    message_type: str
    text: str  # bot mention removed, other mentions as @Name, posts flattened to markdown
    mentions_bot: bool
    create_time_ms: int
    attachments: tuple[Attachment, ...] = ()
    root_id: str | None = None
    parent_id: str | None = None
    thread_id: str | None = None
    """The topic (`omt_…`) the message was written in, if any: topic groups, thread replies."""
    locale: Locale = "zh"
    """The sender's client language, from `message.user_agent` (bridge/strings.py)."""
    mentioned: tuple[str, ...] = ()
    """The open_ids of the people the message mentions (not the bot, not @all)."""

    @property
    def is_group(self) -> bool:
        return self.chat_type == "group"

    @property
    def from_user(self) -> bool:
        return self.sender_type == "user"


@dataclass(frozen=True, slots=True)
class Recalled:
    """A message was recalled (withdrawn) by its sender or a group's owner or manager."""

    event_id: str
    message_id: str
    chat_id: str


@dataclass(frozen=True, slots=True)
class OtherEvent:
    """Any event type the bridge does not act on."""

    event_type: str
    event_id: str


ParsedEvent = IncomingMessage | Recalled | OtherEvent


class EventParseError(InvalidInputError):
    """The payload is not a schema 2.0 event we can read."""


# --- parsing --------------------------------------------------------------------------------------
def parse_event(payload: bytes | str, *, bot_open_id: str | None) -> ParsedEvent:
    """Parse one event payload. Raises EventParseError for malformed messages."""
    if isinstance(payload, bytes):
        payload = payload.decode("utf-8", errors="replace")
    try:
        envelope: RawEnvelope = repaired(json.loads(payload))
    except ValueError as exc:
        raise EventParseError(f"event payload is not JSON: {exc}") from exc
    if not isinstance(envelope, dict):
        raise EventParseError("event payload is not a JSON object")
    header = envelope.get("header") or {}
    event_type = str(header.get("event_type") or "")
    event_id = str(header.get("event_id") or "")
    if envelope.get("schema") != "2.0" or not event_type:
        return OtherEvent(event_type or "unknown", event_id)
    if event_type == MESSAGE_RECALLED:
        # Untrusted JSON typed as what Feishu documents; every field is checked as it is read.
        recalled: RawRecalled = envelope.get("event") or {}  # type: ignore[assignment]
        message_id = str(recalled.get("message_id") or "")
        if not message_id:
            raise EventParseError("recall event without message_id")
        return Recalled(event_id, message_id, str(recalled.get("chat_id") or ""))
    if event_type != MESSAGE_RECEIVED:
        return OtherEvent(event_type, event_id)
    body: RawMessageEvent = envelope.get("event") or {}  # type: ignore[assignment]  # as above
    return _parse_message(event_id, body, bot_open_id)


def _parse_message(
    event_id: str, body: RawMessageEvent, bot_open_id: str | None
) -> IncomingMessage:
    message = body.get("message") or {}
    sender = body.get("sender") or {}
    message_id = message.get("message_id") or ""
    chat_id = message.get("chat_id") or ""
    if not message_id or not chat_id:
        raise EventParseError("message event without message_id or chat_id")
    mentions = list(message.get("mentions") or [])
    message_type = message.get("message_type") or ""
    try:
        content = repaired(json.loads(message.get("content") or "{}"))
    except (ValueError, TypeError):
        content = {}  # read as an empty message: the sender gets a line instead of silence
    if not isinstance(content, dict):
        content = {}
    text, attachments = _content_text(message_type, content, mentions, bot_open_id)
    return IncomingMessage(
        event_id=event_id or message_id,
        message_id=message_id,
        chat_id=chat_id,
        chat_type="p2p" if message.get("chat_type") == "p2p" else "group",
        sender_open_id=(sender.get("sender_id") or {}).get("open_id", ""),
        sender_type=sender.get("sender_type") or "",
        message_type=message_type,
        text=text,
        mentions_bot=any(_is_bot(m, bot_open_id) for m in mentions),
        create_time_ms=_int(message.get("create_time")),
        attachments=attachments,
        root_id=message.get("root_id") or None,
        parent_id=message.get("parent_id") or None,
        thread_id=message.get("thread_id") or None,
        locale=locale_of(str(message.get("user_agent") or "")),
        mentioned=tuple(
            str((m.get("id") or {}).get("open_id") or "")
            for m in mentions
            if m.get("key") != ALL_MENTION
            and not _is_bot(m, bot_open_id)
            and (m.get("id") or {}).get("open_id")
        ),
    )


def message_to_json(msg: IncomingMessage) -> str:
    """The message as JSON, to keep it across a restart (`message_from_json` reads it back)."""
    return json.dumps(asdict(msg), ensure_ascii=False)


def message_from_json(text: str) -> IncomingMessage:
    data = json.loads(text)
    data["attachments"] = tuple(Attachment(**a) for a in data.get("attachments") or ())
    data["mentioned"] = tuple(data.get("mentioned") or ())
    return IncomingMessage(**data)


def _is_bot(mention: RawMention, bot_open_id: str | None) -> bool:
    if mention.get("key") == ALL_MENTION:
        return False
    if bot_open_id:
        return (mention.get("id") or {}).get("open_id") == bot_open_id
    # Bot identity unknown (bot info call failed): the weaker signal Feishu offers.
    return mention.get("mentioned_type") == "bot"


def _int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def content_text(
    message_type: str, content: dict[str, Any], mentions: list[RawMention] | None = None
) -> str:
    """The text of a text or post message's content (a quoted or forwarded one: no bot mention
    to drop, other mentions as @Name); "" for other kinds."""
    return _content_text(message_type, content, mentions or [], None)[0]


def _content_text(
    message_type: str,
    content: dict[str, Any],
    mentions: list[RawMention],
    bot_open_id: str | None,
) -> tuple[str, tuple[Attachment, ...]]:
    match message_type:
        case "text":
            return _resolve_mentions(str(content.get("text", "")), mentions, bot_open_id), ()
        case "post":
            return _post_text(content, mentions, bot_open_id)
        case "image":
            key = str(content.get("image_key", ""))
            return "", (Attachment("image", key),) if key else ()
        case "file":
            key = str(content.get("file_key", ""))
            name = str(content.get("file_name", ""))
            return "", (Attachment("file", key, name),) if key else ()
        case _:
            return "", ()


def _resolve_mentions(text: str, mentions: list[RawMention], bot_open_id: str | None) -> str:
    """Drop the bot's own mention, show other people as @Name, @_all as @all."""
    for mention in sorted(mentions, key=lambda m: -len(m.get("key", ""))):
        key = mention.get("key", "")
        if not key or key == ALL_MENTION:
            continue
        pattern = re.escape(key) + r"(?!\d)"
        if _is_bot(mention, bot_open_id):
            text = re.sub(pattern + r"[ \t]?", "", text)
        else:
            name = mention.get("name") or key.lstrip("@")
            literal = ("@" + name).replace("\\", "\\\\")  # a name's backslashes stay as they are
            text = re.sub(pattern, literal, text)
    text = re.sub(re.escape(ALL_MENTION) + r"(?!\w)", "@all", text)
    return text.strip()


def _post_body(content: dict[str, Any]) -> dict[str, Any]:
    if "content" in content:
        return content
    # Some clients wrap the post in a locale: {"zh_cn": {"title", "content"}}.
    for value in content.values():
        if isinstance(value, dict) and "content" in value:
            return value
    return {}


def _post_text(
    content: dict[str, Any], mentions: list[RawMention], bot_open_id: str | None
) -> tuple[str, tuple[Attachment, ...]]:
    body = _post_body(content)
    by_key = {m.get("key", ""): m for m in mentions}
    lines: list[str] = []
    attachments: list[Attachment] = []
    title = str(body.get("title") or "").strip()
    if title:
        lines.append(title)
    for paragraph in body.get("content") or []:
        if not isinstance(paragraph, list):
            continue
        parts: list[str] = []
        for element in paragraph:
            if not isinstance(element, dict):
                continue
            parts.append(_post_element(element, by_key, bot_open_id, attachments))
        lines.append("".join(parts).strip())
    text = "\n".join(lines)
    return text.strip(), tuple(attachments)


def _post_element(
    element: dict[str, Any],
    by_key: dict[str, RawMention],
    bot_open_id: str | None,
    attachments: list[Attachment],
) -> str:
    tag = element.get("tag")
    match tag:
        case "text" | "md":
            return str(element.get("text", ""))
        case "a":
            label = str(element.get("text") or element.get("href") or "")
            href = str(element.get("href") or "")
            return f"[{label}]({href})" if href else label
        case "at":
            user = str(element.get("user_id") or "")
            mention = by_key.get(user)
            if mention is not None and _is_bot(mention, bot_open_id):
                return ""
            if user == bot_open_id and bot_open_id:
                return ""
            if user in ("all", ALL_MENTION):
                return "@all"
            name = element.get("user_name") or (mention or {}).get("name") or user
            return f"@{name}"
        case "img":
            key = str(element.get("image_key") or "")
            if key:
                attachments.append(Attachment("image", key))
            return ""
        case "media":
            key = str(element.get("file_key") or "")
            if key:
                attachments.append(Attachment("file", key, str(element.get("file_name") or "")))
            return ""
        case "code_block":
            language = str(element.get("language") or "").lower()
            return f"\n```{language}\n{element.get('text', '')}\n```\n"
        case "emotion":
            return f":{element.get('emoji_type', '')}:"
        case "hr":
            return "\n---\n"
        case _:
            return str(element.get("text", ""))
