"""Parsing Feishu event payloads once, at the edge (pure, table-driven)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bridge.events import (
    Attachment,
    EventParseError,
    IncomingMessage,
    OtherEvent,
    Recalled,
    message_from_json,
    message_to_json,
    parse_event,
)
from tests.fakes.feishu_platform import BOT_OPEN_ID, FakeFeishu

# The builders need no running server.
fake = FakeFeishu()


def parse(payload: dict[str, Any], bot: str | None = BOT_OPEN_ID) -> IncomingMessage:
    event = parse_event(json.dumps(payload).encode(), bot_open_id=bot)
    assert isinstance(event, IncomingMessage)
    return event


def test_p2p_text_message() -> None:
    payload = fake.text_event("hello", message_id="om_1", event_id="ev_1", create_time_ms=1700)
    msg = parse(payload)
    assert msg == IncomingMessage(
        event_id="ev_1",
        message_id="om_1",
        chat_id="oc_p2pchat",
        chat_type="p2p",
        sender_open_id="ou_owner000000000000000000000000",
        sender_type="user",
        message_type="text",
        text="hello",
        mentions_bot=False,
        create_time_ms=1700,
    )


@pytest.mark.parametrize(
    ("text", "mentions", "expected_text", "mentions_bot"),
    [
        ("@_user_1 what time is it", [fake.bot_mention()], "what time is it", True),
        ("hi @_user_1 there", [fake.bot_mention()], "hi there", True),
        (
            "@_user_1 ask @_user_2 about it",
            [fake.bot_mention(), FakeFeishu.user_mention("ou_x", "Alice")],
            "ask @Alice about it",
            True,
        ),
        ("@_user_2 hi", [FakeFeishu.user_mention("ou_x", "Alice")], "@Alice hi", False),
        ("@_all meeting now", [], "@all meeting now", False),
        (
            "@_all",
            [{"key": "@_all", "id": {"open_id": ""}, "name": "所有人", "mentioned_type": "bot"}],
            "@all",
            False,
        ),
        # @_user_1 must not clobber @_user_10.
        (
            "@_user_10 and @_user_1",
            [fake.bot_mention("@_user_1"), FakeFeishu.user_mention("ou_y", "Bob", "@_user_10")],
            "@Bob and",
            True,
        ),
    ],
)
def test_group_mentions(
    text: str, mentions: list[dict[str, Any]], expected_text: str, mentions_bot: bool
) -> None:
    msg = parse(fake.text_event(text, chat_type="group", chat_id="oc_g", mentions=mentions))
    assert msg.is_group
    assert msg.text == expected_text
    assert msg.mentions_bot is mentions_bot


def test_unknown_bot_identity_falls_back_to_the_mention_type() -> None:
    payload = fake.text_event("@_user_1 hi", chat_type="group", mentions=[fake.bot_mention()])
    assert parse(payload, bot=None).mentions_bot is True
    other_user = fake.text_event(
        "@_user_2 hi", chat_type="group", mentions=[FakeFeishu.user_mention("ou_x", "A")]
    )
    assert parse(other_user, bot=None).mentions_bot is False


def test_unknown_chat_type_is_treated_as_a_group() -> None:
    assert parse(fake.text_event("x", chat_type="topic_group")).chat_type == "group"


@pytest.mark.parametrize(
    ("post", "expected_text", "attachments"),
    [
        (
            {
                "title": "Plan",
                "content": [
                    [{"tag": "at", "user_id": "@_user_1"}, {"tag": "text", "text": " look at "}],
                    [{"tag": "a", "href": "https://x.y", "text": "this"}],
                    [{"tag": "img", "image_key": "img_1"}],
                    [{"tag": "code_block", "language": "PYTHON", "text": "x = 1"}],
                ],
            },
            "Plan\nlook at\n[this](https://x.y)\n\n```python\nx = 1\n```",
            (Attachment("image", "img_1"),),
        ),
        (
            {"zh_cn": {"title": "", "content": [[{"tag": "text", "text": "你好"}]]}},
            "你好",
            (),
        ),
    ],
)
def test_post_messages(
    post: dict[str, Any], expected_text: str, attachments: tuple[Attachment, ...]
) -> None:
    payload = fake.message_event(post, message_type="post", mentions=[fake.bot_mention()])
    msg = parse(payload)
    assert msg.text == expected_text
    assert msg.attachments == attachments


@pytest.mark.parametrize(
    ("message_type", "content", "attachments"),
    [
        ("image", {"image_key": "img_v3_1"}, (Attachment("image", "img_v3_1"),)),
        (
            "file",
            {"file_key": "file_v3_1", "file_name": "a.pdf"},
            (Attachment("file", "file_v3_1", "a.pdf"),),
        ),
        ("audio", {"file_key": "file_v3_2", "duration": 3}, ()),
        ("sticker", {"file_key": "x"}, ()),
    ],
)
def test_media_messages(
    message_type: str, content: dict[str, Any], attachments: tuple[Attachment, ...]
) -> None:
    msg = parse(fake.message_event(content, message_type=message_type))
    assert msg.text == ""
    assert msg.attachments == attachments
    assert msg.message_type == message_type


def test_bot_senders_are_marked() -> None:
    assert parse(fake.text_event("x", sender_type="app")).from_user is False


@pytest.mark.parametrize(
    "payload",
    [
        {"schema": "2.0", "header": {"event_type": "im.message.message_read_v1", "event_id": "e"}},
        {"schema": "2.0", "header": {"event_type": "im.chat.member.bot.added_v1"}},
        {"uuid": "x", "event": {"type": "message"}},  # schema 1.0
    ],
)
def test_other_event_types_are_recognised_not_parsed(payload: dict[str, Any]) -> None:
    assert isinstance(parse_event(json.dumps(payload), bot_open_id=None), OtherEvent)


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1, 2]",
        json.dumps(
            {"schema": "2.0", "header": {"event_type": "im.message.receive_v1"}, "event": {}}
        ).encode(),
        json.dumps(
            fake.message_event({"text": "x"}) | {"event": {"message": {"message_id": "om"}}}
        ).encode(),
    ],
)
def test_malformed_payloads_raise(raw: bytes) -> None:
    with pytest.raises(EventParseError):
        parse_event(raw, bot_open_id=None)


def test_content_that_is_not_json_reads_as_an_empty_message() -> None:
    payload = fake.text_event("x")
    payload["event"]["message"]["content"] = "{broken"
    event = parse(payload)
    assert event.text == "" and event.attachments == ()  # the sender gets a line, not silence


def test_lone_surrogates_become_replacement_characters_and_pairs_join() -> None:
    payload = fake.text_event("placeholder")
    raw = json.dumps(payload).replace("placeholder", "a\\ud800b \\ud83d\\ude00 c")
    event = parse_event(raw.encode(), bot_open_id=None)
    assert isinstance(event, IncomingMessage)
    assert event.text == "a\ufffdb \U0001f600 c"
    event.text.encode("utf-8")  # what every writer downstream does


def test_bytes_that_are_not_utf8_are_read_with_replacement_characters() -> None:
    raw = json.dumps(fake.text_event("café"), ensure_ascii=False).encode("utf-8")
    raw = raw.replace("café".encode(), b"caf\xe9")
    event = parse_event(raw, bot_open_id=None)
    assert isinstance(event, IncomingMessage)
    assert event.text == "caf\ufffd"


def test_unknown_message_types_parse_without_text() -> None:
    event = parse(fake.message_event({"whatever": 1}, message_type="hologram"))
    assert event.message_type == "hologram" and event.text == ""


def test_a_recall_event_names_the_message() -> None:
    event = parse_event(json.dumps(fake.recall_event("om_9", chat_id="oc_1")), bot_open_id=None)
    assert isinstance(event, Recalled)
    assert (event.message_id, event.chat_id) == ("om_9", "oc_1")


def test_a_message_survives_the_trip_through_the_state() -> None:
    event = parse(fake.post_event("t", [[{"tag": "img", "image_key": "img_1"}]]))
    assert message_from_json(message_to_json(event)) == event
