"""Gather one turn's SDK messages into events for the caller and an outcome for the reply."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from agent.endpoint import CredentialsRefused, EndpointState, NotMessagesAPI, Unreachable
from agent.events import (
    MemoryInjected,
    PermissionEvent,
    Retrying,
    TextDelta,
    ToolStep,
    TurnEvent,
)
from agent.logs import RequestLog
from agent.policy import Allowed, Approver, Ask, Decision, Denied
from agent.replies import ToolFailure, TurnOutcome
from memory.model import OWNER, Reader

logger = logging.getLogger(__name__)

EventSink = Callable[[TurnEvent], Awaitable[None]]

UNTRUSTED_READS = frozenset(
    {"WebFetch", "WebSearch", "Read", "Grep", "Glob", "LS", "Bash", "NotebookRead"}
)
"""Tools whose results are outside text (web pages, files, command output): what a memory
change made after them may have been steered by (docs/permissions.md, "Memory")."""


def summarize_tool_input(name: str, tool_input: Mapping[str, Any], limit: int = 120) -> str:
    """A short, human-readable line for a tool call (shown in the web page and Feishu card)."""
    for key in ("command", "file_path", "notebook_path", "pattern", "path", "url", "query"):
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            text = " ".join(value.split())
            return text if len(text) <= limit else text[: limit - 1] + "…"
    return name


def retry_event(data: Mapping[str, Any]) -> Retrying:
    """The CLI's `api_retry` system message as an event. Its data, as the bundled CLI sends it:
    `{"attempt": 1, "max_retries": 10, "retry_delay_ms": 573, "error_status": 529,
    "error": "overloaded", ...}`; `error_status` is null when no HTTP answer came."""
    status = data.get("error_status")
    status = status if isinstance(status, int) else None
    error = str(data.get("error") or "")
    if status == 529 or error == "overloaded":
        reason = "overloaded"
    elif status == 429 or error == "rate_limit":
        reason = "rate limited"
    elif status is not None:
        reason = f"HTTP {status}"
    else:
        reason = "no answer from the model API"
    delay = data.get("retry_delay_ms")
    return Retrying(
        attempt=int(data.get("attempt") or 0),
        max_retries=int(data.get("max_retries") or 0),
        wait_seconds=round(delay / 1000, 1) if isinstance(delay, int | float) else 0.0,
        reason=reason,
        status=status,
    )


def _result_text(block: ToolResultBlock) -> str:
    content = block.content
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(item.get("text", "")) for item in content if isinstance(item, dict))
    return ""


class TurnState:
    """Mutable record of one running turn; owned by the conversation's actor task."""

    def __init__(self, log: RequestLog, sink: EventSink | None) -> None:
        self.log = log
        self.sink = sink
        self.approver: Approver | None = None  # who answers "ask" calls (the Feishu bridge)
        self.texts: list[str] = []
        self.tool_names: dict[str, str] = {}
        self.tool_summaries: dict[str, str] = {}
        # Every tool step of the turn, in order, with its final state: kept with the turn's
        # history so a reload shows the refused and failed steps too.
        self.steps: dict[str, dict[str, str]] = {}
        self.denied: dict[str, str] = {}
        self.failures: list[ToolFailure] = []
        self.result: ResultMessage | None = None
        self.api_error_kind: str | None = None
        self.api_error_text: str | None = None
        self.interrupted = False
        self.stop_reason: str | None = None  # why it was interrupted, when not on request
        self.timed_out = False
        self.crashed: str | None = None
        self.unreachable: str | None = None  # the endpoint check failed: the CLI never ran
        self.not_messages_api: str | None = None  # ... it is not a Messages API (what it said)
        self.compacted = False
        self.session_id: str | None = None
        self.notices: list[str] = []
        self.file_changes = 0
        # Permission hooks run inside the SDK's callback; their events wait for the next message.
        self._pending: list[TurnEvent] = []
        self.injected: list[dict[str, str]] = []
        self.memory_changes: list[dict[str, Any]] = []
        # Called when the turn's text, steps or session change (its record: agent/journal.py).
        self.on_change: Callable[[], None] | None = None
        # Put before the user's words in the prompt: the last turn was interrupted.
        self.prompt_note = ""
        # Whose memory the turn reads and saves to (the memory hook and tools ask it).
        self.reader: Reader = OWNER
        # What the front door adds to the system prompt if this turn starts the client.
        self.instructions = ""

    async def emit(self, event: TurnEvent) -> None:
        if self.sink is None:
            return
        try:
            await self.sink(event)
        except Exception:  # a gone web client must not break the turn
            logger.debug("event sink failed; dropping further events", exc_info=True)
            self.sink = None

    def record_permission(
        self,
        tool_name: str,
        tool_input: Mapping[str, Any],
        tool_use_id: str | None,
        decision: Decision,
    ) -> None:
        match decision:
            case Denied(reason=reason):
                allowed = False
                if tool_use_id:
                    self.denied[tool_use_id] = reason
                else:
                    summary = summarize_tool_input(tool_name, tool_input)
                    self.failures.append(ToolFailure(tool_name, reason, True, summary))
            case Allowed():
                allowed, reason = True, ""
            case Ask(reason=reason):
                allowed = False  # not decided yet: the answer is recorded when it comes
        self.log.write(
            "permission",
            {
                "tool_name": tool_name,
                "tool_use_id": tool_use_id,
                "input": dict(tool_input),
                "allowed": allowed,
                "reason": reason,
            },
        )
        if self.sink is not None:
            self._pending.append(PermissionEvent(tool_name, allowed, reason))

    def record_memory(self, notes: Sequence[Mapping[str, str]], text: str) -> None:
        """Memories injected into this turn's prompt (from the UserPromptSubmit hook)."""
        self.injected.extend(dict(n) for n in notes)
        self.log.write("memory", {"notes": list(notes), "context": text})
        if self.sink is not None and notes:
            self._pending.append(MemoryInjected(tuple(dict(n) for n in notes)))

    def record_memory_change(self, change: dict[str, Any]) -> None:
        """A memory change the agent made or proposed this turn (agent/memory_tools.py), with
        the tools that read outside input before it (web pages, files, command output: what
        may have steered it)."""
        read = sorted({s["name"] for s in self.steps.values() if s["name"] in UNTRUSTED_READS})
        entry = {**change, "read": read}
        self.memory_changes.append(entry)
        self.log.write("memory_change", entry)

    def memory_waiting(self) -> tuple[str, ...]:
        """One line per change of this turn that waits for the person."""
        return tuple(
            f"{c['title']}: it {c['why']} ({c['pending_id']})"
            for c in self.memory_changes
            if c.get("status") == "waiting"
        )

    async def flush_pending(self) -> None:
        pending, self._pending = self._pending, []
        for event in pending:
            await self.emit(event)

    async def consume(self, message: Any) -> None:
        """Take one SDK message: log it, turn it into events, remember what matters."""
        self.log.write("message", message)
        await self.flush_pending()
        match message:
            case StreamEvent(event=event, parent_tool_use_id=None):
                delta = event.get("delta") if event.get("type") == "content_block_delta" else None
                if isinstance(delta, dict) and delta.get("type") == "text_delta":
                    await self.emit(TextDelta(str(delta.get("text", ""))))
            case AssistantMessage(parent_tool_use_id=None) as msg:
                await self._assistant(msg)
            case UserMessage(parent_tool_use_id=None) as msg:
                await self._user(msg)
            case SystemMessage(subtype="init", data=data):
                self.session_id = data.get("session_id") or self.session_id
                self._changed()
            case SystemMessage(subtype="compact_boundary"):
                self.compacted = True
            case SystemMessage(subtype="api_retry", data=data):
                await self.emit(retry_event(data))
            case ResultMessage() as msg:
                self.result = msg
                self.session_id = msg.session_id or self.session_id
            case _:
                pass

    async def _assistant(self, msg: AssistantMessage) -> None:
        if msg.error is not None:
            self.api_error_kind = str(msg.error)
            self.api_error_text = " ".join(
                b.text for b in msg.content if isinstance(b, TextBlock)
            ).strip()
            return
        for block in msg.content:
            if isinstance(block, TextBlock):
                self.texts.append(block.text)
            elif isinstance(block, ToolUseBlock):
                summary = summarize_tool_input(block.name, block.input)
                self.tool_names[block.id] = block.name
                self.tool_summaries[block.id] = summary
                self.steps[block.id] = {"name": block.name, "summary": summary, "status": "started"}
                if block.name in ("Write", "Edit", "MultiEdit", "NotebookEdit"):
                    self.file_changes += 1
                await self.emit(ToolStep(block.id, block.name, summary, "started"))
        self._changed()

    async def _user(self, msg: UserMessage) -> None:
        if not isinstance(msg.content, list):
            return
        for block in msg.content:
            if not isinstance(block, ToolResultBlock):
                continue
            name = self.tool_names.get(block.tool_use_id, "tool")
            summary = self.tool_summaries.get(block.tool_use_id, "")
            text = _result_text(block)
            step: ToolStep
            if block.tool_use_id in self.denied:
                reason = self.denied[block.tool_use_id]
                self.failures.append(ToolFailure(name, reason, True, summary))
                step = ToolStep(block.tool_use_id, name, summary, "denied", reason)
            elif block.is_error:
                message = text or "the tool reported an error"
                self.failures.append(ToolFailure(name, message, False, summary))
                step = ToolStep(block.tool_use_id, name, summary, "error", text[:500])
            else:
                step = ToolStep(block.tool_use_id, name, summary, "ok", text[:200])
            self.steps[block.tool_use_id] = {
                "name": name,
                "summary": summary,
                "status": step.status,
                "detail": step.detail[:300],
            }
            self._changed()
            await self.emit(step)

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def text_so_far(self) -> str:
        return "\n\n".join(t.strip() for t in self.texts if t.strip())

    def endpoint_failed(self, endpoint: EndpointState | None) -> bool:
        """Take the endpoint check made before the turn; True when the turn must not start:
        the endpoint is unreachable, refuses our credentials (the CLI would retry for minutes)
        or is not a Messages API. The reply then says so, as it would for the CLI's own API
        error."""
        match endpoint:
            case Unreachable(reason=reason):
                self.unreachable = reason
            case NotMessagesAPI(reason=reason):
                self.not_messages_api = reason
            case CredentialsRefused(status=status):
                refused = "authentication_failed" if status == 401 else "permission_error"
                self.api_error_kind = refused
            case _:
                return False
        self.log.write("error", {"stage": "endpoint", "endpoint": endpoint})
        return True

    def step_records(self) -> list[dict[str, str]]:
        """The turn's tool steps for its history (a step never finished reads 'started')."""
        return list(self.steps.values())

    def outcome(self, *, timeout_seconds: float | None) -> TurnOutcome:
        r = self.result
        return TurnOutcome(
            log_file=str(self.log.path),
            texts=tuple(self.texts),
            result_text=r.result if r else None,
            result_subtype=r.subtype if r else None,
            result_is_error=bool(r.is_error) if r else False,
            terminal_reason=r.terminal_reason if r else None,
            api_error_status=r.api_error_status if r else None,
            api_error_kind=self.api_error_kind,
            api_error_text=self.api_error_text,
            tool_failures=tuple(self.failures),
            interrupted=self.interrupted,
            stop_reason=self.stop_reason,
            timed_out=self.timed_out,
            timeout_seconds=timeout_seconds,
            crashed=self.crashed,
            notices=tuple(self.notices),
            unreachable=self.unreachable,
            not_messages_api=self.not_messages_api,
            memory_waiting=self.memory_waiting(),
        )
