"""What every piece of the bridge shares: the settings, the sessions, the bridge's state, the
sender once connected, the app loop; state calls on their lane; a message's conversation scope
and id; the messages recalled. Plain data and three small lookups, no feature."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from agent.sessions import SessionManager
from bridge._lark import WsRunner
from bridge.events import IncomingMessage
from bridge.scopes import Scope, scope_of
from bridge.sender import Sender
from bridge.state import BridgeStateBackend
from settings import Settings

logger = logging.getLogger("bridge.feishu")
_T = TypeVar("_T")

RECALLED_KEPT = 1000  # recalled message ids remembered (a recall may come before its message)


class BridgeContext:
    """The bridge's shared runtime. `sender`, `loop` and `runner` are set by `start()`."""

    def __init__(
        self, settings: Settings, sessions: SessionManager, state: BridgeStateBackend
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.state = state
        self.sender: Sender | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.runner: WsRunner | None = None
        self.instance = ""  # this instance's id in a shared state (bridge.feishu.bridge)
        self.started_at = 0.0
        self.closing = False
        self._recalled: OrderedDict[str, None] = OrderedDict()
        # messages told every turn slot is taken, until their turn starts (the next one told
        # hears how many are ahead)
        self.slot_waiting: set[str] = set()

    @property
    def api(self) -> Sender:
        """The sender, once `start()` made it."""
        assert self.sender is not None
        return self.sender

    def task(self, coro: Coroutine[Any, Any, _T], name: str) -> asyncio.Task[_T]:
        """A task on the app loop, owned by the piece that keeps it."""
        assert self.loop is not None
        return self.loop.create_task(coro, name=name)

    async def db(self, fn: Callable[..., _T], *args: Any) -> _T:
        """A call on the bridge's or the conversations' state, on the state lane's threads
        (storage/lanes.py): SQLite may wait for a lock and PostgreSQL is a round trip, and
        neither may hold up the loop that streams every chat's answer, nor other kinds of
        blocking calls."""
        result: _T = await self.sessions.run_state(fn, *args)
        return result

    def scope(self, msg: IncomingMessage) -> Scope:
        """The conversation `msg` belongs to (bridge/scopes.py); topics get their replies."""
        if msg.thread_id and self.sender is not None:
            self.sender.in_topic(msg.message_id)
        return scope_of(
            chat_id=msg.chat_id,
            in_group=msg.is_group,
            sender=msg.sender_open_id,
            thread_id=msg.thread_id,
            mode=self.settings.feishu_group_conversations,
        )

    async def conversation_id(self, scope_key: str) -> str:
        """`feishu:<scope>:v<generation>`; /clear starts the scope's next generation."""
        return f"feishu:{scope_key}:v{await self.db(self.state.generation, scope_key)}"

    def recalled(self, message_id: str) -> bool:
        """The user recalled this message (queued work skips it, a running turn ends)."""
        return message_id in self._recalled

    def mark_recalled(self, message_id: str) -> None:
        self._recalled[message_id] = None
        while len(self._recalled) > RECALLED_KEPT:
            self._recalled.popitem(last=False)
