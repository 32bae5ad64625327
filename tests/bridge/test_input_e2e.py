"""Quoted replies and forwarded chats reach the model as labelled context, fetched through the
real lark client from the fake's "获取指定消息的内容" (GET /open-apis/im/v1/messages/:id)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bridge.strings import t
from settings import Settings
from tests.bridge.conftest import feishu_app, message_id, wait_answer
from tests.fakes.anthropic_api import FakeMessagesAPI, text
from tests.fakes.feishu_platform import OWNER_OPEN_ID, FakeFeishu
from tests.helpers import wait_until

pytestmark = pytest.mark.e2e

BOB = "ou_bob0000000000000000000000000000"


async def test_a_quoted_reply_brings_the_quoted_text_and_a_quoted_answer_card_what_it_said(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("first", text("Noted the first one."))
    fake_model.on("what did I mean", text("You meant the lighthouse."))
    fake_model.on("explain that", text("It was an answer."))
    async with feishu_app(feishu_settings()) as (_, bridge):
        first = fake_feishu.push_text("first: the lighthouse keeper's log")
        await wait_answer(fake_feishu, message_id(first))
        quote = fake_feishu.push_text("what did I mean here?", parent_id=message_id(first))
        await wait_answer(fake_feishu, message_id(quote))
        answer_card = fake_feishu.replies_to(message_id(first))[-1]
        # kept as the turn ends, a moment after the card arrives
        await wait_until(lambda: bridge.state.said(answer_card.message_id) is not None, timeout=10)
        on_card = fake_feishu.push_text("explain that", parent_id=answer_card.message_id)
        await wait_answer(fake_feishu, message_id(on_card))
    asked = fake_model.requests_for("what did I mean")[0]
    assert "first: the lighthouse keeper's log" in asked.all_text()
    # issue #33: Feishu does not return a JSON 2.0 card's content, and the quote read
    # "[引用了一张机器人卡片，它的内容无法读取]" although the bridge wrote that card
    about_card = fake_model.requests_for("explain that")[0]
    assert t("quoted_card") not in about_card.all_text()
    assert "Noted the first one." in about_card.all_text()


async def test_a_topic_message_is_not_a_quote_of_its_root(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("in the topic", text("ok"))
    async with feishu_app(feishu_settings()):
        root = fake_feishu.push_text("topic root words")
        await wait_answer(fake_feishu, message_id(root))
        reply = fake_feishu.push_text("in the topic", parent_id=message_id(root), thread_id="omt_1")
        await wait_answer(fake_feishu, message_id(reply))
    [asked] = fake_model.requests_for("in the topic")
    assert "topic root words" not in asked.user_texts()[-1]


async def test_a_quote_of_another_chats_message_is_not_read(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("secret plans", text("ok"))
    fake_model.on("leak", text("nothing to leak"))
    settings = feishu_settings(feishu_allowed_users=[OWNER_OPEN_ID, BOB])
    async with feishu_app(settings):
        elsewhere = fake_feishu.push_text(
            "secret plans of the other chat", chat_id="oc_otherp2p", sender=BOB
        )
        await wait_answer(fake_feishu, message_id(elsewhere))
        # An event naming a message of another chat as its parent: never carried over.
        sneaky = fake_feishu.push_text("leak it", parent_id=message_id(elsewhere))
        await wait_answer(fake_feishu, message_id(sneaky))
    [asked] = fake_model.requests_for("leak")
    assert "secret plans of the other chat" not in asked.all_text()
    assert t("quoted_unreadable", why="other chat") in asked.all_text()


async def test_a_forwarded_chat_is_expanded_with_speakers_and_a_huge_one_is_capped(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("line 0 ", text("A long one."))
    fake_model.on("轮到你了", text("Read it."))
    fake_feishu.set_user(BOB, "Bob Li")
    async with feishu_app(feishu_settings()):
        forward = fake_feishu.forward_event(
            [
                {"sender": BOB, "text": "轮到你了：明天上线"},
                {"sender": "app", "msg_type": "interactive", "content": {}},
                {"sender": OWNER_OPEN_ID, "forward": [{"sender": BOB, "text": "里面那条"}]},
            ]
        )
        fake_feishu.push_event(forward)
        await wait_answer(fake_feishu, message_id(forward))
        huge = fake_feishu.forward_event(
            [{"sender": BOB, "text": f"line {i} " + "x" * 300} for i in range(3000)]
        )
        fake_feishu.push_event(huge)
        await wait_answer(fake_feishu, message_id(huge))
    [asked] = fake_model.requests_for("轮到你了")
    prompt = asked.user_texts()[-1]
    assert "- Bob Li: 轮到你了：明天上线" in prompt
    assert "  - Bob Li: 里面那条" in prompt  # the forward inside the forward, indented
    assert "[卡片 card]" in prompt
    [big] = fake_model.requests_for("line 0 ")
    big_prompt = big.user_texts()[-1]
    assert "line 2999" not in big_prompt and len(big_prompt) < 20_000
    assert "……还有 " in big_prompt and " 条没有展开" in big_prompt
