"""One contract for the Feishu bridge state, run against SQLite and PostgreSQL alike."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from bridge.state import (
    CONTROL_KEEP_SECONDS,
    SAID_KEEP_SECONDS,
    BridgeState,
    BridgeStateBackend,
    SavedControl,
)

Open = Callable[..., BridgeStateBackend]


@pytest.fixture(params=["sqlite", "postgresql"])
def open_state(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Open]:
    """Opens another state on the same storage each call (another instance, a restart)."""
    opened: list[BridgeStateBackend] = []
    if request.param == "sqlite":

        def make(**kwargs: Any) -> BridgeStateBackend:
            return BridgeState(tmp_path / "feishu.db", **kwargs)

    else:
        db = request.getfixturevalue("pg_sync_db")

        def make(**kwargs: Any) -> BridgeStateBackend:
            return BridgeState(db, **kwargs)

    def tracked(**kwargs: Any) -> BridgeStateBackend:
        state = make(**kwargs)
        opened.append(state)
        return state

    yield tracked
    for state in opened:
        state.close()


@pytest.fixture
def state(open_state: Open) -> BridgeStateBackend:
    return open_state()


def test_an_event_is_claimed_once(state: BridgeStateBackend) -> None:
    assert state.claim("e1", "m1") is True
    assert state.claim("e1", "m1") is False


def test_a_message_redelivered_under_a_new_event_id_is_not_claimed_again(
    state: BridgeStateBackend,
) -> None:
    assert state.claim("e1", "m1") is True
    assert state.claim("e2", "m1") is False
    assert state.claim("e1", "m2") is False  # a re-pushed event id counts too
    assert state.claim("e3", "m3") is True


def test_a_released_claim_can_be_claimed_again(state: BridgeStateBackend) -> None:
    assert state.claim("e1", "m1") is True
    state.release("e1", "m1")
    assert state.claim("e1", "m1") is True


def test_claims_older_than_the_keep_window_are_pruned(open_state: Open) -> None:
    state = open_state(keep_seconds=100)
    assert state.claim("e1", "m1", now=1000) is True
    assert state.claim("e2", "m2", now=1150) is True
    assert state.claim("e1", "m1", now=1050) is False
    assert state.prune(now=1200) == 2  # e1/m1 are 200 s old; e2/m2 only 50 s
    assert state.claim("e1", "m1", now=1201) is True
    assert state.claim("e2", "m2", now=1201) is False


def test_generations_start_at_one_and_bump_per_chat(state: BridgeStateBackend) -> None:
    assert state.generation("chat-a") == 1
    assert state.bump_generation("chat-a") == 2
    assert state.bump_generation("chat-a") == 3
    assert state.generation("chat-a") == 3
    assert state.generation("chat-b") == 1


def test_a_chat_goes_back_to_an_earlier_conversation_and_clear_then_starts_a_new_one(
    state: BridgeStateBackend,
) -> None:
    assert state.set_generation("chat-a", 1) is True  # a chat never cleared has v1
    assert state.set_generation("chat-a", 2) is False
    state.bump_generation("chat-a")
    state.bump_generation("chat-a")
    assert state.set_generation("chat-a", 1) is True
    assert (state.generation("chat-a"), state.latest_generation("chat-a")) == (1, 3)
    for wrong in (0, -1, 4):
        assert state.set_generation("chat-a", wrong) is False
    assert state.generation("chat-a") == 1
    # /clear after going back: after the latest, never onto v2 which exists
    assert state.bump_generation("chat-a") == 4
    assert state.latest_generation("chat-a") == 4
    assert state.latest_generation("chat-b") == 1


def test_a_chat_keeps_its_model_and_forgets_it_with_none(state: BridgeStateBackend) -> None:
    assert state.model("chat-a") is None
    state.set_model("chat-a", "claude-opus-4-1")
    assert state.model("chat-a") == "claude-opus-4-1"
    assert state.generation("chat-a") == 1  # choosing a model starts no conversation
    state.bump_generation("chat-a")
    assert state.model("chat-a") == "claude-opus-4-1"  # kept across /clear
    state.set_model("chat-a", None)
    assert state.model("chat-a") is None
    assert state.model("chat-b") is None


def test_the_first_owner_stays_the_owner(state: BridgeStateBackend) -> None:
    assert state.owner() is None
    assert state.set_owner("ou_first") is True
    assert state.set_owner("ou_second") is False
    assert state.owner() == "ou_first"


def test_state_survives_reopening(open_state: Open) -> None:
    first = open_state()
    first.claim("e1", "m1")
    first.bump_generation("chat")
    first.set_owner("ou_1")
    first.close()
    again = open_state()
    assert again.claim("e1", "m1") is False
    assert again.generation("chat") == 2
    assert again.owner() == "ou_1"


def test_one_event_claimed_by_two_instances_at_once_is_won_exactly_once(open_state: Open) -> None:
    states = [open_state(), open_state()]
    for round_ in range(5):
        start = threading.Barrier(6)

        def claim(n: int, r: int = round_, start: threading.Barrier = start) -> bool:
            start.wait()
            return states[n % 2].claim(f"e{r}", f"m{r}")

        with ThreadPoolExecutor(6) as pool:
            won = list(pool.map(claim, range(6)))
        assert won.count(True) == 1, won


def test_concurrent_clears_from_two_instances_each_get_a_new_generation(open_state: Open) -> None:
    states = [open_state(), open_state()]
    start = threading.Barrier(4)

    def bump(n: int) -> list[int]:
        start.wait()
        return [states[n % 2].bump_generation("chat") for _ in range(5)]

    with ThreadPoolExecutor(4) as pool:
        results = [g for gens in pool.map(bump, range(4)) for g in gens]
    assert sorted(results) == list(range(2, 22))
    assert states[0].generation("chat") == 21


def test_a_turn_in_flight_is_remembered_until_it_is_finished(open_state: Open) -> None:
    first = open_state()
    first.turn_accepted("m1", "chat", '{"message_id": "m1"}', now=100)
    first.turn_accepted("m2", "chat", '{"message_id": "m2"}', now=101)
    first.turn_accepted("m1", "chat", "ignored: already accepted", now=102)
    first.turn_started("m1")
    first.turn_card("m1", "om_card")
    first.close()
    again = open_state()  # a restart finds what the crash interrupted
    turns = again.unfinished_turns()
    assert [(t.message_id, t.stage, t.card_id) for t in turns] == [
        ("m1", "started", "om_card"),
        ("m2", "accepted", None),
    ]
    assert turns[0].message == '{"message_id": "m1"}'
    assert turns[0].chat_id == "chat" and turns[0].accepted_at == 100
    again.turn_finished("m1")
    again.turn_finished("m2")
    assert again.unfinished_turns() == []


def test_a_start_recovers_only_its_own_turns_and_those_of_dead_instances(
    open_state: Open,
) -> None:
    # Two instances on one database: a starting instance must not answer (or call
    # interrupted) a turn that another, living instance is running right now.
    state = open_state()
    state.alive("alive", now=1000)
    state.alive("dead", now=100)
    state.alive("me", now=1000)
    for message_id, owner in (("a", "alive"), ("d", "dead"), ("m", "me"), ("o", "")):
        state.turn_accepted(message_id, "chat", "{}", now=50, owner=owner)
    mine = state.unfinished_turns(owner="me", dead_before=1000 - 120)
    assert [t.message_id for t in mine] == ["d", "m", "o"]
    assert [t.message_id for t in state.unfinished_turns()] == ["a", "d", "m", "o"]
    state.alive("alive", now=2000)  # a heartbeat moves an instance's time on
    assert "a" not in [t.message_id for t in state.unfinished_turns(owner="x", dead_before=1900)]


def test_the_outbox_keeps_a_send_once_until_it_is_delivered(open_state: Open) -> None:
    from bridge.state import OutboxItem

    first = open_state()
    item = OutboxItem("uuid-1", "reply", "om_user", "interactive", '{"a": 1}', created_at=50)
    first.outbox_put(item)
    first.outbox_put(OutboxItem("uuid-1", "reply", "om_other", "text", "{}", created_at=60))
    first.outbox_put(OutboxItem("patch-1", "patch", "om_card", "interactive", "{}", 70, 0, 500))
    assert [i.key for i in first.outbox_due(now=100)] == ["uuid-1"]  # the patch is not due yet
    first.outbox_retry("uuid-1", next_at=200)
    first.close()
    again = open_state()
    assert again.outbox_due(now=150) == []
    due = again.outbox_due(now=1000)
    assert [i.key for i in due] == ["uuid-1", "patch-1"]
    assert due[0] == OutboxItem("uuid-1", "reply", "om_user", "interactive", '{"a": 1}', 50, 1, 200)
    again.outbox_done("uuid-1")
    assert [i.key for i in again.outbox_due(now=1000)] == ["patch-1"]


def test_a_card_button_outlives_a_restart_until_decided_and_then_a_week(open_state: Open) -> None:
    first = open_state()
    button = SavedControl(
        nonce="n1",
        kind="forget",
        message_id="om_card",
        conversation_id="",
        message='{"message_id": "om_user"}',
        data='{"notes": [["n-1", "Trip"]]}',
        done=False,
        created_at=time.time(),
    )
    first.control_put(button)
    assert first.control_get("unknown") is None
    again = open_state()  # a restart (or another instance)
    assert again.control_get("n1") == button
    again.control_done("n1")
    assert first.control_get("n1") == dataclasses.replace(button, done=True)
    again.prune(now=button.created_at + CONTROL_KEEP_SECONDS - 60)
    assert again.control_get("n1") is not None
    again.prune(now=button.created_at + CONTROL_KEEP_SECONDS + 60)
    assert again.control_get("n1") is None


def test_a_turn_keeps_what_its_streamed_card_showed_for_a_restart(open_state: Open) -> None:
    # issue #33: a restart closed the card over its partial answer
    first = open_state()
    first.turn_accepted("m1", "chat", "{}", now=100)
    first.turn_card("m1", "om_card", entity="7000123")
    first.turn_partial("m1", "The first half of the answer")
    first.turn_partial("m1", "The first half of the answer, and more")
    first.close()
    [turn] = open_state().unfinished_turns()
    assert (turn.card_id, turn.entity) == ("om_card", "7000123")
    assert turn.partial == "The first half of the answer, and more"


def test_the_open_approval_buttons_are_listed_until_decided(open_state: Open) -> None:
    # issue #33: after a restart an approval card kept live buttons; the start closes them
    first = open_state()
    now = time.time()  # a start forgets buttons older than a week
    for nonce, kind, at in (
        ("a1", "approval", now),
        ("f1", "forget", now + 1),
        ("a2", "approval", now + 2),
    ):
        first.control_put(SavedControl(nonce, kind, f"om_{nonce}", "c", "{}", "{}", False, at))
    first.control_done("a1")
    again = open_state()
    assert [c.nonce for c in again.open_controls("approval")] == ["a2"]


def test_what_an_answer_card_said_is_kept_for_a_quote_then_pruned(open_state: Open) -> None:
    # issue #33: a member quoting the bot's answer card got "its content cannot be read"
    first = open_state()
    first.said_put(["om_1", "om_2"], "The answer, in two cards", now=time.time())
    first.said_put(["om_2"], "The second card again", now=time.time())
    again = open_state()
    assert again.said("om_1") == "The answer, in two cards"
    assert again.said("om_2") == "The second card again"
    assert again.said("om_unknown") is None
    again.prune(now=time.time() + SAID_KEEP_SECONDS + 60)
    assert again.said("om_1") is None


def test_a_chat_keeps_its_approvers_and_always_allowed_calls(open_state: Open) -> None:
    first = open_state()
    assert first.set_approver("oc_team", "ou_alice", by="ou_owner", on=True) is True
    assert first.set_approver("oc_team", "ou_alice", by="ou_owner", on=True) is False
    first.set_approver("oc_team", "ou_bob", by="ou_owner", on=True)
    first.set_allowed("oc_team", "Bash\tls", by="ou_owner", on=True)
    first.set_allowed("oc_other", "Bash\tpwd", by="ou_owner", on=True)
    again = open_state()  # a restart (or another instance)
    assert again.approvers("oc_team") == ["ou_alice", "ou_bob"]
    assert again.approvers("oc_other") == []
    assert again.allowed_rules("oc_team") == ["Bash\tls"]
    assert again.set_approver("oc_team", "ou_alice", by="ou_owner", on=False) is True
    assert again.set_allowed("oc_team", "Bash\tls", by="ou_owner", on=False) is True
    assert again.set_allowed("oc_team", "Bash\tls", by="ou_owner", on=False) is False
    assert (again.approvers("oc_team"), again.allowed_rules("oc_team")) == (["ou_bob"], [])
