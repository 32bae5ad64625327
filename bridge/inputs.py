"""Richer input (pure): which message a reply quotes, and what a quoted or forwarded message
says, from the items "获取指定消息的内容" returns (GET /open-apis/im/v1/messages/:message_id,
server-docs/im-v1/message/get).

* **Quotes.** "消息管理概述" (server-docs/im-v1/message/intro): a reply carries `root_id` and
  `parent_id`; inside a topic every message "replies" to the topic's root, so there `parent_id
  == root_id` says nothing. The quoted message is `parent_id` when there is one and either the
  message is not in a topic (no `thread_id`) or `parent_id` differs from the root.
* **Forwards.** A `merge_forward` message's own content is a fixed line; GET on it returns the
  message and every forwarded child (nested forwards too) in one flat `items` list, each child
  naming its enclosing forward in `upper_message_id` ("接收消息内容结构",
  server-docs/im-v1/message-content-description/message_content). The tree is rebuilt here,
  sorted by `create_time`, and capped: a huge forward must not become a huge prompt.
* **Cards.** GET does not return a JSON 2.0 card's content, so a quoted bot answer cannot be read
  back: the model is told so in one line.

Everything read here is other people's text: it goes to the model labelled as quoted or
forwarded, cut to size, never as the user's own words.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.events import RawMention, content_text

QUOTE_CHARS = 2000  # a quoted message, at most
FORWARD_MESSAGES = 50  # forwarded messages shown, nested ones included
FORWARD_LINE_CHARS = 500  # one forwarded message, at most
FORWARD_CHARS = 8000  # all forwarded text together, at most
_PLACEHOLDERS = {
    "image": "[图片 image]",
    "file": "[文件 file]",
    "audio": "[语音 voice]",
    "media": "[视频 video]",
    "sticker": "[表情 sticker]",
    "interactive": "[卡片 card]",
    "merge_forward": "[转发的聊天记录 forwarded chat]",
    "recalled": "[已撤回 recalled]",
}


def quoted_id(*, parent_id: str | None, root_id: str | None, thread_id: str | None) -> str | None:
    """The message a reply quotes, or None (not a reply, or only "in" its topic)."""
    if not parent_id:
        return None
    if thread_id and parent_id == root_id:
        return None
    return parent_id


@dataclass(frozen=True, slots=True)
class ItemText:
    """What one message item says: `text`, or None when it cannot be read (`why`)."""

    text: str | None
    sender: str  # open_id of a user, or "" for an app (a bot)
    is_app: bool
    why: str = ""


def item_text(item: Mapping[str, Any]) -> ItemText:
    """The text of one GET item: text and posts as text, other kinds as a placeholder; a card
    or a recalled message as unreadable."""
    sender = item.get("sender") if isinstance(item.get("sender"), dict) else {}
    assert isinstance(sender, dict)
    is_app = sender.get("sender_type") == "app" or sender.get("id_type") == "app_id"
    who = "" if is_app else str(sender.get("id") or "")
    msg_type = str(item.get("msg_type") or "")
    if item.get("deleted"):
        return ItemText(None, who, is_app, "recalled")
    if msg_type == "interactive":
        return ItemText(None, who, is_app, "card")
    body = item.get("body") if isinstance(item.get("body"), dict) else {}
    assert isinstance(body, dict)
    raw = body.get("content")
    try:
        content = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        content = {}
    if msg_type in ("text", "post") and isinstance(content, dict):
        text = content_text(msg_type, content, _mentions(item.get("mentions")))
        return ItemText(text, who, is_app)
    return ItemText(_PLACEHOLDERS.get(msg_type, f"[{msg_type or 'message'}]"), who, is_app)


def _mentions(raw: Any) -> list[RawMention]:
    """GET's mentions (`id` a string, `id_type`) in the event's shape (`id.open_id`)."""
    found: list[RawMention] = []
    for m in raw if isinstance(raw, list) else []:
        if isinstance(m, dict):
            found.append(
                {
                    "key": str(m.get("key") or ""),
                    "id": {"open_id": str(m.get("id") or "")},
                    "name": str(m.get("name") or ""),
                }
            )
    return found


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Forward:
    """A forward's lines (`depth` for nesting, the speaker's id or "" for a bot, the text) and
    how many messages were left out by the caps."""

    lines: tuple[tuple[int, ItemText], ...]
    total: int
    left_out: int


def forward_tree(items: Sequence[Mapping[str, Any]], root_id: str) -> Forward:
    """The forwarded messages under `root_id`, depth first, oldest first at each level, within
    FORWARD_MESSAGES and FORWARD_CHARS. Items that name no known parent are dropped (they are
    not part of this forward), and a cycle cannot loop."""
    children: dict[str, list[Mapping[str, Any]]] = {}
    for item in items:
        upper = str(item.get("upper_message_id") or "")
        if upper and str(item.get("message_id") or "") != root_id:
            children.setdefault(upper, []).append(item)
    for kids in children.values():
        kids.sort(key=lambda i: _int(i.get("create_time")))
    lines: list[tuple[int, ItemText]] = []
    seen: set[str] = {root_id}
    total = 0
    used = 0
    stack: list[tuple[int, Mapping[str, Any]]] = [
        (0, k) for k in reversed(children.get(root_id, []))
    ]
    while stack:
        depth, item = stack.pop()
        ident = str(item.get("message_id") or "")
        if ident in seen:
            continue
        seen.add(ident)
        total += 1
        said = item_text(item)
        shown = said.text
        if shown is None:  # a card or a recalled message: say which, in place
            kind = "recalled" if said.why == "recalled" else str(item.get("msg_type") or "")
            shown = _PLACEHOLDERS.get(kind, f"[{kind}]")
        text = clip(" ".join(shown.split()), FORWARD_LINE_CHARS)
        if len(lines) < FORWARD_MESSAGES and used + len(text) <= FORWARD_CHARS:
            lines.append((depth, ItemText(text, said.sender, said.is_app, said.why)))
            used += len(text)
        stack.extend((depth + 1, k) for k in reversed(children.get(ident, [])))
    return Forward(tuple(lines), total, total - len(lines))


def forward_markdown(
    forward: Forward, name_of: Callable[[ItemText], str], more: Callable[[int], str]
) -> str:
    """The forward as lines `- Name: text`, nested forwards indented; `more(n)` ends it when
    messages were left out."""
    out = [f"{'  ' * depth}- {name_of(said)}: {said.text}" for depth, said in forward.lines]
    if forward.left_out:
        out.append(more(forward.left_out))
    return "\n".join(out)


def _int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0
