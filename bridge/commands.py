"""Bridge commands (pure parsing): `/clear /new /compact /stop /status /help /pair`, memory
(`/remember /team-remember /forget /recall`, `/memory` an alias of `/recall`), and conversations
(`/model /sessions /resume`), and approvals (`/approvers /allowed /revoke`). The help text is
`help` in bridge/strings.py.

Commands are handled by the bridge and never reach the model as text. `ordered` commands wait
their turn in the chat's queue (they act on the conversation after the messages before them);
the others are answered at once, even while a turn runs (`/stop` must, to be useful).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

# A command is a slash (ASCII or full-width, as Chinese keyboards type it) and a word (words
# joined by "-": `/team-remember`), alone or followed by whitespace: "/usr/bin" or "/tmp/x" are
# ordinary text for the model.
_COMMAND = re.compile(r"^[/／]([A-Za-z]+(?:-[A-Za-z]+)*)(?:\s+(.*))?$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Clear:
    """/clear or /new: start a fresh conversation in this chat."""

    name: str = "clear"
    ordered: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class Compact:
    ordered: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class Stop:
    ordered: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class Status:
    ordered: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class MemorySearch:
    """/recall or /memory: the top notes for a query."""

    query: str
    ordered: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class Remember:
    """/remember <text>: save a note from the chat."""

    text: str
    ordered: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class TeamRemember:
    """/team-remember <text> (or /team): save a note to this group's team memory, used in
    every member's turns here (the group's owner or admins, or the assistant's owners)."""

    text: str
    ordered: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class Forget:
    """/forget <note id or query>: by id at once; by query a confirm card lists the matches."""

    target: str
    ordered: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class Model:
    """/model [name|default]: show or choose this conversation's model."""

    name: str
    ordered: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class Sessions:
    """/sessions: this chat's conversations, numbered."""

    ordered: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class Resume:
    """/resume <n>: go back to conversation n of this chat (`None`: not a number)."""

    number: int | None
    ordered: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class Approvers:
    """/approvers [add|remove @member …]: list, or change, who approves tool calls here."""

    change: str  # "" (list), "add" or "remove"
    ordered: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class AllowedRules:
    """/allowed: the "always allow here" rules of this chat, numbered."""

    ordered: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class Revoke:
    """/revoke <n>: drop rule n of `/allowed` (`None`: not a number)."""

    number: int | None
    ordered: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class Help:
    ordered: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class Pair:
    code: str
    ordered: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class Unknown:
    name: str
    ordered: ClassVar[bool] = False


Command = (
    Clear
    | Compact
    | Stop
    | Status
    | MemorySearch
    | Remember
    | TeamRemember
    | Forget
    | Model
    | Sessions
    | Resume
    | Approvers
    | AllowedRules
    | Revoke
    | Help
    | Pair
    | Unknown
)


def parse_command(text: str) -> Command | None:
    """The command in a message, or None when the message is for the model."""
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    name = match.group(1).lower()
    arg = (match.group(2) or "").strip()
    match name:
        case "clear" | "new" | "reset":
            return Clear(name)
        case "compact":
            return Compact()
        case "stop" | "cancel":
            return Stop()
        case "status":
            return Status()
        case "recall" | "memory" | "mem":
            return MemorySearch(arg)
        case "remember":
            return Remember(arg)
        case "team-remember" | "teamremember" | "team":
            return TeamRemember(arg)
        case "forget":
            return Forget(arg)
        case "model":
            return Model(arg)
        case "sessions" | "history":
            return Sessions()
        case "resume":
            number = arg.isascii() and arg.isdigit() and len(arg) <= 6
            return Resume(int(arg) if number else None)
        case "approvers":
            change = arg.split()[0].lower() if arg else ""
            return Approvers(change if change in ("add", "remove") else "" if not arg else "?")
        case "allowed":
            return AllowedRules()
        case "revoke":
            number = arg.isascii() and arg.isdigit() and len(arg) <= 6
            return Revoke(int(arg) if number else None)
        case "help" | "start":
            return Help()
        case "pair":
            return Pair("".join(arg.split()))  # "1234 5678" and "12345678" alike
        case _:
            return Unknown(name)
