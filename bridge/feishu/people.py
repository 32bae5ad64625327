"""Who is who for the bridge: the paired owner and pairing, who may use the bot
(bridge/access.py decides), the assistant's owners, a group's owner and managers, and members'
display names (both cached, asked of Feishu)."""

from __future__ import annotations

import logging
import secrets
import time

from bridge.access import Granted, Refused, Unpaired, check_access
from bridge.events import IncomingMessage
from bridge.feishu.context import BridgeContext
from bridge.sender import FeishuAPIError
from bridge.strings import t
from bridge.whose import memory_owner, reader_of
from memory.model import Reader

logger = logging.getLogger("bridge.feishu")

PAIR_ATTEMPTS = 5
NAMES_TTL_SECONDS = 3600.0  # how long a member's display name is reused
CHAT_ADMINS_TTL_SECONDS = 300.0  # how long a group's owner and managers are trusted as read


class People:
    """The owner, pairing, access, owners and admins, names."""

    def __init__(self, ctx: BridgeContext) -> None:
        self._ctx = ctx
        self.owner: str | None = None  # read at start, cached: read on every message
        self.pairing_code: str | None = None
        self._pair_failures = 0
        # open_id -> (valid until, display name, whether Feishu said it)
        self._names: dict[str, tuple[float, str, bool]] = {}
        self._chat_admins: dict[str, tuple[float, frozenset[str]]] = {}

    async def load_owner(self) -> None:
        ctx = self._ctx
        self.owner = await ctx.db(ctx.state.owner)

    # --- access ----------------------------------------------------------------------------------
    async def access(self, msg: IncomingMessage) -> Granted | Refused | Unpaired:
        if self.owner is None:  # another instance on the shared database may have paired
            await self.load_owner()
        return self.check(msg.sender_open_id, msg.chat_id)

    def check(self, open_id: str, chat_id: str) -> Granted | Refused | Unpaired:
        """May `open_id` use the bot in `chat_id` (the owner as last read)?"""
        settings = self._ctx.settings
        return check_access(
            open_id,
            chat_id,
            allowed_users=settings.feishu_allowed_users,
            allowed_chats=settings.feishu_allowed_chats,
            owner=self.owner,
        )

    def memory_owner(self) -> str | None:
        """The machine owner, whose memory Claude Code and Codex share (bridge/whose.py)."""
        return memory_owner(
            paired=self.owner, allowed_users=self._ctx.settings.feishu_allowed_users
        )

    def reader(self, msg: IncomingMessage) -> Reader:
        """Whose memory `msg` reads and saves to (bridge/whose.py)."""
        return reader_of(
            sender=msg.sender_open_id,
            chat_id=msg.chat_id,
            in_group=msg.is_group,
            owner=self.memory_owner(),
        )

    def owners(self) -> frozenset[str]:
        """The assistant's owners: the users named in FEISHU_ALLOWED_USERS, else the paired one."""
        if self._ctx.settings.feishu_allowed_users:
            return frozenset(self._ctx.settings.feishu_allowed_users)
        return frozenset({self.owner}) if self.owner else frozenset()

    async def group_admins(self, chat_id: str) -> frozenset[str]:
        """The group's owner and managers, cached; none when Feishu will not say (fail closed)."""
        now = time.monotonic()
        known = self._chat_admins.get(chat_id)
        if known is not None and known[0] > now:
            return known[1]
        try:
            admins = await self._ctx.api.chat_admins(chat_id)
        except FeishuAPIError as exc:
            logger.warning(
                "could not read the owner of group %s (%s); grant the app im:chat:readonly "
                "so group owners and admins may /stop and /clear",
                chat_id,
                exc.message,
            )
            admins = frozenset()
        self._chat_admins[chat_id] = (now + CHAT_ADMINS_TTL_SECONDS, admins)
        return admins

    async def elevated(self, msg: IncomingMessage) -> bool:
        """The sender is one of the assistant's owners or the group's owner or admins."""
        sender = msg.sender_open_id
        return sender in self.owners() or sender in await self.group_admins(msg.chat_id)

    # --- pairing ---------------------------------------------------------------------------------
    def paired(self) -> bool:
        settings = self._ctx.settings
        return bool(settings.feishu_allowed_users or settings.feishu_allowed_chats or self.owner)

    def announce_pairing(self, *, force: bool = False) -> None:
        if self.paired() or (self.pairing_code is not None and not force):
            return
        self.pairing_code = f"{secrets.randbelow(10**8):08d}"
        self._pair_failures = 0
        logger.warning(
            "Feishu bridge is not paired. From your Feishu account, send the bot: /pair %s",
            self.pairing_code,
        )

    async def pair(self, msg: IncomingMessage, code: str) -> str:
        """`/pair <code>`: the answer's text."""
        ctx = self._ctx
        settings = ctx.settings
        lang = msg.locale
        if settings.feishu_allowed_users or settings.feishu_allowed_chats:
            return t("pair_off", lang)
        owner = self.owner
        if owner is not None:
            return t("pair_already" if owner == msg.sender_open_id else "refusal", lang)
        if self.pairing_code is None or not code:
            return t("pair_usage", lang)
        if not secrets.compare_digest(code, self.pairing_code):
            self._pair_failures += 1
            if self._pair_failures >= PAIR_ATTEMPTS:
                logger.warning("too many wrong pairing codes; issuing a new one")
                self.announce_pairing(force=True)
            return t("pair_wrong", lang)
        if not await ctx.db(ctx.state.set_owner, msg.sender_open_id):
            await self.load_owner()
            return t("refusal", lang)
        self.owner = msg.sender_open_id
        self.pairing_code = None
        logger.warning("Feishu bridge paired: owner is %s", msg.sender_open_id)
        return t("paired", lang)

    # --- names -----------------------------------------------------------------------------------
    def name_if_known(self, open_id: str) -> str | None:
        """A member's name if it was read from Feishu (kept past its reuse time), else None."""
        known = self._names.get(open_id)
        return known[1] if known is not None and known[2] else None

    def known_name(self, open_id: str) -> str:
        """A member's name if already read, else the end of their open_id (never waits)."""
        known = self._names.get(open_id)
        return known[1] if known is not None else f"…{open_id[-6:]}"

    async def display_name(self, open_id: str) -> str:
        """A member's Feishu name, cached; the end of their open_id when Feishu will not say."""
        now = time.monotonic()
        known = self._names.get(open_id)
        if known is not None and known[0] > now:
            return known[1]
        name = await self._ctx.api.user_name(open_id) if open_id else None
        # A name is the member's own text: one short line, no brackets to fake another speaker.
        shown = " ".join((name or f"member …{open_id[-6:]}").split())[:40]
        shown = shown.replace("[", "(").replace("]", ")")
        self._names[open_id] = (now + NAMES_TTL_SECONDS, shown, name is not None)
        return shown
