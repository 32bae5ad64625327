"""A fake Feishu/Lark open platform for end-to-end tests of the bridge.

One loopback port serves what the real `lark.ws.Client` and `lark.Client` need
(see /work/shared/notes/feishu-offline.md):

* `POST /callback/ws/endpoint` -> the websocket URL and a fast-reconnect ClientConfig,
* the websocket itself, speaking binary protobuf frames (`lark_oapi.ws.pb.pbbp2_pb2.Frame`):
  pings are answered with pongs, events are pushed with `push_event(...)` and their acks recorded,
* the tenant token, `GET /open-apis/bot/v3/info`, IM message create / reply / patch / edit and
  message resources (images and files).

* `GET /open-apis/im/v1/chats/{chat_id}` (group owner and managers, set with `set_chat(...)`).
* `GET /open-apis/contact/v3/users/{user_id}` (a member's name, set with `set_user(...)`).
* `GET /open-apis/im/v1/messages/{message_id}` ("获取指定消息的内容",
  server-docs/im-v1/message/get): every user message pushed as an event and every bot
  message, as `data.items`; a `merge_forward` (`forward_event(...)`) with its children, each
  naming its forward in `upper_message_id`.

History for assertions: `fake.sent` (every IM call: method, path, body, headers), `fake.acks`
(with timing), `fake.messages` (every bot message and its latest content), `fake.markup` (every
tag the server would interpret in what the bot sent; `fake.mentions` the `at` ones: who got
notified). `fail_next(...)` injects 429 / error responses, `drop_connection()` closes the
websocket from the server side. Every instance uses its own app_id: lark's tenant token cache is
process-global.

How the server reads markup, and how a user reads the result, follows the documentation (named
beside each rule below): `message_markup` finds what would act, `visible_text` what shows.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import html
import itertools
import json
import math
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from lark_oapi.ws.pb.pbbp2_pb2 import Frame
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

SERVICE_ID = 33554678
BOT_OPEN_ID = "ou_fakebot0000000000000000000000"
OWNER_OPEN_ID = "ou_owner000000000000000000000000"


@dataclass
class SentCall:
    """One IM API call the bridge made."""

    method: str
    path: str
    query: dict[str, str]
    body: dict[str, Any]
    headers: dict[str, str]
    at: float
    status: int = 200
    message_id: str | None = None  # the bot message created or targeted

    @property
    def kind(self) -> str:
        """create / reply / patch / edit / resource / cardkit / upload / reaction / other."""
        if "/cardkit/" in self.path:
            return "cardkit"
        if self.path.endswith(("/im/v1/images", "/im/v1/files")):
            return "upload"
        if "/reactions" in self.path:
            return "reaction"
        if self.path.endswith("/reply"):
            return "reply"
        if "/resources/" in self.path:
            return "resource"
        if self.method == "PATCH":
            return "patch"
        if self.method == "PUT":
            return "edit"
        if self.method == "POST" and self.path.rstrip("/").endswith("/im/v1/messages"):
            return "create"
        return "other"

    @property
    def content(self) -> dict[str, Any]:
        raw = self.body.get("content")
        return json.loads(raw) if isinstance(raw, str) else {}


@dataclass
class BotMessage:
    """A message the bot sent, with every version of its content (patches append)."""

    message_id: str
    msg_type: str
    reply_to: str | None
    chat_id: str | None
    uuid: str | None
    versions: list[dict[str, Any]] = field(default_factory=list)
    card_id: str | None = None  # a CardKit card entity sent by reference; versions follow it

    @property
    def content(self) -> dict[str, Any]:
        return self.versions[-1]

    @property
    def text(self) -> str:
        return visible_text(self.msg_type, self.content)


@dataclass
class Ack:
    frame_id: str
    event_id: str | None
    code: int
    biz_rt: str | None
    pushed_at: float
    acked_at: float
    data: dict[str, Any] | None = None
    """The handler's answer (a card action's toast and card), decoded from the ack's base64."""

    @property
    def delay(self) -> float:
        return self.acked_at - self.pushed_at


@dataclass
class Failure:
    """An injected failure for the next matching IM calls."""

    kind: str  # create / reply / patch / any
    status: int
    code: int
    msg: str
    reset: str | None
    remaining: int


# --- how Feishu reads what the bot sends -------------------------------------------------------
# Text messages: `<at user_id="ou_x">Name</at>` / `<at user_id="all"></at>` mention; `<i> <u> <s>`
# style. Docs: "发送消息内容结构" (text), https://open.feishu.cn/document/uAjLw4CM/ukTMukTMukTM/
# im-v1/message/create_json; IM FAQ "怎么实现机器人@人" (.../reference/im-v1/guide/faq). No
# escape is documented: what reads as a tag is read as one. The pattern is liberal (spaces, case).
_TEXT_TAG = re.compile(r"<\s*/?\s*(at|i|u|s|b)\b([^>]*)>", re.IGNORECASE)
# Card markdown (JSON 2.0): CommonMark except HTML blocks, plus these tags; `<at id=all>`,
# `<at id=ou_x>`, `<at ids=a,b>`, `<at email=..>` mention. Docs: "富文本（Markdown）",
# https://open.feishu.cn/document/feishu-cards/card-json-v2-components/content-components/
# rich-text ("支持的 Markdown 语法"). Entities decode to text ("特殊字符转义说明": `&#60;` is `<`);
# code spans and fenced code are literal (CommonMark).
_CARD_TAG = re.compile(
    r"<\s*/?\s*(at|a|link|font|text_tag|person|local_datetime|number_tag|raw|audio|br|hr)\b"
    r"([^>]*)>",
    re.IGNORECASE,
)
_MENTION_TARGET = re.compile(r"\b(?:user_id|id|ids|email)\s*=\s*[\"']?([^\"'\s>]*)", re.IGNORECASE)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
# The bridge's joiner after `<` (bridge/render.py) is invisible: a reader sees `<`.
_JOINED_LT = "<\u200d"


@dataclass(frozen=True)
class Markup:
    """A tag the server would interpret in a bot message: `at` notifies `target`."""

    message_id: str
    msg_type: str
    tag: str
    target: str | None


def _tags(pattern: re.Pattern[str], text: str) -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    for m in pattern.finditer(text):
        if m.group(0).lstrip("< \t").startswith("/"):
            continue  # a closing tag acts through its opening one
        tag = m.group(1).lower()
        target = _MENTION_TARGET.search(m.group(2)) if tag == "at" else None
        found.append((tag, target.group(1) if target else None))
    return found


def _markdown_runs(markdown: str) -> list[tuple[str, bool]]:
    """(text, is_code) runs that join back to `markdown`: fenced blocks and code spans are code."""
    runs: list[tuple[str, bool]] = []
    fence: str | None = None
    for line in markdown.splitlines(keepends=True):
        m = _FENCE.match(line)
        stripped = line.strip()
        if fence is None and m is not None:
            fence = m.group(1)
            runs.append((line, True))
        elif fence is not None:
            runs.append((line, True))
            if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                fence = None
        else:
            runs.append((line, False))
    out: list[tuple[str, bool]] = []
    prose = ""
    for text, is_code in [*runs, ("", True)]:
        if not is_code:
            prose += text
            continue
        pos = 0
        for m in _CODE_SPAN.finditer(prose):
            out.append((prose[pos : m.start()], False))
            out.append((m.group(0), True))
            pos = m.end()
        out.append((prose[pos:], False))
        prose = ""
        out.append((text, True))
    return out


def _card_elements(content: dict[str, Any]) -> list[dict[str, Any]]:
    elements = (content.get("body") or {}).get("elements") or content.get("elements") or []
    return [e for e in elements if isinstance(e, dict)]


def _card_markdowns(content: dict[str, Any]) -> list[str]:
    return [text for text, is_markdown in _card_texts(_card_elements(content)) if is_markdown]


def _card_texts(elements: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """Texts of card components in reading order, containers included: (text, is_markdown)."""
    found: list[tuple[str, bool]] = []
    for element in elements:
        tag = element.get("tag")
        if tag == "markdown":
            found.append((str(element.get("content", "")), True))
        elif tag == "div" and (element.get("text") or {}).get("tag") == "lark_md":
            found.append((str(element["text"].get("content", "")), True))
        elif tag == "collapsible_panel":
            # "折叠面板" (JSON 2.0): the header title shows, folded or not; its elements follow.
            title = ((element.get("header") or {}).get("title")) or {}
            if title.get("content"):
                found.append((str(title["content"]), title.get("tag") == "markdown"))
        children = [e for e in element.get("elements") or [] if isinstance(e, dict)]
        for column in element.get("columns") or []:
            children.extend(e for e in column.get("elements") or [] if isinstance(e, dict))
        found.extend(_card_texts(children))
    return found


def _post_body(content: dict[str, Any]) -> dict[str, Any]:
    return content.get("zh_cn") or content.get("en_us") or content


def message_markup(msg_type: str, content: dict[str, Any]) -> list[tuple[str, str | None]]:
    """Every tag the server would interpret in a message: (tag, mention target or None)."""
    if msg_type == "text":
        return _tags(_TEXT_TAG, str(content.get("text", "")))
    if msg_type == "interactive":
        found: list[tuple[str, str | None]] = []
        for markdown in _card_markdowns(content):
            for text, is_code in _markdown_runs(markdown):
                if not is_code:
                    found.extend(_tags(_CARD_TAG, text))
        return found
    if msg_type == "post":
        # "富文本 post": `at` elements mention; an `md` element reads `<at user_id=...>`; a
        # `text` element is literal (un_escape false); `code_block` is code.
        found = []
        for paragraph in _post_body(content).get("content", []):
            for element in paragraph:
                if element.get("tag") == "at":
                    found.append(("at", str(element.get("user_id", ""))))
                elif element.get("tag") == "a":
                    found.append(("a", str(element.get("href", ""))))
                elif element.get("tag") == "md":
                    found.extend(_tags(_TEXT_TAG, str(element.get("text", ""))))
        return found
    return []


def _read_card_markdown(markdown: str) -> str:
    return "".join(
        text.replace(_JOINED_LT, "<") if is_code else html.unescape(text)
        for text, is_code in _markdown_runs(markdown)
    )


def visible_text(msg_type: str, content: dict[str, Any]) -> str:
    """What a user would read: text, markdown of cards (entities decoded), or text of posts."""
    if msg_type == "text":
        return str(content.get("text", "")).replace(_JOINED_LT, "<")
    if msg_type == "interactive":
        parts: list[str] = []
        header = content.get("header") or {}
        title = (header.get("title") or {}).get("content")
        if title:
            parts.append(str(title))
        for text, is_markdown in _card_texts(_card_elements(content)):
            parts.append(_read_card_markdown(text) if is_markdown else text)
        return "\n".join(parts)
    if msg_type == "post":
        body = _post_body(content)
        lines = [str(body.get("title", ""))] if body.get("title") else []
        for paragraph in body.get("content", []):
            lines.append(
                "".join(str(el.get("text", "")).replace(_JOINED_LT, "<") for el in paragraph)
            )
        return "\n".join(lines)
    return json.dumps(content, ensure_ascii=False)


# --- what Feishu refuses in what the bot sends ---------------------------------------------------
# The fake refuses what the documentation says the server refuses, with the documented HTTP status,
# `code` and `msg`, so a test fails the way a user's message would. Pages under
# https://open.feishu.cn/document/ (mirrored in wxkingstar/doc-hub-mcp, feishu/). Sizes are read
# as decimal KB, the stricter reading.
# * "发送消息" (server-docs/im-v1/message/create), `content`: text request bodies at most 150 KB,
#   card and post bodies at most 30 KB; error 230025 "The length of the message content reaches
#   its limit." (HTTP 400). "更新已发送的消息卡片" (server-docs/im-v1/message-card/patch): 30 KB.
# * Card errors are 230099 "Failed to create card content" (HTTP 400) with a sub-code in `msg`
#   ("230099 子错误码" on both pages):
#   - 11310 "element exceeds the limit": a JSON 2.0 card holds at most 200 elements or components
#     ("卡片 JSON 2.0 结构", feishu-cards/card-json-v2-structure). Counted: every object with a
#     `tag`, at any depth (the page's example is a plain_text element).
#   - tables: at most four in one markdown element ("富文本（Markdown）" JSON 2.0, feishu-cards/
#     card-json-v2-components/content-components/rich-text, table syntax) and five per card
#     ("表格" JSON 2.0, .../content-components/table), markdown tables counted with table
#     components. The pages give no error code; the sub-code 11310 is the one issue 17 saw.
#   - nesting: containers nest at most five levels ("折叠面板" JSON 2.0, feishu-cards/
#     card-json-v2-components/containers/collapsible-panel); no code documented, 11310 used.
#   - 200570 "card contains invalid image keys": a markdown image `![hover](image_key)` (or an
#     `img` component) whose key did not come from "上传图片" (server-docs/im-v1/image/create).
#     This fake uploads nothing: `image_keys` holds the keys a test declares uploaded.
#   - forms ("表单容器" JSON 2.0, feishu-cards/card-json-v2-components/containers/form-container):
#     a form sits at the card's root only, holds no table and no form, has a `name` unique in the
#     card, every interactive component in it has a `name` unique in the card ("otherwise the
#     data fails to send"), and it holds a button with `form_action_type: submit`. An input's
#     `max_length` is 1..1,000 ("输入框", .../interactive-components/input). No error code is
#     documented for these; 11310 is used with the rule's words.
_BODY_LIMITS = {"text": 150_000, "post": 30_000, "interactive": 30_000}
_MARKDOWN_TABLES = 4
_CARD_TABLES = 5
_CARD_COMPONENTS = 200
_CARD_DEPTH = 5
_DELIMITER_ROW = re.compile(r"^ {0,3}\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
_MD_IMAGE = re.compile(r"!\[[^\]\n]*\]\(\s*<?([^)\s>]*)")


@dataclass(frozen=True)
class Refusal:
    """A send or update the fake refused as the server would: what, and why."""

    kind: str  # create / reply / patch
    status: int
    code: int
    msg: str


def _card_error(sub_code: int, message: str) -> tuple[int, int, str]:
    return 400, 230099, f"Failed to create card content, ext=ErrCode: {sub_code}; ErrMsg: {message}"


def markdown_tables(markdown: str) -> int:
    """Tables a markdown text shows: a pipe row followed by a delimiter row, outside fences."""
    count = 0
    fence: str | None = None
    previous = ""
    for line in markdown.split("\n"):
        m = _FENCE.match(line)
        stripped = line.strip()
        if fence is None and m is not None:
            fence, previous = m.group(1), ""
            continue
        if fence is not None:
            if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                fence = None
            continue
        is_delimiter = "|" in line and "-" in line and _DELIMITER_ROW.match(line) is not None
        if is_delimiter and "|" in previous and _DELIMITER_ROW.match(previous) is None:
            count += 1
        previous = line
    return count


def _markdown_image_keys(markdown: str) -> list[str]:
    return [
        key
        for text, is_code in _markdown_runs(markdown)
        if not is_code
        for key in _MD_IMAGE.findall(text)
    ]


def _tagged(value: Any) -> int:
    if isinstance(value, dict):
        return (1 if "tag" in value else 0) + sum(_tagged(v) for v in value.values())
    if isinstance(value, list):
        return sum(_tagged(v) for v in value)
    return 0


def _nested(elements: list[Any], depth: int = 1) -> list[tuple[dict[str, Any], int]]:
    found: list[tuple[dict[str, Any], int]] = []
    for element in elements:
        if isinstance(element, dict):
            found.append((element, depth))
            found.extend(_nested(element.get("elements") or [], depth + 1))
            for column in element.get("columns") or []:
                if isinstance(column, dict):
                    found.extend(_nested(column.get("elements") or [], depth + 1))
    return found


_INTERACTIVE = frozenset(
    {"input", "button", "select_static", "multi_select_static", "select_person", "checker",
     "date_picker", "picker_time", "picker_datetime", "select_img", "multi_select_person"}
)  # fmt: skip


def _form_refusal(components: list[tuple[dict[str, Any], int]]) -> str | None:
    """The form container's documented rules (see above), or None."""
    names: list[str] = []
    for component, depth in components:
        if component.get("tag") == "input":
            limit = component.get("max_length", 1000)
            if not isinstance(limit, int) or not 1 <= limit <= 1000:
                return "input max_length must be 1-1000"
            if len(str(component.get("default_value", ""))) > limit:
                return "input default_value longer than max_length"
        if component.get("tag") != "form":
            continue
        if depth != 1:
            return "form must be at the card's root"
        if not component.get("name"):
            return "form needs a name"
        names.append(str(component["name"]))
        inside = _nested(component.get("elements") or [])
        if any(c.get("tag") in ("table", "form") for c, _ in inside):
            return "form cannot hold a table or a form"
        for c, _ in inside:
            if c.get("tag") in _INTERACTIVE:
                if not c.get("name"):
                    return f"{c.get('tag')} in a form needs a name"
                names.append(str(c["name"]))
        if not any(
            c.get("tag") == "button" and c.get("form_action_type") == "submit" for c, _ in inside
        ):
            return "form needs a submit button"
    if len(names) != len(set(names)):
        return "names in a form must be unique in the card"
    return None


def content_refusal(
    msg_type: str, body: dict[str, Any], image_keys: set[str] | frozenset[str] = frozenset()
) -> tuple[int, int, str] | None:
    """(HTTP status, code, msg) the server answers for this send or update body, or None."""
    size = len(json.dumps(body, ensure_ascii=False).encode("utf-8"))
    if size > _BODY_LIMITS.get(msg_type, _BODY_LIMITS["interactive"]):
        return 400, 230025, "The length of the message content reaches its limit."
    if msg_type != "interactive":
        return None
    try:
        card = json.loads(body.get("content") or "{}")
    except ValueError:
        return _card_error(
            200621, "parse card json err, please check whether the card json is correct"
        )
    components = _nested(_card_elements(card))
    if _tagged(card) > _CARD_COMPONENTS:
        return _card_error(11310, "element exceeds the limit")
    if max((depth for _, depth in components), default=0) > _CARD_DEPTH:
        return _card_error(11310, "container nesting exceeds the limit")
    markdowns = [str(c.get("content", "")) for c, _ in components if c.get("tag") == "markdown"]
    tables = [markdown_tables(m) for m in markdowns]
    if max(tables, default=0) > _MARKDOWN_TABLES:
        return _card_error(11310, "table count in a markdown element exceeds the limit")
    table_components = sum(1 for c, _ in components if c.get("tag") == "table")
    if sum(tables) + table_components > _CARD_TABLES:
        return _card_error(11310, "table count exceeds the limit")
    form_rule = _form_refusal(components)
    if form_rule is not None:
        return _card_error(11310, form_rule)
    keys = [k for m in markdowns for k in _markdown_image_keys(m)]
    keys += [str(c.get("img_key", "")) for c, _ in components if c.get("tag") == "img"]
    for key in keys:
        if key not in image_keys:
            return _card_error(
                200570, f"card contains invalid image keys; ErrorValue: image key {key}"
            )
    return None


# --- uploads ------------------------------------------------------------------------------------
# "上传图片" (server-docs/im-v1/image/create, POST /im/v1/images, multipart `image_type` and
# `image`): JPG, JPEG, PNG, WEBP, GIF, BMP, ICO, TIFF, HEIC; at most 10 MB, never 0 bytes
# ("上传的图片大小不能超过 10 MB，且不支持上传大小为 0 的图片"); `image_type` is `message` or
# `avatar`; the answer's `data.image_key` goes into image messages and cards.
# "上传文件" (server-docs/im-v1/file/create, POST /im/v1/files, multipart `file_type`,
# `file_name`, `duration`, `file`): `file_type` one of opus, mp4, pdf, doc, xls, ppt, stream
# (anything else as stream); "文件大小不得超过 30 MB，且不允许上传空文件"; the answer's
# `data.file_key` goes into a file message (`msg_type: file`, content `{"file_key": ...}`).
# The error codes of these refusals are not in the parts of the pages we could read: the fake
# answers HTTP 400 with 234006 (too large), 234010 (empty) and 234011 (not an image of a listed
# format), the codes lark-oapi users report for these calls; the bridge never reads the code.
IMAGE_BYTES = 10 * 1024 * 1024
FILE_BYTES = 30 * 1024 * 1024
IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"BM", "bmp"),
    (b"\x00\x00\x01\x00", "ico"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
)
FILE_TYPES = frozenset({"opus", "mp4", "pdf", "doc", "xls", "ppt", "stream"})


def image_format(data: bytes) -> str | None:
    """The upload format `data` is in by its signature (WEBP and HEIC by their boxes), or None."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[4:8] == b"ftyp" and data[8:12] in (b"heic", b"heix", b"mif1", b"msf1"):
        return "heic"
    return next((name for sig, name in IMAGE_SIGNATURES if data.startswith(sig)), None)


@dataclass
class Upload:
    """An image or a file the bot uploaded."""

    key: str
    kind: str  # image / file
    name: str
    data: bytes
    file_type: str = ""


# --- faults the platform injects (delivery tests) ----------------------------------------------
# Each behaves as the documentation says the server does (pages under https://open.feishu.cn/
# document/, mirrored in wxkingstar/doc-hub-mcp):
# * rate limit, "频控策略" (server-docs/api-call-guide/frequency-control): HTTP 429, body
#   {"code": 99991400, "msg": "request trigger frequency limit"}, headers `x-ogw-ratelimit-limit`
#   (the window's limit) and `x-ogw-ratelimit-reset` (seconds until the limit resets); "wait the
#   header's seconds and retry until it succeeds". `rate_limit(seconds)`.
# * server errors: "服务端错误码说明" (server-docs/api-call-guide/generic-error-code) lists 1500
#   "internal error: retry later". The status and body of a gateway failure are not documented:
#   `outage(seconds, body=...)` answers a 5xx with that JSON, with `{"code": 0}` (issue 17 saw a
#   5xx whose body said success), or with an HTML page (lark-oapi then cannot parse it).
#   `commits=True`: the send is carried out and only the answer is lost (an ambiguous failure).
# * tenant token, "自建应用获取 tenant_access_token" (server-docs/authentication-management/
#   access-token/tenant_access_token_internal): valid for at most 2 h, the endpoint hands out a
#   new one when less than 30 min remain. `invalidate_token()` revokes the current one: calls
#   with it get HTTP 400 and 99991663 (invalid access token; 99991668 "expired" with
#   `invalidate_token(code=99991668)`, codes from lark-oapi's list: the error-code page was not
#   reachable offline), and the endpoint hands out a new one.
# * idempotency, "发送消息" (server-docs/im-v1/message/create, `uuid`): requests with the same uuid
#   send at most one message within 1 hour (`UUID_WINDOW_SECONDS`, on `fake.clock`). What a
#   repeated uuid answers is not documented; the fake answers success with the first message.
# * recall, "撤回消息" event (uAjLw4CM/ukTMukTMukTM/reference/im-v1/message/events/recalled):
#   `im.message.recalled_v1`, event {message_id, chat_id, recall_time (ms string),
#   recall_type: message_owner / group_owner / group_manager / enterprise_manager}. `recall(...)`.
UUID_WINDOW_SECONDS = 3600.0


@dataclass
class Fault:
    """Calls of `kind` (create/reply/patch/any) fail until `until` (on `fake.clock`)."""

    kind: str
    until: float
    status: int
    code: int
    msg: str
    body: str = "json"  # json / code0 / html
    rate_limited: bool = False
    commits: bool = False
    after: int = 0
    """Matching calls let through before the fault bites (an outage in mid-answer)."""


# --- CardKit card entities and reactions ---------------------------------------------------------
# Rules, each from the page named (pages under https://open.feishu.cn/document/, mirrored in
# wxkingstar/doc-hub-mcp; the research notes are /tmp/research/21-feishu.md §1, §4):
# * "飞书卡片资源概述" (cardkit-v1/feishu-card-resource-overview) and "创建卡片实体"
#   (cardkit-v1/card/create): `POST /cardkit/v1/cards {"type":"card_json","data":"<card>"}` ->
#   data.card_id. The entity holds at most 30 KB (200860 "Card content exceeds limit") and 200
#   components (300305), only schema 2.0 (300303), element_id unique (300301), valid JSON
#   (200220). It lives 14 days (200750) and is sent **once**, by the app that created it
#   ("卡片实体仅支持发送一次"; the code of a second send is not documented: 230099 is used).
# * every later call carries `sequence`, which must strictly increase across all calls on one
#   card (300317 "sequence did not increment"); an unknown card_id is 200740.
# * "流式更新文本" (cardkit-v1/card-element/content): `PUT …/elements/:element_id/content
#   {"content": <full text>, "sequence"}`, only on markdown / plain_text elements (300310), only
#   while streaming_mode is on (300309 "Card streaming closed"), 1-100 000 chars (10002).
# * "流式更新卡片" (cardkit-v1/streaming-updates-openapi-overview): streaming mode closes by
#   itself 10 minutes after it was last switched on (200850 "Card streaming timeout"; the
#   element-create page says 200510); at most 10 operations per second on one card entity, card
#   and element APIs together (the code is not documented: the fake answers as "频控策略" does,
#   HTTP 429 / 99991400 with `x-ogw-ratelimit-reset`).
# * "更新卡片配置" (cardkit-v1/card/settings): `PATCH …/settings {"settings":
#   "{\"config\":{\"streaming_mode\":false}}", "sequence"}`; switching it on again restarts
#   the 10 minutes. "全量更新卡片实体" (cardkit-v1/card/update): `PUT …/cards/:card_id
#   {"card":{"type":"card_json","data":…}, "sequence"}`, the create limits apply.
# * Reactions, "添加消息表情回复" / "删除消息表情回复" (server-docs/im-v1/message-reaction/
#   create, delete): `POST /im/v1/messages/:id/reactions {"reaction_type":{"emoji_type":…}}` ->
#   data.reaction_id; an emoji_type not in "表情文案说明" (…/message-reaction/emojis-introduce)
#   is 231001; `DELETE …/reactions/:reaction_id` deletes only the caller's own reaction (231007),
#   one that is not on that message is 231010, an unknown id 231011.
CARD_BYTES = 30_000
CARD_COMPONENTS = 200
CARD_OPS_PER_SECOND = 10
STREAMING_SECONDS = 600.0
CARD_LIFETIME_SECONDS = 14 * 24 * 3600.0
EMOJI_TYPES = frozenset(
    {
        "OK", "THUMBSUP", "DONE", "Typing", "OnIt", "OneSecond", "Get", "LGTM", "CheckMark",
        "CrossMark", "ThumbsDown", "THINKING", "Yes", "No", "Hundred", "Fire", "SALUTE",
    }
)  # fmt: skip


@dataclass
class CardOp:
    """One CardKit call on a card entity: what, its sequence, when, and the answer's code."""

    kind: str  # create / update / settings / content
    sequence: int
    at: float
    code: int
    content: str = ""
    element_id: str = ""
    streaming: bool | None = None  # settings: the streaming_mode it set


@dataclass
class CardFault:
    op: str
    after: int
    status: int
    code: int
    msg: str
    times: int


@dataclass
class CardEntity:
    card_id: str
    app_id: str
    card: dict[str, Any]
    created_at: float
    streaming: bool = False
    streaming_since: float = 0.0
    sequence: int = 0
    sent_as: str | None = None
    ops: list[CardOp] = field(default_factory=list)


@dataclass
class Reaction:
    reaction_id: str
    message_id: str
    emoji_type: str
    operator_type: str  # app / user
    operator_id: str
    deleted: bool = False


def _card_elements_all(card: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e, _ in _nested(_card_elements(card))]


def _entity_refusal(card: Any) -> tuple[int, int, str] | None:
    """The create / full-update limits of a card entity, or None."""
    if not isinstance(card, dict):
        return 400, 200220, "Failed to generate card content"
    if str(card.get("schema", "")) != "2.0":
        return 400, 300303, "Only schema 2.0 is supported"
    if len(json.dumps(card, ensure_ascii=False).encode("utf-8")) > CARD_BYTES:
        return 400, 200860, "Card content exceeds limit"
    if _tagged(card) > CARD_COMPONENTS:
        return 400, 300305, "number of card components exceeds 200"
    ids = [e.get("element_id") for e in _card_elements_all(card) if e.get("element_id")]
    if len(ids) != len(set(ids)):
        return 400, 300301, "Duplicate element_id"
    return None


def _ack_data(raw: Any) -> dict[str, Any] | None:
    """The handler's answer in an ack: base64 of JSON (lark-oapi ws client)."""
    if not raw:
        return None
    try:
        decoded = base64.b64decode(raw if isinstance(raw, (str, bytes)) else str(raw))
        value = json.loads(decoded)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class FakeFeishu:
    """Serve the fake platform on a free loopback port in a background thread."""

    def __init__(self, *, bot_open_id: str = BOT_OPEN_ID) -> None:
        self.app_id = f"cli_test{uuid.uuid4().hex[:12]}"
        self.app_secret = "fake-secret"
        self.bot_open_id = bot_open_id
        self.tenant_token = f"t-{uuid.uuid4().hex}"
        self.sent: list[SentCall] = []
        self.acks: list[Ack] = []
        self.messages: dict[str, BotMessage] = {}
        self.endpoint_calls = 0
        self.token_calls = 0
        self.connections_total = 0
        self.unknown: list[str] = []
        self.resources: dict[str, tuple[bytes, str]] = {}  # file_key -> (bytes, file name)
        self.markup: list[Markup] = []  # tags the server would interpret in what the bot sent
        self.chats: dict[str, dict[str, Any]] = {}  # chat_id -> GET /im/v1/chats/{id} data
        self.users: dict[str, str] = {}  # open_id -> name, for GET /contact/v3/users/{id}
        self.chat_lookups = 0
        self.user_lookups = 0
        self.refused: list[Refusal] = []  # sends and updates refused for a documented limit
        self.image_keys: set[str] = set()  # image keys uploaded ("上传图片") or declared by a test
        self.uploads: dict[str, Upload] = {}  # image_key / file_key -> what was uploaded
        self._failures: list[Failure] = []
        self._answer_late = 0.0
        self.cards: dict[str, CardEntity] = {}  # CardKit card entities by card_id
        self.reactions: list[Reaction] = []  # every reaction added, deleted ones included
        self._card_faults: list[CardFault] = []
        self._tapped: dict[str, str] = {}  # card action event_id -> the tapped message
        self.user_messages: dict[str, dict[str, Any]] = {}  # GET message items, by message_id
        self._forwarded: dict[str, list[dict[str, Any]]] = {}  # merge_forward -> its children
        self.message_gets: list[str] = []  # message ids asked for with GET
        # fault injection (see "faults the platform injects")
        self.clock = time.monotonic  # patchable: fault windows and the uuid window
        self._faults: list[Fault] = []
        self._uuid_at: dict[str, float] = {}
        self._refused_tokens: dict[str, int] = {}  # revoked token -> the code it gets
        self.faulted: list[SentCall] = []  # calls answered by an injected fault
        self._sockets: list[WebSocket] = []
        self._pushed: dict[str, tuple[float, str | None]] = {}
        self._uuids: dict[str, str] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # --- lifecycle -------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeFeishu:
        app = Starlette(
            routes=[
                Route("/callback/ws/endpoint", self._endpoint, methods=["POST"]),
                WebSocketRoute("/ws/v2", self._websocket),
                Route(
                    "/open-apis/auth/v3/tenant_access_token/internal",
                    self._tenant_token,
                    methods=["POST"],
                ),
                Route("/open-apis/bot/v3/info", self._bot_info, methods=["GET"]),
                Route("/open-apis/im/v1/chats/{chat_id}", self._chat_info, methods=["GET"]),
                Route("/open-apis/contact/v3/users/{user_id}", self._user_info, methods=["GET"]),
                Route("/open-apis/im/v1/messages", self._create, methods=["POST"]),
                Route(
                    "/open-apis/im/v1/messages/{message_id}/reply", self._reply, methods=["POST"]
                ),
                Route(
                    "/open-apis/im/v1/messages/{message_id}",
                    self._update,
                    methods=["PATCH", "PUT"],
                ),
                Route(
                    "/open-apis/im/v1/messages/{message_id}",
                    self._get_message,
                    methods=["GET"],
                ),
                Route(
                    "/open-apis/im/v1/messages/{message_id}/resources/{file_key}",
                    self._resource,
                    methods=["GET"],
                ),
                Route(
                    "/open-apis/im/v1/messages/{message_id}/reactions",
                    self._add_reaction,
                    methods=["POST"],
                ),
                Route(
                    "/open-apis/im/v1/messages/{message_id}/reactions/{reaction_id}",
                    self._delete_reaction,
                    methods=["DELETE"],
                ),
                Route("/open-apis/im/v1/images", self._upload_image, methods=["POST"]),
                Route("/open-apis/im/v1/files", self._upload_file, methods=["POST"]),
                Route("/open-apis/cardkit/v1/cards", self._card_create, methods=["POST"]),
                Route("/open-apis/cardkit/v1/cards/{card_id}", self._card_update, methods=["PUT"]),
                Route(
                    "/open-apis/cardkit/v1/cards/{card_id}/settings",
                    self._card_settings,
                    methods=["PATCH"],
                ),
                Route(
                    "/open-apis/cardkit/v1/cards/{card_id}/elements/{element_id}/content",
                    self._card_content,
                    methods=["PUT"],
                ),
                Route(
                    "/{path:path}", self._unknown, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]
                ),
            ]
        )
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan="off",
            access_log=False,
            ws="websockets-sansio",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, name="fake-feishu", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("fake Feishu did not start")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def _serve(self) -> None:
        assert self._server is not None
        asyncio.run(self._main())

    async def _main(self) -> None:
        assert self._server is not None
        self._loop = asyncio.get_running_loop()
        await self._server.serve()

    def stop(self) -> None:
        if self._loop is not None and self._sockets:
            closing = asyncio.run_coroutine_threadsafe(self._close_all(), self._loop)
            # The loop may already be gone; the server stops below anyway.
            with contextlib.suppress(Exception):
                closing.result(timeout=5)
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    # --- scripting -------------------------------------------------------------------------------
    def fail_next(
        self,
        kind: str = "any",
        *,
        times: int = 1,
        status: int = 429,
        code: int = 99991400,
        msg: str = "request trigger frequency limit",
        reset: str | None = "1",
    ) -> None:
        """Answer the next `times` IM calls of `kind` (create/reply/patch/any) with an error."""
        with self._lock:
            self._failures.append(Failure(kind, status, code, msg, reset, times))

    def answer_late(self, seconds: float) -> None:
        """Sends of new messages reach the chat at once but answer the bot `seconds` later (a
        slow network back to the bot): a user can see, and tap, a card whose id the bot does not
        know yet."""
        with self._lock:
            self._answer_late = seconds

    def set_chat(self, chat_id: str, *, owner: str, managers: list[str] | None = None) -> None:
        """Serve a group's owner and managers (user_manager_id_list) at GET /im/v1/chats/{id}."""
        with self._lock:
            self.chats[chat_id] = {
                "chat_id": chat_id,
                "name": "fake group",
                "chat_mode": "group",
                "chat_type": "private",
                "owner_id_type": "open_id",
                "owner_id": owner,
                "user_manager_id_list": list(managers or []),
                "bot_manager_id_list": [],
            }

    def set_user(self, open_id: str, name: str) -> None:
        """Serve a member's name at GET /contact/v3/users/{open_id}; others are out of sight."""
        with self._lock:
            self.users[open_id] = name

    @property
    def mentions(self) -> list[Markup]:
        """Every mention the server would have made (someone, or everyone, got notified)."""
        with self._lock:
            return [m for m in self.markup if m.tag == "at"]

    def add_resource(self, file_key: str, data: bytes, file_name: str = "") -> None:
        self.resources[file_key] = (data, file_name)

    @property
    def connected(self) -> bool:
        return bool(self._sockets)

    def push_event(self, payload: dict[str, Any], *, fragments: int = 1) -> str:
        """Send an event over the live websocket; returns the frame id its ack will carry."""
        return self.push_event_bytes(json.dumps(payload).encode("utf-8"), payload, fragments)

    def push_event_bytes(self, data: bytes, payload: dict[str, Any], fragments: int = 1) -> str:
        """Send `data` as an event's bytes, as they are (`payload`: the event they stand for,
        kept for GET message): bytes that are not UTF-8 reach the client as the platform
        would pass them on, since a frame's payload is bytes (protobuf `bytes payload`)."""
        # The client can see its handshake finish a moment before this server's own thread has
        # registered the socket; give that thread a moment on a loaded machine.
        deadline = time.monotonic() + 5
        while (self._loop is None or not self._sockets) and time.monotonic() < deadline:
            time.sleep(0.01)
        if self._loop is None or not self._sockets:
            raise RuntimeError("no websocket client is connected")
        frame_id = uuid.uuid4().hex
        size = -(-len(data) // fragments)
        parts = [data[i * size : (i + 1) * size] for i in range(fragments)]
        header = payload.get("header") or {}
        with self._lock:
            self._pushed[frame_id] = (time.monotonic(), header.get("event_id"))
            if header.get("event_type") == "im.message.receive_v1":
                self._keep_user_message(payload)
        frames = [
            _frame(
                method=1,
                headers={
                    "type": "event",
                    "message_id": frame_id,
                    "sum": str(fragments),
                    "seq": str(i),
                    "trace_id": uuid.uuid4().hex[:16],
                },
                payload=part,
                seq=next(self._ids),
            )
            for i, part in enumerate(parts)
        ]
        future = asyncio.run_coroutine_threadsafe(self._send_frames(frames), self._loop)
        future.result(timeout=5)
        return frame_id

    def drop_connection(self) -> None:
        """Close every websocket from the server side (like a Feishu gateway restart)."""
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._close_all(), self._loop).result(timeout=5)

    # --- fault injection -------------------------------------------------------------------------
    def outage(
        self,
        seconds: float,
        *,
        kind: str = "any",
        status: int = 503,
        body: str = "json",
        commits: bool = False,
        after: int = 0,
    ) -> None:
        """IM calls of `kind` answer HTTP `status` for `seconds` (see "server errors"), the
        first `after` of them excepted; `kind="any"` (or "cardkit") takes CardKit calls too."""
        with self._lock:
            self._faults.append(
                Fault(
                    kind,
                    self.clock() + seconds,
                    status,
                    1500,
                    "internal error",
                    body,
                    False,
                    commits,
                    after,
                )
            )

    def rate_limit(self, seconds: float, *, kind: str = "any") -> None:
        """IM calls of `kind` are throttled for `seconds` (HTTP 429, 99991400, reset header)."""
        with self._lock:
            self._faults.append(
                Fault(
                    kind,
                    self.clock() + seconds,
                    429,
                    99991400,
                    "request trigger frequency limit",
                    rate_limited=True,
                )
            )

    def invalidate_token(self, *, code: int = 99991663) -> None:
        """Revoke the current tenant token; the token endpoint hands out a new one."""
        with self._lock:
            self._refused_tokens[self.tenant_token] = code
            self.tenant_token = f"t-{uuid.uuid4().hex}"

    def recall_event(self, message_id: str, *, chat_id: str = "oc_p2pchat") -> dict[str, Any]:
        now_ms = int(time.time() * 1000)
        return {
            "schema": "2.0",
            "header": {
                "event_id": uuid.uuid4().hex,
                "event_type": "im.message.recalled_v1",
                "create_time": str(now_ms),
                "token": "",
                "app_id": self.app_id,
                "tenant_key": "tenant_fake",
            },
            "event": {
                "message_id": message_id,
                "chat_id": chat_id,
                "recall_time": str(now_ms),
                "recall_type": "message_owner",
            },
        }

    def recall(self, message_id: str, *, chat_id: str = "oc_p2pchat") -> str:
        """The user recalls a message: push `im.message.recalled_v1`; returns the frame id."""
        with self._lock:
            if message_id in self.user_messages:  # GET then says `deleted: true`, no content
                self.user_messages[message_id]["deleted"] = True
        return self.push_event(self.recall_event(message_id, chat_id=chat_id))

    def card_action_event(
        self,
        value: Any,
        *,
        message_id: str,
        chat_id: str = "oc_p2pchat",
        operator: str = OWNER_OPEN_ID,
        tag: str = "button",
        form_value: dict[str, Any] | None = None,
        name: str | None = None,
    ) -> dict[str, Any]:
        """A tap on a card button, as "卡片回传交互" (feishu-cards/card-callback-communication)
        describes it: `card.action.trigger`, schema 2.0, `header.create_time` in microseconds,
        `event.operator`, `event.action.value` (an object), `event.context.open_message_id` and
        `open_chat_id`. Over the long connection it comes in a `type=event` frame ("使用长连接
        接收回调", event-subscription-guide/callback-subscription/…; lark-oapi's ws client drops
        `type=card` frames), and the answer (toast, card) must come back within 3 s in the ack.
        A form's submit button adds `form_value` (each named component's value) and the button's
        `name` ("表单容器", 回调结构)."""
        action: dict[str, Any] = {"value": value, "tag": tag}
        if form_value is not None:
            action["form_value"] = form_value
        if name is not None:
            action["name"] = name
        return {
            "schema": "2.0",
            "header": {
                "event_id": uuid.uuid4().hex,
                "token": "",
                "create_time": str(int(time.time() * 1_000_000)),
                "event_type": "card.action.trigger",
                "tenant_key": "tenant_fake",
                "app_id": self.app_id,
            },
            "event": {
                "operator": {"tenant_key": "tenant_fake", "open_id": operator, "union_id": "on_x"},
                "token": f"c-{uuid.uuid4().hex}",
                "action": action,
                "host": "im_message",
                "context": {"open_message_id": message_id, "open_chat_id": chat_id},
            },
        }

    def push_card_action(self, value: Any, **kwargs: Any) -> str:
        """Tap a button (`card.action.trigger`); returns the frame id: its ack has the answer.
        A card in the answer replaces the tapped card (the callback page's `card` field)."""
        event = self.card_action_event(value, **kwargs)
        with self._lock:
            self._tapped[event["header"]["event_id"]] = kwargs["message_id"]
        return self.push_event(event)

    def card_buttons(self, message_id: str) -> list[dict[str, Any]]:
        """The buttons a bot message shows now (JSON 2.0: straight in the elements, or columns)."""
        with self._lock:
            message = self.messages[message_id]
            return [e for e in _card_elements_all(message.content) if e.get("tag") == "button"]

    def _token_refused(self, request: Request) -> Response:
        presented = (request.headers.get("authorization") or "").removeprefix("Bearer ")
        with self._lock:
            code = self._refused_tokens.get(presented, 99991663)
        return JSONResponse(
            {"code": code, "msg": "Invalid access token for authorization"}, status_code=400
        )

    def _fault_for(self, call: SentCall) -> Response | None:
        now = self.clock()
        with self._lock:
            fault = next(
                (f for f in self._faults if f.until > now and f.kind in ("any", call.kind)), None
            )
            if fault is not None and fault.after > 0:
                fault.after -= 1
                fault = None
            if fault is None:
                return None
            call.status = fault.status
            self.faulted.append(call)
        if fault.commits and call.kind in ("create", "reply"):
            self._new_message(call, call.message_id, call.body.get("receive_id"))
        if fault.rate_limited:
            return JSONResponse(
                {"code": fault.code, "msg": fault.msg},
                status_code=fault.status,
                headers={
                    "x-ogw-ratelimit-limit": "50",
                    "x-ogw-ratelimit-reset": str(max(1, math.ceil(fault.until - now))),
                },
            )
        if fault.body == "html":
            return Response(
                "<html><body><h1>502 Bad Gateway</h1></body></html>",
                status_code=fault.status,
                media_type="text/html",
            )
        code = 0 if fault.body == "code0" else fault.code
        msg = "success" if fault.body == "code0" else fault.msg
        return JSONResponse({"code": code, "msg": msg, "data": {}}, status_code=fault.status)

    # --- event builders --------------------------------------------------------------------------
    def message_event(
        self,
        content: dict[str, Any],
        *,
        message_type: str = "text",
        chat_id: str = "oc_p2pchat",
        chat_type: str = "p2p",
        sender: str = OWNER_OPEN_ID,
        sender_type: str = "user",
        message_id: str | None = None,
        event_id: str | None = None,
        mentions: list[dict[str, Any]] | None = None,
        create_time_ms: int | None = None,
        event_type: str = "im.message.receive_v1",
        thread_id: str | None = None,
        user_agent: str | None = None,
        parent_id: str | None = None,
        root_id: str | None = None,
    ) -> dict[str, Any]:
        now_ms = create_time_ms if create_time_ms is not None else int(time.time() * 1000)
        message: dict[str, Any] = {
            "message_id": message_id or f"om_{uuid.uuid4().hex}",
            "create_time": str(now_ms),
            "update_time": str(now_ms),
            "chat_id": chat_id,
            "chat_type": chat_type,
            "message_type": message_type,
            "content": json.dumps(content, ensure_ascii=False),
        }
        if mentions:
            message["mentions"] = mentions
        if user_agent:
            # "接收消息": `message.user_agent` with the im:user_agent:read scope, e.g.
            # "… Lark/6.7.5 LarkLocale/en_US …" (server-docs/im-v1/message/events/receive).
            message["user_agent"] = user_agent
        if thread_id:
            # "话题概述": a message in a topic carries its `thread_id` (omt_…); in a topic its
            # root_id/parent_id name the topic's first message
            # (reference/im-v1/message/thread-introduction).
            message["thread_id"] = thread_id
        if parent_id:
            # "消息管理概述": a reply names the message it answers (`parent_id`) and its
            # thread's first message (`root_id`); in a topic both name the topic's root
            # (server-docs/im-v1/message/intro).
            message["parent_id"] = parent_id
            message["root_id"] = root_id or parent_id
        return {
            "schema": "2.0",
            "header": {
                "event_id": event_id or uuid.uuid4().hex,
                "event_type": event_type,
                "create_time": str(now_ms),
                "token": "",
                "app_id": self.app_id,
                "tenant_key": "tenant_fake",
            },
            "event": {
                "sender": {
                    "sender_id": {"open_id": sender, "union_id": "on_x", "user_id": "u_x"},
                    "sender_type": sender_type,
                    "tenant_key": "tenant_fake",
                },
                "message": message,
            },
        }

    def text_event(self, text: str, **kwargs: Any) -> dict[str, Any]:
        return self.message_event({"text": text}, **kwargs)

    def bot_mention(self, key: str = "@_user_1") -> dict[str, Any]:
        return {
            "key": key,
            "id": {"open_id": self.bot_open_id, "union_id": "on_bot", "user_id": ""},
            "name": "MemoryBot",
            "tenant_key": "tenant_fake",
            "mentioned_type": "bot",
        }

    @staticmethod
    def user_mention(open_id: str, name: str, key: str = "@_user_2") -> dict[str, Any]:
        return {
            "key": key,
            "id": {"open_id": open_id, "union_id": "on_u", "user_id": "u"},
            "name": name,
            "tenant_key": "tenant_fake",
            "mentioned_type": "user",
        }

    def group_text_event(
        self, text: str, *, mention_bot: bool, chat_id: str = "oc_group", **kwargs: Any
    ) -> dict[str, Any]:
        mentions = [self.bot_mention()] if mention_bot else []
        body = f"@_user_1 {text}" if mention_bot else text
        return self.text_event(
            body, chat_id=chat_id, chat_type="group", mentions=mentions or None, **kwargs
        )

    def post_event(
        self, title: str, paragraphs: list[list[dict[str, Any]]], **kwargs: Any
    ) -> dict[str, Any]:
        return self.message_event(
            {"title": title, "content": paragraphs}, message_type="post", **kwargs
        )

    def forward_event(self, children: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        """A merge_forward message: its content is the fixed line "Merged and Forwarded Message"
        and its children come only from GET ("接收消息内容结构", server-docs/im-v1/
        message-content-description/message_content). A child is `{"sender": open_id or "app",
        "text": ...}`, `{"sender", "msg_type", "content"}` or `{"sender", "forward": [...]}` (a
        forward inside the forward: its own children name it in `upper_message_id`)."""
        event = self.message_event(
            {"content": "Merged and Forwarded Message"}, message_type="merge_forward", **kwargs
        )
        root = event["event"]["message"]["message_id"]
        chat_id = event["event"]["message"]["chat_id"]
        with self._lock:
            self._forwarded[root] = self._forward_items(root, children, chat_id)
        return event

    def _forward_items(
        self, upper: str, children: list[dict[str, Any]], chat_id: str
    ) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        base = int(time.time() * 1000) - 10_000_000
        for index, child in enumerate(children):
            ident = f"om_fwd{next(self._ids):06d}"
            nested = child.get("forward")
            if nested is not None:
                msg_type, content = "merge_forward", {"content": "Merged and Forwarded Message"}
            elif "text" in child:
                msg_type, content = "text", {"text": child["text"]}
            else:
                msg_type, content = child["msg_type"], child.get("content", {})
            item = _message_item(
                ident,
                msg_type,
                content,
                chat_id=chat_id,
                sender=child.get("sender", "app"),
                create_ms=base + index * 1000,
            )
            item["upper_message_id"] = upper
            items.append(item)
            if nested is not None:
                items.extend(self._forward_items(ident, nested, chat_id))
        return items

    def _keep_user_message(self, payload: dict[str, Any]) -> None:
        """A user message pushed as an event, kept for GET (under the lock)."""
        message = (payload.get("event") or {}).get("message") or {}
        sender = ((payload.get("event") or {}).get("sender") or {}).get("sender_id") or {}
        ident = message.get("message_id")
        if not ident:
            return
        try:
            content = json.loads(message.get("content") or "{}")
        except ValueError:
            content = {}
        item = _message_item(
            ident,
            message.get("message_type", ""),
            content,
            chat_id=message.get("chat_id", ""),
            sender=sender.get("open_id", ""),
            create_ms=int(message.get("create_time") or 0),
        )
        for key in ("root_id", "parent_id", "thread_id"):
            if message.get(key):
                item[key] = message[key]
        item["mentions"] = [
            {
                "key": m.get("key"),
                "id": (m.get("id") or {}).get("open_id"),
                "id_type": "open_id",
                "name": m.get("name"),
                "tenant_key": "tenant_fake",
            }
            for m in message.get("mentions") or []
        ]
        self.user_messages[ident] = item

    async def _get_message(self, request: Request) -> Response:
        """ "获取指定消息的内容" (server-docs/im-v1/message/get): `data.items` is the message
        (a merge_forward: and every child); a recalled one is `deleted: true` without content;
        a bot's JSON 2.0 card does not come back (the page: card content is not the sent JSON,
        2.0 cards are not returned; observed elsewhere as an "upgrade your client" line)."""
        target = request.path_params["message_id"]
        if not self._authorized(request):
            return self._token_refused(request)
        with self._lock:
            self.message_gets.append(target)
            item = self.user_messages.get(target)
            bot = self.messages.get(target)
            if item is None and bot is not None:
                replied = self.user_messages.get(bot.reply_to or "") or {}
                chat = bot.chat_id or replied.get("chat_id", "oc_p2pchat")
                content = bot.content
                if bot.msg_type == "interactive":
                    content = {"title": None, "elements": [[{"tag": "text", "text": UPGRADE_LINE}]]}
                item = _message_item(
                    target,
                    bot.msg_type,
                    content,
                    chat_id=chat,
                    sender="app",
                    create_ms=int(time.time() * 1000),
                )
            if item is None:
                # The page lists 230001 for an invalid message_id and 230002 when the bot is
                # not in the message's chat.
                return JSONResponse({"code": 230001, "msg": "invalid message_id"}, status_code=400)
            items = [json.loads(json.dumps(item))]
            if item.get("deleted"):
                items[0].pop("body", None)
            items.extend(json.loads(json.dumps(self._forwarded.get(target, []))))
        return JSONResponse({"code": 0, "msg": "success", "data": {"items": items}})

    def push_text(self, text: str, **kwargs: Any) -> dict[str, Any]:
        event = self.text_event(text, **kwargs)
        self.push_event(event)
        return event

    # --- queries ---------------------------------------------------------------------------------
    def calls(self, kind: str | None = None) -> list[SentCall]:
        with self._lock:
            return [c for c in self.sent if kind is None or c.kind == kind]

    def replies_to(self, message_id: str) -> list[BotMessage]:
        """Bot messages that reply to a user's message, in sending order."""
        with self._lock:
            return [m for m in self.messages.values() if m.reply_to == message_id]

    def ack_for(self, frame_id: str) -> Ack | None:
        with self._lock:
            return next((a for a in self.acks if a.frame_id == frame_id), None)

    # --- HTTP handlers ---------------------------------------------------------------------------
    async def _endpoint(self, request: Request) -> Response:
        body = await request.json()
        with self._lock:
            self.endpoint_calls += 1
        if body.get("AppID") != self.app_id or body.get("AppSecret") != self.app_secret:
            return JSONResponse({"code": 10003, "msg": "invalid app credentials"})
        device = uuid.uuid4().hex[:8]
        return JSONResponse(
            {
                "code": 0,
                "msg": "ok",
                "data": {
                    "URL": f"ws://127.0.0.1:{self.port}/ws/v2?device_id={device}"
                    f"&service_id={SERVICE_ID}",
                    "ClientConfig": {
                        "ReconnectCount": -1,
                        "ReconnectInterval": 1,
                        "ReconnectNonce": 0,
                        "PingInterval": 120,
                    },
                },
            }
        )

    async def _tenant_token(self, request: Request) -> Response:
        body = await request.json()
        with self._lock:
            self.token_calls += 1
        if body.get("app_id") != self.app_id or body.get("app_secret") != self.app_secret:
            return JSONResponse({"code": 10014, "msg": "app secret invalid"})
        return JSONResponse(
            {"code": 0, "msg": "ok", "tenant_access_token": self.tenant_token, "expire": 7200}
        )

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {self.tenant_token}"

    async def _bot_info(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._token_refused(request)
        return JSONResponse(
            {
                "code": 0,
                "msg": "ok",
                "bot": {
                    "activate_status": 2,
                    "app_name": "MemoryBot",
                    "avatar_url": "",
                    "ip_white_list": [],
                    "open_id": self.bot_open_id,
                },
            }
        )

    async def _record(self, request: Request, message_id: str | None = None) -> SentCall:
        raw = await request.body()
        body = json.loads(raw) if raw else {}
        call = SentCall(
            method=request.method,
            path=request.url.path,
            query=dict(request.query_params),
            body=body,
            headers={k.lower(): v for k, v in request.headers.items()},
            at=time.monotonic(),
            message_id=message_id,
        )
        with self._lock:
            self.sent.append(call)
        return call

    def _failure_for(self, call: SentCall) -> Response | None:
        if (fault := self._fault_for(call)) is not None:
            return fault
        with self._lock:
            for failure in self._failures:
                if failure.remaining > 0 and failure.kind in ("any", call.kind):
                    failure.remaining -= 1
                    call.status = failure.status
                    headers = {"x-ogw-ratelimit-reset": failure.reset} if failure.reset else {}
                    return JSONResponse(
                        {"code": failure.code, "msg": failure.msg},
                        status_code=failure.status,
                        headers=headers,
                    )
        return None

    def _new_message(self, call: SentCall, reply_to: str | None, chat_id: str | None) -> Response:
        body = call.body
        key = body.get("uuid")
        with self._lock:
            known = self._uuids.get(key) if key else None
            if (
                key
                and known is not None
                and self.clock() - self._uuid_at[key] > UUID_WINDOW_SECONDS
            ):
                known = None  # the uuid's hour is over: a new message
            entity_refusal = None
            entity = None
            if known is None and body.get("msg_type") == "interactive":
                entity, entity_refusal = self._card_reference(call.content)
            if entity_refusal is not None:
                status, code, msg = entity_refusal
                call.status = status
                return JSONResponse({"code": code, "msg": msg}, status_code=status)
            if known is not None:
                # Feishu deduplicates sends with the same uuid (1 h): same message, no new one.
                message = self.messages[known]
            else:
                message = BotMessage(
                    message_id=f"om_bot{next(self._ids):06d}",
                    msg_type=body.get("msg_type", ""),
                    reply_to=reply_to,
                    chat_id=chat_id,
                    uuid=key,
                    versions=[call.content],
                )
                self.messages[message.message_id] = message
                if entity is not None:
                    entity.sent_as = message.message_id
                    message.card_id = entity.card_id
                    message.versions = [json.loads(json.dumps(entity.card))]
                if key:
                    self._uuids[key] = message.message_id
                    self._uuid_at[key] = self.clock()
                self._read_markup(message.message_id, message.msg_type, call.content)
            call.message_id = message.message_id
        return JSONResponse(
            {
                "code": 0,
                "msg": "success",
                "data": {
                    "message_id": message.message_id,
                    "chat_id": chat_id or "oc_p2pchat",
                    "msg_type": message.msg_type,
                    "create_time": str(int(time.time() * 1000)),
                    "body": {"content": body.get("content", "")},
                },
            },
            headers={"X-Tt-Logid": uuid.uuid4().hex},
        )

    async def _create(self, request: Request) -> Response:
        call = await self._record(request)
        if not self._authorized(request):
            return self._token_refused(request)
        if (failed := self._failure_for(call)) is not None:
            return failed
        if (refused := self._refusal_for(call, call.body.get("msg_type", ""))) is not None:
            return refused
        return await self._late(self._new_message(call, None, call.body.get("receive_id")))

    async def _reply(self, request: Request) -> Response:
        target = request.path_params["message_id"]
        call = await self._record(request, target)
        if not self._authorized(request):
            return self._token_refused(request)
        if (failed := self._failure_for(call)) is not None:
            return failed
        if (refused := self._refusal_for(call, call.body.get("msg_type", ""))) is not None:
            return refused
        return await self._late(self._new_message(call, target, None))

    async def _late(self, response: Response) -> Response:
        """The message is stored (and shown in the chat) before its sender hears back."""
        if self._answer_late:
            await asyncio.sleep(self._answer_late)
        return response

    async def _update(self, request: Request) -> Response:
        target = request.path_params["message_id"]
        call = await self._record(request, target)
        if not self._authorized(request):
            return self._token_refused(request)
        if (failed := self._failure_for(call)) is not None:
            return failed
        with self._lock:
            message = self.messages.get(target)
            if message is None:
                return JSONResponse({"code": 230001, "msg": "message not found"}, status_code=400)
            msg_type = call.body.get("msg_type", message.msg_type)
        if (refused := self._refusal_for(call, msg_type)) is not None:
            return refused
        with self._lock:
            message.versions.append(call.content)
            self._read_markup(
                message.message_id, call.body.get("msg_type", message.msg_type), call.content
            )
        return JSONResponse({"code": 0, "msg": "success", "data": {}})

    def _refusal_for(self, call: SentCall, msg_type: str) -> Response | None:
        """The documented refusal of this body (see `content_refusal`), recorded in `refused`."""
        refusal = content_refusal(msg_type, call.body, self.image_keys)
        if refusal is None:
            return None
        status, code, msg = refusal
        with self._lock:
            call.status = status
            self.refused.append(Refusal(call.kind, status, code, msg))
        return JSONResponse(
            {"code": code, "msg": msg}, status_code=status, headers={"X-Tt-Logid": uuid.uuid4().hex}
        )

    def _read_markup(self, message_id: str, msg_type: str, content: dict[str, Any]) -> None:
        # Called with the lock held.
        for tag, target in message_markup(msg_type, content):
            self.markup.append(Markup(message_id, msg_type, tag, target))

    async def _chat_info(self, request: Request) -> Response:
        # "获取群信息": GET /open-apis/im/v1/chats/:chat_id?user_id_type=open_id returns
        # owner_id / owner_id_type and user_manager_id_list; needs im:chat, im:chat:read or
        # im:chat:readonly (https://open.feishu.cn/document/uAjLw4CM/ukTMukTMukTM/reference/
        # im-v1/chat/get). The error code for an unknown chat is unconfirmed.
        if not self._authorized(request):
            return self._token_refused(request)
        chat_id = request.path_params["chat_id"]
        with self._lock:
            self.chat_lookups += 1
            data = self.chats.get(chat_id)
        if data is None:
            return JSONResponse({"code": 232006, "msg": "chat not found"}, status_code=400)
        return JSONResponse({"code": 0, "msg": "success", "data": data})

    async def _user_info(self, request: Request) -> Response:
        # "获取单个用户信息": GET /open-apis/contact/v3/users/:user_id?user_id_type=open_id
        # returns data.user with `name` (field needs contact:user.base:readonly); a user outside
        # the app's visibility gives 41050 "no user authority"
        # (https://open.feishu.cn/document/uAjLw4CM/ukTMukTMukTM/reference/contact-v3/user/get).
        if not self._authorized(request):
            return self._token_refused(request)
        open_id = request.path_params["user_id"]
        with self._lock:
            self.user_lookups += 1
            name = self.users.get(open_id)
        if name is None:
            return JSONResponse({"code": 41050, "msg": "no user authority"}, status_code=400)
        user = {"open_id": open_id, "union_id": "on_x", "name": name, "en_name": ""}
        return JSONResponse({"code": 0, "msg": "success", "data": {"user": user}})

    async def _resource(self, request: Request) -> Response:
        await self._record(request, request.path_params["message_id"])
        key = request.path_params["file_key"]
        if key not in self.resources:
            return JSONResponse({"code": 234003, "msg": "file not found"}, status_code=400)
        data, name = self.resources[key]
        headers = {"Content-Disposition": f'attachment; filename="{name}"'} if name else {}
        return Response(data, media_type="application/octet-stream", headers=headers)

    async def _unknown(self, request: Request) -> Response:
        with self._lock:
            self.unknown.append(f"{request.method} {request.url.path}")
        return JSONResponse({"code": 404, "msg": "unknown path"}, status_code=404)

    # --- CardKit ---------------------------------------------------------------------------------
    def card_ops(self, card_id: str | None = None) -> list[CardOp]:
        """CardKit calls, of one card or all, in order."""
        with self._lock:
            cards = [self.cards[card_id]] if card_id else list(self.cards.values())
            return sorted((op for c in cards for op in c.ops), key=lambda op: op.at)

    def fail_cardkit(
        self,
        op: str,
        *,
        after: int = 0,
        status: int = 500,
        code: int = 300120,
        msg: str = "Server Internal Error",
        times: int = 1_000_000,
    ) -> None:
        """CardKit calls of `op` (create/update/settings/content/any) fail with this answer,
        the first `after` of them excepted (300120 "Server Internal Error", cardkit pages)."""
        with self._lock:
            self._card_faults.append(CardFault(op, after, status, code, msg, times))

    def _card_fault(self, op: str, call: SentCall) -> Response | None:
        # An outage or a rate limit of kind "any" (or "cardkit") is the platform's, so it answers
        # CardKit calls as it answers IM calls (a streamed card is cut in mid-answer).
        if (outage := self._fault_for(call)) is not None:
            return outage
        with self._lock:
            for fault in self._card_faults:
                if fault.op not in ("any", op) or fault.times <= 0:
                    continue
                if fault.after > 0:
                    fault.after -= 1
                    return None
                fault.times -= 1
                return JSONResponse(
                    {"code": fault.code, "msg": fault.msg}, status_code=fault.status
                )
        return None

    def _card_error(self, status: int, code: int, msg: str, **headers: str) -> Response:
        return JSONResponse({"code": code, "msg": msg}, status_code=status, headers=headers)

    async def _card_create(self, request: Request) -> Response:
        call = await self._record(request)
        if not self._authorized(request):
            return self._token_refused(request)
        if (failed := self._card_fault("create", call)) is not None:
            return failed
        body = call.body
        if body.get("type") != "card_json":
            return self._card_error(400, 10002, "invalid request parameter")
        try:
            card = json.loads(body.get("data") or "")
        except ValueError:
            return self._card_error(400, 200220, "Failed to generate card content")
        if (refusal := _entity_refusal(card)) is not None:
            return self._card_error(*refusal)
        config = card.get("config") or {}
        now = self.clock()
        with self._lock:
            entity = CardEntity(
                card_id=f"7{next(self._ids):018d}",
                app_id=self.app_id,
                card=card,
                created_at=now,
                streaming=bool(config.get("streaming_mode")),
                streaming_since=now,
            )
            entity.ops.append(CardOp("create", 0, self.clock(), 0))
            self.cards[entity.card_id] = entity
        return JSONResponse({"code": 0, "msg": "success", "data": {"card_id": entity.card_id}})

    def _card_op(self, card_id: str, kind: str, body: dict[str, Any]) -> CardEntity | Response:
        """The checks every call on an existing entity passes: card, lifetime, sequence, rate.
        Called with the lock held; records the op (with its code)."""
        entity = self.cards.get(card_id)
        if entity is None:
            return self._card_error(400, 200740, "The card entity does not exist")
        sequence = body.get("sequence")
        now = self.clock()

        def refuse(status: int, code: int, msg: str, **headers: str) -> Response:
            entity.ops.append(CardOp(kind, int(sequence or 0), now, code))
            return self._card_error(status, code, msg, **headers)

        if self.clock() - entity.created_at > CARD_LIFETIME_SECONDS:
            return refuse(400, 200750, "The card entity has expired")
        if not isinstance(sequence, int) or not 1 <= sequence <= 2_147_483_647:
            return refuse(400, 10002, "invalid request parameter")
        recent = [op for op in entity.ops if op.code == 0 and now - op.at < 1.0]
        if len(recent) >= CARD_OPS_PER_SECOND:
            return refuse(
                429, 99991400, "request trigger frequency limit", **{"x-ogw-ratelimit-reset": "1"}
            )
        if sequence <= entity.sequence:
            return refuse(400, 300317, "sequence did not increment")
        return entity

    def _card_changed(self, entity: CardEntity) -> None:
        # Called with the lock held: the message showing the entity shows its new state.
        if entity.sent_as and entity.sent_as in self.messages:
            self.messages[entity.sent_as].versions.append(json.loads(json.dumps(entity.card)))

    async def _card_update(self, request: Request) -> Response:
        call = await self._record(request)
        if not self._authorized(request):
            return self._token_refused(request)
        if (failed := self._card_fault("update", call)) is not None:
            return failed
        card_ref = call.body.get("card") or {}
        try:
            card = json.loads(card_ref.get("data") or "")
        except ValueError:
            card = None
        with self._lock:
            entity = self._card_op(request.path_params["card_id"], "update", call.body)
            if isinstance(entity, Response):
                return entity
            if (refusal := _entity_refusal(card)) is not None:
                entity.ops.append(CardOp("update", call.body["sequence"], self.clock(), refusal[1]))
                return self._card_error(*refusal)
            assert isinstance(card, dict)
            entity.sequence = call.body["sequence"]
            entity.card = card
            config = card.get("config") or {}
            if "streaming_mode" in config:
                entity.streaming = bool(config["streaming_mode"])
                entity.streaming_since = self.clock()
            entity.ops.append(CardOp("update", entity.sequence, self.clock(), 0))
            self._card_changed(entity)
        return JSONResponse({"code": 0, "msg": "success", "data": {}})

    async def _card_settings(self, request: Request) -> Response:
        call = await self._record(request)
        if not self._authorized(request):
            return self._token_refused(request)
        if (failed := self._card_fault("settings", call)) is not None:
            return failed
        try:
            settings = json.loads(call.body.get("settings") or "")
            config = settings.get("config") or {}
        except (ValueError, AttributeError):
            return self._card_error(400, 10002, "invalid request parameter")
        with self._lock:
            entity = self._card_op(request.path_params["card_id"], "settings", call.body)
            if isinstance(entity, Response):
                return entity
            entity.sequence = call.body["sequence"]
            streaming = None
            if "streaming_mode" in config:
                streaming = bool(config["streaming_mode"])
                entity.streaming = streaming
                entity.streaming_since = self.clock()
            entity.card.setdefault("config", {}).update(config)
            entity.ops.append(
                CardOp("settings", entity.sequence, self.clock(), 0, streaming=streaming)
            )
            self._card_changed(entity)
        return JSONResponse({"code": 0, "msg": "success", "data": {}})

    async def _card_content(self, request: Request) -> Response:
        call = await self._record(request)
        if not self._authorized(request):
            return self._token_refused(request)
        if (failed := self._card_fault("content", call)) is not None:
            return failed
        element_id = request.path_params["element_id"]
        content = call.body.get("content")
        with self._lock:
            entity = self._card_op(request.path_params["card_id"], "content", call.body)
            if isinstance(entity, Response):
                return entity
            sequence = call.body["sequence"]

            def refuse(code: int, msg: str) -> Response:
                entity.ops.append(
                    CardOp("content", sequence, self.clock(), code, element_id=element_id)
                )
                return self._card_error(400, code, msg)

            if entity.streaming and self.clock() - entity.streaming_since > STREAMING_SECONDS:
                entity.streaming = False  # closed by itself 10 minutes after it was switched on
                return refuse(200850, "Card streaming timeout")
            if not entity.streaming:
                return refuse(300309, "Card streaming closed")
            element = next(
                (e for e in _card_elements_all(entity.card) if e.get("element_id") == element_id),
                None,
            )
            if element is None:
                return refuse(300313, "update element failed: element not found")
            if element.get("tag") not in ("markdown", "plain_text"):
                return refuse(300310, "Only update text")
            if not isinstance(content, str) or not 1 <= len(content) <= 100_000:
                return refuse(10002, "invalid request parameter")
            before = element.get("content")
            element["content"] = content
            if len(json.dumps(entity.card, ensure_ascii=False).encode("utf-8")) > CARD_BYTES:
                element["content"] = before
                return refuse(200860, "Card content exceeds limit")
            entity.sequence = sequence
            entity.ops.append(
                CardOp("content", sequence, self.clock(), 0, content=content, element_id=element_id)
            )
            self._card_changed(entity)
        return JSONResponse({"code": 0, "msg": "success", "data": {}})

    def _card_reference(
        self, content: dict[str, Any]
    ) -> tuple[CardEntity | None, tuple[int, int, str] | None]:
        """A send whose content names a card entity: the entity, or why it cannot be sent.
        Called with the lock held."""
        if content.get("type") != "card":
            return None, None
        card_id = str((content.get("data") or {}).get("card_id") or "")
        entity = self.cards.get(card_id)
        if entity is None:
            return None, (400, 230099, "Failed to create card content, ext=card entity not found")
        if entity.app_id != self.app_id:
            return None, (400, 300311, "app has no permission to update/use this card")
        if entity.sent_as is not None:
            return None, (
                400,
                230099,
                "Failed to create card content, ext=the card entity can only be sent once",
            )
        return entity, None

    # --- uploads ---------------------------------------------------------------------------------
    async def _upload_image(self, request: Request) -> Response:
        return await self._upload(request, "image")

    async def _upload_file(self, request: Request) -> Response:
        return await self._upload(request, "file")

    async def _upload(self, request: Request, kind: str) -> Response:
        """ "上传图片" / "上传文件", with their documented limits (see "uploads")."""
        async with request.form() as form:
            return await self._upload_form(request, kind, form)

    async def _upload_form(self, request: Request, kind: str, form: Any) -> Response:
        call = SentCall(
            method=request.method,
            path=request.url.path,
            query=dict(request.query_params),
            body={k: v for k, v in form.items() if isinstance(v, str)},
            headers={k.lower(): v for k, v in request.headers.items()},
            at=time.monotonic(),
        )
        with self._lock:
            self.sent.append(call)
        if not self._authorized(request):
            return self._token_refused(request)
        if (failed := self._failure_for(call)) is not None:
            return failed
        part = form.get(kind)
        if part is None or isinstance(part, str):
            return self._upload_refused(call, 234001, "Invalid request param.")
        data = await part.read()
        limit = IMAGE_BYTES if kind == "image" else FILE_BYTES
        if not data:
            return self._upload_refused(call, 234010, "File's size can't be 0.")
        if len(data) > limit:
            return self._upload_refused(call, 234006, "The file size exceeds the limit.")
        if kind == "image":
            if form.get("image_type") not in ("message", "avatar"):
                return self._upload_refused(call, 234001, "Invalid request param.")
            if image_format(data) is None:
                return self._upload_refused(call, 234011, "Can't recognize the image format.")
            name, file_type = str(getattr(part, "filename", "") or ""), ""
        else:
            file_type = str(form.get("file_type") or "")
            name = str(form.get("file_name") or "")
            if file_type not in FILE_TYPES or not name:
                return self._upload_refused(call, 234001, "Invalid request param.")
        key = f"{'img' if kind == 'image' else 'file'}_v3_{uuid.uuid4().hex[:20]}"
        with self._lock:
            self.uploads[key] = Upload(key, kind, name, data, file_type)
            if kind == "image":
                self.image_keys.add(key)
        return JSONResponse({"code": 0, "msg": "success", "data": {f"{kind}_key": key}})

    def _upload_refused(self, call: SentCall, code: int, msg: str) -> Response:
        with self._lock:
            call.status = 400
            self.refused.append(Refusal(call.kind, 400, code, msg))
        return JSONResponse({"code": code, "msg": msg}, status_code=400)

    # --- reactions -------------------------------------------------------------------------------
    def reactions_on(self, message_id: str) -> list[str]:
        """The emoji types on a message now (deleted ones left out), in the order added."""
        with self._lock:
            return [
                r.emoji_type for r in self.reactions if r.message_id == message_id and not r.deleted
            ]

    def user_reacts(self, message_id: str, emoji_type: str, *, open_id: str = OWNER_OPEN_ID) -> str:
        """A user puts a reaction on a message (not deletable by the bot)."""
        with self._lock:
            reaction = Reaction(f"r_{next(self._ids)}", message_id, emoji_type, "user", open_id)
            self.reactions.append(reaction)
        return reaction.reaction_id

    async def _add_reaction(self, request: Request) -> Response:
        message_id = request.path_params["message_id"]
        call = await self._record(request, message_id)
        if not self._authorized(request):
            return self._token_refused(request)
        if (failed := self._failure_for(call)) is not None:
            return failed
        emoji = ((call.body.get("reaction_type") or {}).get("emoji_type")) or ""
        if emoji not in EMOJI_TYPES:
            return self._card_error(400, 231001, "reaction type is invalid")
        with self._lock:
            reaction = Reaction(f"r_{next(self._ids)}", message_id, emoji, "app", self.app_id)
            self.reactions.append(reaction)
        return JSONResponse(
            {
                "code": 0,
                "msg": "success",
                "data": {
                    "reaction_id": reaction.reaction_id,
                    "operator": {"operator_id": self.app_id, "operator_type": "app"},
                    "action_time": str(int(time.time() * 1000)),
                    "reaction_type": {"emoji_type": emoji},
                },
            }
        )

    async def _delete_reaction(self, request: Request) -> Response:
        message_id = request.path_params["message_id"]
        call = await self._record(request, message_id)
        if not self._authorized(request):
            return self._token_refused(request)
        if (failed := self._failure_for(call)) is not None:
            return failed
        rid = request.path_params["reaction_id"]
        with self._lock:
            reaction = next((r for r in self.reactions if r.reaction_id == rid), None)
            if reaction is None or reaction.deleted:
                return self._card_error(400, 231011, "invalid reaction_id")
            if reaction.message_id != message_id:
                return self._card_error(400, 231010, "reaction not on this message")
            if reaction.operator_type != "app" or reaction.operator_id != self.app_id:
                return self._card_error(400, 231007, "no permission to delete this reaction")
            reaction.deleted = True
        return JSONResponse(
            {
                "code": 0,
                "msg": "success",
                "data": {"reaction_id": rid, "reaction_type": {"emoji_type": reaction.emoji_type}},
            }
        )

    # --- websocket -------------------------------------------------------------------------------
    async def _websocket(self, ws: WebSocket) -> None:
        await ws.accept()
        with self._lock:
            self._sockets.append(ws)
            self.connections_total += 1
        try:
            while True:
                data = await ws.receive_bytes()
                await self._on_frame(ws, data)
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            with self._lock:
                if ws in self._sockets:
                    self._sockets.remove(ws)

    async def _on_frame(self, ws: WebSocket, data: bytes) -> None:
        frame = Frame()
        frame.ParseFromString(data)
        headers = {h.key: h.value for h in frame.headers}
        if frame.method == 0 and headers.get("type") == "ping":
            pong = _frame(method=0, headers={"type": "pong"}, payload=b"", seq=0)
            await ws.send_bytes(pong.SerializeToString())
            return
        if frame.method == 1:
            frame_id = headers.get("message_id", "")
            try:
                answer = json.loads(frame.payload or b"{}")
                code = int(answer.get("code", 0))
            except ValueError:
                answer, code = {}, 0
            answered = _ack_data(answer.get("data"))
            with self._lock:
                pushed_at, event_id = self._pushed.get(frame_id, (time.monotonic(), None))
                tapped = self._tapped.get(event_id or "")
                new_card = ((answered or {}).get("card") or {}).get("data")
                if tapped in self.messages and isinstance(new_card, dict):
                    self.messages[tapped].versions.append(new_card)
                self.acks.append(
                    Ack(
                        frame_id,
                        event_id,
                        code,
                        headers.get("biz_rt"),
                        pushed_at,
                        time.monotonic(),
                        answered,
                    )
                )

    async def _send_frames(self, frames: list[Frame]) -> None:
        ws = self._sockets[-1]
        for frame in frames:
            await ws.send_bytes(frame.SerializeToString())

    async def _close_all(self) -> None:
        for ws in list(self._sockets):
            with contextlib.suppress(RuntimeError):
                await ws.close(code=1001)


UPGRADE_LINE = "请升级至最新版本客户端，以查看内容"


def _message_item(
    ident: str,
    msg_type: str,
    content: dict[str, Any],
    *,
    chat_id: str,
    sender: str,
    create_ms: int,
) -> dict[str, Any]:
    """One `items` entry of GET message: `sender.id_type` is `app_id` and `sender_type` `app`
    for a bot, `open_id` / `user` for a person; times are strings of milliseconds."""
    is_app = sender == "app"
    return {
        "message_id": ident,
        "msg_type": msg_type,
        "create_time": str(create_ms),
        "update_time": str(create_ms),
        "deleted": False,
        "updated": False,
        "chat_id": chat_id,
        "sender": {
            "id": "cli_fakeapp" if is_app else sender,
            "id_type": "app_id" if is_app else "open_id",
            "sender_type": "app" if is_app else "user",
            "tenant_key": "tenant_fake",
        },
        "body": {"content": json.dumps(content, ensure_ascii=False)},
        "mentions": [],
    }


def _frame(*, method: int, headers: dict[str, str], payload: bytes, seq: int) -> Frame:
    frame = Frame()
    frame.SeqID = seq
    frame.LogID = seq
    frame.service = SERVICE_ID
    frame.method = method
    for key, value in headers.items():
        header = frame.headers.add()
        header.key = key
        header.value = value
    if payload:
        frame.payload = payload
    return frame
