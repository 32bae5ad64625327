"""The reply text of a turn never dresses a failure up as success."""

from __future__ import annotations

import pytest

from agent.replies import NO_OUTPUT, ToolFailure, TurnOutcome, build_reply

LOG = "/logs/x.jsonl"
OK = {"result_subtype": "success", "terminal_reason": "completed"}


def outcome(**fields: object) -> TurnOutcome:
    return TurnOutcome(log_file=LOG, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "expected_start", "is_error"),
    [
        ({"texts": ("Hello",), **OK}, "Hello", False),
        ({"texts": ("a", "b"), **OK}, "a\n\nb", False),
        ({"texts": ("",), "result_text": "fallback", **OK}, "fallback", False),
        ({**OK}, NO_OUTPUT, False),
        (
            {"tool_failures": (ToolFailure("Bash", "rm of /x is outside", denied=True),), **OK},
            "Execution failed: `Bash` was refused: rm of /x is outside.",
            True,
        ),
        (
            {"tool_failures": (ToolFailure("Read", "ENOENT"),), **OK},
            "Execution failed: `Read` failed: ENOENT.",
            True,
        ),
        (
            {"result_subtype": "error_during_execution", "terminal_reason": "aborted_tools"},
            "Execution interrupted (error_during_execution).",
            True,
        ),
        ({"interrupted": True, **OK}, "Execution interrupted", True),
        (
            {"texts": ("partial",), "interrupted": True, **OK},
            "partial\n\n[Execution interrupted",
            True,
        ),
        (
            {"timed_out": True, "timeout_seconds": 5.0},
            "Execution interrupted: the turn timed out after 5 s",
            True,
        ),
        (
            {"result_subtype": "error_max_turns", "result_is_error": True},
            "Execution interrupted (error_max_turns)",
            True,
        ),
        ({}, "Execution interrupted", True),  # no result at all
        ({"crashed": "ProcessError: exit -9"}, "Execution failed: the Claude CLI stopped", True),
        (
            {
                "api_error_status": 401,
                "api_error_kind": "authentication_failed",
                "result_is_error": True,
            },
            "The model API at http://m rejected the credentials (401).",
            True,
        ),
        (
            {"api_error_status": 529, "api_error_kind": "server_error", "result_is_error": True},
            "The model service is overloaded (529).",
            True,
        ),
        (
            {
                "api_error_kind": "unknown",
                "api_error_text": "API Error: connect ECONNREFUSED 127.0.0.1:9",
            },
            "Could not reach the model API at http://m: connection refused.",
            True,
        ),
        (
            {"result_text": "Not logged in · Please run /login", "result_is_error": True, **OK},
            "No model credentials: set ANTHROPIC_API_KEY",
            True,
        ),
        (
            {"api_error_status": 429, "api_error_kind": "rate_limit"},
            "The model API is rate-limiting",
            True,
        ),
        ({"api_error_status": 500}, "The model API failed with HTTP 500.", True),
    ],
)
def test_reply_table(fields: dict[str, object], expected_start: str, is_error: bool) -> None:
    reply = build_reply(outcome(**fields), base_url="http://m")
    assert reply.text.startswith(expected_start), reply.text
    assert reply.is_error is is_error


def test_text_is_not_duplicated_when_result_echoes_it() -> None:
    reply = build_reply(outcome(texts=("Same answer",), result_text="Same answer", **OK))
    assert reply.text == "Same answer"


def test_api_error_text_is_never_the_reply_verbatim() -> None:
    reply = build_reply(
        outcome(api_error_status=401, api_error_text="API Error: 401 {}", result_is_error=True)
    )
    assert not reply.text.startswith("API Error")
    assert "ANTHROPIC_API_KEY" in reply.text


def test_failures_point_at_the_log_file() -> None:
    for fields in ({"interrupted": True}, {"tool_failures": (ToolFailure("Bash", "x"),)}):
        assert LOG in build_reply(outcome(**fields)).text  # type: ignore[arg-type]


def test_notices_come_before_the_reply() -> None:
    reply = build_reply(outcome(texts=("hi",), notices=("(fresh session)",), **OK))
    assert reply.text == "(fresh session)\n\nhi"
