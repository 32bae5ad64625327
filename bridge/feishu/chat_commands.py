"""The chat's commands (bridge/commands.py parses them): `/pair`, `/clear`, `/compact`, `/stop`,
`/status`, `/model`, `/sessions`, `/resume`, `/help`, and the memory ones handed to
`MemoryCommands`. In groups, commands that act on a turn, a conversation or the team's memory
need the right (bridge/rights.py decides; this gathers what it needs); a `/forget` reaches only
the sender's own notes (bridge/whose.py)."""

from __future__ import annotations

import functools
import logging
import re
from datetime import datetime

from bridge.commands import (
    AllowedRules,
    Approvers,
    Clear,
    Command,
    Compact,
    Forget,
    Help,
    MemorySearch,
    Model,
    Pair,
    Remember,
    Resume,
    Revoke,
    Sessions,
    Status,
    Stop,
    TeamRemember,
    Unknown,
)
from bridge.events import IncomingMessage
from bridge.feishu.context import BridgeContext
from bridge.feishu.controls import rule_label
from bridge.feishu.delivery import Delivery
from bridge.feishu.lanes import Lanes
from bridge.feishu.memory_chat import MemoryCommands
from bridge.feishu.people import People
from bridge.inputs import clip
from bridge.progress import TurnReply
from bridge.rights import Action, Denied, Right, command_right
from bridge.strings import Locale, t
from errors import ClaudeMemoryError

logger = logging.getLogger("bridge.feishu")

_MODEL_NAME = re.compile(r"[A-Za-z0-9._:\[\]-]{1,80}")

# Commands that act on a turn, a conversation or the team's memory: in groups they need the
# right (bridge/rights.py). `/forget` needs none: it reaches only the sender's own notes.
_RIGHTS_NEEDED: dict[type[Command], Action] = {
    Stop: "stop",
    Clear: "clear",
    Compact: "compact",
    Resume: "resume",
    Model: "model",
    TeamRemember: "team",
    Revoke: "approve",  # dropping a rule is an approval's right
}


class ChatCommands:
    """Answers the commands the lanes hand it."""

    def __init__(
        self,
        ctx: BridgeContext,
        people: People,
        lanes: Lanes,
        delivery: Delivery,
        memory: MemoryCommands,
    ) -> None:
        self._ctx = ctx
        self._people = people
        self._lanes = lanes
        self._delivery = delivery
        self._memory = memory

    async def run(self, msg: IncomingMessage, command: Command) -> None:
        ctx = self._ctx
        action = _RIGHTS_NEEDED.get(type(command))
        if action is not None and await self._refused(msg, action):
            return
        scope = ctx.scope(msg)
        conversation_id = await ctx.conversation_id(scope.key)
        lang = msg.locale
        notify, markdown = self._delivery.notify, self._delivery.notify_markdown
        match command:
            case Pair(code=code):
                await notify(msg, await self._people.pair(msg, code))
            case Clear():
                generation = await ctx.db(ctx.state.bump_generation, scope.key)
                await ctx.sessions.close_conversation(conversation_id, reason="cleared")
                await notify(msg, t("cleared", lang, generation=generation))
            case Compact():
                await self._compact(msg, conversation_id)
            case Stop():
                stopped = await ctx.sessions.interrupt(conversation_id)
                if not stopped and msg.is_group and await self._people.elevated(msg):
                    # The assistant's owners and the group's owner and admins may stop the
                    # group's other conversations too (members' own, topics').
                    stopped = await self._stop_group(msg.chat_id)
                await notify(msg, t("stop_done" if stopped else "stop_idle", lang))
            case Status():
                await markdown(msg, await self._status_text(msg, conversation_id))
            case MemorySearch(query=query):
                await self._memory.recall(msg, query)
            case Remember(text=text):
                await self._memory.remember(msg, text)
            case TeamRemember(text=text):
                await self._memory.team_remember(msg, text)
            case Forget(target=target):
                await self._memory.forget(msg, target)
            case Model(name=name):
                await markdown(msg, await self._model(msg, scope.key, name))
            case Sessions():
                await markdown(msg, await self._sessions_text(msg, scope.key))
            case Resume(number=number):
                await markdown(msg, await self._resume(msg, scope.key, conversation_id, number))
            case Approvers(change=change):
                await markdown(msg, await self._approvers(msg, change))
            case AllowedRules():
                await markdown(msg, await self._allowed_text(msg))
            case Revoke(number=number):
                await markdown(msg, await self._revoke(msg, number))
            case Help():
                await markdown(msg, t("help", lang))
            case Unknown(name=name):
                await notify(msg, t("unknown_command", lang, name=name))

    # --- approvals for a team --------------------------------------------------------------------
    async def _approvers(self, msg: IncomingMessage, change: str) -> str:
        """`/approvers`: who approves here; `add|remove @member`: only the assistant's owners
        change it (the members are the ones the message mentions)."""
        ctx, lang = self._ctx, msg.locale
        if change:
            right = command_right(
                "approvers",
                sender=msg.sender_open_id,
                in_group=msg.is_group,
                started_by=None,
                conversation_of=None,
                owners=self._people.owners(),
                chat_admins=(),
            )
            if isinstance(right, Denied):
                return t(right.reason, lang)
            if change not in ("add", "remove") or not msg.mentioned:
                return t("approvers_usage", lang)
            for member in msg.mentioned:
                await ctx.db(
                    functools.partial(
                        ctx.state.set_approver, by=msg.sender_open_id, on=change == "add"
                    ),
                    msg.chat_id,
                    member,
                )
        names = [
            await self._people.display_name(o)
            for o in await ctx.db(ctx.state.approvers, msg.chat_id)
        ]
        listed = t("approvers_list", lang, names="、".join(names) or t("approvers_none", lang))
        return t("approvers_changed", lang, list=listed) if change else listed

    async def _allowed_text(self, msg: IncomingMessage) -> str:
        rules = await self._ctx.db(self._ctx.state.allowed_rules, msg.chat_id)
        if not rules:
            return t("allowed_none", msg.locale)
        lines = "\n".join(f"{i}. {rule_label(r)}" for i, r in enumerate(rules, start=1))
        return t("allowed_list", msg.locale, rules=lines)

    async def _revoke(self, msg: IncomingMessage, number: int | None) -> str:
        ctx = self._ctx
        rules = await ctx.db(ctx.state.allowed_rules, msg.chat_id)
        if number is None or not 1 <= number <= len(rules):
            return t("revoke_unknown", msg.locale)
        rule = rules[number - 1]
        await ctx.db(
            functools.partial(ctx.state.set_allowed, by=msg.sender_open_id, on=False),
            msg.chat_id,
            rule,
        )
        return t("revoked", msg.locale, rule=rule_label(rule))

    # --- rights in groups ------------------------------------------------------------------------
    async def _refused(self, msg: IncomingMessage, action: Action) -> bool:
        """Refuse `action` with a line saying who may, unless the sender has the right."""
        right = self._right(msg, action, frozenset())
        if isinstance(right, Denied):  # ask Feishu about the group's owner and managers only now
            right = self._right(msg, action, await self._people.group_admins(msg.chat_id))
        if isinstance(right, Denied):
            logger.info("%s of %s refused in %s", action, msg.sender_open_id, msg.chat_id)
            await self._delivery.notify(msg, t(right.reason, msg.locale))
            return True
        return False

    def _right(self, msg: IncomingMessage, action: Action, admins: frozenset[str]) -> Right:
        scope = self._ctx.scope(msg)
        lane = self._lanes.get(scope.key)
        running = lane.current if lane is not None and lane.busy else None
        return command_right(
            action,
            sender=msg.sender_open_id,
            in_group=msg.is_group,
            started_by=running.sender_open_id if running is not None else None,
            conversation_of=scope.member,
            owners=self._people.owners(),
            chat_admins=admins,
        )

    async def _stop_group(self, chat_id: str) -> bool:
        """Interrupt every running turn of the group's conversations; True if any ran."""
        stopped = False
        for key, lane in self._lanes.items():
            if lane.busy and lane.current is not None and lane.current.chat_id == chat_id:
                conversation_id = await self._ctx.conversation_id(key)
                stopped = await self._ctx.sessions.interrupt(conversation_id) or stopped
        return stopped

    # --- /compact, /status -----------------------------------------------------------------------
    async def _compact(self, msg: IncomingMessage, conversation_id: str) -> None:
        settings = self._ctx.settings
        reply = TurnReply(
            self._ctx.api,
            reply_to=msg.message_id,
            key=msg.message_id,
            interval=settings.feishu_card_update_interval_seconds,
            open_delay=settings.feishu_progress_delay_seconds,
            title=t("compacting", msg.locale),
            locale=msg.locale,
        )
        async with reply:
            try:
                result = await self._ctx.sessions.compact(
                    conversation_id, reader=self._memory.reader(msg)
                )
            except ClaudeMemoryError as exc:
                error = t("compact_failed", msg.locale, error=exc.message)
                await reply.finish(error, is_error=True)
                return
            await reply.finish(result.reply, is_error=result.is_error)

    def _model_name(self, chosen: str | None, lang: Locale) -> str:
        configured = self._ctx.settings.anthropic_model or t("model_cli_default", lang)
        return chosen or t("model_default", lang, name=configured)

    async def _status_text(self, msg: IncomingMessage, conversation_id: str) -> str:
        ctx = self._ctx
        lang = msg.locale
        scope = ctx.scope(msg)
        known = await ctx.db(ctx.sessions.store.get, conversation_id)
        live = ctx.sessions.live_status(conversation_id)
        lane = self._lanes.get(scope.key)
        queued = lane.queue.qsize() if lane else 0
        running = (live is not None and live.running) or (lane is not None and lane.busy)
        state = t("running" if running else "idle", lang)
        if queued:
            state += t("queued_count", lang, count=queued)
        runner = ctx.runner
        connected = runner is not None and runner.connected
        session = f"`{known.session_id}`" if known and known.session_id else None
        return t(
            "status",
            lang,
            conversation=conversation_id,
            session=session or t("session_none", lang),
            turns=known.turns if known else 0,
            cost=f"{known.cost_usd if known else 0.0:.4f}",
            model=self._model_name(await ctx.db(ctx.state.model, scope.key), lang),
            state=state,
            connection=t("connected" if connected else "disconnected", lang),
            reconnects=runner.reconnects if runner else 0,
        )

    # --- conversations: /model, /sessions, /resume -----------------------------------------------
    async def _model(self, msg: IncomingMessage, scope_key: str, name: str) -> str:
        ctx = self._ctx
        lang = msg.locale
        name = name.strip()
        if not name:
            chosen = await ctx.db(ctx.state.model, scope_key)
            return t("model_now", lang, model=self._model_name(chosen, lang))
        if name.lower() in ("default", "reset", "默认"):
            await ctx.db(ctx.state.set_model, scope_key, None)
            shown = ctx.settings.anthropic_model or t("model_cli_default", lang)
            return t("model_reset", lang, model=shown)
        if not _MODEL_NAME.fullmatch(name):
            return t("model_bad", lang)
        await ctx.db(ctx.state.set_model, scope_key, name)
        logger.info("%s chose model %s for %s", msg.sender_open_id, name, scope_key)
        return t("model_set", lang, model=name)

    async def _sessions_text(self, msg: IncomingMessage, scope_key: str) -> str:
        """This chat's conversations (`feishu:<scope>:v1 … vN`), numbered by generation, with
        their date, turns and first message; the current one marked."""
        ctx = self._ctx
        lang = msg.locale
        current = await ctx.db(ctx.state.generation, scope_key)
        latest = await ctx.db(ctx.state.latest_generation, scope_key)
        lines = [t("sessions_title", lang)]
        for number in range(max(latest, current), 0, -1)[:20]:
            known = await ctx.db(ctx.sessions.store.get, f"feishu:{scope_key}:v{number}")
            when = datetime.fromtimestamp(known.created) if known else None
            title = clip(known.title, 50) if known and known.title else ""
            lines.append(
                t(
                    "sessions_line",
                    lang,
                    n=number,
                    date=f"{when:%Y-%m-%d %H:%M}" if when else "—",
                    turns=known.turns if known else 0,
                    title=title or t("sessions_empty_title", lang),
                    current=t("sessions_current", lang) if number == current else "",
                )
            )
        lines.append(t("sessions_hint", lang))
        return "\n".join(lines)

    async def _resume(
        self, msg: IncomingMessage, scope_key: str, conversation_id: str, number: int | None
    ) -> str:
        """Back to conversation `number` of this chat: its id is made from this chat's own
        scope, so no number can reach another chat's conversation. The next message resumes
        its SDK session (the conversation keeps its session id)."""
        ctx = self._ctx
        lang = msg.locale
        if number is None:
            return t("resume_usage", lang)
        if number == await ctx.db(ctx.state.generation, scope_key):
            return t("already_current", lang, n=number)
        known = await ctx.db(ctx.sessions.store.get, f"feishu:{scope_key}:v{number}")
        if known is None or not await ctx.db(ctx.state.set_generation, scope_key, number):
            return t("resume_unknown", lang, n=number)
        await ctx.sessions.close_conversation(conversation_id, reason="resumed another")
        logger.info("%s resumed v%d in %s", msg.sender_open_id, number, scope_key)
        title = clip(known.title, 50) or t("sessions_empty_title", lang)
        return t("resumed", lang, n=number, title=title)
