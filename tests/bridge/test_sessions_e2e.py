"""/model, /sessions and /resume: a chat's model is kept and used by the real CLI; an earlier
conversation resumes its SDK session; no number reaches another chat's conversation."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bridge.strings import t
from settings import Settings
from tests.bridge.conftest import feishu_app, message_id, wait_answer
from tests.fakes.anthropic_api import FakeMessagesAPI, text
from tests.fakes.feishu_platform import OWNER_OPEN_ID, FakeFeishu

pytestmark = pytest.mark.e2e

GROUP = "oc_team"
BOB = "ou_bob0000000000000000000000000000"
CAROL = "ou_carol0000000000000000000000000"


async def test_a_chats_model_is_kept_and_sent_and_default_goes_back(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("hello", text("hi"))
    async with feishu_app(feishu_settings()) as (_, bridge):
        chosen = fake_feishu.push_text("/model glm-4.6")
        assert await wait_answer(fake_feishu, message_id(chosen)) == t("model_set", model="glm-4.6")
        first = fake_feishu.push_text("hello one")
        await wait_answer(fake_feishu, message_id(first))
        shown = fake_feishu.push_text("/model")
        shown_text = await wait_answer(fake_feishu, message_id(shown))
        bad = fake_feishu.push_text("/model x; rm -rf /")
        bad_text = await wait_answer(fake_feishu, message_id(bad))
        back = fake_feishu.push_text("/model default")
        await wait_answer(fake_feishu, message_id(back))
        second = fake_feishu.push_text("hello two")
        await wait_answer(fake_feishu, message_id(second))
        stored = bridge.state.model("oc_p2pchat")
    [one] = fake_model.requests_for("hello one")
    [two] = fake_model.requests_for("hello two")
    assert one.body["model"] == "glm-4.6"
    assert two.body["model"] != "glm-4.6"
    assert "glm-4.6" in shown_text
    assert bad_text == t("model_bad")
    assert stored is None


async def test_sessions_lists_earlier_conversations_and_resume_continues_one(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("apples", text("Apples noted."))
    fake_model.on("pears", text("Pears noted."))
    fake_model.on("which fruit", text("We talked about fruit."))
    async with feishu_app(feishu_settings()) as (_, bridge):
        first = fake_feishu.push_text("let us talk about apples")
        await wait_answer(fake_feishu, message_id(first))
        clear = fake_feishu.push_text("/clear")
        await wait_answer(fake_feishu, message_id(clear))
        second = fake_feishu.push_text("now pears")
        await wait_answer(fake_feishu, message_id(second))
        listing = fake_feishu.push_text("/sessions")
        listed = await wait_answer(fake_feishu, message_id(listing))
        wrong = [fake_feishu.push_text(f"/resume {n}") for n in ("9", "0", "oc_other:v1")]
        wrong_texts = [await wait_answer(fake_feishu, message_id(w)) for w in wrong]
        resume = fake_feishu.push_text("/resume 1")
        resumed = await wait_answer(fake_feishu, message_id(resume))
        ask = fake_feishu.push_text("which fruit did we start with?")
        await wait_answer(fake_feishu, message_id(ask))
        generation = bridge.state.generation("oc_p2pchat")
        clear_again = fake_feishu.push_text("/clear")
        cleared = await wait_answer(fake_feishu, message_id(clear_again))
    assert "1. " in listed and "let us talk about apples" in listed
    assert "2. " in listed and "now pears" in listed and t("sessions_current") in listed
    assert wrong_texts == [
        t("resume_unknown", n=9),
        t("resume_unknown", n=0),
        t("resume_usage"),
    ]
    assert resumed.startswith("已回到对话 1")
    assert generation == 1
    [apples] = fake_model.requests_for("apples")
    [asked] = fake_model.requests_for("which fruit")
    # the SDK session of conversation 1 resumed: same session, its history in the request
    assert asked.session_id == apples.session_id
    assert "let us talk about apples" in asked.all_text()
    assert "now pears" not in asked.all_text()
    assert cleared == t("cleared", generation=3)  # after the latest, never onto v2


async def test_a_group_member_cannot_resume_or_change_the_model_of_a_shared_conversation(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_feishu.set_chat(GROUP, owner=CAROL)
    settings = feishu_settings(feishu_allowed_chats=[GROUP], feishu_group_conversations="shared")
    async with feishu_app(settings) as (_, bridge):

        def say(words: str, sender: str) -> str:
            event = fake_feishu.group_text_event(
                words, mention_bot=True, chat_id=GROUP, sender=sender
            )
            fake_feishu.push_event(event)
            return message_id(event)

        model = await wait_answer(fake_feishu, say("/model claude-haiku-4-5", BOB))
        resume = await wait_answer(fake_feishu, say("/resume 1", BOB))
        owners = await wait_answer(fake_feishu, say("/model claude-haiku-4-5", CAROL))
        stored = bridge.state.model(GROUP)
    assert model == t("model_refused")
    assert resume == t("resume_refused")
    assert owners == t("model_set", model="claude-haiku-4-5")
    assert stored == "claude-haiku-4-5"
    assert OWNER_OPEN_ID
