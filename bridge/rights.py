"""Who may stop a turn or clear a conversation (pure).

In a direct chat the sender is the only person there: every command acts. In a group:

* `/stop` stops the running turn if the sender started it;
* `/clear`, `/new` and `/compact` act if the conversation is the sender's own;
* the assistant's owners (the paired owner, or the users named in `FEISHU_ALLOWED_USERS`) and the
  group's owner and managers may do either;
* approving or denying a tool call the policy marks "ask" (a card button): only the assistant's
  owners and the group's owner and managers, never the member who asked (a request must not
  approve its own tools).

A member's own conversation in a group (bridge/scopes.py) comes with that member as
`conversation_of`; a shared one (a topic, or a group set to `shared`) belongs to no single member,
so only owners and managers clear it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

Action = Literal["stop", "clear", "compact", "approve"]


@dataclass(frozen=True, slots=True)
class Allowed:
    pass


@dataclass(frozen=True, slots=True)
class Denied:
    reason: str  # a short reply saying who may


Right = Allowed | Denied

STOP_REFUSAL = (
    "Only the person who asked, the group's owner or admins, or this assistant's owner can "
    "stop this answer."
)
APPROVE_REFUSAL = (
    "Only the group's owner or admins, or this assistant's owner, can approve or deny this."
)
_CLEAR_REFUSAL = (
    "Only the group's owner or admins, or this assistant's owner, can {what} this group's "
    "conversation."
)


def command_right(
    action: Action,
    *,
    sender: str,
    in_group: bool,
    started_by: str | None,
    conversation_of: str | None,
    owners: Collection[str],
    chat_admins: Collection[str],
) -> Right:
    """Whether `sender` may do `action` now.

    `started_by`: who sent the running turn (None when nothing runs); `conversation_of`: the
    member whose conversation it is (None while the group shares one); `owners`: the
    assistant's owners; `chat_admins`: the group's owner and managers, as far as known.
    """
    if not in_group or not sender:
        return Allowed()
    if sender in owners or sender in chat_admins:
        return Allowed()
    match action:
        case "stop":
            if started_by is None or started_by == sender:
                return Allowed()  # nothing to stop, or their own turn
            return Denied(STOP_REFUSAL)
        case "approve":
            return Denied(APPROVE_REFUSAL)
        case "clear" | "compact":
            if conversation_of is not None and conversation_of == sender:
                return Allowed()
            return Denied(_CLEAR_REFUSAL.format(what=action))
