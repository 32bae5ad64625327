"""Command parsing and access decisions (pure, table-driven)."""

from __future__ import annotations

import pytest

from bridge.access import Granted, Refused, Unpaired, check_access
from bridge.commands import (
    Clear,
    Command,
    Compact,
    Help,
    MemorySearch,
    Pair,
    Status,
    Stop,
    Unknown,
    parse_command,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/clear", Clear("clear")),
        ("/new", Clear("new")),
        ("  /CLEAR  ", Clear("clear")),
        ("／clear", Clear("clear")),  # full-width slash from a Chinese keyboard
        ("/compact", Compact()),
        ("/stop", Stop()),
        ("/status", Status()),
        ("/help", Help()),
        ("/memory 项目 deadline", MemorySearch("项目 deadline")),
        ("/memory", MemorySearch("")),
        ("/pair 1234 5678", Pair("12345678")),
        ("/pair", Pair("")),
        ("/frobnicate", Unknown("frobnicate")),
        ("hello", None),
        ("/usr/bin/ls is where?", None),
        ("what does /clear do?", None),
        ("", None),
    ],
)
def test_parse_command(text: str, expected: Command | None) -> None:
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    ("command", "ordered"),
    [
        (Clear(), True),
        (Compact(), True),
        (Stop(), False),
        (Status(), False),
        (Help(), False),
        (MemorySearch("x"), False),
        (Pair("1"), False),
    ],
)
def test_only_conversation_changing_commands_wait_in_the_chat_queue(
    command: Command, ordered: bool
) -> None:
    assert command.ordered is ordered


@pytest.mark.parametrize(
    ("sender", "chat", "users", "chats", "owner", "expected"),
    [
        ("ou_a", "oc_1", ["ou_a"], [], None, Granted()),
        ("ou_b", "oc_1", ["ou_a"], [], None, Refused),
        ("ou_b", "oc_team", [], ["oc_team"], None, Granted()),
        ("ou_b", "oc_other", ["ou_a"], ["oc_team"], None, Refused),
        ("ou_a", "oc_1", [], [], None, Unpaired()),
        ("ou_a", "oc_1", [], [], "ou_a", Granted()),
        ("ou_b", "oc_1", [], [], "ou_a", Refused),
        # Exact matches only: a prefix of an allowed id is not allowed.
        ("ou_a", "oc_1", ["ou_ab"], [], None, Refused),
        ("", "oc_1", [], [], "ou_a", Refused),
        # An allowlist overrides a stored owner.
        ("ou_owner", "oc_1", ["ou_a"], [], "ou_owner", Refused),
    ],
)
def test_check_access(
    sender: str,
    chat: str,
    users: list[str],
    chats: list[str],
    owner: str | None,
    expected: object,
) -> None:
    decision = check_access(sender, chat, allowed_users=users, allowed_chats=chats, owner=owner)
    if expected is Refused:
        assert isinstance(decision, Refused)
    else:
        assert decision == expected
