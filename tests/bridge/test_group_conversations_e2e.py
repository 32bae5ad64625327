"""Groups and topics: each member their own conversation, a topic one conversation, the model
told who speaks, answers to a topic kept in the topic (bridge/scopes.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from settings import Settings
from tests.bridge.conftest import feishu_app, message_id, wait_answer
from tests.fakes.anthropic_api import FakeMessagesAPI, text
from tests.fakes.feishu_platform import FakeFeishu
from tests.helpers import wait_until

pytestmark = pytest.mark.e2e

GROUP = "oc_team"
ALICE = "ou_alice00000000000000000000000000"
BOB = "ou_bob0000000000000000000000000000"


def _say(
    fake: FakeFeishu, words: str, sender: str, thread_id: str | None = None
) -> dict[str, object]:
    event = fake.group_text_event(
        words, mention_bot=True, chat_id=GROUP, sender=sender, thread_id=thread_id
    )
    fake.push_event(event)
    return event


async def test_two_members_have_their_own_conversations_and_do_not_wait_for_each_other(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_feishu.set_user(ALICE, "Alice")
    fake_feishu.set_user(BOB, "鲍勃")
    fake_model.on("long analysis", text("Alice's analysis is done.", delay=6))
    async with feishu_app(feishu_settings(feishu_allowed_chats=[GROUP])):
        asked = _say(fake_feishu, "a long analysis of our sales", ALICE)
        await wait_until(lambda: bool(fake_model.requests_for("long analysis")), timeout=30)
        started = time.monotonic()
        quick = _say(fake_feishu, "what is 2+2?", BOB)
        bob_answer = await wait_answer(fake_feishu, message_id(quick), timeout=30)
        bob_waited = time.monotonic() - started
        alice_answer = await wait_answer(fake_feishu, message_id(asked), timeout=30)
        follow = _say(fake_feishu, "and what did I ask before?", BOB)
        await wait_answer(fake_feishu, message_id(follow), timeout=30)
    # Bob did not queue behind Alice's turn, and got his own answer.
    assert bob_waited < 5, bob_waited
    assert bob_answer == "echo: [鲍勃] what is 2+2?"
    assert alice_answer == "Alice's analysis is done."
    # The model sees who speaks, and each member's history alone.
    [alice_request] = fake_model.requests_for("long analysis")
    assert "[Alice] a long analysis of our sales" in alice_request.all_text()
    [bob_follow] = fake_model.requests_for("what did I ask before")
    seen = bob_follow.all_text()
    assert "[鲍勃] what is 2+2?" in seen
    assert "sales" not in seen


async def test_a_topic_is_one_conversation_answered_inside_the_topic(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_feishu.set_user(ALICE, "Alice")
    async with feishu_app(feishu_settings(feishu_allowed_chats=[GROUP])):
        first = _say(fake_feishu, "the launch date is May 3", ALICE, thread_id="omt_launch")
        await wait_answer(fake_feishu, message_id(first), timeout=30)
        second = _say(fake_feishu, "when is the launch?", BOB, thread_id="omt_launch")
        await wait_answer(fake_feishu, message_id(second), timeout=30)
        elsewhere = _say(fake_feishu, "when is the launch, again?", BOB)
        await wait_answer(fake_feishu, message_id(elsewhere), timeout=30)
    # Bob's question in the topic sees Alice's message in the same topic...
    [in_topic] = fake_model.requests_for("when is the launch?")
    assert "[Alice] the launch date is May 3" in in_topic.all_text()
    # ...his own conversation outside the topic does not.
    [outside] = fake_model.requests_for("when is the launch, again?")
    assert "May 3" not in outside.all_text()
    # Answers to topic messages go into the topic; others do not.
    replies = {c.path.split("/")[-2]: c.body for c in fake_feishu.calls("reply")}
    assert replies[message_id(first)].get("reply_in_thread") is True
    assert replies[message_id(second)].get("reply_in_thread") is True
    assert "reply_in_thread" not in replies[message_id(elsewhere)]


async def test_a_member_without_a_visible_name_is_still_told_apart(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    # No contact permission (41050): the end of the open_id stands in for the name.
    async with feishu_app(feishu_settings(feishu_allowed_chats=[GROUP])):
        asked = _say(fake_feishu, "hello there", BOB)
        answer = await wait_answer(fake_feishu, message_id(asked), timeout=30)
    assert answer == f"echo: [member …{BOB[-6:]}] hello there"
