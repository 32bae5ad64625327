"""Whose memory a Feishu message reads and writes (bridge/whose.py), who may save a group's team
memory and delete what (bridge/rights.py), and the `/team-remember` command: pure."""

from __future__ import annotations

import pytest

from bridge.commands import TeamRemember, parse_command
from bridge.rights import Allowed, Denied, command_right
from bridge.whose import forgettable, memory_owner, reader_of

OWNER, ALICE, ADMIN = "ou_owner", "ou_alice", "ou_admin"
GROUP = "oc_group"


def test_the_machine_owner_is_the_first_allowed_user_else_the_paired_one() -> None:
    assert memory_owner(paired=None, allowed_users=[OWNER, ALICE]) == OWNER
    assert memory_owner(paired=OWNER, allowed_users=[]) == OWNER
    assert memory_owner(paired=None, allowed_users=[]) is None


def test_the_owner_reads_their_own_directly_and_in_a_group_only_what_the_group_may_see() -> None:
    alone = reader_of(sender=OWNER, chat_id="oc_p2p", in_group=False, owner=OWNER)
    grouped = reader_of(sender=OWNER, chat_id=GROUP, in_group=True, owner=OWNER)
    assert (alone.owner, alone.saves_to) == (True, "user")
    assert alone.reads("user") and alone.reads("project:x") and alone.reads(f"person:{OWNER}")
    assert not alone.reads(f"person:{ALICE}") and not alone.reads(f"team:{GROUP}")
    # every member reads the group's answers: the owner's own memory stays out of them
    assert not grouped.reads("user") and not grouped.reads("project:x")
    assert grouped.reads(f"team:{GROUP}") and grouped.reads(f"person:{OWNER}")
    assert grouped.saves_to == f"person:{OWNER}"  # and comes back in their direct chat
    assert not grouped.reads(f"person:{ALICE}") and not grouped.reads("team:oc_other")
    assert not grouped.writes(f"team:{GROUP}")  # the team's: only on purpose, never by a turn


def test_a_member_reads_their_own_and_their_groups_team_never_the_owners() -> None:
    grouped = reader_of(sender=ALICE, chat_id=GROUP, in_group=True, owner=OWNER)
    alone = reader_of(sender=ALICE, chat_id="oc_p2p", in_group=False, owner=OWNER)
    assert grouped.scopes == (f"person:{ALICE}", f"team:{GROUP}")
    assert alone.scopes == (f"person:{ALICE}",)
    assert grouped.saves_to == alone.saves_to == f"person:{ALICE}"
    for scope in ("user", "project:x", "chat:c", f"person:{OWNER}", "team:oc_other"):
        assert not grouped.reads(scope) and not grouped.writes(scope), scope
    assert grouped.writes(f"person:{ALICE}") and not grouped.writes(f"team:{GROUP}")
    nobody = reader_of(sender="", chat_id=GROUP, in_group=True, owner=OWNER)
    assert nobody.saves_to is None and nobody.scopes == (f"team:{GROUP}",)


@pytest.mark.parametrize(
    ("scope", "keeps_team", "expected"),
    [
        (f"person:{ALICE}", False, True),
        (f"team:{GROUP}", False, False),
        (f"team:{GROUP}", True, True),
        ("team:oc_other", True, False),
        ("user", True, False),
        (f"person:{OWNER}", True, False),
    ],
)
def test_a_member_forgets_their_own_and_with_the_right_their_groups_team_notes(
    scope: str, keeps_team: bool, expected: bool
) -> None:
    alice = reader_of(sender=ALICE, chat_id=GROUP, in_group=True, owner=OWNER)
    assert forgettable(scope, reader=alice, chat_id=GROUP, keeps_team=keeps_team) is expected


def test_team_remember_parses_with_its_aliases() -> None:
    assert parse_command("/team-remember 周报周五交") == TeamRemember("周报周五交")
    assert parse_command("／team 周报周五交") == TeamRemember("周报周五交")
    assert parse_command("/team-remember") == TeamRemember("")
    assert parse_command("/team-") is None  # not a command word: text for the model


@pytest.mark.parametrize(
    ("sender", "in_group", "reason"),
    [
        (OWNER, True, None),
        (ADMIN, True, None),
        (ALICE, True, "team_refused"),
        (OWNER, False, "team_only_in_groups"),
    ],
)
def test_only_owners_and_the_groups_admins_save_to_its_team_memory(
    sender: str, in_group: bool, reason: str | None
) -> None:
    right = command_right(
        "team",
        sender=sender,
        in_group=in_group,
        started_by=None,
        conversation_of=None,
        owners={OWNER},
        chat_admins={ADMIN},
    )
    assert (right.reason if isinstance(right, Denied) else None) == reason
    assert isinstance(right, Allowed) is (reason is None)


def test_a_forget_card_is_tapped_only_by_who_asked() -> None:
    def tap(sender: str) -> bool:
        right = command_right(
            "forget",
            sender=sender,
            in_group=True,
            started_by=ALICE,
            conversation_of=None,
            owners={OWNER},
            chat_admins={ADMIN},
        )
        return isinstance(right, Allowed)

    assert [tap(ALICE), tap(OWNER), tap(ADMIN)] == [True, False, False]
