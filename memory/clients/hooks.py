"""Claude Code / Codex hooks: `claude-memory hook <event>`.

Contract with the CLI (see docs/claude-code.md):

* the hook's JSON payload arrives on stdin;
* stdout carries exactly one JSON object, `{"hookSpecificOutput": {"hookEventName": ...,
  "additionalContext": ...}}` (the form the model actually sees), or nothing at all;
* the exit code is always 0: bad input, a missing or locked home, any error and an overrun of
  the time budget all end with no output (fail open). Logs go to `<home>/logs/hooks.log`.

Two ways to do the work. When `claude-memory serve` runs, the hook posts the request to
`http://127.0.0.1:<CLAUDE_MEMORY_PORT or 8000>/api/hooks/<event>` (the server has the index
open and the segmenter loaded); otherwise it works directly on the files and the index in this
process. Both run `HookService.handle`, so they behave the same.

Import weight matters: every tool call starts a hook process. This module imports only the
standard library and `memory.clients.project`, `memory.clients.conventions` (what Claude
Code and Codex look like from here) and `memory.clients.observations` (what a tool call
teaches) at the top; the store and its dependencies are imported only by the events that
need them (`session-start`, `user-prompt-submit`, `session-end`).
`post-tool-use`, `stop` and `pre-compact` only touch `state.db`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypedDict

from memory.clients.conventions import EVENT_NAMES, EVENTS, last_assistant_reply, resolve_session_id
from memory.clients.observations import observe_tool
from memory.clients.project import ProjectIdentity, identify
from memory.settings_fields import hook_values

if TYPE_CHECKING:
    from memory.backend import MemoryBackend, StateBackend
    from memory.loop.entities import PendingStore
    from memory.loop.episodes import Episode, EpisodeMessage, EpisodeStore
    from memory.loop.prompt import MemoryLoop, Place

log = logging.getLogger("memory.clients.hooks")

CONTEXT_EVENTS: Final = frozenset({"session-start", "user-prompt-submit"})
STORE_EVENTS: Final = frozenset({"session-start", "user-prompt-submit", "session-end"})

DEFAULT_PORT: Final = 8000
MAX_STDIN: Final = 8_000_000
LOG_BYTES: Final = 2_000_000

GENERATED_REUSE_SECONDS: Final = 12 * 3600
IDLE_CLOSE_SECONDS: Final = 12 * 3600
"""An active episode idle this long is closed by the next session start in its project."""
DUPLICATE_OBSERVATION_SECONDS: Final = 30.0


class HookPayload(TypedDict, total=False):
    """What Claude Code sends on stdin (fields by event; unknown ones are ignored)."""

    session_id: str
    transcript_path: str
    cwd: str
    hook_event_name: str
    permission_mode: str
    source: str  # SessionStart: startup | resume | clear | compact
    prompt: str  # UserPromptSubmit
    tool_name: str  # PostToolUse
    tool_input: dict[str, Any]
    tool_response: Any
    tool_use_id: str
    stop_hook_active: bool  # Stop
    last_assistant_message: str
    reason: str  # SessionEnd
    trigger: str  # PreCompact
    custom_instructions: str


# --- settings from the environment ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HookSettings:
    home: Path
    port: int = DEFAULT_PORT
    token: str | None = None
    budget: float = 5.0
    context_tokens: int = 1500
    use_server: bool = True
    dedup_threshold: float | None = None
    client: str = "claude-code"
    environ: Mapping[str, str] = field(default_factory=dict)
    database_url: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(
        cls,
        event: str,
        environ: Mapping[str, str],
        *,
        home: str | None = None,
        client: str = "claude-code",
    ) -> HookSettings:
        # One definition of names and defaults, shared with Settings (memory/settings_fields.py);
        # no pydantic here: it costs ~0.5 s of imports on every prompt and tool call.
        return cls(**hook_values(event, environ, home=home), client=client, environ=environ)


# --- requests ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HookRequest:
    """One hook call, resolved at the edge (session id and project need the caller's env)."""

    event: str
    session_id: str | None
    project: ProjectIdentity
    payload: dict[str, Any]
    client: str = "claude-code"

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "session_id": self.session_id,
            "project": self.project.to_dict(),
            "payload": self.payload,
            "client": self.client,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HookRequest:
        event = data.get("event")
        if event not in EVENT_NAMES:
            raise ValueError(f"unknown hook event {event!r}")
        payload = data.get("payload")
        project = data.get("project")
        if not isinstance(payload, dict) or not isinstance(project, dict):
            raise ValueError("payload and project must be objects")
        session_id = data.get("session_id")
        return cls(
            event=str(event),
            session_id=str(session_id) if session_id else None,
            project=ProjectIdentity.from_dict(project),
            payload=payload,
            client=str(data.get("client") or "claude-code"),
        )

    @property
    def key(self) -> str:
        """The episode key of this CLI session."""
        return f"{self.client}:{self.session_id}"


def parse_payload(raw: str | bytes) -> dict[str, Any]:
    """The hook's stdin as a JSON object (ValueError otherwise)."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    data = json.loads(raw) if raw.strip() else None
    if not isinstance(data, dict):
        raise ValueError("hook input is not a JSON object")
    return data


# --- episode titles and windows ----------------------------------------------------------------


def cli_episode_title(name: str, when: float) -> str:
    """The title of a CLI session: `{project} 开发会话 {MM-DD HH:MM}` (the form of
    `memory.loop.episodes.episode_title(..., kind="开发会话")`)."""
    return f"{name} 开发会话 {time.strftime('%m-%d %H:%M', time.localtime(when))}"


def clear_window(db: StateBackend, key: str) -> None:
    """Forget what the session `key` was given (compaction, `memory_clear_cache`)."""
    from memory.loop.windows import StateWindows

    StateWindows(db).clear(key)


# --- the service ------------------------------------------------------------------------------


class HookService:
    """What each hook event does. Used in-process by the direct path and by the server's
    `/api/hooks/{event}` route; the store is only opened by the events that need it.

    Each client session (`HookRequest.key`) has its own episode, window and summary: two
    Claude Code windows in one project, or a Codex and a Claude Code session, never touch
    each other's. A session that ended without a session-end (its terminal was closed) is
    closed by the next session start in its project once idle for `IDLE_CLOSE_SECONDS`."""

    def __init__(
        self,
        state: StateBackend,
        store: Callable[[], MemoryBackend],
        *,
        budget_tokens: int = 1500,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.state = state
        self._store_factory = store
        self._store: MemoryBackend | None = None
        self.budget_tokens = budget_tokens
        self.clock = clock

    # --- lazily built collaborators ---
    @property
    def store(self) -> MemoryBackend:
        if self._store is None:
            self._store = self._store_factory()
        return self._store

    @property
    def episodes(self) -> EpisodeStore:
        """The episodes; the notes store opens only when a summary is written."""
        from memory.loop.episodes import EpisodeStore

        return EpisodeStore(self.state, open_store=lambda: self.store, clock=self.clock)

    @property
    def loop(self) -> MemoryLoop:
        from memory.loop.prompt import CLI_TOOLS, MemoryLoop

        return MemoryLoop(
            lambda: self.store, self.episodes, budget_tokens=self.budget_tokens, tools=CLI_TOOLS
        )

    @property
    def pending(self) -> PendingStore:
        from memory.loop.entities import PendingStore

        return PendingStore(self.state)

    # --- dispatch ---
    def handle(self, request: HookRequest) -> str:
        """Do the event's work; returns the context to inject ("" for none)."""
        if request.session_id is None:
            request = self._with_session(request)
        match request.event:
            case "session-start":
                return self.session_start(request)
            case "user-prompt-submit":
                return self.user_prompt_submit(request)
            case "post-tool-use":
                self.post_tool_use(request)
            case "stop":
                self.stop(request)
            case "session-end":
                self.session_end(request)
            case "pre-compact":
                clear_window(self.state, request.key)
            case _:
                log.debug("ignoring unknown hook event %s", request.event)
        return ""

    def _with_session(self, request: HookRequest) -> HookRequest:
        """No session id anywhere (Codex without a rollout file): reuse this project's recent
        generated session, or start one (session-start always starts one)."""
        prefix = f"{request.client}:gen-"
        if request.event != "session-start":
            key = self.episodes.latest_active_key(
                request.project.key, prefix, since=self.clock() - GENERATED_REUSE_SECONDS
            )
            if key is not None:
                return _replace_session(request, key[len(request.client) + 1 :])
        return _replace_session(request, f"gen-{os.urandom(16).hex()}")

    def _episode(self, request: HookRequest) -> str:
        """This session's active episode, started now if it has none."""
        episode_id, _ = self.episodes.ensure(
            request.key,
            title=cli_episode_title(request.project.name, self.clock()),
            project=request.project.key,
            scope=request.project.scope,
            source=request.client,
        )
        return episode_id

    # --- events ---
    def session_start(self, request: HookRequest) -> str:
        source = str(request.payload.get("source") or "startup")
        episodes = self.episodes
        for stale in episodes.idle(request.project.key, since=self.clock() - IDLE_CLOSE_SECONDS):
            if stale.key != request.key:  # its terminal closed without a session-end
                self._close(stale)
        self._episode(request)
        if source == "compact":
            clear_window(self.state, request.key)
        return self.loop.session_start(
            request.key, _place(request.project), resumed=source == "resume"
        ).text

    def user_prompt_submit(self, request: HookRequest) -> str:
        from memory.loop.recall import is_trivial_prompt

        prompt = str(request.payload.get("prompt") or "")
        episode_id = self._episode(request)
        if prompt.strip():
            self.episodes.record(episode_id, "user", prompt, turn=True)
        try:
            return self.loop.prompt(request.key, _place(request.project), prompt).text
        finally:
            # After recall: what the user states now is not echoed back to them this turn.
            if not is_trivial_prompt(prompt):
                self._capture(prompt, request)

    def post_tool_use(self, request: HookRequest) -> None:
        from memory.notes.capture import sanitize_data

        payload = request.payload
        # sanitized whole, before observe_tool cuts excerpts: a cut secret is no longer found
        observation = observe_tool(
            str(payload.get("tool_name") or ""),
            sanitize_data(payload.get("tool_input") or {}),
            sanitize_data(payload.get("tool_response")),
            request.project.root,
        )
        if observation is None:
            return
        from memory.notes.capture import clean_message, redact

        now = self.clock()
        episode_id = self._episode(request)
        title = redact(observation.title)
        last = self.episodes.last_message(episode_id, "observation")
        if (
            last is not None
            and last.title == title
            and last.content == clean_message(observation.content)
            and now - last.created < DUPLICATE_OBSERVATION_SECONDS
        ):
            return
        self.episodes.record(
            episode_id,
            "observation",
            observation.content,
            kind=observation.kind,
            title=title,
            file_changes=observation.changes,
        )

    def stop(self, request: HookRequest) -> None:
        from memory.notes.capture import clean_message

        payload = request.payload
        text = payload.get("last_assistant_message")
        if not isinstance(text, str) or not text.strip():
            transcript = payload.get("transcript_path")
            # only a CLI transcript: the path may come over HTTP from another process
            if isinstance(transcript, str) and transcript.endswith(".jsonl"):
                text = last_assistant_reply(transcript)
            else:
                text = ""
        if not text.strip():
            return
        episode_id = self._episode(request)
        last = self.episodes.last_message(episode_id, "assistant")
        if last is not None and last.content == clean_message(text):
            return  # Stop fires again when a stop hook continued the turn
        self.episodes.record(episode_id, "assistant", text)

    def session_end(self, request: HookRequest) -> None:
        episode = self.episodes.active(request.key)
        if episode is not None:
            self._close(episode)
        clear_window(self.state, request.key)

    # --- helpers ---
    def _close(self, episode: Episode) -> None:
        from memory.loop.episodes import should_summarize

        episodes = self.episodes
        summary = None
        if should_summarize(episode):
            summary = session_summary(episodes.messages(episode.id))
        episodes.close(episode.id, summary)  # clears its window too
        log.info("closed episode %s (%s)", episode.id, "summary" if summary else "no summary")

    def _capture(self, prompt: str, request: HookRequest) -> None:
        """Decisions and architecture choices belong to the project; preferences to the user."""
        from memory.loop.entities import capture_entities

        project_scope = request.project.scope
        capture_entities(
            self.store,
            self.pending,
            prompt,
            source=f"{request.client}:{request.session_id}",
            scope=lambda c: "user" if c.type == "preference" else project_scope,
        )


def _place(project: ProjectIdentity) -> Place:
    from memory.loop.prompt import Place

    return Place(key=project.key, name=project.name, scope=project.scope)


def _replace_session(request: HookRequest, session_id: str) -> HookRequest:
    return HookRequest(request.event, session_id, request.project, request.payload, request.client)


def session_summary(messages: Sequence[EpisodeMessage]) -> str:
    """The rule-based summary, plus the files changed when there is room (at most 300 chars)."""
    from memory.loop.episodes import SUMMARY_LIMIT, rule_based_summary

    base = rule_based_summary(messages)
    files: list[str] = []
    for message in messages:
        if message.role != "observation" or message.kind != "change":
            continue
        for line in message.content.splitlines():
            if line.startswith("files: "):
                for name in line[7:].split(", "):
                    if name and name not in files:
                        files.append(name)
    if files:
        extra = " | Files: " + ", ".join(files[:6])
        if len(base) + len(extra) <= SUMMARY_LIMIT:
            base += extra
    return base


# --- the two paths ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Served:
    context: str


@dataclass(frozen=True, slots=True)
class NoServer:
    reason: str


@dataclass(frozen=True, slots=True)
class ServerFailed:
    reason: str


ServerOutcome = Served | NoServer | ServerFailed


def ask_server(settings: HookSettings, request: HookRequest, timeout: float) -> ServerOutcome:
    """Post the request to a running `claude-memory serve` on loopback.

    NoServer (nothing listening, another service, another home, refused token) lets the
    caller work directly; ServerFailed (the request may have been applied) does not, so an
    event is never recorded twice. Plain HTTP/1.1 over a socket: `http.client` and `urllib`
    cost 10-20 ms of imports in a process that lives for ~100 ms."""
    import socket

    body = json.dumps(
        {"home": str(settings.home), "request": request.to_dict()}, ensure_ascii=True
    ).encode("ascii")
    head = [
        f"POST /api/hooks/{request.event} HTTP/1.1",
        f"Host: 127.0.0.1:{settings.port}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    if settings.token:
        head.append(f"Authorization: Bearer {settings.token}")
    message = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
    try:
        sock = socket.create_connection(("127.0.0.1", settings.port), timeout=min(timeout, 0.5))
    except OSError as exc:
        return NoServer(f"connect: {exc}")
    chunks: list[bytes] = []
    try:
        sock.settimeout(max(timeout, 0.1))
        sock.sendall(message)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError as exc:
        return ServerFailed(f"request: {exc}")
    finally:
        sock.close()
    return _server_answer(b"".join(chunks))


def _server_answer(raw: bytes) -> ServerOutcome:
    header, sep, payload = raw.partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2) if sep else []
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        return ServerFailed("no HTTP response")
    status = int(parts[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        payload = _dechunk(payload)
    if status in (401, 403, 404, 405, 409):
        return NoServer(f"HTTP {status}")
    if status != 200:
        return ServerFailed(f"HTTP {status}")
    try:
        context = json.loads(payload)["context"]
    except (ValueError, KeyError, TypeError):
        return NoServer("not a claude-memory server")
    return Served(context if isinstance(context, str) else "")


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return bytes(out)


def run_direct(settings: HookSettings, request: HookRequest) -> str:
    """Do the work in this process: on the files and the index in the home, or on the
    shared database when CLAUDE_MEMORY_DATABASE_URL is set (one small pool for both)."""
    from memory.opening import open_database, open_memory, open_state

    database = open_database(settings.database_url) if settings.database_url else None
    state = open_state(settings.home / "state.db", database=database)
    opened: list[MemoryBackend] = []

    def open_store() -> MemoryBackend:
        from memory.config import MemoryConfig

        overrides: dict[str, object] = {}
        if settings.dedup_threshold is not None:
            overrides["dedup_threshold"] = settings.dedup_threshold
        # Prompts use the index as it is (the files of returned notes are still checked): a
        # full scan costs ~0.15 s at 10k notes. Session start and end pick up hand edits.
        store = open_memory(
            MemoryConfig.for_home(settings.home, **overrides),
            database=database,
            sync=request.event != "user-prompt-submit",
        )
        opened.append(store)
        return store

    try:
        service = HookService(state, open_store, budget_tokens=settings.context_tokens)
        return service.handle(request)
    finally:
        for store in opened:
            from memory.sqlite.store import MemoryStore  # only once a store was opened

            if isinstance(store, MemoryStore):
                # `MemoryStore.close` rewrites `_index.json` in any new process (0.4 s at
                # 10k notes) even when nothing changed; the store rewrote it after our saves.
                store.flush_access_counts()
                store.index.close()
            else:
                store.close()
        state.close()
        if database is not None:
            database.close()


def hook_output(event: str, context: str) -> str:
    """Exactly one JSON object (ASCII, so no locale can break it), or "" for nothing."""
    if not context or event not in CONTEXT_EVENTS:
        return ""
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": EVENT_NAMES[event], "additionalContext": context}}
    )


def run_hook(
    event: str,
    raw: str | bytes,
    settings: HookSettings,
    *,
    deadline: float | None = None,
) -> str:
    """Everything one hook call does; returns what goes to stdout. Raises on bad input."""
    if event not in EVENT_NAMES:
        raise ValueError(f"unknown hook event {event!r}; use one of {', '.join(EVENTS)}")
    payload = parse_payload(raw)
    environ = settings.environ
    cwd = payload.get("cwd")
    cwd = cwd if isinstance(cwd, str) and cwd else os.getcwd()
    request = HookRequest(
        event=event,
        session_id=resolve_session_id(payload, environ, cwd, settings.client),
        project=identify(cwd),
        payload=payload,
        client=settings.client,
    )
    if settings.use_server:
        remaining = (deadline - time.monotonic() - 0.3) if deadline else 3.0
        match ask_server(settings, request, max(min(remaining, 3.0), 0.2)):
            case Served(context=context):
                log.info("%s handled by the server", event)
                return hook_output(event, context)
            case ServerFailed(reason=reason):
                log.warning("%s: the server failed (%s); nothing injected", event, reason)
                return ""
            case NoServer(reason=reason):
                log.debug("%s: no server (%s); working directly", event, reason)
    return hook_output(event, run_direct(settings, request))


# --- the process entry point ------------------------------------------------------------------


def _setup_logging(home: Path) -> None:
    """Everything to `<home>/logs/hooks.log` (one old generation kept at 2 MB); nothing ever
    to stdout or stderr. A plain FileHandler: `logging.handlers` costs ~10 ms of imports."""
    import tempfile

    root = logging.getLogger()
    for previous in list(root.handlers):
        root.removeHandler(previous)
    logging.raiseExceptions = False
    logging.lastResort = None
    handler: logging.Handler = logging.NullHandler()
    for path in (
        home / "logs" / "hooks.log",
        Path(tempfile.gettempdir()) / "claude-memory-hooks.log",
    ):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_size > LOG_BYTES:
                    os.replace(path, path.with_name(path.name + ".1"))
            handler = logging.FileHandler(path, encoding="utf-8")
            break
        except OSError:
            continue
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    )
    from memory.notes.capture import RedactingFilter  # every hook event but the lightest loads it

    handler.addFilter(RedactingFilter())  # messages and tracebacks sanitized before writing
    root.addHandler(handler)
    root.setLevel(logging.INFO)


@dataclass(frozen=True, slots=True)
class HookArgs:
    event: str
    home: str | None = None
    client: str = "claude-code"


def parse_args(argv: Sequence[str]) -> HookArgs | None:
    """`[--home DIR] [hook] <event> [--client claude-code|codex]` (no argparse: it prints
    usage to stderr and exits on errors; a hook must do neither)."""
    event: str | None = None
    home: str | None = None
    client = "claude-code"
    items = list(argv)
    i = 0
    while i < len(items):
        item = items[i]
        if item in ("--home", "--client") and i + 1 < len(items):
            if item == "--home":
                home = items[i + 1]
            else:
                client = items[i + 1]
            i += 2
            continue
        if item.startswith("--home="):
            home = item.split("=", 1)[1]
        elif item.startswith("--client="):
            client = item.split("=", 1)[1]
        elif item == "hook" and event is None:
            pass
        elif not item.startswith("-") and event is None:
            event = item
        i += 1
    if event is None or client not in ("claude-code", "codex"):
        return None
    return HookArgs(event, home, client)


def main(argv: Sequence[str] | None = None) -> int:
    """`claude-memory [--home DIR] hook <event> [--client codex]`: always exits 0."""
    started = time.monotonic()
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    if args is None:
        return 0
    environ = dict(os.environ)
    settings = HookSettings.from_env(args.event, environ, home=args.home, client=args.client)
    with contextlib.suppress(Exception):  # logging is a nicety; the hook must not fail
        _setup_logging(settings.home)
    # Only this process's final write reaches the real stdout: anything a library prints
    # (Python or C) while we work goes to /dev/null.
    try:
        real_stdout = os.dup(1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        return 0
    result: list[str] = []
    deadline = started + settings.budget

    def work() -> None:
        try:
            raw = sys.stdin.buffer.read(MAX_STDIN)
            result.append(run_hook(args.event, raw, settings, deadline=deadline))
        except BaseException:
            log.exception("hook %s failed; no output (fail open)", args.event)

    worker = threading.Thread(target=work, name="hook", daemon=True)
    worker.start()
    worker.join(max(deadline - time.monotonic(), 0.0))
    if worker.is_alive():
        log.warning(
            "hook %s overran its %.1f s budget; exiting with no output", args.event, settings.budget
        )
        logging.shutdown()
        os._exit(0)  # the worker may be stuck on a lock; SQLite and atomic writes stay intact
    output = result[0] if result else ""
    if output:
        data = output.encode("ascii")
        while data:
            written = os.write(real_stdout, data)
            data = data[written:]
    log.info(
        "hook %s done in %.0f ms%s",
        args.event,
        (time.monotonic() - started) * 1000,
        " (context injected)" if output else "",
    )
    logging.shutdown()
    return 0


# --- the server route -------------------------------------------------------------------------


def _same_home(claimed: object, own_home: Path) -> bool:
    return isinstance(claimed, str) and Path(os.path.realpath(claimed)) == own_home


def create_hooks_router(get_service: Callable[[], HookService], home: Path) -> Any:
    """`POST /api/hooks/{event}` for `claude-memory hook` when the server runs (loopback).

    The body is `{"home": ..., "request": HookRequest.to_dict()}`; a hook whose memory home
    is not this server's gets 409 and does the work itself."""
    import asyncio

    from fastapi import APIRouter, HTTPException

    router = APIRouter(prefix="/api/hooks", tags=["hooks"])
    own_home = Path(os.path.realpath(home))

    @router.post("/{event}", include_in_schema=False)
    async def hook_event(event: str, body: dict[str, Any]) -> dict[str, Any]:
        if event not in EVENT_NAMES:
            raise HTTPException(404, f"unknown hook event {event!r}")
        if not _same_home(body.get("home"), own_home):
            raise HTTPException(409, "this server serves another memory home")
        try:
            request = HookRequest.from_dict(body.get("request") or {})
        except (ValueError, KeyError, TypeError) as exc:
            raise HTTPException(422, f"bad hook request: {exc}") from None
        if request.event != event:
            raise HTTPException(422, "event mismatch")
        context = await asyncio.to_thread(get_service().handle, request)
        return {"context": context}

    return router
