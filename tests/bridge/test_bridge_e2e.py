"""The bridge end to end: fake Feishu -> real lark clients -> run_agent -> real Claude CLI -> fake
model, and the answer back to the fake Feishu."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import pytest

from bridge.render import BODY_LIMITS
from bridge.strings import t
from settings import Settings
from tests.bridge.conftest import answer_only, feishu_app, message_id, replies, wait_answer
from tests.bridge.test_render import fences_balanced
from tests.fakes.anthropic_api import FakeMessagesAPI, error, text, tool
from tests.fakes.feishu_platform import OWNER_OPEN_ID, FakeFeishu
from tests.helpers import wait_until

pytestmark = pytest.mark.e2e


async def test_p2p_message_gets_exactly_one_reply_and_is_acked_before_the_turn_ends(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("weather", text("Sunny, 24 °C.", delay=2))
    async with feishu_app(feishu_settings()):
        event = fake_feishu.text_event("what's the weather?")
        frame = fake_feishu.push_event(event)
        answer = await wait_answer(fake_feishu, message_id(event))
        answered_at = time.monotonic()
    ack = fake_feishu.ack_for(frame)
    assert ack is not None and ack.code == 200
    assert ack.delay < 1.0  # Feishu re-pushes after 3 s
    assert ack.acked_at < answered_at - 1.5  # long before the model answered
    assert answer == "Sunny, 24 °C."
    [reply] = replies(fake_feishu, message_id(event))
    assert reply.msg_type == "interactive"
    assert [r.prompt for r in fake_model.turn_requests()] == ["what's the weather?"]


async def test_redelivery_never_answers_twice_even_after_a_restart(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    settings = feishu_settings()
    event = fake_feishu.text_event("count me once")
    same_message_new_event = json.loads(json.dumps(event))
    same_message_new_event["header"]["event_id"] = "a-new-event-id"
    async with feishu_app(settings):
        fake_feishu.push_event(event)
        fake_feishu.push_event(event)  # Feishu re-pushes the same event id
        fake_feishu.push_event(same_message_new_event)  # backfill after a reconnect
        await wait_answer(fake_feishu, message_id(event))
        await wait_until(lambda: len(fake_feishu.acks) == 3)
    async with feishu_app(settings):  # restarted bridge, same home
        fake_feishu.push_event(event)
        await wait_until(lambda: len(fake_feishu.acks) == 4)
        probe = fake_feishu.push_text("/status")
        await wait_answer(fake_feishu, message_id(probe))
    assert len(replies(fake_feishu, message_id(event))) == 1
    assert len(fake_model.requests_for("count me once")) == 1
    assert {a.code for a in fake_feishu.acks} == {200}


async def test_group_mention_is_answered_with_the_mention_stripped(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings()):
        ignored = fake_feishu.group_text_event("chatting among ourselves", mention_bot=False)
        fake_feishu.push_event(ignored)
        event = fake_feishu.group_text_event("summarise the plan", mention_bot=True)
        fake_feishu.push_event(event)
        answer = await wait_answer(fake_feishu, message_id(event))
    # In a group the model is told who speaks (the owner's name is not visible: open_id end).
    said = f"[member …{OWNER_OPEN_ID[-6:]}] summarise the plan"
    assert answer == f"echo: {said}"
    assert replies(fake_feishu, message_id(ignored)) == []
    assert [r.prompt for r in fake_model.turn_requests()] == [said]


async def test_clear_starts_a_fresh_session_and_stop_interrupts_a_slow_turn(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("slow job", text("never delivered", delay=30))
    async with feishu_app(feishu_settings()) as (client, bridge):
        first = fake_feishu.push_text("my locker code is 4711")
        await wait_answer(fake_feishu, message_id(first))
        cleared = fake_feishu.push_text("/clear")
        assert await wait_answer(fake_feishu, message_id(cleared)) == t("cleared", generation=2)
        second = fake_feishu.push_text("what is my locker code?")
        await wait_answer(fake_feishu, message_id(second))

        slow = fake_feishu.push_text("slow job")
        await wait_until(lambda: bool(fake_model.requests_for("slow job")), timeout=30)
        status = fake_feishu.push_text("/status")
        status_text = await wait_answer(fake_feishu, message_id(status))
        stop = fake_feishu.push_text("/stop")
        assert await wait_answer(fake_feishu, message_id(stop)) == t("stop_done")
        slow_text = await wait_answer(fake_feishu, message_id(slow), timeout=30)
        listing = (await client.get("/api/conversations")).json()["conversations"]
        assert bridge.state.generation("oc_p2pchat") == 2
    request = fake_model.requests_for("what is my locker code?")[0]
    assert "4711" not in request.all_text()
    assert "当前：运行中" in status_text
    assert "feishu:oc_p2pchat:v2" in status_text
    assert "never delivered" not in slow_text
    assert "已停止。" in slow_text  # in the chat's language (issue #33)
    assert {c["id"] for c in listing} == {"feishu:oc_p2pchat:v1", "feishu:oc_p2pchat:v2"}


async def test_sixty_kb_answer_arrives_in_several_messages_within_the_limit(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    body = "\n".join(f"row_{i:04d} = '{'数据' * 12}'" for i in range(1100))
    long_answer = f"Here is the table:\n\n```python\n{body}\n```\n\nThat is all."
    assert len(long_answer.encode()) > 60_000
    fake_model.on("big table", text(long_answer))
    async with feishu_app(feishu_settings()):
        event = fake_feishu.push_text("give me the big table")
        await wait_answer(fake_feishu, message_id(event))
    messages = replies(fake_feishu, message_id(event))
    assert len(messages) >= 3
    for call in fake_feishu.calls():
        assert (
            len(json.dumps(call.body, ensure_ascii=False).encode())
            <= BODY_LIMITS[call.body.get("msg_type", "interactive")]
        )
    parts = [m.text.rsplit("\npart ", 1)[0] for m in messages]
    assert all(fences_balanced(p) for p in parts)
    assert sum(p.count("row_") for p in parts) == 1100
    assert len({c.body["uuid"] for c in fake_feishu.calls("reply")}) == len(messages)


async def test_paired_owner_is_answered(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings(feishu_allowed_users=[])) as (_, bridge):
        pair = fake_feishu.push_text(f"/pair {bridge.pairing_code}")
        await wait_answer(fake_feishu, message_id(pair))
        hello = fake_feishu.push_text("hello, it's me")
        answer = await wait_answer(fake_feishu, message_id(hello))
    assert answer == "echo: hello, it's me"


async def test_dropped_websocket_reconnects_and_the_next_message_is_answered(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings()) as (client, bridge):
        fake_feishu.drop_connection()
        await wait_until(lambda: fake_feishu.connections_total == 2 and bridge.connected)
        event = fake_feishu.push_text("still there?")
        answer = await wait_answer(fake_feishu, message_id(event))
        health = (await client.get("/health")).json()
    assert answer == "echo: still there?"
    assert health["feishu"]["reconnects"] == 1
    assert fake_feishu.endpoint_calls == 2


@pytest.mark.parametrize(
    ("overrides", "script", "expected"),
    [
        # the reply's own sentences in the chat's language (issue #33: English in a Chinese chat)
        ({}, [error(529, "overloaded_error", "Overloaded")] * 8, "模型服务过载（529）"),
        ({"turn_timeout_seconds": 3}, [text("late", delay=30)], "本轮超时（3 秒）"),
    ],
    ids=["model-error", "timeout"],
)
async def test_model_errors_and_timeouts_reach_the_user_readably(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
    overrides: dict[str, float],
    script: list[object],
    expected: str,
) -> None:
    fake_model.on("break it", *script)  # type: ignore[arg-type]
    async with feishu_app(feishu_settings(**overrides)):
        event = fake_feishu.push_text("break it")
        answer = await wait_answer(fake_feishu, message_id(event), timeout=60)
    [card] = replies(fake_feishu, message_id(event))
    assert card.content["header"]["template"] == "red"
    assert answer.startswith(t("error_title") + "\n")
    assert expected in answer
    assert t("progress_title") not in answer


async def test_chats_answer_in_order_and_in_parallel(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("slow", text("slow done", delay=3))
    async with feishu_app(feishu_settings(feishu_allowed_chats=["oc_a", "oc_b"])):
        a1 = fake_feishu.push_text("slow a1", chat_id="oc_a")
        a2 = fake_feishu.push_text("quick a2", chat_id="oc_a")
        b1 = fake_feishu.push_text("slow b1", chat_id="oc_b")
        await wait_answer(fake_feishu, message_id(a2))
        await wait_answer(fake_feishu, message_id(b1))
    prompts = [r.prompt for r in fake_model.turn_requests()]
    assert prompts.index("slow a1") < prompts.index("quick a2")
    # oc_b did not wait for oc_a: its turn started before oc_a's first answer was written.
    b_started = fake_model.requests_for("slow b1")[0]
    assert prompts.index("slow b1") < prompts.index("quick a2"), (prompts, b_started.path)
    a1_replies = replies(fake_feishu, message_id(a1))
    assert a1_replies and answer_only(a1_replies[-1].text) == "slow done"


async def test_images_are_saved_in_the_inbox_and_the_agent_is_told_where(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
    fake_feishu.add_resource("img_v3_photo", png)
    settings = feishu_settings()
    async with feishu_app(settings):
        event = fake_feishu.post_event(
            "",
            [
                [{"tag": "text", "text": "what is in this picture?"}],
                [{"tag": "img", "image_key": "img_v3_photo"}],
            ],
        )
        fake_feishu.push_event(event)
        await wait_answer(fake_feishu, message_id(event))
    [saved] = list((settings.workspace_dir / "inbox" / "feishu").iterdir())
    assert saved.read_bytes() == png
    assert saved.suffix == ".png"
    prompt = fake_model.turn_requests()[0].prompt or ""
    assert prompt.startswith("what is in this picture?")
    assert f"inbox/feishu/{saved.name}" in prompt


async def test_compact_compacts_the_running_session(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings()):
        first = fake_feishu.push_text("remember the blue door")
        await wait_answer(fake_feishu, message_id(first))
        compact = fake_feishu.push_text("/compact")
        # Its card reads "正在压缩…" until compacted (a slow compaction shows it before the
        # answer): wait for the final state, not for the first reply.
        working = (t("compacting", "zh"), t("compacting", "en"))

        def compacted() -> bool:
            shown = replies(fake_feishu, message_id(compact))
            return bool(shown) and not any(m.text.startswith(working) for m in shown)

        await wait_until(compacted, timeout=60)
        answer = await wait_answer(fake_feishu, message_id(compact), timeout=60)
    assert "Compacted" in answer


async def test_progress_card_shows_tool_steps_then_the_answer(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on(
        "make a folder",
        tool("Bash", {"command": "mkdir reports"}),
        text("Made the folder.", delay=1),
    )
    async with feishu_app(feishu_settings()):
        event = fake_feishu.push_text("make a folder please")
        answer = await wait_answer(fake_feishu, message_id(event))
        await asyncio.sleep(0)
    [card] = replies(fake_feishu, message_id(event))
    seen = [json.dumps(v, ensure_ascii=False) for v in card.versions]
    assert any("mkdir reports" in v for v in seen[:-1])
    # the finished step keeps the command it ran (its result arrives without the input)
    assert "✅ Bash `mkdir reports`" in json.loads(seen[-2])["body"]["elements"][0]["content"]
    assert answer == "Made the folder."


async def test_shutdown_leaves_no_card_working_and_no_message_unanswered(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("endless", text("too late", delay=60))
    async with feishu_app(feishu_settings(shutdown_timeout_seconds=1)):
        running = fake_feishu.push_text("endless task")
        queued = fake_feishu.push_text("and then this")
        await wait_until(lambda: bool(replies(fake_feishu, message_id(running))), timeout=30)
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 15
    [card] = replies(fake_feishu, message_id(running))
    assert t("progress_title") not in card.text
    assert "正在关闭" in card.text and "shutting down" not in card.text  # the chat's language
    [notice] = replies(fake_feishu, message_id(queued))
    assert notice.text == t("restart_queued")
    assert fake_model.requests_for("and then this") == []
