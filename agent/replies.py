"""The one honest reply text of a turn, built from what actually happened.

Order of precedence: an API failure > assistant text > a failed or refused tool >
an interruption or execution error > "done, no text output". A turn that failed never
reads as success, and text is never repeated when the result echoes the assistant.

Every refused or failed tool call is stated next to whatever the model wrote, so a model that
claims success after a refusal cannot hide it; so is every memory change that waits for the
person. A stopped turn reads "Stopped", not as a crash.
No server path appears in the text: the log file travels in its own field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from storage.public_text import without_paths

NO_OUTPUT = "Done, no text output."
STOPPED = "Stopped."

TurnStatus = Literal["completed", "stopped", "timed_out", "failed"]
"""completed: the model finished; stopped: interrupted on request; timed_out: interrupted by
the time limit; failed: anything else that kept the turn from finishing. `is_error` is true for
every status but completed."""

_LISTED: Final = 5  # refused/failed steps listed in a reply; the rest are counted


@dataclass(frozen=True, slots=True)
class ToolFailure:
    tool_name: str
    message: str
    denied: bool = False
    summary: str = ""
    """The command or path, shortened (empty when the tool had no such input)."""

    def to_public(self) -> dict[str, str]:
        return {"tool": self.tool_name, "input": self.summary, "reason": self.message}


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """What a turn produced, gathered from the SDK message stream (no SDK types here)."""

    log_file: str
    texts: tuple[str, ...] = ()
    result_text: str | None = None
    result_subtype: str | None = None
    result_is_error: bool = False
    terminal_reason: str | None = None
    api_error_status: int | None = None
    api_error_kind: str | None = None
    api_error_text: str | None = None
    tool_failures: tuple[ToolFailure, ...] = ()
    interrupted: bool = False
    stop_reason: str | None = None
    """The sentence for an interruption not asked for by the user (the app shutting down)."""
    timed_out: bool = False
    timeout_seconds: float | None = None
    crashed: str | None = None
    notices: tuple[str, ...] = field(default_factory=tuple)
    unreachable: str | None = None
    """Why the model endpoint could not be reached when the turn was to start (agent/endpoint.py):
    the turn never reached the CLI."""
    not_messages_api: str | None = None
    """What the endpoint answered instead of the Messages API when the turn was to start (a
    plain web server, a wrong path): the turn never reached the CLI."""
    memory_waiting: tuple[str, ...] = ()
    """Memory changes the model asked for that wait for the person (memory.reach), one line
    each: stated with the reply, so a model that claims it changed the memory cannot hide it."""


@dataclass(frozen=True, slots=True)
class Reply:
    text: str
    is_error: bool
    status: TurnStatus = "completed"


def build_reply(outcome: TurnOutcome, *, base_url: str | None = None) -> Reply:
    """Choose the reply text, error flag and status for a finished turn."""
    reply = _core_reply(outcome, base_url)
    if outcome.memory_waiting:
        reply = Reply(
            "\n\n".join([reply.text, _waiting_section(outcome.memory_waiting)]),
            reply.is_error,
            reply.status,
        )
    if outcome.notices:
        return Reply("\n\n".join([*outcome.notices, reply.text]), reply.is_error, reply.status)
    return reply


def _core_reply(o: TurnOutcome, base_url: str | None) -> Reply:
    if o.crashed is not None:
        return Reply(
            f"Execution failed: the Claude CLI stopped unexpectedly "
            f"({without_paths(o.crashed)}). The conversation will restart on the next message.",
            True,
            "failed",
        )
    api = _api_error_reply(o, base_url)
    if api is not None:
        return api

    text = _joined_text(o)
    steps = _failures_section(o.tool_failures)
    if o.timed_out:
        status: TurnStatus = "timed_out"
        ending = _timeout_sentence(o)
    elif o.interrupted:
        status, ending = "stopped", o.stop_reason or STOPPED
    elif _ended_in_error(o):
        detail = f" ({o.result_subtype})" if o.result_subtype not in (None, "success") else ""
        status, ending = "failed", f"Execution interrupted{detail}."
    elif text:
        status = "failed" if o.result_is_error else "completed"
        ending = ""
    elif o.tool_failures:
        refused = any(f.denied for f in o.tool_failures)
        status = "failed"
        ending = (
            "Execution failed: a step was refused."
            if refused
            else ("Execution failed: a step failed.")
        )
    else:
        return Reply(NO_OUTPUT, o.result_is_error, "failed" if o.result_is_error else "completed")
    parts = [part for part in (text, steps, ending) if part]
    if not text and ending:  # the headline first when the model said nothing
        parts = [ending, *[p for p in (steps,) if p]]
    return Reply("\n\n".join(parts), status != "completed", status)


def _waiting_section(waiting: tuple[str, ...]) -> str:
    lines = ["Waiting for your confirmation (memory page, Pending; not done):"]
    lines += [f"- {_one_line(w, 200)}" for w in waiting[:_LISTED]]
    if len(waiting) > _LISTED:
        lines.append(f"- … and {len(waiting) - _LISTED} more")
    return "\n".join(lines)


def _failures_section(failures: tuple[ToolFailure, ...]) -> str:
    """Plain-words lines for every refused and failed step, refused first."""
    lines: list[str] = []
    for denied, heading in ((True, "Refused (not run):"), (False, "Failed:")):
        group = [f for f in failures if f.denied is denied]
        if not group:
            continue
        lines.append(heading)
        for failure in group[:_LISTED]:
            what = f" `{failure.summary}`" if failure.summary else ""
            # The reason is the policy's or the CLI's text: no server paths in it.
            reason = _one_line(without_paths(failure.message), 200)
            lines.append(f"- {failure.tool_name}{what}: {reason}")
        if len(group) > _LISTED:
            lines.append(f"- … and {len(group) - _LISTED} more (see the log)")
    return "\n".join(lines)


def _joined_text(o: TurnOutcome) -> str:
    texts = [t.strip() for t in o.texts if t and t.strip()]
    joined = "\n\n".join(texts)
    if joined:
        return joined
    # The result text only repeats the last assistant text; use it only when there was none.
    if o.result_text and o.result_text.strip() and not o.result_is_error:
        return o.result_text.strip()
    return ""


def _ended_in_error(o: TurnOutcome) -> bool:
    if o.result_subtype is None:
        return True  # no result at all: the turn never finished
    return o.result_subtype != "success" or o.terminal_reason in (
        "aborted_streaming",
        "aborted_tools",
    )


def _timeout_sentence(o: TurnOutcome) -> str:
    limit = f" after {o.timeout_seconds:g} s" if o.timeout_seconds else ""
    return f"Stopped: the turn timed out{limit}. The conversation is still usable."


def _one_line(message: str, limit: int = 300) -> str:
    line = " ".join(message.split())
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    if line and line[-1] not in ".!?。…":
        line += "."
    return line


def _api_error_reply(o: TurnOutcome, base_url: str | None) -> Reply | None:
    if o.unreachable is not None:
        text = unreachable_text(base_url or "the Anthropic API", o.unreachable)
        return Reply(text, True, "failed")
    if o.not_messages_api is not None:
        text = not_messages_api_text(base_url or "the Anthropic API", o.not_messages_api)
        return Reply(text, True, "failed")
    status = o.api_error_status
    kind = o.api_error_kind
    raw = o.api_error_text or o.result_text or ""
    if status is None and kind is None and o.terminal_reason != "api_error":
        if "Not logged in" in raw and o.result_is_error:
            return Reply(_NO_CREDENTIALS, True)
        return None
    where = base_url or "the Anthropic API"
    if "Not logged in" in raw:
        text = _NO_CREDENTIALS
    elif status == 401 or kind == "authentication_failed":
        text = (
            f"The model API at {where} rejected the credentials (401). "
            "Check ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN."
        )
    elif status == 403 or kind == "permission_error":
        text = f"The model API at {where} refused the request (403): the key lacks access."
    elif status == 429 or kind == "rate_limit":
        text = "The model API is rate-limiting requests (429). Wait a minute and try again."
    elif status is None and ("ECONNREFUSED" in raw or "Connection" in raw):
        text = unreachable_text(where, "connection refused")
    elif status in _WRONG_PLACE:
        # Not there, not this method, not implemented: the URL (or the model's name) is wrong,
        # and trying again changes nothing.
        text = (
            f"The model API at {where} answered HTTP {status} ({_WRONG_PLACE[status]}): it may "
            "not be an Anthropic Messages API, or not know the model. Check ANTHROPIC_BASE_URL "
            "(the CLI posts to <base>/v1/messages) and the model name."
        )
    elif status in (529, 503) or (kind == "server_error" and status is None):
        text = f"The model service is overloaded ({status or 'server error'}). Try again shortly."
    elif status is not None and status >= 500:
        text = f"The model API failed with HTTP {status}. Try again shortly."
    elif status in (408, 409):  # a timeout or a conflict: passing, worth another try
        text = f"The model API did not take the request (HTTP {status}). Try again shortly."
    elif status is not None:
        text = (
            f"The model API at {where} rejected the request (HTTP {status}): "
            f"{_one_line(raw) or 'no details'} Check ANTHROPIC_BASE_URL and the model settings."
        )
    else:
        text = f"The model API failed: {_one_line(raw) or kind}"
    return Reply(text, True, "failed")


_WRONG_PLACE: Final = {404: "not found", 405: "method not allowed", 501: "not implemented"}


def not_messages_api_text(where: str, reason: str) -> str:
    """The reply when the endpoint answers, but not as an Anthropic Messages API."""
    return (
        f"The model endpoint at {where} is not an Anthropic Messages API ({reason}). "
        "Check ANTHROPIC_BASE_URL: it must be the base of an Anthropic Messages API "
        "(the CLI posts to <base>/v1/messages), not another web server or a path below it."
    )


def unreachable_text(where: str, reason: str) -> str:
    """The reply when the model endpoint cannot be reached (`reason`: "connection refused")."""
    return (
        f"Could not reach the model API at {where}: {reason}. "
        "Check ANTHROPIC_BASE_URL and that the endpoint is running."
    )


_NO_CREDENTIALS = (
    "No model credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) "
    "in the environment or .env, then restart."
)
