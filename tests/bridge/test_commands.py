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
from bridge.rights import Action, Allowed, Denied, command_right
from bridge.strings import t


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


A, B, OWNER, ADMIN = "ou_a", "ou_b", "ou_owner", "ou_admin"


@pytest.mark.parametrize(
    ("action", "sender", "in_group", "started_by", "conversation_of", "allowed"),
    [
        # direct chats: the sender is alone with the bot
        ("stop", B, False, A, None, True),
        ("clear", B, False, None, None, True),
        # groups: a turn is stopped by whoever asked for it
        ("stop", A, True, A, None, True),
        ("stop", B, True, A, None, False),
        ("stop", B, True, None, None, True),  # nothing runs: "Nothing is running."
        # ...and by the assistant's owners and the group's owner or managers
        ("stop", OWNER, True, A, None, True),
        ("stop", ADMIN, True, A, None, True),
        # a shared group conversation belongs to no member
        ("clear", A, True, None, None, False),
        ("compact", A, True, None, None, False),
        ("clear", OWNER, True, None, None, True),
        ("compact", ADMIN, True, None, None, True),
        # a member's own conversation (issue 17: one per member) is theirs to clear
        ("clear", A, True, None, A, True),
        ("clear", B, True, None, A, False),
        ("compact", B, True, None, B, True),
        # approving an "ask" tool: owners and the group's owner or managers only, never the
        # member whose request it is (a request must not approve its own tools)
        ("approve", A, True, A, A, False),
        ("approve", B, True, A, None, False),
        ("approve", OWNER, True, A, A, True),
        ("approve", ADMIN, True, A, None, True),
        ("approve", A, False, A, None, True),  # a direct chat: the one person there
    ],
)
def test_group_commands_act_within_the_senders_rights(
    action: Action,
    sender: str,
    in_group: bool,
    started_by: str | None,
    conversation_of: str | None,
    allowed: bool,
) -> None:
    right = command_right(
        action,
        sender=sender,
        in_group=in_group,
        started_by=started_by,
        conversation_of=conversation_of,
        owners={OWNER},
        chat_admins={ADMIN},
    )
    assert isinstance(right, Allowed) is allowed
    if isinstance(right, Denied):
        assert right.reason == f"{action}_refused"
        assert "owner" in t(right.reason, "en") and "群主" in t(right.reason)
