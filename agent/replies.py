"""The one honest reply text of a turn, built from what actually happened.

Order of precedence: an API failure > assistant text > a failed or refused tool >
an interruption or execution error > "done, no text output". A turn that failed never
reads as success, and text is never repeated when the result echoes the assistant.

Every refused or failed tool call is stated next to whatever the model wrote, so a model that
claims success after a refusal cannot hide it; so is every memory change that waits for the
person. A stopped turn reads "Stopped", not as a crash.
No server path appears in the text: the log file travels in its own field.

The reply speaks the chat's language (`locale`: a Feishu chat in Chinese gets 已停止。, 出错了's
reasons, 已拒绝（未执行）; the web chat and the API English); the model's own text is never
translated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from storage.public_text import without_paths

Locale = Literal["en", "zh"]

_TEXTS: Final[dict[str, tuple[str, str]]] = {
    # key: (English, Chinese)
    "no_output": ("Done, no text output.", "完成，没有文字输出。"),
    "stopped": ("Stopped.", "已停止。"),
    "shutting_down": (
        "Stopped: the app is shutting down. Send the message again in a moment.",
        "已停止：应用正在关闭，请稍后重新发送这条消息。",
    ),
    "timed_out": (
        "Stopped: the turn timed out{limit}. The conversation is still usable.",
        "已停止：本轮超时{limit}。对话仍可继续。",
    ),
    "timeout_limit": (" after {seconds:g} s", "（{seconds:g} 秒）"),
    "interrupted": ("Execution interrupted{detail}.", "执行中断{detail}。"),
    "step_refused": ("Execution failed: a step was refused.", "执行失败：有一步被拒绝。"),
    "step_failed": ("Execution failed: a step failed.", "执行失败：有一步出错。"),
    "refused_heading": ("Refused (not run):", "已拒绝（未执行）："),
    "failed_heading": ("Failed:", "失败："),
    "more_steps": ("- … and {n} more (see the log)", "- …… 另有 {n} 步（见日志）"),
    "waiting_heading": (
        "Waiting for your confirmation (memory page, Pending; not done):",
        "等待你确认（记忆页面的“待确认”；尚未执行）：",
    ),
    "more": ("- … and {n} more", "- …… 另有 {n} 项"),
    "crashed": (
        "Execution failed: the Claude CLI stopped unexpectedly ({error}). The conversation will "
        "restart on the next message.",
        "执行失败：Claude CLI 意外退出（{error}）。下一条消息会重新开始对话。",
    ),
    "unreachable": (
        "Could not reach the model API at {where}: {reason}. Check ANTHROPIC_BASE_URL and that "
        "the endpoint is running.",
        "无法连接模型 API（{where}）：{reason}。请检查 ANTHROPIC_BASE_URL，并确认该服务正在运行。",
    ),
    "not_messages_api": (
        "The model endpoint at {where} is not an Anthropic Messages API ({reason}). Check "
        "ANTHROPIC_BASE_URL: it must be the base of an Anthropic Messages API (the CLI posts to "
        "<base>/v1/messages), not another web server or a path below it.",
        "{where} 不是 Anthropic Messages API（{reason}）。请检查 ANTHROPIC_BASE_URL：它必须是"
        " Anthropic Messages API 的根地址（CLI 会请求 <base>/v1/messages），"
        "而不是别的网站或其下的路径。",
    ),
    "no_credentials": (
        "No model credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) in the environment "
        "or .env, then restart.",
        "没有模型凭据：请在环境变量或 .env 中设置 ANTHROPIC_API_KEY"
        "（或 ANTHROPIC_AUTH_TOKEN），然后重启。",
    ),
    "rejected_credentials": (
        "The model API at {where} rejected the credentials (401). Check ANTHROPIC_API_KEY or "
        "ANTHROPIC_AUTH_TOKEN.",
        "模型 API（{where}）拒绝了凭据（401）。请检查 ANTHROPIC_API_KEY 或 ANTHROPIC_AUTH_TOKEN。",
    ),
    "forbidden": (
        "The model API at {where} refused the request (403): the key lacks access.",
        "模型 API（{where}）拒绝了请求（403）：该密钥没有权限。",
    ),
    "rate_limited": (
        "The model API is rate-limiting requests (429). Wait a minute and try again.",
        "模型 API 正在限流（429）。请等一分钟再试。",
    ),
    "wrong_place": (
        "The model API at {where} answered HTTP {status} ({why}): it may not be an Anthropic "
        "Messages API, or not know the model. Check ANTHROPIC_BASE_URL (the CLI posts to "
        "<base>/v1/messages) and the model name.",
        "模型 API（{where}）返回 HTTP {status}（{why}）：它可能不是 Anthropic Messages API，"
        "或不认识这个模型。请检查 ANTHROPIC_BASE_URL（CLI 会请求 <base>/v1/messages）和模型名称。",
    ),
    "overloaded": (
        "The model service is overloaded ({status}). Try again shortly.",
        "模型服务过载（{status}）。请稍后再试。",
    ),
    "server_failed": (
        "The model API failed with HTTP {status}. Try again shortly.",
        "模型 API 出错（HTTP {status}）。请稍后再试。",
    ),
    "not_taken": (
        "The model API did not take the request (HTTP {status}). Try again shortly.",
        "模型 API 没有接受这次请求（HTTP {status}）。请稍后再试。",
    ),
    "rejected": (
        "The model API at {where} rejected the request (HTTP {status}): {detail} Check "
        "ANTHROPIC_BASE_URL and the model settings.",
        "模型 API（{where}）拒绝了请求（HTTP {status}）：{detail}"
        " 请检查 ANTHROPIC_BASE_URL 和模型设置。",
    ),
    "api_failed": ("The model API failed: {detail}", "模型 API 出错：{detail}"),
    "no_details": ("no details", "没有详情"),
    "server_error": ("server error", "服务器错误"),
    "the_api": ("the Anthropic API", "Anthropic API"),
}


def text_of(key: str, locale: Locale = "en", **values: object) -> str:
    """One of the reply's own sentences in `locale`, with `values` filled."""
    english, chinese = _TEXTS[key]
    return (chinese if locale == "zh" else english).format(**values)


NO_OUTPUT = text_of("no_output")
STOPPED = text_of("stopped")
SHUTDOWN_STOP = text_of("shutting_down")
"""The `stop_reason` of a turn the app's shutdown interrupted (said in the chat's language)."""

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
    """Memory changes the model asked for that wait for the person (memory.loop.reach), one line
    each: stated with the reply, so a model that claims it changed the memory cannot hide it."""


@dataclass(frozen=True, slots=True)
class Reply:
    text: str
    is_error: bool
    status: TurnStatus = "completed"


def build_reply(
    outcome: TurnOutcome, *, base_url: str | None = None, locale: Locale = "en"
) -> Reply:
    """Choose the reply text, error flag and status for a finished turn, in `locale`."""
    reply = _core_reply(outcome, base_url, locale)
    if outcome.memory_waiting:
        reply = Reply(
            "\n\n".join([reply.text, _waiting_section(outcome.memory_waiting, locale)]),
            reply.is_error,
            reply.status,
        )
    if outcome.notices:
        return Reply("\n\n".join([*outcome.notices, reply.text]), reply.is_error, reply.status)
    return reply


def _core_reply(o: TurnOutcome, base_url: str | None, locale: Locale) -> Reply:
    if o.crashed is not None:
        text = text_of("crashed", locale, error=without_paths(o.crashed))
        return Reply(text, True, "failed")
    api = _api_error_reply(o, base_url, locale)
    if api is not None:
        return api

    text = _joined_text(o)
    steps = _failures_section(o.tool_failures, locale)
    if o.timed_out:
        status: TurnStatus = "timed_out"
        ending = _timeout_sentence(o, locale)
    elif o.interrupted:
        status, ending = "stopped", _stop_sentence(o.stop_reason, locale)
    elif _ended_in_error(o):
        detail = f" ({o.result_subtype})" if o.result_subtype not in (None, "success") else ""
        status, ending = "failed", text_of("interrupted", locale, detail=detail)
    elif text:
        status = "failed" if o.result_is_error else "completed"
        ending = ""
    elif o.tool_failures:
        refused = any(f.denied for f in o.tool_failures)
        status = "failed"
        ending = text_of("step_refused" if refused else "step_failed", locale)
    else:
        status = "failed" if o.result_is_error else "completed"
        return Reply(text_of("no_output", locale), o.result_is_error, status)
    parts = [part for part in (text, steps, ending) if part]
    if not text and ending:  # the headline first when the model said nothing
        parts = [ending, *[p for p in (steps,) if p]]
    return Reply("\n\n".join(parts), status != "completed", status)


def _stop_sentence(reason: str | None, locale: Locale) -> str:
    """A stop's sentence: the app's shutdown and a plain stop in the chat's language; another
    reason as it was given."""
    if reason is None:
        return text_of("stopped", locale)
    return text_of("shutting_down", locale) if reason == SHUTDOWN_STOP else reason


def _waiting_section(waiting: tuple[str, ...], locale: Locale) -> str:
    lines = [text_of("waiting_heading", locale)]
    lines += [f"- {_one_line(w, 200)}" for w in waiting[:_LISTED]]
    if len(waiting) > _LISTED:
        lines.append(text_of("more", locale, n=len(waiting) - _LISTED))
    return "\n".join(lines)


def _failures_section(failures: tuple[ToolFailure, ...], locale: Locale) -> str:
    """Plain-words lines for every refused and failed step, refused first."""
    lines: list[str] = []
    for denied, key in ((True, "refused_heading"), (False, "failed_heading")):
        heading = text_of(key, locale)
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
            lines.append(text_of("more_steps", locale, n=len(group) - _LISTED))
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


def _timeout_sentence(o: TurnOutcome, locale: Locale) -> str:
    seconds = o.timeout_seconds
    limit = text_of("timeout_limit", locale, seconds=seconds) if seconds else ""
    return text_of("timed_out", locale, limit=limit)


def _one_line(message: str, limit: int = 300) -> str:
    line = " ".join(message.split())
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    if line and line[-1] not in ".!?。…":
        line += "."
    return line


def _api_error_reply(o: TurnOutcome, base_url: str | None, locale: Locale) -> Reply | None:
    where = base_url or text_of("the_api", locale)
    if o.unreachable is not None:
        return Reply(unreachable_text(where, o.unreachable, locale), True, "failed")
    if o.not_messages_api is not None:
        return Reply(not_messages_api_text(where, o.not_messages_api, locale), True, "failed")
    status = o.api_error_status
    kind = o.api_error_kind
    raw = o.api_error_text or o.result_text or ""
    if status is None and kind is None and o.terminal_reason != "api_error":
        if "Not logged in" in raw and o.result_is_error:
            return Reply(text_of("no_credentials", locale), True)
        return None
    if "Not logged in" in raw:
        text = text_of("no_credentials", locale)
    elif status == 401 or kind == "authentication_failed":
        text = text_of("rejected_credentials", locale, where=where)
    elif status == 403 or kind == "permission_error":
        text = text_of("forbidden", locale, where=where)
    elif status == 429 or kind == "rate_limit":
        text = text_of("rate_limited", locale)
    elif status is None and ("ECONNREFUSED" in raw or "Connection" in raw):
        text = unreachable_text(where, "connection refused", locale)
    elif status in _WRONG_PLACE:
        # Not there, not this method, not implemented: the URL (or the model's name) is wrong,
        # and trying again changes nothing.
        text = text_of("wrong_place", locale, where=where, status=status, why=_WRONG_PLACE[status])
    elif status in (529, 503) or (kind == "server_error" and status is None):
        text = text_of("overloaded", locale, status=status or text_of("server_error", locale))
    elif status is not None and status >= 500:
        text = text_of("server_failed", locale, status=status)
    elif status in (408, 409):  # a timeout or a conflict: passing, worth another try
        text = text_of("not_taken", locale, status=status)
    elif status is not None:
        detail = _one_line(raw) or text_of("no_details", locale)
        text = text_of("rejected", locale, where=where, status=status, detail=detail)
    else:
        text = text_of("api_failed", locale, detail=_one_line(raw) or kind)
    return Reply(text, True, "failed")


_WRONG_PLACE: Final = {404: "not found", 405: "method not allowed", 501: "not implemented"}


def not_messages_api_text(where: str, reason: str, locale: Locale = "en") -> str:
    """The reply when the endpoint answers, but not as an Anthropic Messages API."""
    return text_of("not_messages_api", locale, where=where, reason=reason)


def unreachable_text(where: str, reason: str, locale: Locale = "en") -> str:
    """The reply when the model endpoint cannot be reached (`reason`: "connection refused")."""
    return text_of("unreachable", locale, where=where, reason=reason)
