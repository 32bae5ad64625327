"""The one honest reply text of a turn, built from what actually happened.

Order of precedence: an API failure > assistant text > a failed or refused tool >
an interruption or execution error > "done, no text output". A turn that failed never
reads as success, and text is never repeated when the result echoes the assistant.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NO_OUTPUT = "Done, no text output."


@dataclass(frozen=True, slots=True)
class ToolFailure:
    tool_name: str
    message: str
    denied: bool = False


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
    timed_out: bool = False
    timeout_seconds: float | None = None
    crashed: str | None = None
    notices: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class Reply:
    text: str
    is_error: bool


def build_reply(outcome: TurnOutcome, *, base_url: str | None = None) -> Reply:
    """Choose the reply text and error flag for a finished turn."""
    reply = _core_reply(outcome, base_url)
    if outcome.notices:
        text = "\n\n".join([*outcome.notices, reply.text])
        return Reply(text, reply.is_error)
    return reply


def _core_reply(o: TurnOutcome, base_url: str | None) -> Reply:
    if o.crashed is not None:
        return Reply(
            f"Execution failed: the Claude CLI stopped unexpectedly ({o.crashed}). "
            f"The conversation will restart on the next message. Log: {o.log_file}",
            True,
        )
    api = _api_error_reply(o, base_url)
    if api is not None:
        return api

    text = _joined_text(o)
    stopped = o.timed_out or o.interrupted or _ended_in_error(o)
    if text:
        if o.timed_out:
            return Reply(f"{text}\n\n{_timeout_sentence(o)}", True)
        if o.interrupted:
            return Reply(f"{text}\n\n[Execution interrupted. Log: {o.log_file}]", True)
        return Reply(text, o.result_is_error)

    if o.tool_failures:
        failure = o.tool_failures[-1]
        verb = "was refused" if failure.denied else "failed"
        reason = _one_line(failure.message)
        return Reply(
            f"Execution failed: `{failure.tool_name}` {verb}: {reason} Log: {o.log_file}",
            True,
        )
    if o.timed_out:
        return Reply(_timeout_sentence(o), True)
    if stopped:
        detail = f" ({o.result_subtype})" if o.result_subtype not in (None, "success") else ""
        return Reply(f"Execution interrupted{detail}. Log: {o.log_file}", True)
    return Reply(NO_OUTPUT, o.result_is_error)


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
    return (
        f"Execution interrupted: the turn timed out{limit}. "
        f"The conversation is still usable. Log: {o.log_file}"
    )


def _one_line(message: str, limit: int = 300) -> str:
    line = " ".join(message.split())
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    if line and line[-1] not in ".!?。":
        line += "."
    return line


def _api_error_reply(o: TurnOutcome, base_url: str | None) -> Reply | None:
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
        text = (
            f"Could not reach the model API at {where}: connection refused. "
            "Check ANTHROPIC_BASE_URL and that the endpoint is running."
        )
    elif status in (529, 503) or (kind == "server_error" and status is None):
        text = f"The model service is overloaded ({status or 'server error'}). Try again shortly."
    elif status is not None and status >= 500:
        text = f"The model API failed with HTTP {status}. Try again shortly."
    elif status is not None:
        text = f"The model API rejected the request (HTTP {status}): {_one_line(raw)}"
    else:
        text = f"The model API failed: {_one_line(raw) or kind}"
    return Reply(f"{text} Log: {o.log_file}", True)


_NO_CREDENTIALS = (
    "No model credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) "
    "in the environment or .env, then restart."
)
