"""The progress card and the final answer, through the real lark.Client and the fake platform."""

from __future__ import annotations

import asyncio
import itertools
import json
import re

import pytest

from agent.events import TextDelta, ToolStep, TurnResult
from bridge.progress import TurnReply
from bridge.render import BODY_LIMITS
from bridge.sender import Sender
from tests.bridge.test_render import fences_balanced
from tests.fakes.feishu_platform import BotMessage, FakeFeishu, markdown_tables
from tests.helpers import wait_until

USER_MESSAGE = "om_user_message"


def turn_reply(sender: Sender, *, interval: float = 0.2, open_delay: float = 0.3) -> TurnReply:
    # English, so these pin the English side of the strings table (the e2e tests read Chinese)
    return TurnReply(
        sender,
        reply_to=USER_MESSAGE,
        key=USER_MESSAGE,
        locale="en",
        interval=interval,
        open_delay=open_delay,
    )


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
    # the answer replaces the progress, and the card keeps the steps it showed
    assert card.text == "All **done**\nTool steps: 1\n- ✅ Bash `ls a`"
    assert card.content["body"]["elements"][1]["tag"] == "collapsible_panel"
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
    assert card.text.startswith("final words\nTool steps: 40\n… 20 earlier steps")


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


def refuse(fake_feishu: FakeFeishu, kind: str, times: int) -> None:
    """Feishu refuses the next `times` calls of `kind` as it refuses a card it cannot show."""
    fake_feishu.fail_next(
        kind, times=times, status=400, code=230099, msg="Failed to create card content", reset=None
    )


TABLED = "# Title\n\nplain **answer**\n\n| fruit | qty |\n|---|---|\n| apple | 3 |\n\n![chart](https://x.y/c.png)"


async def test_a_refused_card_is_sent_again_within_stricter_limits(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    refuse(fake_feishu, "reply", times=1)
    async with turn_reply(sender) as reply:
        await reply.finish(TABLED)
    [message] = fake_feishu.replies_to(USER_MESSAGE)
    assert message.msg_type == "interactive"
    assert "| apple | 3 |" in message.text


async def test_when_cards_are_refused_the_answer_arrives_as_a_post_with_readable_tables(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    refuse(fake_feishu, "reply", times=2)
    async with turn_reply(sender) as reply:
        await reply.finish(TABLED)
    [message] = fake_feishu.replies_to(USER_MESSAGE)
    assert message.msg_type == "post"
    paragraphs = message.content["zh_cn"]["content"]
    assert [{"tag": "md", "text": "**Title**"}] in paragraphs
    assert [
        {
            "tag": "code_block",
            "language": "PLAIN_TEXT",
            "text": "fruit | qty\n------+----\napple | 3",
        }
    ] in paragraphs
    assert "!" not in message.text


async def test_when_cards_and_posts_are_refused_the_answer_arrives_as_readable_text(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    refuse(fake_feishu, "reply", times=3)
    async with turn_reply(sender) as reply:
        await reply.finish(TABLED)
    [message] = fake_feishu.replies_to(USER_MESSAGE)
    assert message.msg_type == "text"
    assert message.text == (
        "Title\n\nplain answer\n\n• fruit: apple; qty: 3\n\nchart (https://x.y/c.png)"
    )


async def test_a_progress_card_whose_answer_went_as_text_does_not_stay_working(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    async with turn_reply(sender, open_delay=0) as reply:
        await wait_until(lambda: len(fake_feishu.replies_to(USER_MESSAGE)) == 1, timeout=5)
        refuse(fake_feishu, "patch", times=2)
        refuse(fake_feishu, "reply", times=1)
        await reply.finish(TABLED)
    card, message = fake_feishu.replies_to(USER_MESSAGE)
    assert "Working" not in card.text
    assert message.msg_type == "text"


EIGHT_TABLES = "\n\n".join(
    [
        *(f"## Table {i}\n\n| name | value |\n|---|---:|\n| row {i} | {i * 7} |" for i in range(8)),
        *(f"```python\nprint({i})  # <at id=all></at>\n```" for i in range(9)),
        "A chart: ![sales](https://example.com/sales.png) and ![](https://example.com/b.png).",
    ]
)


async def test_eight_tables_nine_code_blocks_and_two_images_arrive_as_cards_the_platform_accepts(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    async with turn_reply(sender, open_delay=0) as reply:
        await reply.on_event(step("a"))
        await wait_until(lambda: len(fake_feishu.replies_to(USER_MESSAGE)) == 1, timeout=5)
        await reply.finish(EIGHT_TABLES)
    messages = fake_feishu.replies_to(USER_MESSAGE)
    assert fake_feishu.refused == []
    assert {m.msg_type for m in messages} == {"interactive"}
    assert len(messages) >= 2  # five tables per card at most
    text = "\n".join(m.text for m in messages)
    assert "Working" not in text
    assert sum(markdown_tables(t) for t in _markdowns(messages)) == 8
    assert text.count("```python") == 9
    assert "[sales](https://example.com/sales.png)" in text
    assert "[image](https://example.com/b.png)" in text
    assert "![" not in text
    assert fake_feishu.mentions == []


def _markdowns(messages: list[BotMessage]) -> list[str]:
    return [
        e["content"]
        for m in messages
        for e in m.content["body"]["elements"]
        if e["tag"] == "markdown"
    ]


async def test_a_stopped_turn_reads_stopped_under_a_neutral_header(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    async with turn_reply(sender, open_delay=0) as reply:
        await wait_until(lambda: len(fake_feishu.replies_to(USER_MESSAGE)) == 1, timeout=5)
        await reply.finish("Partial answer.\n\nStopped.", is_error=True, status="stopped")
    [card] = fake_feishu.replies_to(USER_MESSAGE)
    assert card.content["header"]["title"]["content"] == "Stopped"
    assert card.content["header"]["template"] == "grey"


async def test_the_final_card_keeps_the_trace_with_the_refused_step_and_a_footer(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    result = TurnResult(
        reply="All clean!\n\nRefused (not run):\n- Bash `rm -rf /`: outside the workspace.",
        conversation_id="c",
        session_id="s",
        is_error=False,
        log_file="/home/someone/.claude-memory/logs/x.jsonl",
        cost_usd=0.0123,
        steps=(
            {"name": "Bash", "summary": "ls", "status": "ok", "detail": "a b"},
            {
                "name": "Bash",
                "summary": "rm -rf /",
                "status": "denied",
                "detail": "outside the workspace /home/someone/.claude-memory/workspace",
            },
        ),
    )
    async with turn_reply(sender, open_delay=0) as reply:
        await reply.on_event(step("a"))
        await wait_until(lambda: len(fake_feishu.replies_to(USER_MESSAGE)) == 1, timeout=5)
        await reply.finish_turn(result)
    [card] = fake_feishu.replies_to(USER_MESSAGE)
    panel = card.content["body"]["elements"][1]
    assert panel["tag"] == "collapsible_panel"
    assert panel["expanded"] is True  # a refused step is shown without a tap
    assert panel["header"]["title"]["content"] == "Tool steps: 2 · 1 refused"
    assert "🚫 Bash `rm -rf /` — refused: outside the workspace …/workspace" in card.text
    assert re.search(r"⏱ \d+\.\d s · \$0\.0123$", card.text)
    assert "/home/someone" not in json.dumps(card.content)
    assert "header" not in card.content  # completed: no error header


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
    assert card.content["header"]["template"] != "red"
