"""A turn on record while it runs, and what is left of one whose process died.

`TurnJournal`: a chat turn is written when it starts (the user's message, status `running`),
its steps and text as they happen (the latest state only, by a writer task the turn owns, so a
slow database delays the record, never the turn), and its end. A crash (SIGKILL, power cut)
leaves the row `running`.

`recover_turn`: such a turn, once its process is known gone, is marked `interrupted` with the
steps that ran and the text its transcript holds (the CLI's own record, which may hold more
than reached us: the CLI can finish a turn after the app died). `interrupted_note` is what the
model is told at the start of the conversation's next turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from agent._turn import summarize_tool_input
from agent.conversations import INTERRUPTED, ConversationBackend, OpenTurn, TurnRecord
from memory.clients.conventions import claude_project_dirs

logger = logging.getLogger(__name__)

Run = Callable[..., Awaitable[Any]]
"""Runs a blocking store call off the loop: `await run(fn, *args, **kwargs)`."""

INTERRUPTED_REPLY = (
    "Interrupted: the app stopped (it crashed or was killed) before this turn finished, so "
    "its reply never arrived."
)
_SESSION_ID = re.compile(r"[0-9a-fA-F-]{36}")
_TEXT_LIMIT = 20_000


class TurnJournal:
    """One running chat turn's row. `changed()` after its steps or text change; the writer
    task (`running()`) writes the latest state whenever it can."""

    def __init__(
        self,
        store: ConversationBackend,
        run: Run,
        snapshot: Callable[[], tuple[str, list[dict[str, str]], str | None]],
    ) -> None:
        self._store = store
        self._run = run
        self._snapshot = snapshot  # (text so far, steps so far, session id)
        self.turn_id: int | None = None
        self.previous: TurnRecord | None = None
        self._dirty = asyncio.Event()

    async def begin(
        self,
        conversation_id: str,
        *,
        started: float,
        message: str,
        log_file: str,
        session: str | None,
    ) -> None:
        """Put the turn on record. A store error is logged: the turn runs, recorded at its end."""
        try:
            self.turn_id, self.previous = await self._run(
                self._store.begin_turn,
                conversation_id,
                started=started,
                message=message,
                log_file=log_file,
                session_id=session,
            )
        except Exception:
            logger.exception("could not put a turn of %s on record", conversation_id)

    def changed(self) -> None:
        self._dirty.set()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Owns the writer task for the turn's duration; the last state is written on exit."""
        if self.turn_id is None:
            yield
            return
        task = asyncio.get_running_loop().create_task(self._write_changes())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _write_changes(self) -> None:
        assert self.turn_id is not None
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            reply, tools, session = self._snapshot()
            try:
                await self._run(
                    self._store.update_turn,
                    self.turn_id,
                    reply=reply,
                    tools=tools,
                    session_id=session,
                )
            except Exception:
                logger.warning("could not write a running turn's progress", exc_info=True)


def interrupted_note(previous: TurnRecord | None) -> str:
    """The note put before the user's words when the conversation's last turn was interrupted
    (empty otherwise): the model's session may hold that turn, the person never saw it end."""
    if previous is None or previous.status != INTERRUPTED:
        return ""
    steps = "; ".join(
        f"{s.get('name', 'tool')} `{s.get('summary', '')}` ({s.get('status', '?')})"
        for s in previous.tools[:10]
    )
    ran = f" Steps that had run: {steps}." if steps else ""
    return (
        "[Note from the app, not from the person: your previous turn in this conversation was "
        "interrupted (the app stopped before it finished), so the person never saw its reply "
        f"or its end.{ran} Check the state of anything it changed before relying on it; "
        "say so if you repeat it.]\n\n"
    )


@dataclass(slots=True)
class TranscriptTail:
    """What a session's transcript holds from a point in time on: text and tool steps."""

    found: bool = False
    texts: list[str] = field(default_factory=list)
    steps: list[dict[str, str]] = field(default_factory=list)


def transcript_tail(entries: Iterable[Mapping[str, Any]], since: float) -> TranscriptTail:
    """Read the CLI's transcript entries (its JSONL lines) written at or after `since` (epoch
    seconds): the assistant's text and the tool steps with their results. The CLI's own error
    messages and side chains are left out."""
    tail = TranscriptTail()
    by_id: dict[str, dict[str, str]] = {}
    for entry in entries:
        tail.found = True
        kind = entry.get("type")
        if kind not in ("user", "assistant") or entry.get("isSidechain"):
            continue
        if entry.get("isApiErrorMessage") or entry.get("error"):
            continue
        if _epoch(entry.get("timestamp")) < since - 1.0:
            continue
        message = entry.get("message")
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, Mapping):
                continue
            if kind == "assistant" and block.get("type") == "text":
                text = str(block.get("text") or "").strip()
                if text:
                    tail.texts.append(text)
            elif kind == "assistant" and block.get("type") == "tool_use":
                raw = block.get("input")
                tool_input = raw if isinstance(raw, Mapping) else {}
                name = str(block.get("name") or "tool")
                step = {"name": name, "summary": summarize_tool_input(name, tool_input)}
                step["status"] = "started"
                by_id[str(block.get("id"))] = step
                tail.steps.append(step)
            elif kind == "user" and block.get("type") == "tool_result":
                step = by_id.get(str(block.get("tool_use_id")), {})
                if step:
                    result = _result_text(block.get("content"))
                    step["status"] = "error" if block.get("is_error") else "ok"
                    step["detail"] = result[:300]
    return tail


def read_transcript_file(config_dir: Path, workspace: Path, session_id: str) -> list[Any]:
    """A session's transcript lines from disk ([] when there is none)."""
    if not _SESSION_ID.fullmatch(session_id):  # never a path from stored data
        return []
    for folder in reversed(claude_project_dirs(config_dir, str(workspace))):
        path = folder / f"{session_id}.jsonl"
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        entries = []
        for line in lines:
            with contextlib.suppress(ValueError):  # a line cut off by the crash
                entries.append(json.loads(line))
        return entries
    return []


def recovered(turn: OpenTurn, tail: TranscriptTail) -> tuple[str, list[dict[str, Any]]]:
    """The reply and steps an interrupted turn is kept with: whichever record holds more (the
    transcript may hold what the app never received)."""
    tools = tail.steps if len(tail.steps) >= len(turn.tools) and tail.steps else turn.tools
    text = "\n\n".join(tail.texts) if tail.texts else turn.reply
    if len(text) > _TEXT_LIMIT:
        text = text[:_TEXT_LIMIT] + "…"
    reply = INTERRUPTED_REPLY
    if text.strip():
        reply += "\n\nWhat the model had written:\n\n" + text.strip()
    return reply, tools


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(item.get("text", "")) for item in content if isinstance(item, Mapping))
    return ""


def _epoch(value: Any) -> float:
    if not isinstance(value, str):
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
