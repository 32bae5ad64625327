"""The bridge in the real app, for everything that never reaches the model (fast)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from bridge.strings import t
from settings import Settings
from tests.bridge.conftest import feishu_app, message_id, wait_answer
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI
from tests.fakes.feishu_platform import OWNER_OPEN_ID, FakeFeishu
from tests.helpers import wait_until

STRANGER = "ou_stranger000000000000000000000"
EN_CLIENT = "Mozilla/5.0 Lark/7.30 LarkLocale/en_US ttnet"


async def test_stranger_gets_one_refusal_and_the_model_is_never_called(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings()):
        event = fake_feishu.text_event("tell me secrets", sender=STRANGER)
        frame = fake_feishu.push_event(event)
        fake_feishu.push_event(event)  # re-delivered: still one refusal
        assert await wait_answer(fake_feishu, message_id(event)) == t("refusal")
        await wait_until(lambda: len(fake_feishu.acks) == 2)
    assert [a.code for a in fake_feishu.acks] == [200, 200]
    assert fake_feishu.ack_for(frame) is not None
    assert len(fake_feishu.replies_to(message_id(event))) == 1
    assert fake_model.requests == []


async def test_group_message_without_mention_is_ignored(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings()):
        quiet = fake_feishu.group_text_event("/help", mention_bot=False)
        everyone = fake_feishu.text_event(
            "@_all /help",
            chat_type="group",
            mentions=[{"key": "@_all", "id": {"open_id": ""}, "name": "所有人"}],
        )
        addressed = fake_feishu.group_text_event("/help", mention_bot=True)
        for event in (quiet, everyone, addressed):
            fake_feishu.push_event(event)
        assert "/clear" in await wait_answer(fake_feishu, message_id(addressed))
        await wait_until(lambda: len(fake_feishu.acks) == 3)
    assert fake_feishu.replies_to(message_id(quiet)) == []
    assert fake_feishu.replies_to(message_id(everyone)) == []
    assert fake_model.requests == []


async def test_help_and_status_answer_without_a_model_call(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings()):
        help_event = fake_feishu.text_event("/help")
        fake_feishu.push_event(help_event, fragments=3)  # a fragmented frame is reassembled
        status = fake_feishu.push_text("/status")
        status_text = await wait_answer(fake_feishu, message_id(status))
        english = fake_feishu.push_text("/status", user_agent=EN_CLIENT)
        english_text = await wait_answer(fake_feishu, message_id(english))
        compact = fake_feishu.push_text("/compact")
        unknown = fake_feishu.push_text("/frobnicate")
        help_text = await wait_answer(fake_feishu, message_id(help_event))
        compact_text = await wait_answer(fake_feishu, message_id(compact))
        unknown_text = await wait_answer(fake_feishu, message_id(unknown))
    # Chinese first; English for a client that runs in English
    assert help_text.startswith("**命令**") and "/remember <内容>" in help_text
    assert "/recall <查询>" in help_text and "/resume <编号>" in help_text
    assert "feishu:oc_p2pchat:v1" in status_text
    assert "会话：尚未开始" in status_text and "当前：空闲" in status_text
    assert "session: not started" in english_text and "now: idle" in english_text
    assert "Nothing to compact yet." in compact_text
    assert unknown_text == "没有 /frobnicate 这个命令。发送 /help 查看命令列表。"
    assert fake_model.requests == []


async def test_message_from_before_the_start_is_not_run(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings()):
        old = fake_feishu.text_event("do this now", create_time_ms=int((time.time() - 3600) * 1000))
        fake_feishu.push_event(old)
        text = await wait_answer(fake_feishu, message_id(old))
    assert text == t("stale")
    assert len(fake_feishu.replies_to(message_id(old))) == 1
    assert fake_model.requests == []


async def test_pairing_makes_the_first_user_with_the_code_the_owner(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings(feishu_allowed_users=[])) as (client, bridge):
        code = bridge.pairing_code
        assert code is not None and len(code) == 8
        hello = fake_feishu.push_text("hello")
        assert await wait_answer(fake_feishu, message_id(hello)) == t("unpaired")
        wrong = fake_feishu.push_text("/pair 00000000" if code != "00000000" else "/pair 1")
        assert await wait_answer(fake_feishu, message_id(wrong)) == t("pair_wrong")
        right = fake_feishu.push_text(f"/pair {code[:4]} {code[4:]}")
        assert await wait_answer(fake_feishu, message_id(right)) == t("paired")
        late = fake_feishu.push_text(f"/pair {code}", sender=STRANGER, chat_id="oc_other")
        assert await wait_answer(fake_feishu, message_id(late)) == t("refusal")
        other = fake_feishu.push_text("hi", sender=STRANGER, chat_id="oc_other")
        assert await wait_answer(fake_feishu, message_id(other)) == t("refusal")
        assert bridge.state.owner() == OWNER_OPEN_ID
        assert bridge.pairing_code is None
        health = (await client.get("/health")).json()
    assert health["feishu"]["paired"] is True
    assert fake_model.requests == []


async def test_voice_stickers_unsupported_and_empty_messages_get_exactly_one_line(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings()):
        # "接收消息内容结构": audio {file_key, duration (ms)}, sticker {file_key}
        audio = fake_feishu.message_event({"file_key": "f", "duration": 2000}, message_type="audio")
        sticker = fake_feishu.message_event({"file_key": "s"}, message_type="sticker")
        vote = fake_feishu.message_event({"topic": "lunch?"}, message_type="vote")
        empty = fake_feishu.group_text_event("", mention_bot=True)
        for event in (audio, sticker, vote, empty):
            fake_feishu.push_event(event)
        assert await wait_answer(fake_feishu, message_id(audio)) == t("audio")
        assert await wait_answer(fake_feishu, message_id(sticker)) == t("sticker")
        assert await wait_answer(fake_feishu, message_id(vote)) == t("unsupported", kind="vote")
        assert await wait_answer(fake_feishu, message_id(empty)) == t("empty")
        await asyncio.sleep(0.5)
        for event in (audio, sticker, vote, empty):
            assert len(fake_feishu.replies_to(message_id(event))) == 1
    assert fake_model.requests == []


async def test_bot_messages_other_events_and_garbage_are_acked_and_ignored(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings()) as (_, bridge):
        from_bot = fake_feishu.text_event("/help", sender_type="app")
        fake_feishu.push_event(from_bot)
        fake_feishu.push_event(
            {"schema": "2.0", "header": {"event_type": "im.message.message_read_v1"}, "event": {}}
        )
        fake_feishu.push_event({"schema": "2.0", "header": {"event_type": "im.message.receive_v1"}})
        await wait_until(lambda: len(fake_feishu.acks) == 3)
        assert bridge.status()["last_event_at"] is not None
    assert [a.code for a in fake_feishu.acks] == [200, 200, 200]
    assert fake_feishu.sent == []


async def test_memory_command_lists_top_memories(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings()) as (client, _):
        saved = await client.post(
            "/api/memories",
            json={
                "content": "The quarterly report is due on the 15th.",
                "title": "Quarterly report deadline",
                "summary": "due on the 15th",
            },
        )
        assert saved.status_code in (200, 201), saved.text
        found = fake_feishu.push_text("/memory quarterly report")
        empty = fake_feishu.push_text("/memory")
        text = await wait_answer(fake_feishu, message_id(found))
        usage = await wait_answer(fake_feishu, message_id(empty))
    assert "Quarterly report deadline" in text
    assert usage == t("recall_usage")
    assert fake_model.requests == []


async def test_health_webhook_route_and_clean_shutdown(
    feishu_settings: Callable[..., Settings],
    make_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
) -> None:
    settings = feishu_settings()
    async with feishu_app(settings) as (client, bridge):
        health = (await client.get("/health")).json()
        webhook = await client.post("/api/feishu/webhook", json={"challenge": "x"})
        t0 = time.monotonic()
    closed_in = time.monotonic() - t0
    assert health["feishu"]["enabled"] is True
    assert health["feishu"]["connected"] is True
    assert webhook.status_code == 404
    assert closed_in < 10
    assert bridge.connected is False
    assert not [t for t in threading.enumerate() if t.name == "feishu-ws"]
    log = settings.logs_dir / "feishu_ws_bridge.log"
    assert "Feishu bridge started" in log.read_text()
    async with running_app(make_settings()) as plain:
        assert (await plain.get("/health")).json()["feishu"] == {
            "enabled": False,
            "connected": False,
        }


async def test_bad_credentials_are_reported_in_status(
    feishu_settings: Callable[..., Settings], fake_feishu: FakeFeishu
) -> None:
    async with running_app(feishu_settings(feishu_app_secret="wrong")) as client:
        bridge = client.app.state.feishu  # type: ignore[attr-defined]
        await wait_until(lambda: bridge.status()["error"] is not None, timeout=10)
        status = bridge.status()
        await asyncio.sleep(0)
    assert status["connected"] is False
    assert "invalid app credentials" in status["error"]


async def test_throttled_reply_is_retried_after_the_reset_header(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings()):
        fake_feishu.fail_next("reply", times=1, status=429, reset="0.5")
        event = fake_feishu.push_text("/help")
        await wait_answer(fake_feishu, message_id(event))
    first, second = fake_feishu.calls("reply")
    assert first.status == 429
    assert second.at - first.at >= 0.45
    assert first.body["uuid"] == second.body["uuid"]
    assert len(fake_feishu.replies_to(message_id(event))) == 1


async def test_command_answers_fall_back_to_text_when_cards_are_refused(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings()):
        fake_feishu.fail_next("reply", status=400, code=11310, msg="card invalid", reset=None)
        event = fake_feishu.push_text("/help")
        text = await wait_answer(fake_feishu, message_id(event))
    [message] = fake_feishu.replies_to(message_id(event))
    assert message.msg_type == "text"
    assert text.startswith("命令")
