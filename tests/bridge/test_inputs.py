"""Richer input, pure: which message a reply quotes, what an item says, a forward's tree."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bridge.inputs import (
    FORWARD_CHARS,
    FORWARD_MESSAGES,
    Forward,
    forward_markdown,
    forward_tree,
    item_text,
    quoted_id,
)


@pytest.mark.parametrize(
    ("parent", "root", "thread", "quoted"),
    [
        (None, None, None, None),  # not a reply
        ("om_1", "om_1", None, "om_1"),  # a quote of a top-level message in a normal chat
        ("om_2", "om_1", None, "om_2"),  # a reply to a reply
        ("om_1", "om_1", "omt_1", None),  # a topic message "replies" to its root: no quote
        ("om_2", "om_1", "omt_1", "om_2"),  # a quote inside a topic
    ],
)
def test_the_quoted_message_is_the_parent_unless_it_is_only_the_topic_root(
    parent: str | None, root: str | None, thread: str | None, quoted: str | None
) -> None:
    assert quoted_id(parent_id=parent, root_id=root, thread_id=thread) == quoted


def _item(
    ident: str,
    msg_type: str,
    content: dict[str, Any],
    *,
    upper: str | None = None,
    sender: str = "ou_a",
    at: int = 0,
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "message_id": ident,
        "msg_type": msg_type,
        "create_time": str(at),
        "chat_id": "oc_1",
        "sender": {"id": sender, "id_type": "open_id", "sender_type": "user"},
        "body": {"content": json.dumps(content)},
    }
    if upper:
        item["upper_message_id"] = upper
    return item


@pytest.mark.parametrize(
    ("item", "text", "why"),
    [
        (_item("m", "text", {"text": "hello @_user_1"}), "hello @_user_1", ""),
        (
            _item("m", "post", {"title": "T", "content": [[{"tag": "text", "text": "x"}]]}),
            "T\nx",
            "",
        ),
        (_item("m", "image", {"image_key": "k"}), "[图片 image]", ""),
        (_item("m", "audio", {"file_key": "k", "duration": 2000}), "[语音 voice]", ""),
        (_item("m", "interactive", {"elements": []}), None, "card"),
        ({**_item("m", "text", {"text": "gone"}), "deleted": True}, None, "recalled"),
        ({**_item("m", "text", {}), "body": {"content": "not json"}}, "", ""),
    ],
)
def test_an_item_reads_as_text_a_placeholder_or_unreadable(
    item: dict[str, Any], text: str | None, why: str
) -> None:
    said = item_text(item)
    assert (said.text, said.why) == (text, why)


def test_a_mention_in_a_quoted_message_reads_as_the_name() -> None:
    item = _item("m", "text", {"text": "ask @_user_1"})
    item["mentions"] = [{"key": "@_user_1", "id": "ou_b", "id_type": "open_id", "name": "Bob"}]
    assert item_text(item).text == "ask @Bob"


def test_a_forward_is_rebuilt_as_a_tree_oldest_first_with_nesting() -> None:
    items = [
        _item("root", "merge_forward", {}),
        _item("b", "text", {"text": "second"}, upper="root", at=2),
        _item("a", "text", {"text": "first"}, upper="root", at=1),
        _item("n", "merge_forward", {}, upper="root", at=3),
        _item("n1", "text", {"text": "inner"}, upper="n", at=4, sender="ou_b"),
        _item("x", "text", {"text": "elsewhere"}, upper="other", at=5),  # not this forward
    ]
    forward = forward_tree(items, "root")
    shown = [(depth, said.text) for depth, said in forward.lines]
    assert shown == [
        (0, "first"),
        (0, "second"),
        (0, "[转发的聊天记录 forwarded chat]"),
        (1, "inner"),
    ]
    assert (forward.total, forward.left_out) == (4, 0)
    markdown = forward_markdown(forward, lambda s: s.sender, lambda n: f"+{n}")
    assert markdown.splitlines()[-1] == "  - ou_b: inner"


def test_a_huge_forward_is_capped_in_messages_and_characters() -> None:
    many = [_item("root", "merge_forward", {})] + [
        _item(f"m{i}", "text", {"text": f"message {i}"}, upper="root", at=i) for i in range(5000)
    ]
    forward = forward_tree(many, "root")
    assert len(forward.lines) == FORWARD_MESSAGES
    assert forward.left_out == 5000 - FORWARD_MESSAGES
    long = [_item("root", "merge_forward", {})] + [
        _item(f"m{i}", "text", {"text": "长" * 10_000}, upper="root", at=i) for i in range(40)
    ]
    capped = forward_tree(long, "root")
    assert sum(len(s.text or "") for _, s in capped.lines) <= FORWARD_CHARS
    assert capped.left_out > 0
    assert forward_markdown(capped, lambda s: "x", lambda n: f"+{n}").endswith(
        f"+{capped.left_out}"
    )


def test_a_forward_whose_children_point_at_each_other_does_not_loop() -> None:
    items = [
        _item("a", "merge_forward", {}, upper="root"),
        _item("b", "merge_forward", {}, upper="a"),
        {**_item("a", "merge_forward", {}, upper="b")},
    ]
    forward = forward_tree(items, "root")
    assert isinstance(forward, Forward) and forward.total == 2
