"""What each Claude Code / Codex hook event does (`HookService`), and the app's route that
runs it for a hook process (`create_hooks_router`).

The process side (`claude-memory hook <event>`: stdin, stdout, the time budget, finding and
proving the running app, direct mode) is `memory/clients/hook_process.py`; both paths end in
`HookService.handle`, so they behave the same. The store and its dependencies are imported only
by the events that need them (`session-start`, `user-prompt-submit`, `session-end`, the
compaction events and `file-changed`, and a `post-tool-use` of a `git commit`: the summary
trigger points of `memory/clients/triggers.py`); `stop` and other tool uses only touch
`state.db`.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypedDict, TypeVar

from memory._record import record
from memory.clients.conventions import EVENT_NAMES, EVENTS, last_assistant_reply, resolve_session_id
from memory.clients.degraded import Problem, first_telling, home_problem, notice, write_problem
from memory.clients.project import ProjectIdentity, identify
from memory.clients.triggers import summary_trigger

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from memory.backend import MemoryBackend, StateBackend
    from memory.loop.entities import PendingStore
    from memory.loop.episodes import Episode, EpisodeMessage, EpisodeStore
    from memory.loop.prompt import MemoryLoop, Place
    from memory.loop.windows import Window, WindowStore

log = logging.getLogger("memory.clients.hooks")
T = TypeVar("T")

CONTEXT_EVENTS: Final = frozenset({"session-start", "user-prompt-submit"})
STORE_EVENTS: Final = frozenset({"session-start", "user-prompt-submit", "session-end"})

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


# --- requests ---------------------------------------------------------------------------------


@record
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
    """The hook's stdin as a JSON object (ValueError otherwise). A JSON escape of half a UTF-16
    pair (`"\\ud800"`: valid JSON, no text) becomes U+FFFD here, once: it failed the prompt's
    record and its recall with it (issue #32)."""
    from storage.text import repaired

    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    data = json.loads(raw) if raw.strip() else None
    if not isinstance(data, dict):
        raise ValueError("hook input is not a JSON object")
    return dict(repaired(data))


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
    closed by the next session start in its project once idle for `IDLE_CLOSE_SECONDS`.

    A home that takes no writes (read-only, full) still gets its brief and its recall: each
    write of the session start and of a prompt is given up on its own when the storage refuses
    it (`degraded.write_problem`), and the answer then says so once per session
    (`system_message`)."""

    def __init__(
        self,
        state: StateBackend,
        store: Callable[[], MemoryBackend],
        *,
        budget_tokens: int = 1500,
        clock: Callable[[], float] = time.time,
        native_memory: str = "off",
        environ: Mapping[str, str] | None = None,
        after_answer: bool = False,
        home: str | os.PathLike[str] | None = None,
    ) -> None:
        """`after_answer`: what an answer does not need (a prompt's message in the episode,
        capture, the injected notes' use counts) waits for `finish()`, which the app's route
        runs once the answer is sent; otherwise (a hook process) it runs at once. `home`: the
        memory home, whose filesystem `system_message` asks whether it takes writes."""
        self.state = state
        self._store_factory = store
        self._store: MemoryBackend | None = None
        self.budget_tokens = budget_tokens
        self.clock = clock
        self.native_memory = native_memory
        """`import`: a session start imports changed native memories (`native.py`)."""
        self.environ = os.environ if environ is None else environ
        self._later: list[Callable[[], object]] | None = [] if after_answer else None
        self.home = home
        self.problems: set[Problem] = set()
        """Why writes of this call were given up (`_write`)."""

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

        episodes = self.episodes
        return MemoryLoop(
            lambda: self.store,
            episodes,
            budget_tokens=self.budget_tokens,
            tools=CLI_TOOLS,
            windows=_TolerantWindows(episodes.windows, self),
            after_answer=self._after_answer,
        )

    @property
    def pending(self) -> PendingStore:
        from memory.loop.entities import PendingStore

        return PendingStore(self.state)

    # --- writes that may be refused ---
    def _write(self, what: str, work: Callable[[], T]) -> T | None:
        """`work()`, or None when the storage refuses its write (read-only, full): the reads
        of this call go on without it, and the answer says memory is degraded. Any other
        failure is raised."""
        try:
            return work()
        except Exception as exc:
            problem = write_problem(exc)
            if problem is None:
                raise
            log.warning("%s not saved: the memory home is %s (%s)", what, problem, exc)
            self.problems.add(problem)
            return None

    def system_message(self, request: HookRequest) -> str:
        """The line the person sees (a hook's `systemMessage`) when memory is degraded: a
        write of this call was refused, the home cannot take writes, or the encoder failed;
        once per session ("": nothing to say, or already said)."""
        if request.event not in CONTEXT_EVENTS:
            return ""
        problems = set(self.problems)
        if self.home is not None and (problem := home_problem(self.home)) is not None:
            problems.add(problem)
        if self._store is not None and _encoder_failed(self._store):
            problems.add("encoder")
        if not problems or not first_telling(self.home or "", request.key):
            return ""
        return notice(problems)

    # --- after the answer ---
    def _after_answer(self, work: Callable[[], object]) -> None:
        def guarded() -> None:
            self._write("work after the answer", work)

        if self._later is None:
            guarded()
        else:
            self._later.append(guarded)

    @property
    def has_later(self) -> bool:
        """Work is waiting for `finish()`."""
        return bool(self._later)

    def finish(self) -> None:
        """Run the work left for after the answer, in order (blocking). A failure is logged and
        the rest still runs: the answer is already out, no one else would hear of it."""
        while self._later:
            work = self._later.pop(0)
            try:
                work()
            except Exception:
                log.exception("hook work after the answer failed")

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
                self.pre_compact(request)
            case "post-compact":
                self.post_compact(request)
            case "file-changed":
                self.file_changed(request)
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
                self._write("an idle session's close", functools.partial(self._close, stale))
        self._write("the session's episode", lambda: self._episode(request))
        if self.native_memory == "import" and source in ("startup", "clear"):
            self._import_native(request)
        if source in ("compact", "clear"):
            self._write("the window's reset", lambda: clear_window(self.state, request.key))
        # fork: a new session id over an old conversation, so like resume (the model has it)
        return self.loop.session_start(
            request.key,
            _place(request.project),
            resumed=source in ("resume", "fork"),
            compacted=source == "compact",
        ).text

    def watch_paths(self, request: HookRequest) -> list[str]:
        """What Claude Code should watch for hand edits (`notes_watch`): the notes folder."""
        from memory.clients.notes_watch import watch_paths

        return watch_paths(self.store) if request.client == "claude-code" else []

    def user_prompt_submit(self, request: HookRequest) -> str:
        from memory.loop.recall import is_trivial_prompt

        prompt = str(request.payload.get("prompt") or "")
        episode_id = self._write("the session's episode", lambda: self._episode(request))
        if episode_id is not None and prompt.strip():  # the recall does not read it
            self._after_answer(lambda: self.episodes.record(episode_id, "user", prompt, turn=True))
        try:
            return self.loop.prompt(request.key, _place(request.project), prompt).text
        finally:
            # After recall: what the user states now is not echoed back to them this turn.
            if episode_id is not None and not is_trivial_prompt(prompt):
                self._after_answer(lambda: self._capture_and_summarize(prompt, request, episode_id))

    def _capture_and_summarize(self, prompt: str, request: HookRequest, episode_id: str) -> None:
        captured = self._capture(prompt, request)
        if summary_trigger(request.event, request.payload, captured=captured):
            self._summarize_now(episode_id)

    def post_tool_use(self, request: HookRequest) -> None:
        from memory.clients.observations import observe_tool  # only this event: not on a prompt
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
        if summary_trigger(request.event, payload):  # a git commit
            self._summarize_now(episode_id)

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

    def pre_compact(self, request: HookRequest) -> None:
        clear_window(self.state, request.key)
        episode = self.episodes.active(request.key)
        if episode is not None:
            self._summarize_now(episode.id)

    def post_compact(self, request: HookRequest) -> None:
        """Claude Code's compaction summary joins the episode (timeline, L2 summary); Codex
        sends none, and its summary is rewritten from what was recorded."""
        from memory.loop.episodes import COMPACTION_KIND

        summary = request.payload.get("compact_summary")
        episode_id = self._episode(request)
        if isinstance(summary, str) and summary.strip():
            trigger = str(request.payload.get("trigger") or "auto")
            title = f"上下文压缩 ({trigger})"
            self.episodes.record(
                episode_id, "observation", summary, kind=COMPACTION_KIND, title=title
            )
        self._summarize_now(episode_id)

    def file_changed(self, request: HookRequest) -> None:
        from memory.clients.notes_watch import note_changed

        path = request.payload.get("file_path")
        if isinstance(path, str) and note_changed(self.store, path):
            log.info("a note changed on disk; the index is in step with the files again")

    def session_end(self, request: HookRequest) -> None:
        episode = self.episodes.active(request.key)
        if episode is not None:
            # `/clear` is a trigger point: even a short session keeps what it was about
            cleared = summary_trigger(request.event, request.payload) == "clear"
            self._close(episode, always=cleared and episode.turns > 0)
        clear_window(self.state, request.key)

    # --- helpers ---
    def _close(self, episode: Episode, *, always: bool = False) -> None:
        episodes = self.episodes
        summary = None
        if always or episodes.wants_summary(episode):
            summary = session_summary(episodes.session_messages(episode.key))
        episodes.close(episode.id, summary)  # clears its window too
        log.info("closed episode %s (%s)", episode.id, "summary" if summary else "no summary")

    def _import_native(self, request: HookRequest) -> None:
        """Claude Code's and Codex's own memories, when their files changed since the last
        start; a failure costs the import, never the session's start."""
        from errors import ClaudeMemoryError
        from memory.clients.native import import_changed

        started = time.monotonic()
        try:
            report = import_changed(
                self.state, lambda: self.store, self.environ, request.project, clock=self.clock
            )
        except (ClaudeMemoryError, OSError, ValueError) as exc:
            log.warning("native memories not imported: %s", exc)
            return
        if report is not None:
            log.info(
                "native memories: %d added, %d replaced, %d unchanged in %.0f ms",
                len(report.added),
                len(report.replaced),
                len(report.unchanged),
                (time.monotonic() - started) * 1000,
            )

    def _summarize_now(self, episode_id: str) -> None:
        """A trigger point (`triggers.summary_trigger`): create or overwrite the session's L2
        summary from what the session recorded so far (all its episodes: a resumed session
        is one more episode under its key); the episode stays open."""
        episodes = self.episodes
        messages = episodes.session_messages(episodes.get(episode_id).key)
        if messages:
            episodes.write_summary(episode_id, session_summary(messages))

    def _capture(self, prompt: str, request: HookRequest) -> bool:
        """Decisions and architecture choices belong to the project; preferences to the user.
        Whether anything was captured (saved or pending): the user asked to keep it."""
        from memory.loop.entities import capture_entities

        project_scope = request.project.scope
        result = capture_entities(
            self.store,
            self.pending,
            prompt,
            source=f"{request.client}:{request.session_id}",
            scope=lambda c: "user" if c.type == "preference" else project_scope,
        )
        return bool(result.saved or result.pending)


class _TolerantWindows:
    """A session's window whose writes may be refused (`HookService._write`): the recall it
    served is still given; the next prompt may repeat a note."""

    def __init__(self, windows: WindowStore, service: HookService) -> None:
        self._windows = windows
        self._service = service

    def load(self, key: str) -> Window:
        return self._windows.load(key)

    def save(self, key: str, turn: int, previous: Sequence[str], injected: Sequence[str]) -> None:
        self._service._write(
            "the session's window", lambda: self._windows.save(key, turn, previous, injected)
        )

    def clear(self, key: str) -> None:
        self._service._write("the window's reset", lambda: self._windows.clear(key))


def _encoder_failed(store: MemoryBackend) -> bool:
    """The store's encoder is the app's worker and it failed: failed now, or loading again
    after failing (the client retries with a growing delay). Not: its first load, none."""
    status = getattr(store.encoder, "status_dict", None)
    if not callable(status):
        return False
    state = status()
    return state.get("state") == "failed" or (
        state.get("state") == "loading" and bool(state.get("restarts"))
    )


def _place(project: ProjectIdentity) -> Place:
    from memory.loop.prompt import Place

    return Place(key=project.key, name=project.name, scope=project.scope)


def _replace_session(request: HookRequest, session_id: str) -> HookRequest:
    return HookRequest(request.event, session_id, request.project, request.payload, request.client)


def session_summary(messages: Sequence[EpisodeMessage]) -> str:
    """The rule-based summary, plus the files changed when there is room (at most 300 chars),
    in the conversation's language (`memory.loop.episodes.files_summary`)."""
    from memory.loop.episodes import files_summary

    return files_summary(messages)


# --- requests and answers -------------------------------------------------------------------


def build_request(
    event: str,
    payload: dict[str, Any],
    client: str,
    cwd: str,
    environ: Mapping[str, str],
) -> HookRequest:
    """The request of one hook call: the payload's `cwd` (else the hook's own folder), its
    session id (else the newest transcript, found through `environ`), the project."""
    if event not in EVENT_NAMES:
        raise ValueError(f"unknown hook event {event!r}; use one of {', '.join(EVENTS)}")
    folder = payload.get("cwd")
    folder = folder if isinstance(folder, str) and folder else cwd
    return HookRequest(
        event=event,
        session_id=resolve_session_id(payload, environ, folder, client),
        project=identify(folder),
        payload=payload,
        client=client,
    )


def hook_output(
    event: str, context: str, watch_paths: Sequence[str] = (), system_message: str = ""
) -> str:
    """Exactly one JSON object (ASCII, so no locale can break it), or "" for nothing.
    `watch_paths`: Claude Code's SessionStart `watchPaths` (folders it reports to FileChanged).
    `system_message`: a line shown to the person, not the model (`degraded.py`)."""
    if not (context or watch_paths or system_message) or event not in CONTEXT_EVENTS:
        return ""
    output: dict[str, Any] = {"hookEventName": EVENT_NAMES[event]}
    if context:
        output["additionalContext"] = context
    if watch_paths and event == "session-start":
        output["watchPaths"] = list(watch_paths)
    answer: dict[str, Any] = {"hookSpecificOutput": output}
    if system_message:
        answer = {"systemMessage": system_message, **answer}
    return json.dumps(answer)


def run_hook(
    event: str,
    raw: str | bytes,
    service: HookService,
    *,
    client: str,
    cwd: str,
    environ: Mapping[str, str],
    watch_notes: bool = True,
) -> str:
    """One hook call on `service`: stdin in, stdout text out. Raises on bad input."""
    request = build_request(event, parse_payload(raw), client, cwd, environ)
    return answer(service, request, watch_notes=watch_notes)


def answer(service: HookService, request: HookRequest, *, watch_notes: bool = True) -> str:
    """What one hook call prints: the event's work on `service`, as the hook's output.

    `watch_notes`: a session start names the notes' folders for Claude Code to watch
    (`watchPaths`, `notes_watch`). The app's route says no: every file written there then
    started a `file-changed` hook process, our own writes too (a capture, an MCP save: one
    process each, issue #32), while the app finds hand edits itself (its background rescans,
    `rescans.py`). A session that works directly has nothing else that would see them."""
    context = service.handle(request)
    watch = service.watch_paths(request) if watch_notes and request.event == "session-start" else []
    return hook_output(request.event, context, watch, service.system_message(request))


# --- the app's route --------------------------------------------------------------------------

MAX_BODY: Final = 8_000_000
HOOK_VECTOR_SECONDS: Final = 0.15
"""How long a served hook's search waits for its prompt's vector before it searches on
keywords, as the hooks working directly do (their whole budget is about this): an encoder busy
embedding notes, or meeting a long prompt, never holds a prompt for seconds (issue #32)."""


class SeenNonces:
    """The nonces of signed hook requests the app has taken, each kept twice the signature
    window (`hook_process.SIGNATURE_WINDOW`): a request played back within the window is
    refused, and one played back later is refused by its time. Only correctly signed
    requests are recorded, so only a holder of the secret can make the set grow."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._expires: dict[str, float] = {}  # in arrival order, so oldest first

    def first_use(self, nonce: str, now: float) -> bool:
        while self._expires:
            oldest = next(iter(self._expires))
            if self._expires[oldest] > now:
                break
            del self._expires[oldest]
        if nonce in self._expires:
            return False
        self._expires[nonce] = now + 2 * self.window
        return True


def signature_problem(
    secret: str,
    *,
    method: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes,
    now: float,
    seen: SeenNonces,
) -> str | None:
    """Why a hook request is not one a hook of this instance signed (None: it is): a nonce of
    32 hex digits, a time within the window, the signature over this request, a nonce not
    used before."""
    from memory.clients.hook_process import (
        CWD_HEADER,
        NONCE_HEADER,
        SIGNATURE_HEADER,
        TIME_HEADER,
        request_signature,
        same_text,
    )

    nonce = headers.get(NONCE_HEADER, "")
    stamp = headers.get(TIME_HEADER, "")
    given = headers.get(SIGNATURE_HEADER, "")
    if len(nonce) != 32 or any(c not in "0123456789abcdef" for c in nonce):
        return "no nonce"
    if not stamp.isascii() or not stamp.isdigit() or not given:
        return "not signed"
    wanted = request_signature(
        secret, method, target, stamp, nonce, headers.get(CWD_HEADER, ""), body
    )
    if not same_text(given, wanted):
        return "wrong signature"
    if abs(now - int(stamp)) > seen.window:
        return "signed too long ago"
    if not seen.first_use(nonce, now):
        return "nonce used before"
    return None


def create_hooks_router(
    get_service: Callable[[], HookService],
    secret: Callable[[], str | None],
    serving: Callable[[], AbstractContextManager[object]] | None = None,
    *,
    clock: Callable[[], float] = time.time,
) -> Any:
    """`POST /api/hooks/{event}?client=claude-code|codex`: a hook's stdin as it came from the
    CLI, answered with what the hook prints (`{}` for nothing). `serving()` is entered around
    each request's work (the app's background rescans wait for a quiet moment: `rescans.py`).

    Only a request signed with this instance's secret (`<home>/run/serve`;
    `hook_process.request_signature` in `X-Claude-Memory-Signature`, with
    `X-Claude-Memory-Time` and a fresh `X-Claude-Memory-Nonce`) is served; anything else,
    a played-back request included, gets 403, whether an API token is set or not. The secret
    itself never travels. Every answer to a signed request carries `X-Claude-Memory-Proof`
    (`hook_process.answer_proof` over its nonce, status and body), so the hook knows it was
    this app that answered; `hello` answers only that proof, before the hook sends its
    stdin."""
    import asyncio
    from contextlib import nullcontext

    from fastapi import APIRouter, Request, Response
    from starlette.background import BackgroundTask

    from memory.clients.hook_process import (
        CLIENTS,
        CWD_HEADER,
        HELLO,
        NONCE_HEADER,
        PROOF_HEADER,
        SIGNATURE_WINDOW,
        answer_proof,
    )

    # here, not at the top: only the app's route sets a vector budget; a hook process's tool
    # and stop events never search (~0.8 ms of their import time)
    from memory.search.plan import vector_budget

    router = APIRouter()
    seen = SeenNonces(SIGNATURE_WINDOW)

    def answer(
        status: int,
        body: bytes,
        key: str,
        nonce: str,
        service: HookService | None = None,
    ) -> Response:
        headers = {PROOF_HEADER: answer_proof(key, nonce, status, body)}
        later = None
        if service is not None and service.has_later:
            later = BackgroundTask(finish, service)  # after the answer is sent
        return Response(
            body, status, headers=headers, media_type="application/json", background=later
        )

    def refused(status: int, detail: bytes) -> Response:
        return Response(b'{"detail":"' + detail + b'"}', status, media_type="application/json")

    async def finish(service: HookService) -> None:
        with serving() if serving is not None else nullcontext():
            await asyncio.to_thread(service.finish)

    async def hook_event(request: Request) -> Response:
        # A plain Starlette endpoint: the raw body and headers, no FastAPI parameter binding.
        event = str(request.path_params["event"])
        client = request.query_params.get("client", "claude-code")
        key = secret()
        if key is None:
            return refused(403, b"not this app's hook signature")
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_BODY:
            return refused(413, b"hook input too large")
        raw = await request.body()
        if len(raw) > MAX_BODY:
            return refused(413, b"hook input too large")
        query = request.scope.get("query_string", b"").decode("latin-1")
        target = request.scope["path"] + (f"?{query}" if query else "")
        problem = signature_problem(
            key,
            method=request.method,
            target=target,
            headers=request.headers,
            body=raw,
            now=clock(),
            seen=seen,
        )
        if problem is not None:
            log.info("hook request refused: %s", problem)
            return refused(403, b"not this app's hook signature")
        nonce = request.headers[NONCE_HEADER]
        if event == HELLO:
            return answer(200, b"{}", key, nonce)
        if event not in EVENT_NAMES or client not in CLIENTS:
            return answer(404, b'{"detail":"unknown hook event or client"}', key, nonce)
        try:
            cwd = bytes.fromhex(request.headers.get(CWD_HEADER, "")).decode(
                "utf-8", "surrogateescape"
            )
        except ValueError:
            cwd = ""
        service = get_service()
        try:
            with (
                serving() if serving is not None else nullcontext(),
                vector_budget(HOOK_VECTOR_SECONDS),
            ):
                text = await asyncio.to_thread(
                    run_hook,
                    event,
                    raw,
                    service,
                    client=client,
                    cwd=cwd or os.getcwd(),
                    environ=os.environ,
                    watch_notes=False,  # the app's rescans see hand edits (`answer`)
                )
        except ValueError as exc:
            log.info("hook %s: bad input (%s)", event, exc)
            return answer(422, b'{"detail":"bad hook input"}', key, nonce, service)
        except Exception:
            log.exception("hook %s failed in the app", event)
            return answer(500, b'{"detail":"hook failed"}', key, nonce, service)
        return answer(200, (text or "{}").encode("ascii"), key, nonce, service)

    router.add_route("/api/hooks/{event}", hook_event, methods=["POST"], include_in_schema=False)
    return router
