"""Everything that depends on lark-oapi internals, in one place (verified with lark-oapi 1.7.5).

* `import_lark()` imports the SDK (slow: ~3.7 s) and, once, replaces the module-level `loop`
  of `lark_oapi.ws.client` with a proxy that forwards to the loop of the calling thread. The
  SDK captures that loop at import time and drives `ws.Client.start()` with it, which fails when
  it is the app's (running) loop; with the proxy each runner thread drives its own loop.
* `WsRunner` runs one `ws.Client` in a daemon thread with its own event loop, and stops it
  (1.7.5 has no public stop): no more reconnects, cancel the loop's tasks, close the socket.
* `forget_tenant_token()` drops the SDK's cached tenant token. The cache is process-global,
  keyed `self_tenant_token:<app_id>`, trusted until `expire - 600` s, and never refreshed when
  the platform refuses the token (99991663 and kin): the next call would send it again.
* `repairing_ws_client()`: the SDK's `ws.Client` whose data frames are made valid UTF-8 before
  the SDK reads them. 1.7.5 decodes each event's payload for a debug log line
  (`_handle_data_frame`: `pl.decode(UTF_8)`, evaluated whatever the log level) outside its
  try: bytes that are not UTF-8 raise there, the event is never acked nor handed on, and
  Feishu pushes it again for hours. Repaired (U+FFFD for each bad sequence), the event reaches
  the bridge, which reads it as docs/feishu.md says ("Odd input").
* `RawEventHandler` hands the raw event payload (bytes) to our callback, for every event type,
  so we parse once at the edge and ack types we do not handle instead of answering 500. Card
  actions (`card.action.trigger`, "卡片回传交互") are the exception: they go through the SDK's
  own `register_p2_card_action_trigger` processor (typed `P2CardActionTrigger` in, a
  `P2CardActionTriggerResponse` out, marshalled into the ack), as the documentation's
  long-connection samples do.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

logger = logging.getLogger("bridge.feishu.ws")

_import_lock = threading.Lock()
_lark: ModuleType | None = None
# The loop lark created (or grabbed) at import time. Kept referenced, never used: dropping it
# would let it be garbage-collected unclosed, and closing it could close a loop someone set.
_import_time_loop: object = None


class _ThreadLoopProxy:
    """Stands in for `lark_oapi.ws.client.loop`: the running loop, else this thread's loop."""

    def __getattr__(self, name: str) -> Any:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        return getattr(loop, name)


def import_lark() -> ModuleType:
    """Import lark_oapi once, with the per-thread loop proxy installed (blocking: ~4 s)."""
    global _lark
    with _import_lock:
        if _lark is None:
            import lark_oapi
            import lark_oapi.ws.client as ws_client

            if not isinstance(ws_client.loop, _ThreadLoopProxy):
                global _import_time_loop
                _import_time_loop = ws_client.loop
                ws_client.loop = _ThreadLoopProxy()
            _lark = lark_oapi
        return _lark


def forget_tenant_token(app_id: str) -> None:
    """Make the SDK fetch a new tenant access token on its next call."""
    from lark_oapi.core.token.manager import TokenManager

    # ICache has only get/set; an entry already expired is dropped on the next get.
    TokenManager.cache.set(f"self_tenant_token:{app_id}", "", 0)


CARD_ACTION = "card.action.trigger"


def raw_event_handler(
    callback: Callable[[bytes], None], on_card_action: Callable[[Any], Any] | None = None
) -> Any:
    """An EventDispatcherHandler whose every event goes, unparsed, to `callback`; card actions
    go to `on_card_action(P2CardActionTrigger) -> P2CardActionTriggerResponse` when given.

    The ws client acks 200 when this returns and 500 when it raises (Feishu then re-pushes);
    what it returns is marshalled, base64-encoded, into the ack (a card action's toast and card).
    """
    lark = import_lark()
    registered = lark.EventDispatcherHandler.builder("", "")
    if on_card_action is not None:
        registered = registered.register_p2_card_action_trigger(on_card_action)
    processors = registered.build()._callback_processor_map

    # lark is imported lazily (a module object here): mypy cannot see its classes.
    class RawEventHandler(lark.EventDispatcherHandler):  # type: ignore[name-defined,misc]
        def _do_without_validation(self, payload: bytes) -> Any:
            if on_card_action is not None and _event_type(payload) == CARD_ACTION:
                return super()._do_without_validation(payload)
            callback(payload)
            return None

    handler = RawEventHandler()
    handler._callback_processor_map = processors
    return handler


def valid_utf8(payload: bytes) -> bytes:
    """`payload` as valid UTF-8: unchanged when it is, each bad sequence as U+FFFD otherwise."""
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError:
        logger.warning("an event that is not valid UTF-8 was repaired (U+FFFD) before parsing")
        return payload.decode("utf-8", errors="replace").encode("utf-8")
    return payload


def repairing_ws_client(lark: ModuleType) -> type:
    """`lark.ws.Client` whose data frames reach the SDK as valid UTF-8 (module docstring)."""
    from lark_oapi.ws.const import HEADER_MESSAGE_ID, HEADER_SEQ, HEADER_SUM

    # lark is imported lazily (a module object here): mypy cannot see its classes.
    class RepairingClient(lark.ws.Client):  # type: ignore[name-defined,misc]
        async def _handle_data_frame(self, frame: Any) -> None:
            headers = {h.key: h for h in frame.headers}
            total = int(headers[HEADER_SUM].value) if HEADER_SUM in headers else 1
            payload = frame.payload
            if total > 1:
                # the SDK joins a fragmented event, then decodes it: join it here so the whole
                # is repaired (a fragment may end inside a character), then hand it on as one
                payload = self._combine(
                    headers[HEADER_MESSAGE_ID].value, total, int(headers[HEADER_SEQ].value), payload
                )
                if payload is None:
                    return
                headers[HEADER_SUM].value = "1"
                headers[HEADER_SEQ].value = "0"
            frame.payload = valid_utf8(payload)
            await super()._handle_data_frame(frame)

    return RepairingClient


def _event_type(payload: bytes) -> str:
    try:
        header = json.loads(payload).get("header") or {}
    except (ValueError, AttributeError):
        return ""
    return str(header.get("event_type") or "") if isinstance(header, dict) else ""


def card_action_response(toast: dict[str, Any] | None, card: dict[str, Any] | None) -> Any:
    """The SDK's answer object for a card action: a toast and/or the card's new JSON."""
    from lark_oapi.event.callback.model.p2_card_action_trigger import (
        P2CardActionTriggerResponse,
    )

    answer: dict[str, Any] = {}
    if toast is not None:
        answer["toast"] = toast
    if card is not None:
        answer["card"] = {"type": "raw", "data": card}
    return P2CardActionTriggerResponse(answer)


class WsRunner:
    """One lark websocket client in its own thread and event loop."""

    def __init__(
        self,
        *,
        app_id: str,
        app_secret: str,
        domain: str,
        on_payload: Callable[[bytes], None],
        on_card_action: Callable[[Any], Any] | None = None,
        log_level: int = logging.INFO,
    ) -> None:
        self._app_id = app_id
        self._app_secret = app_secret
        self._domain = domain
        self._on_payload = on_payload
        self._on_card_action = on_card_action
        self._log_level = log_level
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._stopping = False
        self.reconnects = 0
        self.connected_at: float | None = None
        self.error: BaseException | None = None

    @property
    def connected(self) -> bool:
        client = self._client
        return client is not None and getattr(client, "_conn", None) is not None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        import_lark()
        self._thread = threading.Thread(target=self._run, name="feishu-ws", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        lark = import_lark()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            client = repairing_ws_client(lark)(
                self._app_id,
                self._app_secret,
                event_handler=raw_event_handler(self._on_payload, self._on_card_action),
                domain=self._domain,
                log_level=_lark_level(lark, self._log_level),
            )
            client.on_reconnecting = self._reconnecting
            client.on_reconnected = self._reconnected
            self._client = client
            if not self._stopping:
                client.start()  # blocks until stop() cancels its loop
        except asyncio.CancelledError:
            pass  # stop() cancelled the loop's tasks: the normal way out
        except BaseException as exc:  # surfaced through status(); the thread must end cleanly
            self.error = exc
            logger.error("Feishu websocket client stopped: %s", exc)
        finally:
            self._close_loop(loop)

    def _reconnecting(self) -> None:
        logger.warning("Feishu websocket lost; reconnecting")

    def _reconnected(self) -> None:
        self.reconnects += 1
        self.connected_at = time.time()
        logger.info("Feishu websocket reconnected (%d reconnects so far)", self.reconnects)

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop the client and its thread; True when the thread ended within `timeout`."""
        self._stopping = True
        loop, thread = self._loop, self._thread
        if thread is None:
            return True
        if loop is not None and not loop.is_closed():
            shutdown = self._shutdown()
            try:
                asyncio.run_coroutine_threadsafe(shutdown, loop)
            except RuntimeError:  # the loop closed meanwhile: nothing left to stop
                shutdown.close()
        thread.join(timeout)
        return not thread.is_alive()

    async def _shutdown(self) -> None:
        client = self._client
        if client is not None:
            client._auto_reconnect = False
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        # Cancel the receive loop, pings and handlers first so a closed socket is not "lost".
        main = [t for t in tasks if _is_select(t)]
        others = [t for t in tasks if t not in main]
        for task in others:
            task.cancel()
        if others:
            await asyncio.wait(others, timeout=2)
        conn = getattr(client, "_conn", None)
        if conn is not None:
            try:
                async with asyncio.timeout(2):
                    await conn.close()
            except Exception as exc:  # closing a broken socket can fail; we are leaving anyway
                logger.debug("closing the Feishu websocket failed: %s", exc)
            client._conn = None
        for task in main:
            task.cancel()  # start() returns (raises CancelledError) once this is processed

    @staticmethod
    def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=2))
            loop.run_until_complete(loop.shutdown_asyncgens())
        except Exception as exc:  # a half-stopped loop; it is closed right below
            logger.debug("cleanup of the websocket loop failed: %s", exc)
        finally:
            loop.close()


def _is_select(task: asyncio.Task[Any]) -> bool:
    coro = task.get_coro()
    return getattr(coro, "__name__", "") == "_select"


def _lark_level(lark: ModuleType, level: int) -> Any:
    if level <= logging.DEBUG:
        return lark.LogLevel.DEBUG
    if level <= logging.INFO:
        return lark.LogLevel.INFO
    if level <= logging.WARNING:
        return lark.LogLevel.WARNING
    return lark.LogLevel.ERROR
