"""Streaming answers through CardKit, end to end: the real app, the real lark clients, the real
Claude CLI and the fake model; the fake platform enforces CardKit's documented rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bridge.strings import t
from settings import Settings
from tests.bridge.conftest import (
    answer_only,
    feishu_app,
    message_id,
    replies,
    wait_answer,
    wait_reply_text,
)
from tests.fakes.anthropic_api import FakeMessagesAPI, broken_stream, text, tool
from tests.fakes.feishu_platform import CARD_OPS_PER_SECOND, FakeFeishu
from tests.helpers import wait_until

pytestmark = pytest.mark.e2e

STORY = " ".join(f"Sentence {i} of a long story about the sea." for i in range(60))


def streaming(make: Callable[..., Settings], **overrides: Any) -> Settings:
    values: dict[str, Any] = {"feishu_streaming": True, "feishu_stream_interval_seconds": 0.3}
    values.update(overrides)
    return make(**values)


async def test_a_long_answer_streams_into_one_card_then_streaming_is_switched_off(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on(
        "tell a story",
        tool("Bash", {"command": "ls"}),
        text(STORY, chunks=12, chunk_delay=0.25),
    )
    async with feishu_app(streaming(feishu_settings)):
        event = fake_feishu.push_text("tell a story please")
        await wait_until(lambda: bool(fake_feishu.cards), timeout=60)
        [card_id] = list(fake_feishu.cards)
        # text appears while the model is still writing
        await wait_until(
            lambda: any(
                op.kind == "content" and "Sentence" in op.content
                for op in fake_feishu.card_ops(card_id)
            ),
            timeout=60,
        )
        streamed_before_end = fake_feishu.cards[card_id].streaming
        answer = await wait_answer(fake_feishu, message_id(event))
    ops = fake_feishu.card_ops(card_id)
    assert streamed_before_end
    assert all(op.code == 0 for op in ops), [(op.kind, op.code) for op in ops]
    sequences = [op.sequence for op in ops[1:]]
    assert sequences == sorted(set(sequences)) and sequences[0] >= 1  # strictly increasing
    for i, op in enumerate(ops):  # never more than the documented 10 operations a second
        assert sum(1 for o in ops[i:] if o.at - op.at < 1.0) <= CARD_OPS_PER_SECOND
    texts = [op.content for op in ops if op.kind == "content" and op.element_id == "answer"]
    assert len(texts) >= 2 and all("Sentence" in t for t in texts[-2:])
    assert [(op.kind, op.streaming) for op in ops[-2:]] == [("update", None), ("settings", False)]
    [reply] = fake_feishu.replies_to(message_id(event))
    assert reply.card_id == card_id and answer == STORY
    assert "Bash `ls`" in reply.text and "⏱" in reply.text  # the trace and the footer stay
    assert not any(
        b.get("element_id") == "stop" for b in fake_feishu.card_buttons(reply.message_id)
    )
    assert fake_feishu.refused == [] and fake_feishu.unknown == []


async def test_a_cardkit_failure_mid_stream_still_delivers_exactly_one_answer(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("tell a story", text(STORY, chunks=10, chunk_delay=0.3))
    fake_feishu.fail_cardkit("content", after=1)  # the second streaming update fails, and all after
    async with feishu_app(streaming(feishu_settings)):
        event = fake_feishu.push_text("tell a story please")
        await wait_answer(fake_feishu, message_id(event))
    replies = fake_feishu.replies_to(message_id(event))
    assert answer_only(replies[-1].text).strip() == STORY
    assert sum(STORY in m.text for m in replies) == 1  # exactly one answer
    streamed = fake_feishu.cards[replies[0].card_id or ""]
    assert not streamed.streaming  # closed, pointing below
    assert t("stream_cut") in replies[0].text


async def test_a_quick_answer_is_one_plain_card(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(streaming(feishu_settings, feishu_progress_delay_seconds=30)):
        event = fake_feishu.push_text("hello")
        answer = await wait_answer(fake_feishu, message_id(event))
    assert answer == "echo: hello"
    assert fake_feishu.cards == {}


@pytest.mark.parametrize("error_type", ["overloaded_error", None])
async def test_a_model_stream_that_breaks_ends_on_the_error_card_not_done(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
    error_type: str | None,
) -> None:
    # issue #33: a dropped stream or an error inside it showed "Done, no text output." on a
    # normal card
    fake_model.on(
        "tell a story",
        *([broken_stream(STORY, error_type=error_type)] * 8),
    )
    async with feishu_app(streaming(feishu_settings)):
        event = fake_feishu.push_text("tell a story please")
        text_seen = await wait_reply_text(fake_feishu, message_id(event))
    assert "Done, no text output." not in text_seen and "完成" not in answer_only(text_seen)
    assert "529" in text_seen
    assert "出错了" in text_seen


@pytest.mark.timeout(300)  # 50 s of outage, then the answer; loaded machines are slow
async def test_a_streamed_card_cut_by_an_outage_is_closed_with_what_it_showed_and_a_pointer(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    # issue #33: after 30 s of 5xx then 20 s of 429 in mid-stream the answer arrived as a new
    # reply, and the streamed card stayed in streaming mode with its first paragraph for good,
    # with no pointer to the new reply
    fake_model.on("tell a story", text(STORY, chunks=12, chunk_delay=0.8))
    settings = streaming(feishu_settings, feishu_delivery_window_seconds=120)
    async with feishu_app(settings):
        event = fake_feishu.push_text("tell a story please")
        await wait_until(
            lambda: any(
                op.kind == "content" and "Sentence" in op.content and op.code == 0
                for op in fake_feishu.card_ops()
            ),
            timeout=60,
        )
        fake_feishu.outage(30, status=503)
        fake_feishu.rate_limit(50)
        answer = await wait_answer(fake_feishu, message_id(event), timeout=150)
    assert {503, 429} <= {c.status for c in fake_feishu.faulted}
    streamed, *rest = replies(fake_feishu, message_id(event))
    assert streamed.card_id is not None and not fake_feishu.cards[streamed.card_id].streaming
    assert "Sentence 0 of" in streamed.text  # what it showed stays
    assert t("stream_cut") in streamed.text  # and says where the answer continues
    assert STORY in answer and sum(STORY in m.text for m in rest) == 1


@pytest.mark.timeout(300)  # a 40 s outage, then the outbox's backoff
async def test_a_streamed_card_still_refused_after_the_answer_is_closed_by_the_outbox(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    # an outage longer than the delivery window: the answer waits in the outbox, and so does
    # the streamed card's close (it stayed streaming when the platform still refused then)
    fake_model.on("tell a story", text(STORY, chunks=8, chunk_delay=0.5))
    settings = streaming(feishu_settings, feishu_delivery_window_seconds=3)
    async with feishu_app(settings):
        event = fake_feishu.push_text("tell a story please")
        await wait_until(
            lambda: any(
                op.kind == "content" and "Sentence" in op.content and op.code == 0
                for op in fake_feishu.card_ops()
            ),
            timeout=60,
        )
        fake_feishu.outage(40, status=503)
        await wait_until(
            lambda: any(STORY in m.text for m in replies(fake_feishu, message_id(event))),
            timeout=200,
        )  # the outbox may close the card before it delivers the answer, or after
        answer = await wait_answer(fake_feishu, message_id(event), timeout=60)
    streamed, *rest = replies(fake_feishu, message_id(event))
    assert streamed.card_id is not None and not fake_feishu.cards[streamed.card_id].streaming
    assert t("stream_cut") in streamed.text and "Sentence 0 of" in streamed.text
    assert STORY in answer and sum(STORY in m.text for m in rest) == 1
