"""Typed turn events: what a running turn tells its caller (web SSE, Feishu card, logs).

These are the only shapes the front doors see; SDK message classes never leave `agent/`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from agent.replies import TurnStatus

ToolStatus = Literal["started", "ok", "error", "denied"]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of assistant text as the model streams it."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ToolStep:
    """A tool call starting or finishing."""

    tool_use_id: str
    name: str
    summary: str
    status: ToolStatus
    detail: str = ""
    kind: Literal["tool"] = "tool"


@dataclass(frozen=True, slots=True)
class PermissionEvent:
    """The permission policy's decision on one tool call."""

    tool_name: str
    allowed: bool
    reason: str = ""
    kind: Literal["permission"] = "permission"


@dataclass(frozen=True, slots=True)
class MemoryInjected:
    """Memories added to the prompt of this turn (ids and titles only)."""

    notes: tuple[dict[str, str], ...]
    kind: Literal["memory"] = "memory"


@dataclass(frozen=True, slots=True)
class Retrying:
    """The CLI is about to retry a failed model request (its `api_retry` message): attempt
    `attempt` of `max_retries`, after `wait_seconds`. `reason` is a few words ("overloaded",
    "rate limited", "HTTP 500", "no connection"); `status` the HTTP status, if there was one."""

    attempt: int
    max_retries: int
    wait_seconds: float
    reason: str
    status: int | None = None
    kind: Literal["retrying"] = "retrying"


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The end of a turn: one honest reply and where to find the full record."""

    reply: str
    conversation_id: str
    session_id: str | None
    is_error: bool
    log_file: str
    cost_usd: float | None = None
    duration_ms: int | None = None
    num_turns: int | None = None
    notices: tuple[str, ...] = field(default_factory=tuple)
    status: TurnStatus = "completed"
    refused: tuple[dict[str, str], ...] = ()
    """Tool calls the permission policy refused: `{tool, input, reason}` (input shortened)."""
    failed: tuple[dict[str, str], ...] = ()
    """Tool calls that ran and reported an error, same shape."""
    steps: tuple[dict[str, str], ...] = ()
    """Every tool step with its final state (`name, summary, status, detail`), for history."""
    memory_changes: tuple[dict[str, Any], ...] = ()
    """The turn's memory changes (agent/memory_tools.py): made (`status: done`, with the
    request that undoes it) or waiting for the person (`status: waiting`, `pending_id`)."""
    kind: Literal["result"] = "result"

    def to_public(self) -> dict[str, Any]:
        """The `/api/chat` response body."""
        return {
            "reply": self.reply,
            "conversation_id": self.conversation_id,
            "session_id": self.session_id,
            "is_error": self.is_error,
            "status": self.status,
            "refused": list(self.refused),
            "failed": list(self.failed),
            "log_file": self.log_file,
            "cost_usd": self.cost_usd,
            "memory_changes": [dict(c) for c in self.memory_changes],
        }


TurnEvent = TextDelta | ToolStep | PermissionEvent | MemoryInjected | Retrying | TurnResult


def event_to_dict(event: TurnEvent) -> dict[str, Any]:
    """JSON-ready form of an event, with its `kind` as the discriminator."""
    data = asdict(event)
    if isinstance(event, MemoryInjected):
        data["notes"] = [dict(n) for n in event.notes]
    return data
