"""Who may stop a turn or clear a conversation (pure).

In a direct chat the sender is the only person there: every command acts. In a group:

* `/stop` stops the running turn if the sender started it;
* `/clear`, `/new` and `/compact` act if the conversation is the sender's own;
* the assistant's owners (the paired owner, or the users named in `FEISHU_ALLOWED_USERS`) and the
  group's owner and managers may do either;
* approving or denying a tool call the policy marks "ask" (a card button): the assistant's
  owners, the group's owner and managers, and the group's approvers (`/approvers`, set by an
  owner); an approver never for the tools of their own request (a request must not approve its
  own tools). Revoking an "always allow here" rule (`/revoke`) takes the same right, without
  approvers;
* setting the group's approvers (`/approvers add|remove`): only the assistant's owners;
* `/resume` and `/model` change a conversation like `/clear` does: the same rule;
* `/forget` deletes notes: anyone, of the notes that are theirs (bridge/whose.py
  `forgettable`: their own, and the group's team notes for those who may save them); a tap on
  a `/forget` card (the asker's notes): only the member who asked;
* saving to a group's team memory (`/team-remember`): only in a group, and only the
  assistant's owners and the group's owner and managers;
* keeping or discarding a low-confidence capture ("记住这个吗？"): the member who said it, or
  the assistant's owners and the group's owner and managers.

A member's own conversation in a group (bridge/scopes.py) comes with that member as
`conversation_of`; a shared one (a topic, or a group set to `shared`) belongs to no single member,
so only owners and managers clear it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

Action = Literal[
    "stop", "clear", "compact", "approve", "resume", "model", "forget", "keep", "approvers", "team"
]


@dataclass(frozen=True, slots=True)
class Allowed:
    pass


@dataclass(frozen=True, slots=True)
class Denied:
    reason: str  # the key of a short reply saying who may (bridge/strings.py)


Right = Allowed | Denied


def command_right(
    action: Action,
    *,
    sender: str,
    in_group: bool,
    started_by: str | None,
    conversation_of: str | None,
    owners: Collection[str],
    chat_admins: Collection[str],
    approvers: Collection[str] = (),
) -> Right:
    """Whether `sender` may do `action` now.

    `started_by`: who sent the running turn (None when nothing runs); `conversation_of`: the
    member whose conversation it is (None while the group shares one); `owners`: the
    assistant's owners; `chat_admins`: the group's owner and managers, as far as known;
    `approvers`: the members an owner named to approve tool calls in this group.
    """
    if action == "approvers":  # who approves in a group is the assistant owners' choice
        return Allowed() if sender in owners else Denied("approvers_refused")
    if action == "forget":  # a /forget card lists the asker's own notes: theirs to delete
        return Allowed() if not in_group or started_by == sender else Denied("forget_refused")
    if action == "team":  # a group's memory, kept on purpose by those who run the group
        if not in_group:
            return Denied("team_only_in_groups")
        if sender and (sender in owners or sender in chat_admins):
            return Allowed()
        return Denied("team_refused")
    if not in_group or not sender:
        return Allowed()
    if sender in owners or sender in chat_admins:
        return Allowed()
    match action:
        case "stop":
            if started_by is None or started_by == sender:
                return Allowed()  # nothing to stop, or their own turn
            return Denied("stop_refused")
        case "approve":
            if sender in approvers and sender != started_by:
                return Allowed()
            return Denied("approve_refused")
        case "keep":
            # `started_by`: the member whose words the capture came from
            return Allowed() if started_by == sender else Denied("keep_refused")
        case "clear" | "compact" | "resume" | "model":
            if conversation_of is not None and conversation_of == sender:
                return Allowed()
            return Denied(f"{action}_refused")
