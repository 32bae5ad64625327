"""Chat text cannot act: a model answer full of mention and markup tags reaches Feishu (the fake
platform, reading markup as the documentation says) with no mention and no tag, in a card, in the
progress card and in the plain-text fallback; ordinary text still reads as written."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from settings import Settings
from tests.bridge.conftest import feishu_app, message_id, wait_answer
from tests.fakes.anthropic_api import FakeMessagesAPI, text, tool
from tests.fakes.feishu_platform import OWNER_OPEN_ID, FakeFeishu

pytestmark = pytest.mark.e2e

GROUP = "oc_team"

# Every documented mention form (text messages, post md, card markdown), case and spacing
# variants, and the other card tags: none may act.
HOSTILE = (
    'Hey <at user_id="all"></at> and <at id=all></at>, <at user_id="ou_x">x</at>, '
    "<at email=a@b.c></at>, <at ids=ou_a,ou_b></at>, <AT ID=ALL></AT>, < at id = all ></at>, "
    "<person id='ou_x'></person> <font color='red'>red</font> "
    "<link url='https://evil.example'>click</link> <text_tag color='red'>tag</text_tag> "
    "<a href='https://evil.example'>a</a> <i>i</i> <u>u</u> <s>s</s> "
    "&#60;at id=all&#62;&#60;/at&#62;"
)
ORDINARY = (
    "Compare a < b && c > d, AT&T, 5 &lt; 6 and 中文。\n\n"
    "`x<y>` and `<at id=all></at>` in code\n\n"
    '```html\n<div class="a">&amp; 中文</div>\n<at id=all></at>\n```\n\n'
    "> quoted"
)
ANSWER = f"{HOSTILE}\n\n{ORDINARY}"


def _invisible(text: str) -> str:
    return text.replace("\u200d", "")


def _settings(feishu_settings: Callable[..., Settings], **overrides: object) -> Settings:
    return feishu_settings(feishu_allowed_chats=[GROUP], **overrides)


async def test_a_card_answer_and_its_progress_mention_nobody_and_read_as_written(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on(
        "everyone",
        tool("Bash", {"command": "echo '<at id=all></at> <font color=red>x</font>'"}),
        text(ANSWER, delay=1),
    )
    async with feishu_app(_settings(feishu_settings)):
        event = fake_feishu.group_text_event(
            "tell everyone", mention_bot=True, chat_id=GROUP, sender=OWNER_OPEN_ID
        )
        fake_feishu.push_event(event)
        answer = await wait_answer(fake_feishu, message_id(event))
    [card] = fake_feishu.replies_to(message_id(event))
    assert card.msg_type == "interactive"
    assert len(card.versions) >= 2  # the progress card showed the tool step, then the answer
    assert fake_feishu.mentions == []
    assert fake_feishu.markup == []
    assert _invisible(answer) == ANSWER


async def test_the_plain_text_fallback_mentions_nobody_and_reads_as_written(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("everyone", text(ANSWER))
    # No progress card: the answer card is the first reply, and the platform refuses it.
    async with feishu_app(_settings(feishu_settings, feishu_progress_delay_seconds=60)):
        # Refused as a card, as a stricter card and as a post: the last resort is text.
        fake_feishu.fail_next(
            "reply", times=3, status=400, code=230099, msg="card invalid", reset=None
        )
        event = fake_feishu.group_text_event(
            "tell everyone", mention_bot=True, chat_id=GROUP, sender=OWNER_OPEN_ID
        )
        fake_feishu.push_event(event)
        answer = await wait_answer(fake_feishu, message_id(event))
    [message] = fake_feishu.replies_to(message_id(event))
    assert message.msg_type == "text"
    assert fake_feishu.mentions == []
    assert fake_feishu.markup == []
    assert _invisible(answer) == ANSWER
