"""Sending through the real lark.Client against the fake platform: retries, limits, uuids."""

from __future__ import annotations

import asyncio

import pytest

from bridge._lark import import_lark
from bridge.render import text_content
from bridge.sender import FeishuAPIError, RetryPolicy, Sender, send_uuid
from tests.fakes.feishu_platform import BOT_OPEN_ID, FakeFeishu


class FakeClock:
    """The sender's clock and sleep: sleeping moves the clock, nothing waits."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def sender_with(fake: FakeFeishu, clock: FakeClock, *, window: float = 300) -> Sender:
    lark = import_lark()
    client = (
        lark.Client.builder()
        .app_id(fake.app_id)
        .app_secret(fake.app_secret)
        .domain(fake.url)
        .build()
    )
    return Sender(
        client,
        policy=RetryPolicy(window=window),
        sleep=clock.sleep,
        clock=clock,
        rand=lambda: 0.5,  # no jitter
    )


async def test_reply_carries_token_uuid_and_json_content(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    new_id = await sender.reply("om_user", "text", text_content("hi 你好"), uuid="u-1")
    [call] = fake_feishu.calls("reply")
    assert call.path == "/open-apis/im/v1/messages/om_user/reply"
    assert call.headers["authorization"] == f"Bearer {fake_feishu.tenant_token}"
    assert call.body == {"content": '{"text": "hi 你好"}', "msg_type": "text", "uuid": "u-1"}
    assert fake_feishu.messages[new_id].reply_to == "om_user"


async def test_create_and_patch(sender: Sender, fake_feishu: FakeFeishu) -> None:
    card = {"schema": "2.0", "body": {"elements": []}}
    new_id = await sender.create("oc_1", "interactive", card, uuid="u-2")
    await sender.patch(new_id, {"schema": "2.0", "body": {"elements": [{"tag": "markdown"}]}})
    [create] = fake_feishu.calls("create")
    assert create.query == {"receive_id_type": "chat_id"}
    assert create.body["receive_id"] == "oc_1"
    assert len(fake_feishu.messages[new_id].versions) == 2


async def test_throttled_send_waits_for_the_reset_header_then_succeeds(
    fake_feishu: FakeFeishu,
) -> None:
    clock = FakeClock()
    sender = sender_with(fake_feishu, clock)
    fake_feishu.fail_next("reply", times=2, status=429, code=99991400, reset="3")
    new_id = await sender.reply("om_user", "text", text_content("x"), uuid="u-3")
    calls = fake_feishu.calls("reply")
    assert [c.status for c in calls] == [429, 429, 200]
    assert {c.body["uuid"] for c in calls} == {"u-3"}  # retries are idempotent
    assert clock.waits == [3.0, 3.0]
    assert len(fake_feishu.replies_to("om_user")) == 1
    assert new_id


async def test_a_long_rate_limit_is_waited_out_as_the_header_says(fake_feishu: FakeFeishu) -> None:
    clock = FakeClock()
    sender = sender_with(fake_feishu, clock)
    fake_feishu.fail_next("reply", times=1, status=429, reset="45")  # longer than the 30 s cap
    await sender.reply("om_user", "text", text_content("x"), uuid="u-3b")
    assert clock.waits == [45.0]


async def test_im_rate_limit_code_without_http_429_is_retried(fake_feishu: FakeFeishu) -> None:
    clock = FakeClock()
    sender = sender_with(fake_feishu, clock)
    fake_feishu.fail_next("patch", status=400, code=230020, reset=None)
    new_id = await sender.reply("om_user", "interactive", {"body": {}}, uuid="u-4")
    await sender.patch(new_id, {"body": {"elements": []}})
    assert clock.waits == [1.0]  # no reset header: backoff starts at 1 s


async def test_server_errors_back_off_exponentially_up_to_the_cap_within_the_window(
    fake_feishu: FakeFeishu,
) -> None:
    clock = FakeClock()
    sender = sender_with(fake_feishu, clock, window=200)
    fake_feishu.fail_next("reply", times=100, status=503, code=1500, reset=None)
    with pytest.raises(FeishuAPIError) as caught:
        await sender.reply("om_user", "text", text_content("x"), uuid="u-5")
    assert caught.value.transient
    assert "HTTP 503" in caught.value.message
    assert clock.waits[:7] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert sum(clock.waits) <= 200 < sum(clock.waits) + 30  # the window, not a count, ends it
    assert fake_feishu.replies_to("om_user") == []


async def test_a_server_error_whose_body_says_success_is_a_failure(fake_feishu: FakeFeishu) -> None:
    clock = FakeClock()
    sender = sender_with(fake_feishu, clock)
    fake_feishu.outage(3600, kind="reply", status=500, body="code0")
    with pytest.raises(FeishuAPIError) as caught:
        await sender.reply("om_user", "text", text_content("x"), uuid="u-5b")
    assert caught.value.status == 500 and caught.value.transient


async def test_a_gateway_error_page_is_retried(fake_feishu: FakeFeishu) -> None:
    clock = FakeClock()
    sender = sender_with(fake_feishu, clock)
    fake_feishu.outage(3600, kind="reply", status=502, body="html")
    with pytest.raises(FeishuAPIError) as caught:
        await sender.reply("om_user", "text", text_content("x"), uuid="u-5c", window=10)
    assert caught.value.transient
    assert len(fake_feishu.calls("reply")) > 2


async def test_a_send_whose_answer_was_lost_is_not_doubled(fake_feishu: FakeFeishu) -> None:
    clock = FakeClock()
    sender = sender_with(fake_feishu, clock)
    fake_feishu.outage(0.5, kind="reply", status=504, commits=True)
    await asyncio.sleep(0.6)  # the outage is over before the retry (the fake runs on real time)
    first = await sender.reply("om_user", "text", text_content("x"), uuid="u-5d")
    assert len(fake_feishu.replies_to("om_user")) == 1
    again = await sender.reply("om_user", "text", text_content("x"), uuid="u-5d")
    assert again == first


async def test_a_revoked_token_is_fetched_anew_and_the_call_retried_once(
    fake_feishu: FakeFeishu,
) -> None:
    clock = FakeClock()
    sender = sender_with(fake_feishu, clock)
    await sender.reply("om_user", "text", text_content("before"), uuid="u-t1")
    tokens = fake_feishu.token_calls
    fake_feishu.invalidate_token()
    await sender.reply("om_user", "text", text_content("after"), uuid="u-t2")
    calls = fake_feishu.calls("reply")
    assert [c.status for c in calls][-1] == 200
    assert calls[-1].headers["authorization"] == f"Bearer {fake_feishu.tenant_token}"
    assert fake_feishu.token_calls == tokens + 1
    assert clock.waits == []  # at once, no backoff


async def test_other_errors_are_not_retried(fake_feishu: FakeFeishu) -> None:
    clock = FakeClock()
    sender = sender_with(fake_feishu, clock)
    fake_feishu.fail_next("reply", status=400, code=230002, msg="bot not in chat", reset=None)
    with pytest.raises(FeishuAPIError) as caught:
        await sender.reply("om_user", "text", text_content("x"), uuid="u-6")
    assert caught.value.code == 230002
    assert "bot not in chat" in caught.value.message
    assert clock.waits == []


async def test_bodies_over_the_limit_are_refused_before_sending(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    card = {"body": {"elements": [{"tag": "markdown", "content": "x" * 31_000}]}}
    with pytest.raises(FeishuAPIError) as caught:
        await sender.reply("om_user", "interactive", card, uuid="u-7")
    assert caught.value.code == 230025
    assert fake_feishu.calls() == []


async def test_bot_identity_and_downloads(sender: Sender, fake_feishu: FakeFeishu) -> None:
    assert await sender.bot_open_id() == BOT_OPEN_ID
    fake_feishu.add_resource("file_k", b"%PDF-1.4 data", "report.pdf")
    download = await sender.download("om_user", "file_k", "file")
    assert download.data == b"%PDF-1.4 data"
    assert download.file_name == "report.pdf"
    [call] = fake_feishu.calls("resource")
    assert call.query == {"type": "file"}


def test_send_uuid_is_stable_and_short() -> None:
    assert send_uuid("om_1", "answer", 0) == send_uuid("om_1", "answer", 0)
    assert send_uuid("om_1", "answer", 0) != send_uuid("om_1", "answer", 1)
    assert len(send_uuid("om_" + "x" * 60, "answer", 12)) <= 50
