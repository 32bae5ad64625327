"""`claude-memory feishu`: the bridge alone, over the same container as the web app, no HTTP.

Runs until SIGINT/SIGTERM, then closes the bridge before the container, each within its time
limit. Exits 1 when the websocket client dies for good (e.g. the app credentials are rejected).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from settings import Settings

logger = logging.getLogger("bridge.feishu")

_WATCH_SECONDS = 1.0


async def run_bridge(settings: Settings, *, stop: asyncio.Event | None = None) -> int:
    from app import build_container
    from bridge.feishu import FeishuBridge, memory_search

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # Windows, non-main thread
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
    container = await asyncio.to_thread(build_container, settings)
    code = 0
    try:
        await container.start()
        bridge = FeishuBridge(
            settings,
            container.sessions,
            search=memory_search(container.memory),
            state=container.feishu_state,
        )
        try:
            await bridge.start()
            if await bridge.wait_connected(30):
                logger.info("Feishu bridge connected; press Ctrl+C to stop")
            else:
                logger.warning("Feishu bridge not connected yet; it keeps retrying")
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_WATCH_SECONDS):
                        await stop.wait()
                error = bridge.status()["error"]
                if error:
                    logger.error("Feishu websocket client stopped: %s", error)
                    code = 1
                    break
        finally:
            await bridge.aclose()
    finally:
        await container.aclose()
        for sig in installed:
            loop.remove_signal_handler(sig)
    return code
