"""The reply text of a turn never dresses a failure up as success."""

from __future__ import annotations

import pytest

from agent.replies import (
    NO_OUTPUT,
    SHUTDOWN_STOP,
    STOPPED,
    ToolFailure,
    TurnOutcome,
    build_reply,
)
from storage.public_text import without_paths

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
            {
                "tool_failures": (ToolFailure("Bash", "rm of /x is outside", True, "rm /x"),),
                **OK,
            },
            "Execution failed: a step was refused.\n\nRefused (not run):\n"
            "- Bash `rm /x`: rm of /x is outside.",
            True,
        ),
        (
            {"tool_failures": (ToolFailure("Read", "ENOENT", False, "a.txt"),), **OK},
            "Execution failed: a step failed.\n\nFailed:\n- Read `a.txt`: ENOENT.",
            True,
        ),
        (
            {"result_subtype": "error_during_execution", "terminal_reason": "aborted_tools"},
            "Execution interrupted (error_during_execution).",
            True,
        ),
        ({"interrupted": True, **OK}, STOPPED, True),
        ({"texts": ("partial",), "interrupted": True, **OK}, "partial\n\nStopped.", True),
        (
            {"timed_out": True, "timeout_seconds": 5.0},
            "Stopped: the turn timed out after 5 s",
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
        # Not there, not this method, not implemented: the URL is to check, not to retry.
        ({"api_error_status": 404}, "The model API at http://m answered HTTP 404 (not", True),
        ({"api_error_status": 405}, "The model API at http://m answered HTTP 405 (method", True),
        ({"api_error_status": 501}, "The model API at http://m answered HTTP 501 (not", True),
        (
            {"api_error_status": 400, "api_error_text": "bad request"},
            "The model API at http://m rejected the request (HTTP 400): bad request. Check "
            "ANTHROPIC_BASE_URL",
            True,
        ),
        ({"api_error_status": 408}, "The model API did not take the request (HTTP 408).", True),
        (
            {"not_messages_api": "POST /v1/messages answered HTTP 404"},
            "The model endpoint at http://m is not an Anthropic Messages API (POST /v1/messages "
            "answered HTTP 404). Check ANTHROPIC_BASE_URL",
            True,
        ),
    ],
)
def test_reply_table(fields: dict[str, object], expected_start: str, is_error: bool) -> None:
    reply = build_reply(outcome(**fields), base_url="http://m")
    assert reply.text.startswith(expected_start), reply.text
    assert reply.is_error is is_error


@pytest.mark.parametrize("status", [400, 404, 405, 413, 422, 501])
def test_a_4xx_or_501_names_the_url_and_never_says_try_again(status: int) -> None:
    text = build_reply(outcome(api_error_status=status), base_url="http://m").text
    assert "ANTHROPIC_BASE_URL" in text
    assert "try again" not in text.lower()


def test_text_is_not_duplicated_when_result_echoes_it() -> None:
    reply = build_reply(outcome(texts=("Same answer",), result_text="Same answer", **OK))
    assert reply.text == "Same answer"


def test_api_error_text_is_never_the_reply_verbatim() -> None:
    reply = build_reply(
        outcome(api_error_status=401, api_error_text="API Error: 401 {}", result_is_error=True)
    )
    assert not reply.text.startswith("API Error")
    assert "ANTHROPIC_API_KEY" in reply.text


def test_no_reply_names_a_server_path() -> None:
    # The log file travels in its own field; user-facing text never holds a server path.
    for fields in (
        {"interrupted": True},
        {"tool_failures": (ToolFailure("Bash", "x"),)},
        {"crashed": "ProcessError: /srv/app/.venv/bin/claude exited"},
        {"api_error_status": 401},
        {"timed_out": True},
    ):
        assert "/" not in build_reply(outcome(**fields)).text.replace("…/", "")


def test_a_claim_of_success_after_a_refusal_still_names_the_refused_command() -> None:
    refused = ToolFailure("Bash", "`rm` of `/` is outside the workspace", True, "rm -rf /")
    reply = build_reply(
        outcome(texts=("All clean! I removed everything.",), tool_failures=(refused,), **OK)
    )
    assert reply.text.startswith("All clean! I removed everything.")
    assert "Refused (not run):\n- Bash `rm -rf /`: `rm` of `/` is outside" in reply.text
    assert (reply.is_error, reply.status) == (False, "completed")


def test_many_failures_are_listed_briefly() -> None:
    failures = tuple(ToolFailure("Read", f"missing {i}", False, f"f{i}") for i in range(8))
    text = build_reply(outcome(texts=("ok",), tool_failures=failures, **OK)).text
    assert text.count("\n- Read") == 5
    assert "and 3 more" in text


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        ({"texts": ("hi",), **OK}, "completed"),
        ({"texts": ("hi",), "interrupted": True, **OK}, "stopped"),
        ({"interrupted": True}, "stopped"),
        ({"timed_out": True}, "timed_out"),
        ({"crashed": "x"}, "failed"),
        ({"api_error_status": 529}, "failed"),
        ({"result_subtype": "error_max_turns", "result_is_error": True}, "failed"),
    ],
)
def test_status_says_how_the_turn_ended(fields: dict[str, object], status: str) -> None:
    reply = build_reply(outcome(**fields))
    assert reply.status == status
    assert reply.is_error is (status != "completed")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("No such file: /home/u/.claude-memory/logs/a.jsonl", "No such file: …/a.jsonl"),
        ("see http://127.0.0.1:8/v1/messages", "see http://127.0.0.1:8/v1/messages"),
        ("a/b and ./c/d stay", "a/b and ./c/d stay"),
        ("dir /srv/x/ gone", "dir …/ gone"),
        ("ratio 1/2", "ratio 1/2"),
    ],
)
def test_server_paths_are_cut_from_app_text(text: str, expected: str) -> None:
    assert without_paths(text) == expected


def test_notices_come_before_the_reply() -> None:
    reply = build_reply(outcome(texts=("hi",), notices=("(fresh session)",), **OK))
    assert reply.text == "(fresh session)\n\nhi"


@pytest.mark.parametrize(
    ("fields", "english", "chinese"),
    [
        ({"interrupted": True, **OK}, "Stopped.", "已停止。"),
        ({**OK}, "Done, no text output.", "完成，没有文字输出。"),
        (
            {"tool_failures": (ToolFailure("Bash", "outside the workspace", True, "rm /x"),), **OK},
            "Refused (not run):",
            "已拒绝（未执行）：",
        ),
        ({"timed_out": True, "timeout_seconds": 5.0}, "timed out after 5 s", "本轮超时（5 秒）"),
        (
            {"api_error_status": 529, "terminal_reason": "api_error"},
            "overloaded (529)",
            "过载（529）",
        ),
        (
            {"interrupted": True, "stop_reason": SHUTDOWN_STOP, **OK},
            "the app is shutting down",
            "应用正在关闭",
        ),
        ({"unreachable": "connection refused"}, "Could not reach", "无法连接模型 API"),
    ],
)
def test_the_replys_own_sentences_speak_the_chats_language(
    fields: dict[str, object], english: str, chinese: str
) -> None:
    # a Chinese Feishu chat got "Stopped.", "Refused (not run): …" and the 529 text in English
    assert english in build_reply(outcome(**fields)).text
    zh = build_reply(outcome(**fields), locale="zh").text
    assert chinese in zh and english not in zh
