"""Bridge commands: `/clear /new /compact /stop /status /memory /help /pair` (pure parsing).

Commands are handled by the bridge and never reach the model as text. `ordered` commands wait
their turn in the chat's queue (they act on the conversation after the messages before them);
the others are answered at once, even while a turn runs (`/stop` must, to be useful).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

# A command is a slash (ASCII or full-width, as Chinese keyboards type it) and a word, alone or
# followed by whitespace: "/usr/bin" or "/tmp/x" are ordinary text for the model.
_COMMAND = re.compile(r"^[/／]([A-Za-z]+)(?:\s+(.*))?$", re.DOTALL)


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
    query: str
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


Command = Clear | Compact | Stop | Status | MemorySearch | Help | Pair | Unknown

HELP_TEXT = """\
**Commands**
- `/clear` or `/new`: start a fresh conversation (the old one is closed and summarised)
- `/compact`: compact the current session so it uses less context
- `/stop`: stop the answer that is running
- `/status`: conversation, session, turns, cost, running or idle
- `/memory <query>`: search the long-term memory
- `/help`: this list

Anything else goes to the agent. In group chats, @-mention the bot."""


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
        case "memory" | "mem":
            return MemorySearch(arg)
        case "help" | "start":
            return Help()
        case "pair":
            return Pair("".join(arg.split()))  # "1234 5678" and "12345678" alike
        case _:
            return Unknown(name)
