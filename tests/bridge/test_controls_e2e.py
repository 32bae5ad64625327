"""Card buttons and signals, end to end (real app, real lark clients, real Claude CLI, fake
model): Stop on a streaming card, approve/deny for "ask" tools, who may tap, forged taps,
reactions on the user's message, the queue's position and cap."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bridge.strings import t
from settings import Settings
from tests.bridge.conftest import feishu_app, message_id, wait_answer, wait_reply_text
from tests.fakes.anthropic_api import FakeMessagesAPI, text, tool
from tests.fakes.feishu_platform import OWNER_OPEN_ID, BotMessage, FakeFeishu, visible_text
from tests.helpers import wait_until

pytestmark = pytest.mark.e2e

GROUP = "oc_team"
ALICE = "ou_alice00000000000000000000000000"  # a member let in through the group
CAROL = "ou_carol0000000000000000000000000"  # the group's owner in Feishu


def streaming(make: Callable[..., Settings], **overrides: Any) -> Settings:
    values: dict[str, Any] = {"feishu_streaming": True, "feishu_stream_interval_seconds": 0.3}
    values.update(overrides)
    return make(**values)


def button_value(fake: FakeFeishu, message: BotMessage, element_id: str) -> dict[str, Any]:
    [button] = [b for b in fake.card_buttons(message.message_id) if b["element_id"] == element_id]
    value: dict[str, Any] = button["behaviors"][0]["value"]
    return value


async def tap(fake: FakeFeishu, value: Any, *, message: str, **kwargs: Any) -> dict[str, Any]:
    frame = fake.push_card_action(value, message_id=message, **kwargs)
    await wait_until(lambda: fake.ack_for(frame) is not None, timeout=10)
    ack = fake.ack_for(frame)
    assert ack is not None and ack.code == 200 and ack.delay < 3.0  # Feishu waits 3 s
    return ack.data or {}


async def test_the_stop_button_interrupts_a_long_turn(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("slow job", text("never delivered", delay=30))
    async with feishu_app(streaming(feishu_settings)):
        slow = fake_feishu.push_text("slow job")
        await wait_until(lambda: bool(fake_model.requests_for("slow job")), timeout=30)
        await wait_until(lambda: bool(fake_feishu.replies_to(message_id(slow))), timeout=10)
        [card] = fake_feishu.replies_to(message_id(slow))
        answer = await tap(
            fake_feishu, button_value(fake_feishu, card, "stop"), message=card.message_id
        )
        final = await wait_answer(fake_feishu, message_id(slow), timeout=20)
    assert answer["toast"]["content"] == "正在停止这个回答。"
    assert answer["toast"]["i18n"]["en_us"] == "Stopping this answer."
    assert "card" not in answer  # a streaming card cannot be updated from a callback answer
    assert t("stopped_title") in final and "never delivered" not in final
    [card] = fake_feishu.replies_to(message_id(slow))
    assert card.content["header"]["title"]["content"] == t("stopped_title")
    assert fake_feishu.card_buttons(card.message_id) == []


async def test_a_forged_tap_is_refused(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("slow job", text("the real answer", delay=6))
    async with feishu_app(streaming(feishu_settings)):
        slow = fake_feishu.push_text("slow job")
        await wait_until(lambda: bool(fake_feishu.replies_to(message_id(slow))), timeout=30)
        [card] = fake_feishu.replies_to(message_id(slow))
        value = button_value(fake_feishu, card, "stop")
        answers = [
            await tap(fake_feishu, {"cm": "stop", "n": "guessed"}, message=card.message_id),
            await tap(fake_feishu, value, message="om_another_card"),
            await tap(fake_feishu, value, message=card.message_id, chat_id="oc_elsewhere"),
            await tap(fake_feishu, value, message=card.message_id, operator="ou_stranger"),
            await tap(fake_feishu, {"unrelated": 1}, message=card.message_id),
        ]
        final = await wait_answer(fake_feishu, message_id(slow), timeout=30)
    assert [a["toast"]["type"] for a in answers] == ["error"] * 5
    assert all("card" not in a for a in answers)
    assert final == "the real answer"  # nothing stopped it


async def test_an_ask_tool_runs_once_the_owner_approves(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("list files", tool("Bash", {"command": "ls"}), text("Listed them."))
    settings = streaming(feishu_settings, ask_tools=["Bash"])
    async with feishu_app(settings):
        asked = fake_feishu.push_text("list files please")
        approval = await _approval_card(fake_feishu, message_id(asked))
        assert approval.content["header"]["title"]["content"] == "需要批准"
        value = button_value(fake_feishu, approval, "approve_btn")
        answer = await tap(fake_feishu, value, message=approval.message_id)
        again = await tap(fake_feishu, value, message=approval.message_id)
        final = await wait_reply_text(fake_feishu, message_id(asked))
    assert answer["toast"]["type"] == "success"
    assert answer["card"]["data"]["header"]["template"] == "green"  # recoloured in place
    assert approval.content["header"]["template"] == "green"
    assert fake_feishu.card_buttons(approval.message_id) == []
    assert again["toast"]["content"] == "已经处理过了。"
    assert "Listed them." in final and "✅ Bash `ls`" in final
    [result] = tool_results(fake_model, "list files")
    assert not result.get("is_error")


async def test_an_ask_tool_nobody_approves_is_denied_when_the_time_is_up(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("list files", tool("Bash", {"command": "ls"}), text("Could not list them."))
    settings = streaming(feishu_settings, ask_tools=["Bash"], feishu_approval_timeout_seconds=1.5)
    async with feishu_app(settings):
        asked = fake_feishu.push_text("list files please")
        approval = await _approval_card(fake_feishu, message_id(asked))
        final = await wait_reply_text(fake_feishu, message_id(asked), timeout=60)
        late = await tap(
            fake_feishu, button_value_from_first(approval), message=approval.message_id
        )
    assert approval.content["header"]["template"] == "grey"
    assert "已超时" in approval.text
    assert "🚫 Bash `ls` — 被拒绝" in final
    [result] = tool_results(fake_model, "list files")  # the model is told why: no retry
    assert result.get("is_error") and "nobody gave it in time" in str(result.get("content"))
    assert late["toast"]["content"] == "已经处理过了。"  # decided: the time ran out


def tool_results(fake: FakeMessagesAPI, trigger: str) -> list[dict[str, Any]]:
    """Tool results the model got back in the turns of `trigger` (this test's only turns)."""
    assert fake.requests_for(trigger)
    return [r for req in fake.message_requests() for r in req.tool_results]


def button_value_from_first(message: BotMessage) -> dict[str, Any]:
    elements = message.versions[0]["body"]["elements"]
    value: dict[str, Any] = next(e for e in elements if e.get("tag") == "button")["behaviors"][0][
        "value"
    ]
    return value


async def test_in_a_group_a_members_tap_is_refused_and_the_owners_decides(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("list files", tool("Bash", {"command": "ls"}), text("Listed them."))
    fake_feishu.set_chat(GROUP, owner=CAROL)
    settings = streaming(feishu_settings, ask_tools=["Bash"], feishu_allowed_chats=[GROUP])
    async with feishu_app(settings):
        event = fake_feishu.group_text_event(
            "list files please", mention_bot=True, chat_id=GROUP, sender=ALICE
        )
        fake_feishu.push_event(event)
        approval = await _approval_card(fake_feishu, message_id(event))
        value = button_value(fake_feishu, approval, "approve_btn")
        refused = await tap(
            fake_feishu, value, message=approval.message_id, chat_id=GROUP, operator=ALICE
        )
        decided = await tap(
            fake_feishu, value, message=approval.message_id, chat_id=GROUP, operator=CAROL
        )
        final = await wait_reply_text(fake_feishu, message_id(event))
    assert refused["toast"]["type"] == "error" and "card" not in refused
    assert refused["toast"]["content"] == t("approve_refused")
    assert "owner" in refused["toast"]["i18n"]["en_us"]
    assert decided["toast"]["type"] == "success"
    assert "Listed them." in final


async def _approval_card(fake: FakeFeishu, asked: str) -> BotMessage:
    def find() -> BotMessage | None:
        return next(
            (
                m
                for m in fake.replies_to(asked)
                if (m.versions[0].get("header") or {}).get("template") == "orange"
            ),
            None,
        )

    await wait_until(lambda: find() is not None, timeout=60)
    found = find()
    assert found is not None
    return found


async def test_a_reaction_at_once_replaced_when_the_answer_is_delivered(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("weather", text("Sunny.", delay=2))
    async with feishu_app(streaming(feishu_settings)):
        event = fake_feishu.push_text("what's the weather")
        await wait_until(
            lambda: fake_feishu.reactions_on(message_id(event)) == ["Typing"], timeout=1
        )
        await wait_answer(fake_feishu, message_id(event))
        await wait_until(
            lambda: fake_feishu.reactions_on(message_id(event)) == ["DONE"], timeout=10
        )
    assert all(r.operator_type == "app" for r in fake_feishu.reactions)


async def test_a_busy_conversation_tells_the_queue_position_and_refuses_past_the_cap(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("slow job", text("done slowly", delay=5))
    async with feishu_app(streaming(feishu_settings, feishu_queue_max=1)):
        fake_feishu.push_text("slow job")
        await wait_until(lambda: bool(fake_model.requests_for("slow job")), timeout=30)
        second = fake_feishu.push_text("second question")
        third = fake_feishu.push_text("third question", user_agent="Lark/7.30 LarkLocale/en_US")
        await wait_until(lambda: bool(fake_feishu.replies_to(message_id(second))), timeout=5)
        full = await wait_answer(fake_feishu, message_id(third), timeout=5)
        queued = fake_feishu.replies_to(message_id(second))[0].text
        await wait_until(
            lambda: any(
                "echo: second question" in m.text
                for m in fake_feishu.replies_to(message_id(second))
            ),
            timeout=60,
        )
    assert queued.startswith("已收到") and "1" in queued
    assert full.startswith("The queue is full (1 messages at most)")
    assert fake_model.requests_for("third question") == []


async def test_a_stop_tapped_after_its_turn_and_a_restart_says_the_answer_ended(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("slow job", text("the first answer", delay=3))
    fake_model.on("next job", text("the second answer", delay=8))
    settings = streaming(feishu_settings)
    async with feishu_app(settings):
        slow = fake_feishu.push_text("slow job")
        await wait_until(lambda: bool(fake_feishu.replies_to(message_id(slow))), timeout=30)
        [card] = fake_feishu.replies_to(message_id(slow))
        value = button_value(fake_feishu, card, "stop")
        await wait_answer(fake_feishu, message_id(slow), timeout=30)
    async with feishu_app(settings):
        running = fake_feishu.push_text("next job")
        await wait_until(lambda: bool(fake_model.requests_for("next job")), timeout=30)
        old_stop = await tap(fake_feishu, value, message=card.message_id)
        second = await wait_answer(fake_feishu, message_id(running), timeout=30)
    assert old_stop["toast"]["content"] == t("nothing_running")
    assert second == "the second answer"  # the old button stopped nothing running now


async def test_stop_is_on_the_progress_card_too_when_streaming_is_off(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("slow job", text("never delivered", delay=30))
    settings = feishu_settings(feishu_streaming=False, feishu_progress_delay_seconds=0)
    async with feishu_app(settings):
        slow = fake_feishu.push_text("slow job")
        await wait_until(lambda: bool(fake_model.requests_for("slow job")), timeout=30)
        await wait_until(lambda: bool(fake_feishu.replies_to(message_id(slow))), timeout=10)
        [card] = fake_feishu.replies_to(message_id(slow))
        assert card.card_id is None  # a message card PATCHed in place, not a CardKit entity
        answer = await tap(
            fake_feishu, button_value(fake_feishu, card, "stop"), message=card.message_id
        )
        final = await wait_answer(fake_feishu, message_id(slow), timeout=20)
    assert answer["toast"]["content"] == t("stopping")
    assert t("stopped_title") in final and "never delivered" not in final
    assert fake_feishu.card_buttons(card.message_id) == []  # the answer replaced the button


async def test_a_queued_message_s_reaction_is_replaced_when_its_own_answer_is_delivered(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    # issue #33: the first message's Typing became DONE, the queued one's never did
    fake_model.on("first question", text("First answer.", delay=2))
    fake_model.on("second question", text("Second answer."))
    async with feishu_app(streaming(feishu_settings)):
        first = fake_feishu.push_text("first question")
        await wait_until(lambda: fake_feishu.reactions_on(message_id(first)) == ["Typing"])
        second = fake_feishu.push_text("second question")
        await wait_until(lambda: fake_feishu.reactions_on(message_id(second)) == ["Typing"])
        await wait_answer(fake_feishu, message_id(first))
        await wait_answer(fake_feishu, message_id(second))
        done = [message_id(first), message_id(second)]
        await wait_until(
            lambda: [fake_feishu.reactions_on(m) for m in done] == [["DONE"], ["DONE"]],
            timeout=10,
        )


async def test_a_turn_waiting_for_a_free_slot_is_told_so(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    # issue #33: past the app's concurrent-turn limit a message waited with only a Typing
    # reaction, the limit said nowhere
    fake_model.on("slow job", text("done slowly", delay=4))
    settings = streaming(feishu_settings, max_concurrent_turns=1)
    async with feishu_app(settings):
        fake_feishu.push_text("slow job")
        await wait_until(lambda: bool(fake_model.requests_for("slow job")), timeout=30)
        other = fake_feishu.push_text("another chat's question", chat_id="oc_otherchat")
        await wait_until(lambda: bool(fake_feishu.replies_to(message_id(other))), timeout=10)
        third = fake_feishu.push_text("a third chat's question", chat_id="oc_thirdchat")
        await wait_until(lambda: bool(fake_feishu.replies_to(message_id(third))), timeout=10)
        told = fake_feishu.replies_to(message_id(other))[0].text
        told_third = fake_feishu.replies_to(message_id(third))[0].text
        answered = [
            (message_id(other), "echo: another chat's question"),
            (message_id(third), "echo: a third chat's question"),
        ]
        await wait_until(
            lambda: all(
                any(said in m.text for m in fake_feishu.replies_to(asked))
                for asked, said in answered
            ),
            timeout=60,
        )
    # "排队中，前面还有 N 个": the turns that must end first
    assert told.startswith("排队中，前面还有 1 个") and "（1 个）" in told
    assert told_third.startswith("排队中，前面还有 2 个")


async def test_a_stop_while_an_approval_is_asked_closes_the_approval_card(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    # issue #33: after a stop the approval card kept live 批准/拒绝 buttons and "2 分钟内无人批准
    # 则自动拒绝"
    fake_model.on("list files", tool("Bash", {"command": "ls"}), text("Could not list them."))
    settings = streaming(feishu_settings, ask_tools=["Bash"], feishu_approval_timeout_seconds=120)
    async with feishu_app(settings):
        asked = fake_feishu.push_text("list files please")
        approval = await _approval_card(fake_feishu, message_id(asked))
        fake_feishu.push_text("/stop")
        await wait_until(lambda: fake_feishu.card_buttons(approval.message_id) == [], timeout=30)
    assert approval.content["header"]["template"] == "grey"
    assert "已关闭" in approval.text and "2 分钟" not in approval.text


async def test_a_write_approval_card_shows_the_diff_within_the_card_limits(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    # issue #33: an Edit or Write approval showed only the path, not what it would change
    plan = "# Plan\n" + "".join(
        f"step {i}: ship `part {i}` <at id=all></at>\n" for i in range(3000)
    )
    fake_model.on(
        "write the plan",
        tool("Write", {"file_path": "notes/plan.md", "content": plan}),
        text("Wrote it."),
    )
    settings = streaming(feishu_settings, ask_tools=["Write"])
    async with feishu_app(settings):
        asked = fake_feishu.push_text("write the plan please")
        approval = await _approval_card(fake_feishu, message_id(asked))
        shown = approval.versions[0]
        value = button_value(fake_feishu, approval, "approve_btn")
        await tap(fake_feishu, value, message=approval.message_id)
        await wait_reply_text(fake_feishu, message_id(asked))
    text_shown = visible_text("interactive", shown)  # as the chat showed it, before the tap
    assert "+# Plan" in text_shown and "+step 0: ship `part 0`" in text_shown
    assert "step 2999" not in text_shown  # capped, the rest counted
    assert fake_feishu.refused == []  # within the documented card limits
    assert fake_feishu.mentions == []  # chat text in the diff cannot mention anyone
    assert (settings.workspace_dir / "notes" / "plan.md").read_text() == plan


BOB = "ou_bob00000000000000000000000000000"  # a member the owner names as an approver


def _group_command(fake: FakeFeishu, text: str, *, sender: str, mentions: list[Any]) -> str:
    event = fake.text_event(
        f"@_user_1 {text}",
        chat_id=GROUP,
        chat_type="group",
        sender=sender,
        mentions=[fake.bot_mention(), *mentions],
    )
    fake.push_event(event)
    return message_id(event)


async def test_an_approver_the_owner_names_decides_in_the_group_and_only_the_owner_names_them(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    # issue #33: only owners, the group owner and admins could approve; a team could not name
    # who approves
    fake_model.on("list files", tool("Bash", {"command": "ls"}), text("Listed them."))
    fake_feishu.set_chat(GROUP, owner=CAROL)
    settings = streaming(feishu_settings, ask_tools=["Bash"], feishu_allowed_chats=[GROUP])
    bob = FakeFeishu.user_mention(BOB, "Bob", "@_user_2")
    async with feishu_app(settings):
        by_alice = _group_command(
            fake_feishu, "/approvers add @_user_2", sender=ALICE, mentions=[bob]
        )
        refused = await wait_reply_text(fake_feishu, by_alice)
        by_owner = _group_command(
            fake_feishu, "/approvers add @_user_2", sender=OWNER_OPEN_ID, mentions=[bob]
        )
        listed = await wait_reply_text(fake_feishu, by_owner)
        event = fake_feishu.group_text_event(
            "list files please", mention_bot=True, chat_id=GROUP, sender=ALICE
        )
        fake_feishu.push_event(event)
        approval = await _approval_card(fake_feishu, message_id(event))
        value = button_value(fake_feishu, approval, "approve_btn")
        decided = await tap(
            fake_feishu, value, message=approval.message_id, chat_id=GROUP, operator=BOB
        )
        final = await wait_reply_text(fake_feishu, message_id(event))
    assert refused == t("approvers_refused")
    assert "member …" in listed or "Bob" in listed
    assert decided["toast"]["type"] == "success"
    assert "Listed them." in final


async def test_always_allow_here_skips_the_card_for_the_same_command_until_revoked(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    # issue #33: no "always allow this command in this chat"
    for i in range(3):
        fake_model.on(f"round {i}", tool("Bash", {"command": "ls"}), text(f"Listed {i}."))
    fake_model.on("other", tool("Bash", {"command": "pwd"}), text("Printed."))
    settings = streaming(feishu_settings, ask_tools=["Bash"])
    async with feishu_app(settings):
        first = fake_feishu.push_text("round 0 please")
        approval = await _approval_card(fake_feishu, message_id(first))
        always = button_value(fake_feishu, approval, "always_btn")
        answer = await tap(fake_feishu, always, message=approval.message_id)
        await wait_reply_text(fake_feishu, message_id(first))
        second = fake_feishu.push_text("round 1 please")
        second_text = await wait_reply_text(fake_feishu, message_id(second))
        other = fake_feishu.push_text("other please")
        other_card = await _approval_card(fake_feishu, message_id(other))  # another command asks
        await tap(
            fake_feishu,
            button_value(fake_feishu, other_card, "deny_btn"),
            message=other_card.message_id,
        )
        await wait_reply_text(fake_feishu, message_id(other))
        listed = fake_feishu.push_text("/allowed")
        listed_text = await wait_reply_text(fake_feishu, message_id(listed))
        revoke = fake_feishu.push_text("/revoke 1")
        revoked_text = await wait_reply_text(fake_feishu, message_id(revoke))
        third = fake_feishu.push_text("round 2 please")
        third_card = await _approval_card(fake_feishu, message_id(third))  # asks again
        await tap(
            fake_feishu,
            button_value(fake_feishu, third_card, "deny_btn"),
            message=third_card.message_id,
        )
        await wait_reply_text(fake_feishu, message_id(third))
    assert (
        answer["toast"]["type"] == "success"
        and "/revoke" in answer["card"]["data"]["body"]["elements"][0]["content"]
    )
    assert "Listed 1." in second_text
    assert [m for m in fake_feishu.replies_to(message_id(second)) if "批准" in m.text] == []
    assert "Bash `ls`" in listed_text and "pwd" not in listed_text
    assert "Bash `ls`" in revoked_text
