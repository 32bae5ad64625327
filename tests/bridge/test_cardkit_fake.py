"""The bridge's CardKit and reaction calls through the real lark client, and the fake platform's
documented rules for them (each rule's page is named in tests/fakes/feishu_platform.py)."""

from __future__ import annotations

import pytest

from bridge.sender import FeishuAPIError, Sender
from tests.fakes.feishu_platform import CARD_COMPONENTS, FakeFeishu

STREAMING = {
    "schema": "2.0",
    "config": {"streaming_mode": True},
    "body": {"elements": [{"tag": "markdown", "element_id": "answer", "content": "…"}]},
}


async def code_of(call: object) -> int:
    with pytest.raises(FeishuAPIError) as caught:
        await call  # type: ignore[misc]
    return caught.value.code


async def test_a_card_entity_streams_with_increasing_sequences_and_is_sent_once(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    card_id = await sender.card_create(STREAMING)
    ref = {"type": "card", "data": {"card_id": card_id}}
    message = await sender.reply("om_user", "interactive", ref, uuid="u-1")
    await sender.card_content(card_id, "answer", "Hello", 1)
    assert await code_of(sender.card_content(card_id, "answer", "Hello again", 1)) == 300317
    await sender.card_content(card_id, "answer", "Hello again", 2)
    assert await code_of(sender.card_content(card_id, "nope", "x", 3)) == 300313
    await sender.card_settings(card_id, {"streaming_mode": False}, 4)
    assert await code_of(sender.card_content(card_id, "answer", "late", 5)) == 300309
    assert fake_feishu.messages[message].text == "Hello again"
    assert await code_of(sender.reply("om_user", "interactive", ref, uuid="u-2")) == 230099
    assert await code_of(sender.card_content("7000", "answer", "x", 9)) == 200740


async def test_streaming_closes_by_itself_after_ten_minutes(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    now = [1000.0]
    fake_feishu.clock = lambda: now[0]
    card_id = await sender.card_create(STREAMING)
    now[0] += 601
    assert await code_of(sender.card_content(card_id, "answer", "x", 1)) == 200850
    await sender.card_settings(card_id, {"streaming_mode": True}, 2)  # switched on again
    await sender.card_content(card_id, "answer", "x", 3)


async def test_size_component_and_schema_limits(sender: Sender) -> None:
    big = {**STREAMING, "body": {"elements": [{"tag": "markdown", "content": "x" * 31_000}]}}
    assert await code_of(sender.card_create(big)) == 200860
    many = [{"tag": "markdown", "content": "x"} for _ in range(CARD_COMPONENTS + 1)]
    assert await code_of(sender.card_create({**STREAMING, "body": {"elements": many}})) == 300305
    assert await code_of(sender.card_create({"body": {"elements": []}})) == 300303
    card_id = await sender.card_create(STREAMING)
    panel = {"tag": "collapsible_panel", "element_id": "answer", "header": {}, "elements": []}
    assert await code_of(sender.card_content(card_id, "answer", "x" * 31_000, 1)) == 200860
    dup = {**STREAMING, "body": {"elements": [STREAMING["body"]["elements"][0], panel]}}  # type: ignore[index]
    assert await code_of(sender.card_create(dup)) == 300301


async def test_more_than_ten_operations_a_second_on_one_card_are_throttled(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    fake_feishu.clock = lambda: 1000.0  # every call in the same second
    card_id = await sender.card_create(STREAMING)
    for sequence in range(1, 10):
        await sender.card_content(card_id, "answer", f"v{sequence}", sequence)
    throttled = [op for op in fake_feishu.card_ops(card_id) if op.code == 99991400]
    assert throttled == []
    # the eleventh in the second is refused as "频控策略" says (HTTP 429, reset header)
    with pytest.raises(FeishuAPIError) as caught:
        await sender.card_content(card_id, "answer", "v10", 10)
    assert caught.value.status == 429 and caught.value.throttled
    fake_feishu.clock = lambda: 1001.5  # a second later it goes through
    await sender.card_content(card_id, "answer", "v10", 10)


async def test_reactions_valid_types_and_only_own_ones_deleted(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    reaction = await sender.react("om_user", "Typing")
    assert await code_of(sender.react("om_user", "EYES")) == 231001  # not a documented type
    theirs = fake_feishu.user_reacts("om_user", "OK")
    assert await code_of(sender.unreact("om_user", theirs)) == 231007
    assert await code_of(sender.unreact("om_other", reaction)) == 231010
    await sender.unreact("om_user", reaction)
    assert fake_feishu.reactions_on("om_user") == ["OK"]
