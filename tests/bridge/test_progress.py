"""The progress card and the final answer, through the real lark.Client and the fake platform."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest

from agent.events import TextDelta, ToolStep
from bridge.progress import TurnReply
from bridge.render import BODY_LIMITS
from bridge.sender import Sender
from tests.bridge.test_render import fences_balanced
from tests.fakes.feishu_platform import FakeFeishu
from tests.helpers import wait_until

USER_MESSAGE = "om_user_message"


def turn_reply(sender: Sender, **kwargs: float) -> TurnReply:
    options = {"interval": 0.2, "open_delay": 0.3} | kwargs
    return TurnReply(sender, reply_to=USER_MESSAGE, key=USER_MESSAGE, **options)


def step(tid: str, status: str = "started") -> ToolStep:
    return ToolStep(tool_use_id=tid, name="Bash", summary=f"ls {tid}", status=status)  # type: ignore[arg-type]


async def test_quick_answer_is_one_message_without_progress(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    async with turn_reply(sender) as reply:
        await reply.on_event(TextDelta("Hi"))
        await reply.finish("Hi there")
    [message] = fake_feishu.replies_to(USER_MESSAGE)
    assert message.msg_type == "interactive"
    assert message.text == "Hi there"
    assert fake_feishu.calls("patch") == []


async def test_progress_card_shows_steps_and_ends_with_the_answer(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    async with turn_reply(sender) as reply:
        await reply.on_event(step("a"))
        await wait_until(lambda: len(fake_feishu.replies_to(USER_MESSAGE)) == 1, timeout=5)
        [card] = fake_feishu.replies_to(USER_MESSAGE)
        assert "Working" in card.text
        assert "ls a" in card.text
        await reply.on_event(step("a", "ok"))
        await wait_until(lambda: "✅" in card.text, timeout=5)
        await reply.finish("All **done**")
    assert card.text == "All **done**"
    assert len(fake_feishu.replies_to(USER_MESSAGE)) == 1


async def test_updates_never_exceed_five_per_second_and_the_final_state_is_written(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    async with turn_reply(sender, interval=0.1) as reply:  # asked for 10/s: clamped to 5/s
        for i in range(40):
            await reply.on_event(step(f"s{i}"))
            await reply.on_event(step(f"s{i}", "ok"))
            await asyncio.sleep(0.025)
        await reply.finish("final words")
    writes = [c.at for c in fake_feishu.calls() if c.kind in ("reply", "patch")]
    gaps = [b - a for a, b in itertools.pairwise(writes)]
    assert len(writes) >= 3
    assert min(gaps) >= 0.19
    [card] = fake_feishu.replies_to(USER_MESSAGE)
    assert card.text == "final words"


async def test_error_is_shown_plainly_with_a_red_header(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    async with turn_reply(sender, open_delay=0) as reply:
        await wait_until(lambda: len(fake_feishu.replies_to(USER_MESSAGE)) == 1, timeout=5)
        await reply.finish("Execution failed: the API is overloaded (529).", is_error=True)
    [card] = fake_feishu.replies_to(USER_MESSAGE)
    assert card.content["header"]["template"] == "red"
    assert card.text == "Error\nExecution failed: the API is overloaded (529)."


async def test_long_answer_continues_in_further_replies_within_the_limit(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    code = "\n".join(f"line_{i} = '{'中' * 20}'" for i in range(900))
    answer = "Intro paragraph.\n\n```python\n" + code + "\n```\n\nClosing words."
    assert len(answer.encode()) > 60_000
    async with turn_reply(sender, open_delay=0) as reply:
        await wait_until(lambda: len(fake_feishu.replies_to(USER_MESSAGE)) == 1, timeout=5)
        await reply.finish(answer)
    messages = fake_feishu.replies_to(USER_MESSAGE)
    assert len(messages) >= 3
    for call in fake_feishu.calls():
        body_size = len(json.dumps(call.body, ensure_ascii=False).encode())
        assert body_size <= BODY_LIMITS["interactive"]
    texts = [m.text.rsplit("\npart ", 1)[0] for m in messages]
    assert all(fences_balanced(t) for t in texts)
    assert sum(t.count("line_") for t in texts) == 900
    assert texts[0].startswith("Intro paragraph.")
    assert texts[-1].endswith("Closing words.")
    assert [m.text.rsplit("\n", 1)[1] for m in messages] == [
        f"part {i}/{len(messages)}" for i in range(1, len(messages) + 1)
    ]


async def test_failed_final_patch_sends_the_answer_as_a_new_reply(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    async with turn_reply(sender, open_delay=0) as reply:
        await wait_until(lambda: len(fake_feishu.replies_to(USER_MESSAGE)) == 1, timeout=5)
        fake_feishu.fail_next("patch", status=400, code=230031, msg="too old", reset=None)
        await reply.finish("the answer")
    card, answer = fake_feishu.replies_to(USER_MESSAGE)
    assert "Working" in card.text
    assert answer.text == "the answer"


async def test_when_cards_fail_the_answer_arrives_as_text(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    fake_feishu.fail_next("reply", times=1, status=400, code=11310, msg="card invalid", reset=None)
    async with turn_reply(sender) as reply:
        await reply.finish("# Title\n\nplain **answer**")
    [message] = fake_feishu.replies_to(USER_MESSAGE)
    assert message.msg_type == "text"
    assert message.text == "Title\n\nplain answer"


async def test_a_cancelled_turn_never_leaves_the_card_working(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    async def turn() -> None:
        async with turn_reply(sender, open_delay=0):
            await asyncio.sleep(60)

    task = asyncio.create_task(turn())
    await wait_until(lambda: len(fake_feishu.replies_to(USER_MESSAGE)) == 1, timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [card] = fake_feishu.replies_to(USER_MESSAGE)
    assert "Working" not in card.text
    assert "shutting down" in card.text
