"""A retried model request shows on the Feishu progress card while it happens."""

from __future__ import annotations

from agent.events import Retrying, TextDelta
from bridge.progress import TurnReply
from bridge.sender import Sender
from tests.fakes.feishu_platform import FakeFeishu
from tests.helpers import wait_until

USER_MESSAGE = "om_user_message"


async def test_the_card_says_the_request_is_retried_until_the_answer_comes(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    reply = TurnReply(
        sender, reply_to=USER_MESSAGE, key=USER_MESSAGE, interval=0.2, open_delay=0, locale="en"
    )
    async with reply:
        await reply.on_event(Retrying(2, 10, 4.2, "overloaded", 529))
        await wait_until(
            lambda: any(
                "retrying (2/10) in 4 s: overloaded" in m.text
                for m in fake_feishu.replies_to(USER_MESSAGE)
            ),
            timeout=5,
        )
        [card] = fake_feishu.replies_to(USER_MESSAGE)
        await reply.on_event(TextDelta("Hi"))
        await wait_until(lambda: "retrying" not in card.text, timeout=5)
        await reply.finish("Hi there")
    assert card.text == "Hi there"
