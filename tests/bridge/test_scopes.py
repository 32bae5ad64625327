"""Which conversation a Feishu message belongs to: direct chats, group members, topics."""

from __future__ import annotations

import pytest

from bridge.scopes import GroupMode, Scope, scope_of


@pytest.mark.parametrize(
    ("in_group", "sender", "thread", "mode", "expected"),
    [
        # a direct chat: one conversation, keyed as before (existing ids carry on)
        (False, "ou_a", None, "auto", Scope("oc_1", "ou_a", None)),
        (False, "ou_a", "omt_9", "auto", Scope("oc_1", "ou_a", None)),
        # a group: each member their own conversation
        (True, "ou_a", None, "auto", Scope("oc_1:ou_a", "ou_a", None)),
        (True, "ou_b", None, "auto", Scope("oc_1:ou_b", "ou_b", None)),
        # a topic: one conversation for the topic, replies go into it
        (True, "ou_a", "omt_9", "auto", Scope("oc_1:omt_9", None, "omt_9")),
        (True, "ou_b", "omt_9", "auto", Scope("oc_1:omt_9", None, "omt_9")),
        # per_user: members apart even inside a topic (still answered in the topic)
        (True, "ou_a", "omt_9", "per_user", Scope("oc_1:ou_a", "ou_a", "omt_9")),
        # shared: the whole group in one conversation, as before
        (True, "ou_a", None, "shared", Scope("oc_1", None, None)),
        (True, "ou_a", "omt_9", "shared", Scope("oc_1", None, "omt_9")),
        # no sender id: the shared conversation rather than a key of nobody
        (True, "", None, "auto", Scope("oc_1", None, None)),
    ],
)
def test_scope_table(
    in_group: bool, sender: str, thread: str | None, mode: GroupMode, expected: Scope
) -> None:
    got = scope_of(chat_id="oc_1", in_group=in_group, sender=sender, thread_id=thread, mode=mode)
    assert got == expected
    assert "/" not in got.key  # part of a conversation id, which appears in URLs
