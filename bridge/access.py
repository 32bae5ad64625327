"""Who may reach the agent (pure).

With `FEISHU_ALLOWED_USERS` / `FEISHU_ALLOWED_CHATS` set, exactly those users (open_ids) and
the members of those chats (chat_ids) are served. With both empty the bot serves one owner: the
first user who sends `/pair <code>` with the code printed in the server log at start.
Comparisons are exact (no prefixes or substrings).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Granted:
    pass


@dataclass(frozen=True, slots=True)
class Refused:
    reason: str


@dataclass(frozen=True, slots=True)
class Unpaired:
    """No allowlist and no owner yet: only `/pair <code>` is accepted."""


Access = Granted | Refused | Unpaired


def check_access(
    sender_open_id: str,
    chat_id: str,
    *,
    allowed_users: Collection[str],
    allowed_chats: Collection[str],
    owner: str | None,
) -> Access:
    if allowed_users or allowed_chats:
        if sender_open_id in allowed_users or chat_id in allowed_chats:
            return Granted()
        return Refused("not in FEISHU_ALLOWED_USERS or FEISHU_ALLOWED_CHATS")
    if owner is None:
        return Unpaired()
    if sender_open_id and sender_open_id == owner:
        return Granted()
    return Refused("not the owner")
