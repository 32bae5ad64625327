"""Chat text cannot act, where no model is involved: command answers that echo user text, and
posts, read by the fake platform's documented rules."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bridge.render import post_content, text_content
from settings import Settings
from tests.bridge.conftest import feishu_app, message_id, wait_answer
from tests.bridge.test_chat_text_e2e import ANSWER, HOSTILE, ORDINARY
from tests.fakes.anthropic_api import FakeMessagesAPI
from tests.fakes.feishu_platform import FakeFeishu, message_markup, visible_text


@pytest.mark.parametrize("refuse_cards", [False, True], ids=["card", "text-fallback"])
async def test_memory_command_echoing_a_hostile_query_mentions_nobody(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
    refuse_cards: bool,
) -> None:
    query = '<at id=all></at> <at user_id="all"></at> 5 < 6 & 中文'
    async with feishu_app(feishu_settings()):
        if refuse_cards:
            fake_feishu.fail_next("reply", status=400, code=11310, msg="card invalid", reset=None)
        event = fake_feishu.push_text(f"/memory {query}")
        answer = await wait_answer(fake_feishu, message_id(event))
    [message] = fake_feishu.replies_to(message_id(event))
    assert message.msg_type == ("text" if refuse_cards else "interactive")
    assert fake_feishu.mentions == []
    assert fake_feishu.markup == []
    assert query in answer.replace("\u200d", "")
    assert fake_model.requests == []


def test_a_post_of_hostile_markdown_mentions_nobody_and_reads_as_written() -> None:
    post = post_content(ANSWER)
    assert message_markup("post", post) == []
    shown = visible_text("post", post).replace("\u200d", "")
    assert HOSTILE in shown
    assert '<div class="a">&amp; 中文</div>' in shown


def test_a_text_message_of_hostile_text_mentions_nobody() -> None:
    content = text_content(ANSWER)
    assert message_markup("text", content) == []
    assert visible_text("text", content).replace("\u200d", "") == ANSWER
    assert ORDINARY in visible_text("text", content)  # code and prose read the same
