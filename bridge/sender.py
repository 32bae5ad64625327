"""Sending through the real `lark.Client`: reply, create, patch, download, bot info.

* Calls run in a worker thread (`asyncio.to_thread`): the SDK's sync path also fetches the tenant
  token synchronously, which must not block the app's event loop.
* The SDK has no retry: throttling (HTTP 429, code 99991400 or 230020) waits for
  `x-ogw-ratelimit-reset` seconds (capped) and tries again; network errors are retried too. A
  retried send is safe because every reply/create carries an idempotency `uuid` (Feishu keeps
  one message per uuid for an hour).
* A request body over Feishu's limit is refused here, before it leaves.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid as uuid_mod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import requests

from bridge.render import BODY_LIMITS, MsgType, request_body_size
from errors import ClaudeMemoryError

logger = logging.getLogger("bridge.feishu.sender")

THROTTLED_CODES = frozenset({99991400, 230020})
RESET_HEADER = "x-ogw-ratelimit-reset"
_UUID_NAMESPACE = uuid_mod.UUID("8f0c7a52-2b7e-4d55-9a39-3f1f6d1e5c21")


class FeishuAPIError(ClaudeMemoryError):
    """An open platform call failed; `code` is Feishu's error code (0 when there was none)."""

    status_code = 502

    def __init__(
        self, operation: str, *, code: int, msg: str, status: int | None, log_id: str | None
    ) -> None:
        hint = f" (log id {log_id})" if log_id else ""
        super().__init__(f"Feishu {operation} failed: code {code}, {msg}{hint}")
        self.operation = operation
        self.code = code
        self.status = status
        self.log_id = log_id

    @property
    def throttled(self) -> bool:
        return self.status == 429 or self.code in THROTTLED_CODES


def send_uuid(*parts: object) -> str:
    """A stable idempotency key (36 chars, Feishu allows 50) for one turn's chunk."""
    return str(uuid_mod.uuid5(_UUID_NAMESPACE, ":".join(str(p) for p in parts)))


@dataclass(frozen=True, slots=True)
class Download:
    data: bytes
    file_name: str


Sleep = Callable[[float], Awaitable[None]]


class Sender:
    """Feishu IM calls with retries; one per bridge."""

    def __init__(
        self,
        client: Any,
        *,
        attempts: int = 4,
        max_wait: float = 30.0,
        sleep: Sleep = asyncio.sleep,
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
        self._attempts = attempts
        self._max_wait = max_wait
        self._sleep = sleep
        self._create_req = CreateMessageRequest
        self._create_body = CreateMessageRequestBody
        self._reply_req = ReplyMessageRequest
        self._reply_body = ReplyMessageRequestBody
        self._patch_req = PatchMessageRequest
        self._patch_body = PatchMessageRequestBody
        self._resource_req = GetMessageResourceRequest
        self._chat_req = GetChatRequest

    # --- messages --------------------------------------------------------------------------------
    async def reply(
        self, message_id: str, msg_type: MsgType, content: dict[str, Any], *, uuid: str
    ) -> str:
        """Reply to a message; returns the new message's id."""
        text = json.dumps(content, ensure_ascii=False)
        _check_size(msg_type, {"content": text, "msg_type": msg_type, "uuid": uuid})
        body = self._reply_body.builder().content(text).msg_type(msg_type).uuid(uuid).build()
        request = self._reply_req.builder().message_id(message_id).request_body(body).build()
        resp = await self._call("reply", self._client.im.v1.message.reply, request)
        return str(resp.data.message_id)

    async def create(
        self, chat_id: str, msg_type: MsgType, content: dict[str, Any], *, uuid: str
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
        resp = await self._call("create", self._client.im.v1.message.create, request)
        return str(resp.data.message_id)

    async def patch(self, message_id: str, content: dict[str, Any]) -> None:
        """Replace a card's content (cards only; 5 updates/s per message at most)."""
        text = json.dumps(content, ensure_ascii=False)
        _check_size("interactive", {"content": text})
        body = self._patch_body.builder().content(text).build()
        request = self._patch_req.builder().message_id(message_id).request_body(body).build()
        await self._call("patch", self._client.im.v1.message.patch, request)

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

    async def chat_admins(self, chat_id: str) -> frozenset[str]:
        """A group's owner and managers (open_ids), from "获取群信息" (GET /im/v1/chats/:chat_id,
        `owner_id` and `user_manager_id_list`; needs im:chat:readonly, im:chat:read or im:chat)."""
        request = self._chat_req.builder().chat_id(chat_id).user_id_type("open_id").build()
        resp = await self._call("chat info", self._client.im.v1.chat.get, request)
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
        resp = await self._call("bot info", self._client.request, request)
        try:
            payload = json.loads(resp.raw.content)
        except (ValueError, AttributeError):
            return None
        bot = payload.get("bot") or (payload.get("data") or {}).get("bot") or {}
        return bot.get("open_id") or None

    # --- plumbing --------------------------------------------------------------------------------
    async def _call(self, operation: str, fn: Callable[[Any], Any], request: Any) -> Any:
        last: FeishuAPIError | None = None
        for attempt in range(1, self._attempts + 1):
            try:
                resp = await asyncio.to_thread(fn, request)
            except requests.RequestException as exc:  # connection lost, timeout: try again
                last = FeishuAPIError(
                    operation, code=0, msg=f"{type(exc).__name__}: {exc}", status=None, log_id=None
                )
                wait = min(2.0 ** (attempt - 1), self._max_wait)
            except Exception as exc:  # token refused, a body that is not JSON: not transient
                raise FeishuAPIError(
                    operation, code=0, msg=f"{type(exc).__name__}: {exc}", status=None, log_id=None
                ) from exc
            else:
                if resp.success():
                    return resp
                raw = getattr(resp, "raw", None)
                status = getattr(raw, "status_code", None)
                headers = getattr(raw, "headers", None) or {}
                last = FeishuAPIError(
                    operation,
                    code=int(resp.code or 0),
                    msg=str(resp.msg or ""),
                    status=status,
                    log_id=resp.get_log_id(),
                )
                if not last.throttled:
                    raise last
                wait = _reset_seconds(headers, default=2.0 ** (attempt - 1), cap=self._max_wait)
            if attempt == self._attempts:
                break
            logger.warning("%s; retrying in %.1f s (attempt %d)", last.message, wait, attempt)
            await self._sleep(wait)
        assert last is not None
        raise last


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


def _disposition_name(headers: dict[str, str]) -> str:
    """The file name of a Content-Disposition header, whatever its case (lark matches exactly)."""
    for key, value in headers.items():
        if key.lower() == "content-disposition":
            match = re.search(r'filename="?([^";]+)"?', value)
            return match.group(1) if match else ""
    return ""


def _reset_seconds(headers: dict[str, str], *, default: float, cap: float) -> float:
    for key, value in headers.items():
        if key.lower() == RESET_HEADER:
            try:
                return max(0.0, min(float(value), cap))
            except ValueError:
                break
    return min(default, cap)
