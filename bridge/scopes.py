"""Which conversation a Feishu message belongs to (pure).

A direct chat is one conversation. In a group, by default (`FEISHU_GROUP_CONVERSATIONS=auto`):

* a message in a topic (a topic group, or a reply in a thread: the event carries `thread_id`)
  belongs to that topic's conversation, shared by everyone who writes in the topic;
* any other group message belongs to its sender's own conversation in that group, so members
  neither queue behind each other nor see each other's requests merged.

`per_user` gives every member their own conversation even inside topics; `shared` keeps the
old behaviour, one conversation for the whole group. The scope is a string without `/` (it
becomes part of a conversation id, which appears in URLs): `<chat>`, `<chat>:<open_id>` or
`<chat>:<thread_id>`. A direct chat's scope is its chat id alone, as it always was, so existing
conversations carry on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GroupMode = Literal["auto", "per_user", "shared"]


@dataclass(frozen=True, slots=True)
class Scope:
    key: str
    """The conversation's scope key (the id's middle part: `feishu:<key>:v<generation>`)."""
    member: str | None
    """The member whose own conversation it is (None: shared by a chat or a topic)."""
    thread_id: str | None
    """The topic the conversation lives in; replies go into it."""


def scope_of(
    *,
    chat_id: str,
    in_group: bool,
    sender: str,
    thread_id: str | None,
    mode: GroupMode,
) -> Scope:
    """The conversation scope of one message."""
    if not in_group:
        return Scope(chat_id, sender or None, None)
    if mode == "shared":
        return Scope(chat_id, None, thread_id)
    if thread_id and mode == "auto":
        return Scope(f"{chat_id}:{thread_id}", None, thread_id)
    if not sender:  # no sender id to key on: the group's shared conversation
        return Scope(chat_id, None, thread_id)
    return Scope(f"{chat_id}:{sender}", sender, thread_id)
