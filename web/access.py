"""Who may reach the app: without an API token, loopback clients only, however it is started.

`claude-memory serve` refuses a non-loopback bind without `CLAUDE_MEMORY_API_TOKEN`, but
`uvicorn app:app --host 0.0.0.0` or any other ASGI server binds wherever it is told. So the app
itself checks every request (http and websocket, every path: page, /health, /api/*, /docs):
`create_app` installs `LoopbackOnly` when no token is configured. With a token, the bearer
check (`web.auth.require_token`) guards the API instead and any address may connect.

A client is local when both hold:

* its address (`scope["client"]`) is in 127.0.0.0/8 or ::1 (an IPv4-mapped ::ffff:127.x too),
  or there is no address at all: ASGI servers give none for a unix socket (`uvicorn --uds`),
  whose file permissions decide who may connect;
* no forwarding header (`Forwarded`, `X-Forwarded-For`, `X-Real-IP`) names any other address.
  A reverse proxy on the same host connects from 127.0.0.1 for a remote browser; uvicorn even
  rewrites `scope["client"]` from `X-Forwarded-For` when the proxy is 127.0.0.1. Either way a
  request forwarded for 203.0.113.7 is refused. A value that is not an address (`unknown`,
  an obfuscated `_node`) is not local either.

A local client must also name a local host (`Host: 127.0.0.1:8000`, `localhost`, `[::1]`): a
web page on another site can make the browser's own requests reach 127.0.0.1 by pointing its
host name there (DNS rebinding), and its requests then carry that name. Without a token, open
the page as http://127.0.0.1:8000 or http://localhost:8000. A request without a Host header
(HTTP/1.0 tools) is judged by its address alone.

This is a pure ASGI middleware, not Starlette's BaseHTTPMiddleware: it decides before the app
runs and then passes the untouched stream through, so SSE responses are never buffered.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

logger = logging.getLogger(__name__)

HOST_REFUSAL = (
    "this server answers only requests for a local host name (127.0.0.1, localhost, [::1]) "
    "because no API token is set: open it as http://127.0.0.1:<port>, or set "
    "CLAUDE_MEMORY_API_TOKEN on the server"
)
REFUSAL = (
    "this server answers only local (loopback) clients because no API token is set: "
    "set CLAUDE_MEMORY_API_TOKEN on the server and send 'Authorization: Bearer <token>'"
)
_FORWARDING_HEADERS = (b"forwarded", b"x-forwarded-for", b"x-real-ip")
_FORWARDED_FOR = re.compile(r"""(?:^|[;,\s])for\s*=\s*("[^"]*"|[^;,\s]*)""", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Local:
    pass


@dataclass(frozen=True, slots=True)
class Remote:
    address: str
    """The first non-loopback address seen: the client's, or one a forwarding header named."""


Origin = Local | Remote


def is_loopback(address: str) -> bool:
    """127.0.0.0/8, ::1, or an IPv4-mapped loopback; `[::1]:port` and `1.2.3.4:port` forms too.

    Anything that does not parse as an IP address (a host name, `unknown`) is not loopback.
    """
    text = address.strip().strip('"').strip()
    if text.startswith("["):  # [v6] or [v6]:port
        text = text[1 : text.find("]")] if "]" in text else text[1:]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def forwarded_addresses(headers: Iterable[tuple[bytes, bytes]]) -> list[str]:
    """Every address the forwarding headers name, in order (`for=` of `Forwarded` included)."""
    found: list[str] = []
    for raw_name, raw_value in headers:
        name = raw_name.lower()
        if name not in _FORWARDING_HEADERS:
            continue
        value = raw_value.decode("latin-1")
        if name == b"forwarded":
            found += [m.group(1) for m in _FORWARDED_FOR.finditer(value)]
        else:
            found += [part.strip() for part in value.split(",")]
    return found


def is_local_host_header(value: str) -> bool:
    """A Host header that names this machine: a loopback address or `localhost` (with a port)."""
    text = value.strip().lower()
    if text.startswith("["):  # [v6]:port
        name = text[1 : text.find("]")] if "]" in text else text[1:]
    else:
        name = text.rsplit(":", 1)[0] if text.count(":") == 1 else text
    name = name.rstrip(".")
    return name == "localhost" or name.endswith(".localhost") or is_loopback(name)


def origin(scope: Scope) -> Origin:
    """Where a request comes from, as far as the loopback rule is concerned."""
    client = scope.get("client")
    if client is not None and not is_loopback(str(client[0])):
        return Remote(str(client[0]))
    for address in forwarded_addresses(scope.get("headers") or []):
        if not is_loopback(address):
            return Remote(address or "<empty>")
    return Local()


def names_local_host(scope: Scope) -> bool:
    """False when the Host header names another host (see the module doc: DNS rebinding)."""
    for raw_name, raw_value in scope.get("headers") or []:
        if raw_name.lower() == b"host":
            return is_local_host_header(raw_value.decode("latin-1"))
    return True


class LoopbackOnly:
    """ASGI middleware: 403 JSON for every http and websocket request that is not local."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        match origin(scope):
            case Local() if not names_local_host(scope):
                logger.info("refused a request for a non-local host name: no API token")
                if scope["type"] == "http":
                    await _refuse_http(send, HOST_REFUSAL)
                else:
                    await _refuse_websocket(receive, send)
            case Local():
                await self.app(scope, receive, send)
            case Remote(address):
                logger.info("refused a request from %r: no API token, loopback only", address)
                if scope["type"] == "http":
                    await _refuse_http(send)
                else:
                    await _refuse_websocket(receive, send)


async def _refuse_http(send: Send, detail: str = REFUSAL) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _refuse_websocket(receive: Receive, send: Send) -> None:
    message: dict[str, Any] = dict(await receive())
    if message.get("type") == "websocket.connect":
        # Closing before accepting: the server answers the handshake with 403.
        await send({"type": "websocket.close", "code": 1008, "reason": "loopback only"})
