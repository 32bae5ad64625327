"""Sending through the real `lark.Client`: reply, create, patch, download, bot info.

* Calls run in a worker thread (`asyncio.to_thread`): the SDK's sync path also fetches the tenant
  token synchronously, which must not block the app's event loop.
* The SDK has no retry. Here every call is retried with backoff within a window (default 5
  minutes for sends, `QUICK_WINDOW` for progress updates, bot info and group owners, which all
  have a fallback): network errors, HTTP 5xx, a body that is not JSON (a gateway's error page),
  and throttling. Throttling (HTTP 429, or code 99991400 / 230020 on an older API's 400) waits
  the `x-ogw-ratelimit-reset` seconds the platform asks for ("频控策略", https://open.feishu.cn/
  document/server-docs/api-call-guide/frequency-control: wait the header's seconds, retry,
  repeat); other failures wait 1, 2, 4 … s, capped at 30 s, with ±20 % jitter.
* A response is a success only with HTTP 2xx **and** `code` 0 (a 5xx whose body says `code: 0`
  is a failure), and a send's response must carry the new message's id.
* A refused tenant token (99991661, 99991663, 99991664, 99991668) makes the SDK forget its
  cached token (`_lark.forget_tenant_token`) and the call is tried again once at once.
* A retried send is safe because every reply/create carries an idempotency `uuid` ("发送消息":
  requests with the same uuid send at most one message within 1 hour).
* A request body over Feishu's limit is refused here, before it leaves.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import random
import re
import time
import uuid as uuid_mod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import requests

from bridge._lark import forget_tenant_token
from bridge.render import BODY_LIMITS, MsgType, request_body_size
from errors import ClaudeMemoryError

logger = logging.getLogger("bridge.feishu.sender")

THROTTLED_CODES = frozenset({99991400, 230020})
# Token refused: 99991663 invalid, 99991668 expired (also in lark-oapi's own list), 99991661 and
# 99991664 (missing / invalid tenant token; third-party sources only).
TOKEN_CODES = frozenset({99991661, 99991663, 99991664, 99991668})
RESET_HEADER = "x-ogw-ratelimit-reset"
STREAM_WINDOW = 3.0  # seconds: a streaming card's calls (the progress card is the fallback)
QUICK_WINDOW = 15.0  # seconds: progress updates, bot info, group owners (each has a fallback)
_TOPIC_MEMORY = 10_000  # message ids remembered as written in a topic
_UUID_NAMESPACE = uuid_mod.UUID("8f0c7a52-2b7e-4d55-9a39-3f1f6d1e5c21")


class FeishuAPIError(ClaudeMemoryError):
    """An open platform call failed; `code` is Feishu's error code (0 when there was none)."""

    status_code = 502

    def __init__(
        self,
        operation: str,
        *,
        code: int,
        msg: str,
        status: int | None,
        log_id: str | None,
        transient: bool = False,
        reset: float | None = None,
    ) -> None:
        hint = f" (log id {log_id})" if log_id else ""
        shown = f"HTTP {status}, code {code}" if status and status >= 400 else f"code {code}"
        super().__init__(f"Feishu {operation} failed: {shown}, {msg}{hint}")
        self.operation = operation
        self.code = code
        self.status = status
        self.log_id = log_id
        self.reset = reset  # seconds the platform asked us to wait (x-ogw-ratelimit-reset)
        self._transient = transient

    @property
    def throttled(self) -> bool:
        return self.status == 429 or self.code in THROTTLED_CODES

    @property
    def token_refused(self) -> bool:
        return self.code in TOKEN_CODES

    @property
    def transient(self) -> bool:
        """Worth trying again later: network, 5xx, throttling, a garbled success."""
        return self._transient or self.throttled or (self.status or 0) >= 500


def late_sequence(now: float | None = None) -> int:
    """A CardKit `sequence` for a call on a card this process did not stream (its close after a
    restart, from the outbox): each call's sequence must be above every earlier one on the card
    (300317) and at most 2**31 - 1. A streaming turn counts from 1 and makes a few thousand
    calls at most, so quarter-seconds since 2023-11-14 (1.7e9 s) are above its count and fit
    the limit until 2040; a caller making two calls uses this and this + 1."""
    return int(((time.time() if now is None else now) - 1_700_000_000) * 4)


def send_uuid(*parts: object) -> str:
    """A stable idempotency key (36 chars, Feishu allows 50) for one turn's chunk."""
    return str(uuid_mod.uuid5(_UUID_NAMESPACE, ":".join(str(p) for p in parts)))


@dataclass(frozen=True, slots=True)
class Download:
    data: bytes
    file_name: str


Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long a call is retried, and how far apart."""

    window: float = 300.0  # seconds from the first attempt; then the caller's fallback/outbox
    base: float = 1.0  # the first wait
    cap: float = 30.0  # the longest wait between attempts (a rate-limit reset may be longer)
    jitter: float = 0.2  # each wait is spread by ± this fraction


class Sender:
    """Feishu IM calls with retries; one per bridge."""

    def __init__(
        self,
        client: Any,
        *,
        policy: RetryPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        from lark_oapi.api.im.v1 import (
            CreateMessageRequest,
            CreateMessageRequestBody,
            GetChatRequest,
            GetMessageResourceRequest,
            PatchMessageRequest,
            PatchMessageRequestBody,
            ReplyMessageRequest,
            ReplyMessageRequestBody,
        )

        self._client = client
        self._app_id = str(getattr(getattr(client, "config", None), "app_id", "") or "")
        self.policy = policy or RetryPolicy()
        self._sleep = sleep
        self._clock = clock
        self._rand = rand
        self._create_req = CreateMessageRequest
        self._create_body = CreateMessageRequestBody
        self._reply_req = ReplyMessageRequest
        self._reply_body = ReplyMessageRequestBody
        self._patch_req = PatchMessageRequest
        self._patch_body = PatchMessageRequestBody
        self._resource_req = GetMessageResourceRequest
        self._chat_req = GetChatRequest
        self._in_topics: dict[str, None] = {}  # message ids whose replies go into their topic

    # --- messages --------------------------------------------------------------------------------
    def in_topic(self, message_id: str) -> None:
        """Replies to this message go into its topic (the message event carried a thread_id)."""
        self._in_topics[message_id] = None
        while len(self._in_topics) > _TOPIC_MEMORY:
            self._in_topics.pop(next(iter(self._in_topics)))

    async def user_name(self, open_id: str) -> str | None:
        """A user's display name from "获取单个用户信息" (GET /contact/v3/users/:user_id,
        user_id_type=open_id; needs contact:contact.base:readonly and, for the name,
        contact:user.base:readonly — reference/contact-v3/user/get). None when Feishu will not
        say (no permission, outside the app's visibility: 41050)."""
        from lark_oapi.api.contact.v3 import GetUserRequest

        request = GetUserRequest.builder().user_id(open_id).user_id_type("open_id").build()
        try:
            resp = await self._call(
                "user info", self._client.contact.v3.user.get, request, window=QUICK_WINDOW
            )
        except FeishuAPIError as exc:
            logger.info("no name for %s: %s", open_id, exc.message)
            return None
        user = getattr(resp.data, "user", None)
        name = str(getattr(user, "name", "") or "").strip()
        return name or None

    async def reply(
        self,
        message_id: str,
        msg_type: MsgType,
        content: dict[str, Any],
        *,
        uuid: str,
        window: float | None = None,
    ) -> str:
        """Reply to a message; returns the new message's id. `window`: seconds to keep trying
        (default: the policy's window)."""
        text = json.dumps(content, ensure_ascii=False)
        _check_size(msg_type, {"content": text, "msg_type": msg_type, "uuid": uuid})
        builder = self._reply_body.builder().content(text).msg_type(msg_type).uuid(uuid)
        if message_id in self._in_topics:
            # "回复消息" `reply_in_thread`: the answer stays in the user's topic instead of
            # starting a topic of its own (reference/im-v1/message/reply).
            builder = builder.reply_in_thread(True)
        body = builder.build()
        request = self._reply_req.builder().message_id(message_id).request_body(body).build()
        resp = await self._call(
            "reply", self._client.im.v1.message.reply, request, window=window, sends=True
        )
        return str(resp.data.message_id)

    async def create(
        self,
        chat_id: str,
        msg_type: MsgType,
        content: dict[str, Any],
        *,
        uuid: str,
        window: float | None = None,
    ) -> str:
        """Send a new message to a chat; returns its id."""
        text = json.dumps(content, ensure_ascii=False)
        _check_size(
            msg_type, {"receive_id": chat_id, "msg_type": msg_type, "content": text, "uuid": uuid}
        )
        body = (
            self._create_body.builder()
            .receive_id(chat_id)
            .msg_type(msg_type)
            .content(text)
            .uuid(uuid)
            .build()
        )
        request = self._create_req.builder().receive_id_type("chat_id").request_body(body).build()
        resp = await self._call(
            "create", self._client.im.v1.message.create, request, window=window, sends=True
        )
        return str(resp.data.message_id)

    async def patch(
        self, message_id: str, content: dict[str, Any], *, window: float = QUICK_WINDOW
    ) -> None:
        """Replace a card's content (cards only; 5 updates/s per message at most). Tried for
        `QUICK_WINDOW` s by default: every patch has a fallback (a new reply, the outbox)."""
        text = json.dumps(content, ensure_ascii=False)
        _check_size("interactive", {"content": text})
        body = self._patch_body.builder().content(text).build()
        request = self._patch_req.builder().message_id(message_id).request_body(body).build()
        await self._call("patch", self._client.im.v1.message.patch, request, window=window)

    # --- uploads: "上传图片" (server-docs/im-v1/image/create), "上传文件" (…/im-v1/file/create)
    async def upload_image(self, data: bytes, name: str) -> str:
        """Upload an image for messages and cards (image_type `message`); its image_key."""
        from lark_oapi.api.im.v1 import CreateImageRequest, CreateImageRequestBody

        def create(_: object) -> Any:
            # built anew for every attempt: the SDK turns the body into a one-shot multipart
            # stream when it sends it
            body = (
                CreateImageRequestBody.builder()
                .image_type("message")
                .image(_named_stream(data, name))
                .build()
            )
            request = CreateImageRequest.builder().request_body(body).build()
            return self._client.im.v1.image.create(request)

        resp = await self._call("image upload", create, None, window=QUICK_WINDOW * 4)
        key = getattr(resp.data, "image_key", None)
        if not key:
            raise _failure("image upload", "success without an image_key", transient=True)
        return str(key)

    async def upload_file(self, data: bytes, name: str, file_type: str) -> str:
        """Upload a file for a file message (`file_type`: opus, mp4, pdf, doc, xls, ppt or
        stream); its file_key."""
        from lark_oapi.api.im.v1 import CreateFileRequest, CreateFileRequestBody

        def create(_: object) -> Any:
            body = (
                CreateFileRequestBody.builder()
                .file_type(file_type)
                .file_name(name)
                .file(_named_stream(data, name))
                .build()
            )
            request = CreateFileRequest.builder().request_body(body).build()
            return self._client.im.v1.file.create(request)

        resp = await self._call("file upload", create, None, window=QUICK_WINDOW * 4)
        key = getattr(resp.data, "file_key", None)
        if not key:
            raise _failure("file upload", "success without a file_key", transient=True)
        return str(key)

    # --- CardKit card entities ("飞书卡片资源概述", cardkit-v1/feishu-card-resource-overview) ---
    # Every call after the creation carries a `sequence` that must strictly increase on the card
    # (300317 otherwise): the caller counts. Tried for `STREAM_WINDOW` s only: a streaming card
    # has the progress-card path as its fallback.
    async def card_create(self, card: dict[str, Any]) -> str:
        """Create a card entity from JSON 2.0; returns its card_id (sent once, within 14 days)."""
        from lark_oapi.api.cardkit.v1 import CreateCardRequest, CreateCardRequestBody

        body = (
            CreateCardRequestBody.builder()
            .type("card_json")
            .data(json.dumps(card, ensure_ascii=False))
            .build()
        )
        request = CreateCardRequest.builder().request_body(body).build()
        resp = await self._call(
            "card create", self._client.cardkit.v1.card.create, request, window=STREAM_WINDOW
        )
        card_id = getattr(resp.data, "card_id", None)
        if not card_id:
            raise _failure("card create", "success without a card_id", transient=True)
        return str(card_id)

    async def card_content(self, card_id: str, element_id: str, text: str, sequence: int) -> None:
        """Stream a text element: its full text so far ("流式更新文本")."""
        from lark_oapi.api.cardkit.v1 import (
            ContentCardElementRequest,
            ContentCardElementRequestBody,
        )

        body = ContentCardElementRequestBody.builder().content(text).sequence(sequence).build()
        request = (
            ContentCardElementRequest.builder()
            .card_id(card_id)
            .element_id(element_id)
            .request_body(body)
            .build()
        )
        await self._call(
            "card content",
            self._client.cardkit.v1.card_element.content,
            request,
            window=STREAM_WINDOW,
        )

    async def card_settings(
        self,
        card_id: str,
        config: dict[str, Any],
        sequence: int,
        *,
        window: float = STREAM_WINDOW,
    ) -> None:
        """Change a card's config, e.g. `{"streaming_mode": False}` ("更新卡片配置")."""
        from lark_oapi.api.cardkit.v1 import SettingsCardRequest, SettingsCardRequestBody

        settings = json.dumps({"config": config}, ensure_ascii=False)
        body = SettingsCardRequestBody.builder().settings(settings).sequence(sequence).build()
        request = SettingsCardRequest.builder().card_id(card_id).request_body(body).build()
        await self._call(
            "card settings", self._client.cardkit.v1.card.settings, request, window=window
        )

    async def card_update(
        self,
        card_id: str,
        card: dict[str, Any],
        sequence: int,
        *,
        window: float = STREAM_WINDOW,
    ) -> None:
        """Replace the whole card entity ("全量更新卡片实体")."""
        from lark_oapi.api.cardkit.v1 import Card, UpdateCardRequest, UpdateCardRequestBody

        data = json.dumps(card, ensure_ascii=False)
        body = (
            UpdateCardRequestBody.builder()
            .card(Card.builder().type("card_json").data(data).build())
            .sequence(sequence)
            .build()
        )
        request = UpdateCardRequest.builder().card_id(card_id).request_body(body).build()
        await self._call("card update", self._client.cardkit.v1.card.update, request, window=window)

    # --- reactions ("添加/删除消息表情回复", server-docs/im-v1/message-reaction/create, delete) ---
    async def react(self, message_id: str, emoji_type: str) -> str:
        """Put a reaction on a message; returns its reaction_id (to delete it later)."""
        from lark_oapi.api.im.v1 import (
            CreateMessageReactionRequest,
            CreateMessageReactionRequestBody,
            Emoji,
        )

        body = (
            CreateMessageReactionRequestBody.builder()
            .reaction_type(Emoji.builder().emoji_type(emoji_type).build())
            .build()
        )
        request = (
            CreateMessageReactionRequest.builder().message_id(message_id).request_body(body).build()
        )
        resp = await self._call(
            "reaction", self._client.im.v1.message_reaction.create, request, window=QUICK_WINDOW
        )
        return str(getattr(resp.data, "reaction_id", "") or "")

    async def unreact(self, message_id: str, reaction_id: str) -> None:
        """Delete one of the bot's own reactions."""
        from lark_oapi.api.im.v1 import DeleteMessageReactionRequest

        request = (
            DeleteMessageReactionRequest.builder()
            .message_id(message_id)
            .reaction_id(reaction_id)
            .build()
        )
        await self._call(
            "reaction delete",
            self._client.im.v1.message_reaction.delete,
            request,
            window=QUICK_WINDOW,
        )

    async def download(self, message_id: str, file_key: str, kind: str) -> Download:
        """Fetch an image or file a user sent (`kind`: image or file)."""
        request = (
            self._resource_req.builder()
            .message_id(message_id)
            .file_key(file_key)
            .type(kind)
            .build()
        )
        resp = await self._call("download", self._client.im.v1.message_resource.get, request)
        data = resp.file.read() if resp.file is not None else b""
        headers = getattr(resp.raw, "headers", None) or {}
        return Download(data, str(resp.file_name or _disposition_name(headers)))

    async def get_message(self, message_id: str) -> list[dict[str, Any]]:
        """A message as "获取指定消息的内容" returns it (GET /im/v1/messages/:message_id,
        user_id_type=open_id; im:message or im:message:readonly; server-docs/im-v1/message/get):
        `data.items`, the message itself and, for a merge_forward, its children (each with
        `upper_message_id`), as raw JSON objects."""
        from lark_oapi.api.im.v1 import GetMessageRequest

        request = GetMessageRequest.builder().message_id(message_id).user_id_type("open_id").build()
        resp = await self._call(
            "message get", self._client.im.v1.message.get, request, window=QUICK_WINDOW
        )
        try:
            payload = json.loads(resp.raw.content)
        except (ValueError, AttributeError):
            return []
        items = (payload.get("data") or {}).get("items") if isinstance(payload, dict) else None
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    async def chat_admins(self, chat_id: str) -> frozenset[str]:
        """A group's owner and managers (open_ids), from "获取群信息" (GET /im/v1/chats/:chat_id,
        `owner_id` and `user_manager_id_list`; needs im:chat:readonly, im:chat:read or im:chat)."""
        request = self._chat_req.builder().chat_id(chat_id).user_id_type("open_id").build()
        resp = await self._call(
            "chat info", self._client.im.v1.chat.get, request, window=QUICK_WINDOW
        )
        data = resp.data
        if data is None:
            return frozenset()
        admins = {str(data.owner_id or "")} | {str(i) for i in data.user_manager_id_list or []}
        admins.discard("")
        return frozenset(admins)

    async def bot_open_id(self) -> str | None:
        """The bot's own open_id (to recognise @-mentions of the bot)."""
        import lark_oapi as lark

        request = (
            lark.BaseRequest.builder()
            .http_method(lark.HttpMethod.GET)
            .uri("/open-apis/bot/v3/info")
            .token_types({lark.AccessTokenType.TENANT})
            .build()
        )
        resp = await self._call("bot info", self._client.request, request, window=QUICK_WINDOW)
        try:
            payload = json.loads(resp.raw.content)
        except (ValueError, AttributeError):
            return None
        bot = payload.get("bot") or (payload.get("data") or {}).get("bot") or {}
        return bot.get("open_id") or None

    # --- plumbing --------------------------------------------------------------------------------
    async def _call(
        self,
        operation: str,
        fn: Callable[[Any], Any],
        request: Any,
        *,
        window: float | None = None,
        sends: bool = False,
    ) -> Any:
        """Call `fn(request)` in a thread until it succeeds, fails for good or the window ends."""
        policy = self.policy
        deadline = self._clock() + (policy.window if window is None else window)
        refreshed = False
        attempt = 0
        while True:
            attempt += 1
            failure = await self._attempt(operation, fn, request, sends=sends)
            if not isinstance(failure, FeishuAPIError):
                return failure
            if failure.token_refused and not refreshed and self._app_id:
                refreshed = True
                logger.warning("%s; fetching a new tenant token", failure.message)
                forget_tenant_token(self._app_id)
                continue
            if not failure.transient:
                raise failure
            if failure.throttled and failure.reset is not None:
                wait = failure.reset  # the platform said when; the cap does not apply
            else:
                wait = min(policy.base * 2 ** (attempt - 1), policy.cap)
                wait *= 1 + policy.jitter * (2 * self._rand() - 1)
            if self._clock() + wait > deadline:
                logger.warning("%s; giving up after %d attempts", failure.message, attempt)
                raise failure
            logger.warning("%s; retrying in %.1f s (attempt %d)", failure.message, wait, attempt)
            await self._sleep(wait)

    async def _attempt(
        self, operation: str, fn: Callable[[Any], Any], request: Any, *, sends: bool
    ) -> Any:
        """One call: the response on success, else the failure as a FeishuAPIError."""
        try:
            resp = await asyncio.to_thread(fn, request)
        except requests.RequestException as exc:  # connection lost, timeout
            return _failure(operation, f"{type(exc).__name__}: {exc}", transient=True)
        except ValueError as exc:  # a body that is not JSON: a gateway's error page
            return _failure(operation, f"response is not JSON ({exc})", transient=True)
        except Exception as exc:  # the SDK refused (e.g. credentials for the token): final
            raise FeishuAPIError(
                operation, code=0, msg=f"{type(exc).__name__}: {exc}", status=None, log_id=None
            ) from exc
        raw = getattr(resp, "raw", None)
        status = getattr(raw, "status_code", None)
        headers = getattr(raw, "headers", None) or {}
        code = int(resp.code or 0)
        if code != 0 or (status is not None and status >= 300):
            return FeishuAPIError(
                operation,
                code=code,
                msg=str(resp.msg or "") or "no message",
                status=status,
                log_id=resp.get_log_id(),
                reset=_reset_seconds(headers),
            )
        if sends and not getattr(getattr(resp, "data", None), "message_id", None):
            return FeishuAPIError(
                operation,
                code=code,
                msg="success without a message id",
                status=status,
                log_id=resp.get_log_id(),
                transient=True,
            )
        return resp


def _failure(operation: str, msg: str, *, transient: bool) -> FeishuAPIError:
    return FeishuAPIError(operation, code=0, msg=msg, status=None, log_id=None, transient=transient)


def _check_size(msg_type: MsgType, body: dict[str, Any]) -> None:
    size = request_body_size(body)
    if size > BODY_LIMITS[msg_type]:
        raise FeishuAPIError(
            "send",
            code=230025,
            msg=f"{msg_type} body of {size} bytes exceeds {BODY_LIMITS[msg_type]}; not sent",
            status=None,
            log_id=None,
        )


def _named_stream(data: bytes, name: str) -> Any:
    """The bytes as a multipart part with a file name: a (filename, stream) pair, which the
    SDK's form encoder (requests-toolbelt) sends as a file part; a bare stream would go without
    a filename, as a plain field."""
    return (name or "upload", io.BytesIO(data))


def _disposition_name(headers: dict[str, str]) -> str:
    """The file name of a Content-Disposition header, whatever its case (lark matches exactly)."""
    for key, value in headers.items():
        if key.lower() == "content-disposition":
            match = re.search(r'filename="?([^";]+)"?', value)
            return match.group(1) if match else ""
    return ""


def _reset_seconds(headers: dict[str, str]) -> float | None:
    """The `x-ogw-ratelimit-reset` header (seconds until the limit resets), whatever its case."""
    for key, value in headers.items():
        if key.lower() == RESET_HEADER:
            try:
                return max(0.0, float(value))
            except ValueError:
                return None
    return None
