"""`claude-memory mcp`: the memory tools over MCP stdio, for Claude Code, Codex and others.

One process per client session (the client starts it); it exits when stdin closes. It answers
at once and loads the rest behind: `initialize` and `tools/list` come from the catalog
(`mcp_tools.catalog`, no memory imported), and once the tool list is out a background thread
reads the settings, imports the tools and opens the memory on first use; a tool call that
arrives sooner waits for that (issue #32: with the SDK the first answer took 0.5-2 s and Codex
started without the tools). The protocol is `mcp_stdio`; the tools are `mcp_tools`.

Semantic search: with an encoder configured, the server runs the encoder worker itself
(`memory.encoders.client.EncoderClient`, on its own event loop in a thread, as the app runs
it): searches answer with keywords until it is ready (and say so), then hybrid; notes without
vectors are embedded in the background meanwhile (docs/retrieval.md, "Per front door").

Project-aware tools take the project from the working directory the client started the server
in (`memory.clients.project.identify`), so two folders that share a name never share project
memory. Nothing here reads the environment: `claude-memory mcp` hands over a function that
builds the `McpConfig` from the settings.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from errors import ClaudeMemoryError
from memory.clients.mcp_stdio import NoSuchTool, ToolText, serve
from memory.clients.mcp_tools.catalog import RETIRED, SPECS

if TYPE_CHECKING:
    import asyncio
    from pathlib import Path

    from memory.clients.mcp_tools.context import McpConfig, ToolContext
    from memory.encoders.client import EncoderClient

log = logging.getLogger(__name__)

LOAD_WAIT: Final = 120.0
"""Longest a tool call waits for the memory to load (a PostgreSQL database may be slow to
answer); the call is then refused with a word to try again."""
CLOSE_WAIT: Final = 10.0
"""Longest the exit waits for the loading or the encoder worker to stop."""
_NAMES: Final = frozenset(spec.name for spec in SPECS)


class LazyTools:
    """The tools behind the protocol: loaded once, in the background, on first need."""

    def __init__(self, make_config: Callable[[], McpConfig], *, cwd: str | None = None) -> None:
        self._make_config = make_config
        self._cwd = cwd
        self._lock = threading.Lock()
        self._started = False
        self._ready = threading.Event()
        self._ctx: ToolContext | None = None
        self._failure = "the memory did not load"
        self._encoder: EncoderThread | None = None

    def warm(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._load, name="mcp-load", daemon=True).start()

    def _load(self) -> None:
        try:
            self._ctx = self.load()
        except ClaudeMemoryError as exc:  # a bad setting, an unreachable database: every call
            log.error("the memory did not load: %s", exc.message)
            self._failure = exc.message
        except Exception:
            log.exception("the memory did not load")
            self._failure = "the memory did not load (details in mcp.log)"
        finally:
            self._ready.set()

    def load(self) -> ToolContext:
        """Settings, logging, the tools, the encoder worker: what the first answers skipped."""
        config = self._make_config()
        _log_to_file(config.log_folder)
        from memory.clients.mcp_tools import registry  # noqa: F401 - the memory, imported now
        from memory.clients.mcp_tools.context import ToolContext

        ctx = ToolContext(config, cwd=self._cwd)
        log.info("MCP server ready for %s (project %s)", config.home, ctx.project.key)
        if config.encoder is not None:
            self._encoder = EncoderThread(ctx)
            self._encoder.start()
        return ctx

    def call(
        self, name: str, arguments: object, meta: Mapping[str, Any] | None
    ) -> ToolText | NoSuchTool:
        if name not in _NAMES:  # answered without loading anything
            if name in RETIRED:
                return ToolText(f"{name} was retired; use {RETIRED[name]}", error=True)
            return NoSuchTool(name)
        self.warm()
        if not self._ready.wait(LOAD_WAIT):
            return ToolText("the memory is still loading; try again in a moment", error=True)
        if self._ctx is None:
            return ToolText(self._failure, error=True)
        from memory.clients.mcp_tools.registry import note_session, run_tool

        note_session(self._ctx, meta)
        return run_tool(self._ctx, name, arguments)

    def close(self) -> None:
        """Stop the encoder worker and close the memory (after the loading, if it runs)."""
        if self._started:
            self._ready.wait(CLOSE_WAIT)
        if self._encoder is not None:
            self._encoder.stop(CLOSE_WAIT)
        if self._ctx is not None:
            self._ctx.close()


class EncoderThread:
    """The encoder worker's client on an event loop of its own (the protocol needs none):
    started after the tools, it loads in its own process while searches use keywords, then
    embeds the notes whose vectors are missing or stale (as the app's `VectorSync` does)."""

    def __init__(self, ctx: ToolContext) -> None:
        self._ctx = ctx
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._running = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mcp-encoder", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._running.wait(CLOSE_WAIT)

    def stop(self, seconds: float) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended meanwhile
                loop.call_soon_threadsafe(stop.set)
        self._thread.join(seconds)

    def _run(self) -> None:
        import asyncio  # here: the protocol's start never pays for it

        try:
            asyncio.run(self._main())
        except Exception:
            log.exception("the encoder worker stopped")
        finally:
            self._running.set()

    async def _main(self) -> None:
        import asyncio

        from memory.encoders.client import EncoderClient, ThreadEncoder

        ctx = self._ctx
        spec = ctx.config.encoder
        assert spec is not None
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        self._running.set()
        client = EncoderClient(
            spec,
            log_path=ctx.config.log_folder / "encoder.log",
            request_timeout=ctx.config.encoder_timeout,
        )
        async with client:
            ctx.attach_encoder(ThreadEncoder(client))
            try:
                async with asyncio.TaskGroup() as tasks:
                    embedding = tasks.create_task(_embed_in_background(ctx, client))
                    await self._stop.wait()
                    embedding.cancel()
            finally:
                ctx.attach_encoder(None)


async def _embed_in_background(ctx: ToolContext, client: EncoderClient) -> None:
    """Once the encoder is ready, embed the notes whose vectors are missing or stale (saved
    before, or by the hooks and the CLI meanwhile), as the app's `VectorSync` does."""
    import asyncio

    from memory.clients.vector_sync import VectorSync
    from memory.encoders.client import EncoderDisabled, EncoderReady

    while not isinstance(status := await client.wait_ready(60), EncoderReady):
        if isinstance(status, EncoderDisabled):
            return
    try:
        store = await asyncio.to_thread(lambda: ctx.store)
    except ClaudeMemoryError as exc:  # the tools report it too, on their first use
        log.warning("background embedding off: the store did not open (%s)", exc.message)
        return
    async with VectorSync(client, store.vectors, store.generation, written=store.check_embedded):
        await asyncio.Event().wait()  # until cancelled


def _log_to_file(folder: Path) -> None:
    """Logs to `<logs>/mcp.log`; stdout belongs to the protocol. Sanitized as memory."""
    import logging.handlers

    from memory.notes.capture import RedactingFilter

    try:
        folder.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.handlers.RotatingFileHandler(
            folder / "mcp.log", maxBytes=2_000_000, backupCount=2, encoding="utf-8"
        )
    except OSError:
        return
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())  # tool arguments may be logged on errors
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)


def serve_stdio(make_config: Callable[[], McpConfig], *, cwd: str | None = None) -> int:
    """Run until the client closes stdin, then stop the encoder, close the memory, return 0."""
    tools = LazyTools(make_config, cwd=cwd)
    try:
        serve(tools, sys.stdin.buffer, sys.stdout.buffer)
    except KeyboardInterrupt:
        pass
    finally:
        tools.close()
        log.info("MCP server stopped (stdin closed)")
    return 0
