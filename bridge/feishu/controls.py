"""Cards and controls: the buttons the bridge puts on cards and the taps on them.

A control is Stop on a turn's card, approve/deny on an approval card, the notes of a `/forget`
by query, keep/discard of a capture or a conflict. A tap counts only with its control's
unguessable nonce, from that control's chat and card, by someone with the right
(bridge/rights.py). Controls are kept in the bridge state, so a tap after a restart (or on
another instance) still finds its button. Taps on memory cards are answered by the memory
commands (`MemoryTaps`, bridge/feishu/memory_chat.py); Stop and approvals here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from dataclasses import replace as dataclasses_replace
from typing import Any, Protocol

from agent._turn import summarize_tool_input
from agent.policy import Allowed as ToolAllowed
from agent.policy import Approver
from agent.policy import Denied as ToolDenied
from bridge._lark import card_action_response
from bridge.access import Granted
from bridge.diffs import DIFF_TOOLS, file_to_read, tool_diff
from bridge.events import IncomingMessage, message_from_json, message_to_json
from bridge.feishu.cards import approval_card, decided_card, toast
from bridge.feishu.context import BridgeContext
from bridge.feishu.people import People
from bridge.render import escape_card_markdown, step_label
from bridge.rights import Action, Denied, Right, command_right
from bridge.sender import QUICK_WINDOW, FeishuAPIError, send_uuid
from bridge.state import SavedControl
from bridge.strings import both, t
from errors import ClaudeMemoryError
from memory.loop.entities import PendingEntity, PendingStore

logger = logging.getLogger("bridge.feishu")

DIFF_READ_BYTES = 1_000_000  # a Write's current file, read at most this far for its diff
DECIDED_KEPT = 200  # decided approval cards remembered (a late tap reads "already decided")
CARD_SENT_WAIT = 1.5
"""Seconds a tap waits for its card's send to return: Feishu shows a card as soon as it has it,
so a quick tap can arrive before the bot knows the card's message id (within the 2.5 s a tap
is answered in)."""

# Who may tap a card's buttons, per control kind (bridge/rights.py).
MEMORY_CARDS = frozenset({"forget", "pending", "conflict"})  # taps that change the memory
_TAP_ACTIONS: dict[str, Action] = {
    "stop": "stop",
    "approval": "approve",
    "forget": "forget",
    "pending": "keep",
    "conflict": "keep",
}

TapAnswer = tuple[dict[str, Any], dict[str, Any] | None]
"""(toast, the card's new state or None)."""


@dataclass(slots=True)
class Control:
    """A button the bridge put on a card: Stop on a streaming answer, approve/deny on an
    approval card, the notes of a `/forget` by query, keep/discard of a low-confidence capture.
    A tap counts only with this control's unguessable nonce, from this chat and this card's
    message, by someone with the right (`Controls.card_action`)."""

    kind: str  # stop / approval / forget / pending / conflict
    msg: IncomingMessage  # the user's message whose turn (or command) it belongs to
    conversation_id: str
    message_id: str | None = None  # the card showing it, once sent
    tool: str = ""
    decision: asyncio.Future[ToolAllowed | ToolDenied] | None = None
    notes: tuple[tuple[str, str], ...] = ()  # forget: (note id, title) offered
    pending: PendingEntity | None = None  # pending: the capture asked about
    supersession: str = ""  # conflict: the pending supersession's id
    rule: str = ""  # approval: the "always allow here" rule it offers ("" for none)
    done: bool = False  # forget / pending: decided (a late tap reads "already decided")
    restored: bool = False  # read back from the bridge state: made before this process started
    sent: asyncio.Event = field(default_factory=asyncio.Event)  # set with message_id

    def shown(self, message_id: str) -> None:
        """The card showing this control was sent: taps on it count from now on."""
        self.message_id = message_id
        self.sent.set()


async def _card_sent(control: Control) -> None:
    """Wait (at most CARD_SENT_WAIT) until the card showing `control` has its message id."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(control.sent.wait(), CARD_SENT_WAIT)


RULE_CHARS = 2_000  # an "always allow here" rule, at most (a longer call is asked every time)


def allow_rule(tool: str, tool_input: Any) -> str | None:
    """The "always allow here" rule of one call: the tool and, for Bash, the exact command, for
    any other tool its exact input. Exact on purpose: a prefix or a pattern would allow calls
    nobody saw. None when the call is too long to be a rule."""
    if (
        tool == "Bash"
        and isinstance(tool_input, dict)
        and isinstance(tool_input.get("command"), str)
    ):
        what = tool_input["command"]
    else:
        what = json.dumps(tool_input, ensure_ascii=False, sort_keys=True, default=str)
    rule = f"{tool}\t{what}"
    return rule if len(rule) <= RULE_CHARS else None


def rule_label(rule: str) -> str:
    """A rule as the tool steps show a call: the tool and its command or input, on one line."""
    tool, _, what = rule.partition("\t")
    return step_label(tool, " ".join(what.split()))


class MemoryTaps(Protocol):
    """Who answers a tap on a memory card, once the tapper's right was checked."""

    async def tap(
        self, control: Control, value: dict[str, Any], operator: str, edited: str | None
    ) -> TapAnswer: ...


class Controls:
    """The live controls by nonce, the taps on them, and approvals."""

    def __init__(
        self, ctx: BridgeContext, people: People, pending: PendingStore | None = None
    ) -> None:
        self._ctx = ctx
        self._people = people
        self._pending = pending
        self._controls: dict[str, Control] = {}  # nonce -> the button's control
        self._decided: OrderedDict[str, Control] = OrderedDict()  # approvals already decided
        self.memory_taps: MemoryTaps | None = None

    # --- the registry ----------------------------------------------------------------------------
    def add(self, control: Control) -> str:
        """Register a control before its card is sent; its nonce."""
        nonce = secrets.token_urlsafe(12)
        self._controls[nonce] = control
        return nonce

    def drop(self, nonce: str) -> None:
        self._controls.pop(nonce, None)

    async def keep(self, nonce: str, control: Control) -> None:
        """Keep a sent card's button in the bridge state, so a tap after a restart (or on
        another instance) still finds it (`_restored`)."""
        if control.message_id is None:
            return
        data = {
            "notes": [list(n) for n in control.notes],
            "pending": control.pending.id if control.pending else None,
            "tool": control.tool,
            "supersession": control.supersession,
        }
        saved = SavedControl(
            nonce=nonce,
            kind=control.kind,
            message_id=control.message_id,
            conversation_id=control.conversation_id,
            message=message_to_json(control.msg),
            data=json.dumps(data, ensure_ascii=False),
            done=control.done,
            created_at=time.time(),
        )
        try:
            await self._ctx.db(self._ctx.state.control_put, saved)
        except Exception:  # the button still works in this process
            logger.exception("button %s of %s not kept", control.kind, control.message_id)

    async def show(self, nonce: str, control: Control, card_id: str) -> None:
        """The card showing `control` was sent: taps count from now on, and it is kept."""
        control.shown(card_id)
        await self.keep(nonce, control)

    def keep_decided(self, nonce: str) -> None:
        """Forget the oldest memory cards beyond DECIDED_KEPT (their taps then read "not ours")."""
        kept = [n for n, c in self._controls.items() if c.kind in MEMORY_CARDS]
        for old in kept[: max(len(kept) - DECIDED_KEPT, 0)]:
            if old != nonce:
                self._controls.pop(old, None)

    async def _restored(self, nonce: str) -> Control | None:
        """A button this process did not make (it was restarted since): as kept, marked
        `restored`; a capture card's pending entity read again."""
        ctx = self._ctx
        try:
            saved = await ctx.db(ctx.state.control_get, nonce)
            if saved is None:
                return None
            data = json.loads(saved.data)
            msg = message_from_json(saved.message)
            pending = None
            if saved.kind == "pending":
                if self._pending is None or not data.get("pending"):
                    return None
                pending = await ctx.db(self._pending.get, str(data["pending"]))
        except (ClaudeMemoryError, ValueError, KeyError, TypeError) as exc:
            logger.warning("button %s not restored: %s", nonce[:4], exc)
            return None
        control = Control(
            saved.kind,
            msg,
            saved.conversation_id,
            message_id=saved.message_id,
            tool=str(data.get("tool") or ""),
            notes=tuple((str(i), str(title)) for i, title in data.get("notes") or ()),
            pending=pending,
            supersession=str(data.get("supersession") or ""),
            done=saved.done,
            restored=True,
        )
        if control.kind in MEMORY_CARDS:  # live again in this process
            self._controls[nonce] = control
            self.keep_decided(nonce)
        return control

    # --- taps ------------------------------------------------------------------------------------
    def on_card_action(self, data: Any) -> Any:
        """Runs on the websocket thread (lark's `register_p2_card_action_trigger`): decide on the
        app loop within Feishu's 3 s, answer with a toast and, for approvals, the new card."""
        event = getattr(data, "event", None)
        operator = str(getattr(getattr(event, "operator", None), "open_id", "") or "")
        context = getattr(event, "context", None)
        chat_id = str(getattr(context, "open_chat_id", "") or "")
        message_id = str(getattr(context, "open_message_id", "") or "")
        action = getattr(event, "action", None)
        value = getattr(action, "value", None)
        form = getattr(action, "form_value", None)
        loop = self._ctx.loop
        if loop is None or self._ctx.closing:
            return card_action_response(toast("busy_try_again", "zh", "warning"), None)
        future = asyncio.run_coroutine_threadsafe(
            self.card_action(operator, chat_id, message_id, value, form), loop
        )
        try:
            shown, card = future.result(timeout=2.5)
        except Exception as exc:  # too slow or failed: the tap is answered, nothing changed
            future.cancel()
            logger.warning("card action from %s not handled in time: %s", operator, exc)
            shown, card = toast("busy_try_again", "zh", "warning"), None
        return card_action_response(shown, card)

    async def card_action(
        self, operator: str, chat_id: str, message_id: str, value: Any, form: Any = None
    ) -> TapAnswer:
        """(toast, new card or None) for a tap. Refused unless the value carries one of our
        nonces and the tap comes from that control's chat and card, by someone with the right."""
        nonce = value.get("n") if isinstance(value, dict) else None
        control = None
        if isinstance(nonce, str):
            control = self._controls.get(nonce) or self._decided.get(nonce)
            control = control or await self._restored(nonce)
        if control is not None and control.message_id is None:
            await _card_sent(control)
        if (
            control is None
            or control.msg.chat_id != chat_id
            or control.message_id is None
            or control.message_id != message_id
        ):
            logger.warning("card action from %s in %s refused: not ours", operator, chat_id)
            return toast("not_yours", "zh", "error"), None
        locale = control.msg.locale
        if not isinstance(self._people.check(operator, chat_id), Granted):
            return toast("not_yours", locale, "error"), None
        action: Action = _TAP_ACTIONS[control.kind]
        tap = dataclasses_replace(control.msg, sender_open_id=operator)
        approvers: frozenset[str] = frozenset()
        if control.kind == "approval" and tap.is_group:  # the group's own approvers
            approvers = frozenset(await self._ctx.db(self._ctx.state.approvers, chat_id))
        right = self._tap_right(tap, control, action, frozenset(), approvers)
        if isinstance(right, Denied):
            admins = await self._people.group_admins(chat_id)
            right = self._tap_right(tap, control, action, admins, approvers)
        if isinstance(right, Denied):
            logger.info("%s by %s refused in %s", action, operator, chat_id)
            refused = {
                "type": "error",
                "content": t(right.reason, locale),
                "i18n": both(right.reason),
            }
            return refused, None
        assert isinstance(nonce, str)
        if control.kind in MEMORY_CARDS:
            assert self.memory_taps is not None
            edited = form.get("text") if isinstance(form, dict) else None
            answer = await self.memory_taps.tap(
                control, value, operator, edited if isinstance(edited, str) else None
            )
            if control.done:
                await self._ctx.db(self._ctx.state.control_done, nonce)
            return answer
        if control.restored:  # its turn ended with the process that ran it
            key = "already_decided" if control.done else "nothing_running"
            return toast(key, locale, "info"), None
        if control.kind == "stop":
            stopped = await self._ctx.sessions.interrupt(control.conversation_id)
            return toast("stopping" if stopped else "nothing_running", locale, "info"), None
        cm = value.get("cm")
        always = cm == "always" and bool(control.rule)
        return await self._decide(
            nonce, control, approve=cm == "approve" or always, always=always, by=operator
        )

    async def _decide(
        self, nonce: str, control: Control, *, approve: bool, by: str, always: bool = False
    ) -> TapAnswer:
        """An approval tap by someone with the right: the tool call goes ahead or is denied;
        `always`: and the same call is always allowed in this chat from now on."""
        locale = control.msg.locale
        assert control.decision is not None
        if control.decision.done():
            return toast("already_decided", locale, "info"), None
        await self._ctx.db(self._ctx.state.control_done, nonce)
        who = self._people.known_name(by)
        if always:
            ctx = self._ctx
            await ctx.db(
                functools.partial(ctx.state.set_allowed, by=by, on=True),
                control.msg.chat_id,
                control.rule,
            )
        if approve:
            control.decision.set_result(ToolAllowed())
        else:
            control.decision.set_result(
                ToolDenied(t("denied_reason_user", "en", tool=control.tool))
            )
        key = "always_by" if always else "approved_by" if approve else "denied_by"
        card = decided_card(
            t("approved_title" if approve else "denied_title", locale),
            "green" if approve else "red",
            t(key, locale, tool=escape_card_markdown(control.tool), who=who),
        )
        return toast("approved_title" if approve else "denied_title", locale, "success"), card

    def _tap_right(
        self,
        tap: IncomingMessage,
        control: Control,
        action: Action,
        admins: frozenset[str],
        approvers: frozenset[str] = frozenset(),
    ) -> Right:
        return command_right(
            action,
            sender=tap.sender_open_id,
            in_group=tap.is_group,
            started_by=control.msg.sender_open_id,
            conversation_of=self._ctx.scope(control.msg).member,
            owners=self._people.owners(),
            chat_admins=admins,
            approvers=approvers,
        )

    async def close_approvals(self, msg: IncomingMessage) -> None:
        """The turn of `msg` ended (answered, stopped, failed) with an approval card still
        asking: the card says so and loses its buttons, the tool call is denied. A stopped turn
        left live 批准/拒绝 buttons and "2 分钟内无人批准则自动拒绝" (issue #33)."""
        waiting = [
            (nonce, c)
            for nonce, c in list(self._controls.items())
            if c.kind == "approval"
            and c.msg.message_id == msg.message_id
            and c.decision is not None
            and not c.decision.done()
        ]
        for nonce, control in waiting:
            await self._close_asked(nonce, control)

    async def _close_asked(self, nonce: str, control: Control) -> None:
        """An approval whose turn ended: denied, and its card closed (no buttons)."""
        ctx = self._ctx
        if control.decision is not None and not control.decision.done():
            control.decision.set_result(
                ToolDenied(t("approval_turn_ended", "en", tool=control.tool))
            )
        with contextlib.suppress(Exception):  # bookkeeping: never in the way of the stop
            await asyncio.wait_for(ctx.db(ctx.state.control_done, nonce), 5)
        if control.message_id is None or ctx.sender is None:
            return
        locale = control.msg.locale
        closed = decided_card(
            t("cancelled_title", locale),
            "grey",
            t("approval_turn_ended", locale, tool=escape_card_markdown(control.tool)),
        )
        try:
            await asyncio.wait_for(ctx.sender.patch(control.message_id, closed), 10)
        except (FeishuAPIError, TimeoutError) as exc:
            logger.warning("approval card %s not closed: %s", control.message_id, exc)

    async def ended_by_restart(self, message_ids: set[str]) -> list[tuple[str, dict[str, Any]]]:
        """At start: the approval cards still asking for turns a restart ended (`message_ids`,
        the users' messages), each marked decided, with the closed card it should show:
        (card message id, card). Issue #33: they kept live 批准/拒绝 buttons after a restart."""
        ctx = self._ctx
        closing: list[tuple[str, dict[str, Any]]] = []
        for saved in await ctx.db(ctx.state.open_controls, "approval"):
            try:
                msg = message_from_json(saved.message)
                tool = str(json.loads(saved.data).get("tool") or "")
            except (ValueError, KeyError, TypeError) as exc:
                logger.warning("approval button %s unreadable: %s", saved.nonce[:4], exc)
                continue
            if msg.message_id not in message_ids:
                continue  # another living instance's turn, asking right now
            await ctx.db(ctx.state.control_done, saved.nonce)
            card = decided_card(
                t("cancelled_title", msg.locale),
                "grey",
                t("approval_restart", msg.locale, tool=escape_card_markdown(tool)),
            )
            closing.append((saved.message_id, card))
        return closing

    # --- approvals -------------------------------------------------------------------------------
    def _diff(self, tool_name: str, tool_input: dict[str, Any]) -> str | None:
        """The approval card's diff (in a thread): a Write's target is read as it is now (a
        relative path is the workspace's, where the agent runs; none there: a new file)."""
        before = None
        if (path := file_to_read(tool_name, tool_input)) is not None:
            try:
                with (self._ctx.settings.workspace_dir / path).open("rb") as f:
                    before = f.read(DIFF_READ_BYTES).decode("utf-8", errors="replace")
            except OSError:
                before = None
        return tool_diff(tool_name, tool_input, before)

    def approver(self, msg: IncomingMessage, conversation_id: str) -> Approver:
        """Asks the chat about a tool call the policy marks "ask": an approval card with
        buttons; the first tap of someone with the right decides, no tap in time denies."""

        async def approve(tool_name: str, tool_input: Any) -> ToolAllowed | ToolDenied:
            return await self._ask(msg, conversation_id, tool_name, tool_input)

        return approve

    async def _ask(
        self, msg: IncomingMessage, conversation_id: str, tool_name: str, tool_input: Any
    ) -> ToolAllowed | ToolDenied:
        ctx = self._ctx
        assert ctx.sender is not None and ctx.loop is not None
        timeout = ctx.settings.feishu_approval_timeout_seconds
        minutes = max(round(timeout / 60), 1)
        rule = allow_rule(tool_name, tool_input)
        if rule is not None and rule in await ctx.db(ctx.state.allowed_rules, msg.chat_id):
            logger.info("%s always allowed in %s; not asked", tool_name, msg.chat_id)
            return ToolAllowed()
        control = Control("approval", msg, conversation_id, tool=tool_name, rule=rule or "")
        control.decision = ctx.loop.create_future()
        summary = step_label(tool_name, summarize_tool_input(tool_name, tool_input))
        nonce = self.add(control)
        diff = None
        if isinstance(tool_input, dict) and tool_name in DIFF_TOOLS:
            # what an Edit or Write would change; reading the file and diffing it block
            diff = await asyncio.to_thread(self._diff, tool_name, tool_input)
        card = approval_card(
            msg.locale, tool_name, summary, minutes, nonce, diff, always=rule is not None
        )
        try:
            card_id = await ctx.sender.reply(
                msg.message_id,
                "interactive",
                card,
                uuid=send_uuid(msg.message_id, "approval", nonce),
                window=QUICK_WINDOW,
            )
            await self.show(nonce, control, card_id)
            try:
                return await asyncio.wait_for(asyncio.shield(control.decision), timeout)
            except asyncio.CancelledError:
                # the turn was stopped while asking (the SDK cancels the pending permission
                # request): the card must not keep asking
                logger.info("approval for %s cancelled with its turn", tool_name)
                await self._close_asked(nonce, control)
                raise
            except TimeoutError:
                if control.decision.done():  # a tap just in time
                    return control.decision.result()
                control.decision.set_result(
                    ToolDenied(t("denied_reason_timeout", "en", tool=tool_name))
                )
                await ctx.db(ctx.state.control_done, nonce)
                closed = decided_card(
                    t("timed_out_title", msg.locale),
                    "grey",
                    t(
                        "approval_timed_out",
                        msg.locale,
                        tool=escape_card_markdown(tool_name),
                        minutes=minutes,
                    ),
                )
                with contextlib.suppress(FeishuAPIError):
                    await ctx.sender.patch(card_id, closed)
                return control.decision.result()
        except FeishuAPIError as exc:
            logger.warning("approval card for %s not sent: %s", tool_name, exc.message)
            return ToolDenied(t("denied_reason_timeout", "en", tool=tool_name))
        finally:
            # Kept a while, so a late tap reads "already decided" rather than "not ours".
            self._decided[nonce] = self._controls.pop(nonce, control)
            while len(self._decided) > DECIDED_KEPT:
                self._decided.popitem(last=False)
