"""Memory in the chat: `/recall`, `/remember`, `/team-remember`, `/forget`, the "记住这个吗？"
cards of a turn's low-confidence captures, the card of a new note contradicting an older one,
and the taps on those cards (docs/feishu.md, "Memory in the chat").

Whose the notes are (bridge/whose.py): a member's `/remember` saves to their own scope and their
`/recall` and `/forget` reach only their own notes and their group's team notes; the machine
owner's reach their own scopes as before; `/team-remember` saves to the group's team scope.

Every change goes through the memory store's own paths (one save with redaction, dedup and
conflicts; `confirm_pending`; `ConflictStore.resolve`), as at every other front door; an
unexpected store error answers with its cleaned text and a next step, never silence.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bridge.events import IncomingMessage
from bridge.feishu.cards import conflict_card, decided_card, forget_card, note_line, pending_card
from bridge.feishu.cards import toast as make_toast
from bridge.feishu.context import BridgeContext
from bridge.feishu.controls import Control, Controls, TapAnswer
from bridge.feishu.delivery import Delivery
from bridge.feishu.people import People
from bridge.inputs import clip
from bridge.render import escape_card_markdown
from bridge.sender import QUICK_WINDOW, FeishuAPIError, send_uuid
from bridge.strings import Locale, both, t
from bridge.whose import forgettable
from errors import ClaudeMemoryError, ConfigurationError
from memory.backend import MemoryBackend
from memory.history.conflicts import ConflictStore
from memory.loop.entities import PendingEntity, PendingStore, confirm_pending
from memory.model import NoteDraft, Reader, SaveResult, team_scope
from memory.notes.changes import ChangeSource, acting_as
from storage.public_text import clean_error, exception_text, next_step

logger = logging.getLogger("bridge.feishu")

SearchFn = Callable[[str, int, Reader], Awaitable[list[dict[str, Any]]]]
"""search(query, limit, reader): the notes `reader` reads, best first, as dicts."""

MEMORY_RESULTS = 5  # notes a /recall shows
FORGET_MATCHES = 5  # notes a /forget by query offers


class MemoryCommands:
    """The memory commands and cards of one bridge; taps on its cards arrive through `tap`
    (the `controls.MemoryTaps` the controls call once the tapper's right was checked)."""

    def __init__(
        self,
        ctx: BridgeContext,
        controls: Controls,
        delivery: Delivery,
        people: People,
        *,
        search: SearchFn | None = None,
        memory: MemoryBackend | None = None,
        pending: PendingStore | None = None,
        conflicts: ConflictStore | None = None,
    ) -> None:
        self._ctx = ctx
        self._controls = controls
        self._delivery = delivery
        self._people = people
        self.search = search
        self.memory = memory
        self.pending = pending
        self.conflicts = conflicts

    def reader(self, msg: IncomingMessage) -> Reader:
        """Whose memory `msg` reads and saves to (bridge/whose.py)."""
        return self._people.reader(msg)

    async def _search(self, query: str, limit: int, reader: Reader) -> list[dict[str, Any]]:
        if self.search is not None:
            return await self.search(query, limit, reader)
        if self.memory is not None:
            return await memory_search(self.memory)(query, limit, reader)
        raise ConfigurationError("no memory store")

    # --- /recall ---------------------------------------------------------------------------------
    async def recall(self, msg: IncomingMessage, query: str) -> None:
        text = await self._memory_text(query, msg.locale, self.reader(msg))
        await self._delivery.notify_markdown(msg, text)

    async def _memory_text(self, query: str, lang: Locale, reader: Reader) -> str:
        if not query:
            return t("recall_usage", lang)
        if self.search is None and self.memory is None:
            return t("memory_unavailable", lang)
        try:
            results = await self._search(query, MEMORY_RESULTS, reader)
        except Exception as exc:  # the memory store is another package: report, do not crash
            logger.exception("memory search failed")
            return t("memory_failed", lang, error=_unexpected(exc))
        shown = clip(query, 80)
        if not results:
            return t("recall_none", lang, query=shown)
        lines = [t("recall_title", lang, query=shown)]
        for index, note in enumerate(results, start=1):
            lines.append(f"{index}. " + note_line(note, lang))
        return "\n".join(lines)

    # --- /remember -------------------------------------------------------------------------------
    async def remember(self, msg: IncomingMessage, text: str) -> None:
        """`/remember <text>`: the answer, then the choice card if it contradicts a note."""
        reply, saved = await self._remember(msg, text)
        await self._delivery.notify_markdown(msg, reply)
        if saved is not None and saved.pending and saved.conflicts_with:
            await self._offer_conflict(msg, saved.id, saved.conflicts_with, saved.pending)

    async def _remember(self, msg: IncomingMessage, text: str) -> tuple[str, SaveResult | None]:
        """A note from this chat, through the store's one save (redaction, dedup, conflicts),
        like every other front door's. (reply, what was saved)."""
        lang = msg.locale
        text = text.strip()
        if not text:
            return t("remember_usage", lang), None
        scope = self.reader(msg).saves_to  # the sender's own: in a group, never everyone's
        if self.memory is None or scope is None:
            return t("memory_unavailable", lang), None
        draft = NoteDraft(content=text, scope=scope, source=f"feishu:{msg.chat_id}")
        try:
            saved = await asyncio.to_thread(self.memory.save, draft)
        except ClaudeMemoryError as exc:
            return t("memory_failed", lang, error=clean_error(exc.message)), None
        except Exception as exc:  # the store is another package: say so, never fall silent
            logger.exception("remember failed in %s", msg.chat_id)
            return t("memory_failed", lang, error=_unexpected(exc)), None
        logger.info("%s remembered %s in %s", msg.sender_open_id, saved.id, msg.chat_id)
        key = "remembered_known" if saved.deduplicated else "remembered"
        if msg.is_group and not saved.deduplicated:
            key = "remembered_for_you"  # said, so nobody takes it for the group's
        return t(key, lang, id=saved.id), saved

    # --- /team-remember --------------------------------------------------------------------------
    async def team_remember(self, msg: IncomingMessage, text: str) -> None:
        """`/team-remember <text>` in a group, by someone with the "team" right (checked by
        the caller): a note of the group's team scope, which every member's turns here read,
        confirmed by a card saying so (and the choice card if it contradicts a team note)."""
        lang = msg.locale
        text = text.strip()
        if not text:
            await self._delivery.notify_markdown(msg, t("team_remember_usage", lang))
            return
        if self.memory is None:
            await self._delivery.notify(msg, t("memory_unavailable", lang))
            return
        draft = NoteDraft(
            content=text, scope=team_scope(msg.chat_id), source=f"feishu:{msg.chat_id}"
        )
        try:
            saved = await asyncio.to_thread(self.memory.save, draft)
        except ClaudeMemoryError as exc:
            await self._delivery.notify(
                msg, t("memory_failed", lang, error=clean_error(exc.message))
            )
            return
        except Exception as exc:  # the store is another package: say so, never fall silent
            logger.exception("team remember failed in %s", msg.chat_id)
            await self._delivery.notify(msg, t("memory_failed", lang, error=_unexpected(exc)))
            return
        logger.info("%s saved team note %s in %s", msg.sender_open_id, saved.id, msg.chat_id)
        who = await self._people.display_name(msg.sender_open_id)
        title = "team_known_title" if saved.deduplicated else "team_remembered_title"
        body = t(
            "team_remembered",
            lang,
            content=escape_card_markdown(clip(text, 500)),
            id=saved.id,
            who=escape_card_markdown(who),
        )
        card = decided_card(t(title, lang), "green", body)
        await self._delivery.send(msg, "interactive", card, part="team")
        if saved.pending and saved.conflicts_with:
            await self._offer_conflict(msg, saved.id, saved.conflicts_with, saved.pending)

    async def _offer_conflict(
        self, msg: IncomingMessage, new_id: str, old_id: str, supersession: str
    ) -> None:
        """A new note contradicts an older one (`memory.history.conflicts`): both stay until the
        user chooses on a card: keep the new one, the old one, or both."""
        if self.memory is None or self.conflicts is None or self._ctx.sender is None:
            return
        try:
            new, old = (
                await self._ctx.db(self.memory.get, new_id),
                await self._ctx.db(self.memory.get, old_id),
            )
        except ClaudeMemoryError as exc:  # one was deleted meanwhile: nothing to choose
            logger.info("conflict %s not offered: %s", supersession, exc.message)
            return
        control = Control("conflict", msg, "", supersession=supersession)
        nonce = self._controls.add(control)
        card = conflict_card(msg.locale, new.body, old.body, nonce)
        uuid = send_uuid(msg.message_id, "conflict", supersession)
        if await self._show(nonce, control, msg, card, uuid, about=supersession):
            self._controls.keep_decided(nonce)

    async def _show(
        self,
        nonce: str,
        control: Control,
        msg: IncomingMessage,
        card: dict[str, Any],
        uuid: str,
        *,
        about: str,
    ) -> bool:
        """Send a memory card as a reply to `msg`; False (its control dropped) if not sent."""
        try:
            card_id = await self._ctx.api.reply(
                msg.message_id, "interactive", card, uuid=uuid, window=QUICK_WINDOW
            )
            await self._controls.show(nonce, control, card_id)
        except FeishuAPIError as exc:
            self._controls.drop(nonce)
            label = "capture" if control.kind == "pending" else control.kind
            logger.warning("%s card for %s not sent: %s", label, about, exc.message)
            return False
        return True

    # --- /forget ---------------------------------------------------------------------------------
    async def forget(self, msg: IncomingMessage, target: str) -> None:
        """`/forget <id>` deletes that note at once; `/forget <query>` answers with a card of
        the matches, each deleted by one tap (the tap's rights are checked again)."""
        lang = msg.locale
        notify, notify_markdown = self._delivery.notify, self._delivery.notify_markdown
        target = target.strip()
        if not target:
            await notify(msg, t("forget_usage", lang))
            return
        memory = self.memory
        if memory is None:
            await notify(msg, t("memory_unavailable", lang))
            return
        reader = self.reader(msg)
        keeps_team = msg.is_group and await self._people.elevated(msg)

        def theirs(scope: str) -> bool:  # what this sender may delete (bridge/whose.py)
            return forgettable(scope, reader=reader, chat_id=msg.chat_id, keeps_team=keeps_team)

        if " " not in target:
            note = await self._ctx.db(_note_or_none, memory, target)
            if note is not None and not theirs(note.scope):
                note = None  # another's note reads as no note: not even that it exists
            if note is not None:
                await self._ctx.db(memory.delete, note.id)
                logger.info("%s deleted note %s in %s", msg.sender_open_id, note.id, msg.chat_id)
                title = clip(note.title or note.content, 60)
                await notify_markdown(msg, t("forgotten", lang, id=note.id, title=title))
                return
        try:
            found = await self._search(target, FORGET_MATCHES, reader)
        except Exception as exc:
            logger.exception("memory search failed")
            await notify(msg, t("memory_failed", lang, error=_unexpected(exc)))
            return
        hits = [h for h in found if theirs(str(h.get("scope") or ""))]
        notes = tuple(
            (str(h.get("id") or ""), str(h.get("title") or "")) for h in hits if h.get("id")
        )
        if not notes:
            await notify_markdown(msg, t("forget_none", lang, query=clip(target, 80)))
            return
        control = Control("forget", msg, "", notes=notes)
        nonce = self._controls.add(control)
        card = forget_card(lang, clip(target, 80), hits[: len(notes)], nonce)
        uuid = send_uuid(msg.message_id, "forget")
        await self._show(nonce, control, msg, card, uuid, about=msg.message_id)
        self._controls.keep_decided(nonce)

    # --- captures --------------------------------------------------------------------------------
    async def offer_captures(
        self, msg: IncomingMessage, conversation_id: str, since: float
    ) -> None:
        """The turn's low-confidence captures (the pending list: `capture_entities` queued them
        under this conversation before the reply came back) become "记住这个吗？" cards, one
        tap to keep or discard, for the person who said it."""
        if self.pending is None or self._ctx.sender is None:
            return
        source = f"conversation:{conversation_id}"
        try:
            waiting = await self._ctx.db(functools.partial(self.pending.list, "pending", 50))
        except Exception:
            logger.exception("pending captures not read")
            return
        for entity in waiting:
            if entity.source != source or entity.created < since:
                continue  # another conversation's, or asked about before
            control = Control("pending", msg, conversation_id, pending=entity)
            nonce = self._controls.add(control)
            card = pending_card(msg.locale, _pending_text(entity), nonce)
            uuid = send_uuid(msg.message_id, "pending", entity.id)
            if await self._show(nonce, control, msg, card, uuid, about=entity.id):
                self._controls.keep_decided(nonce)

    # --- taps on the memory cards ----------------------------------------------------------------
    async def tap(
        self, control: Control, value: dict[str, Any], operator: str, edited: str | None = None
    ) -> TapAnswer:
        """A tap on a `/forget` card (one note, all, cancel), a capture card (keep, discard,
        keep as `edited`) or a conflict card, once the tapper's right was checked. The card
        changes in place."""
        if control.done:
            return make_toast("already_decided", control.msg.locale, "info"), None
        choice = str(value.get("cm") or "")
        if control.kind == "conflict":
            return await self._conflict_tap(control, choice)
        if control.kind == "forget":
            return await self._forget_tap(control, choice, value.get("i"), operator)
        return await self._capture_tap(control, choice, edited)

    async def _forget_tap(
        self, control: Control, choice: str, index: object, operator: str
    ) -> TapAnswer:
        lang = control.msg.locale
        if choice == "cancel":
            control.done = True
            card = decided_card(t("cancelled_title", lang), "grey", t("forget_cancelled", lang))
            return make_toast("cancelled_title", lang, "info"), card
        if choice == "forget_all":
            chosen = list(control.notes)
        elif isinstance(index, int) and 0 <= index < len(control.notes):
            chosen = [control.notes[index]]
        else:
            return make_toast("not_yours", lang, "error"), None
        memory = self.memory
        assert memory is not None
        control.done = True
        for note_id, _title in chosen:
            with contextlib.suppress(ClaudeMemoryError):  # already gone: fine
                await self._ctx.db(memory.delete, note_id)
        logger.info("%s deleted notes %s", operator, [n for n, _ in chosen])
        listed = "\n".join(
            f"- `{n}` {escape_card_markdown(clip(title, 60))}" for n, title in chosen
        )
        card = decided_card(
            t("forget_done_title", lang), "red", t("forget_done", lang, notes=listed)
        )
        return make_toast("forget_done_title", lang, "success"), card

    async def _capture_tap(self, control: Control, choice: str, edited: str | None) -> TapAnswer:
        lang = control.msg.locale
        db = self._ctx.db
        memory, pending, entity = self.memory, self.pending, control.pending
        assert entity is not None and pending is not None and memory is not None
        content = escape_card_markdown(clip(entity.content, 500))
        try:
            if choice == "edit" and not (edited or "").strip():
                return make_toast("edit_empty", lang, "error"), None
            if choice in ("keep", "edit"):
                corrected = edited if choice == "edit" else None
                # the person's own tap: their history door (a model's change becomes theirs)
                with acting_as(ChangeSource("feishu-user", control.conversation_id)):
                    _resolved, note_id, _dup = await db(
                        functools.partial(confirm_pending, content=corrected),
                        memory,
                        pending,
                        entity.id,
                    )
                if corrected is not None:
                    content = escape_card_markdown(clip(corrected.strip(), 500))
                control.done = True
                card = decided_card(
                    t("kept_title", lang), "green", t("kept", lang, content=content, id=note_id)
                )
                return make_toast("kept_title", lang, "success"), card
            if choice == "discard":
                await db(pending.resolve, entity.id, "rejected")
                control.done = True
                card = decided_card(
                    t("discarded_title", lang), "grey", t("discarded", lang, content=content)
                )
                return make_toast("discarded_title", lang, "info"), card
        except ClaudeMemoryError as exc:  # decided elsewhere (the web page): that stands
            control.done = True
            logger.info("capture %s: %s", entity.id, exc.message)
            known = await db(pending.get, entity.id)
            shown = {
                "type": "info",
                "content": t("already_decided_as", lang, status=known.status),
                "i18n": both("already_decided_as", status=known.status),
            }
            return shown, None
        return make_toast("not_yours", lang, "error"), None

    async def _conflict_tap(self, control: Control, choice: str) -> TapAnswer:
        """Keep the new note, the old one or both (`ConflictStore.resolve`: final; both notes'
        histories record it). A choice made elsewhere first (web page, MCP) stands."""
        lang = control.msg.locale
        keep = {"keep_new": "new", "keep_old": "old", "keep_both": "both"}.get(choice)
        if keep is None or self.conflicts is None or self.memory is None:
            return make_toast("not_yours", lang, "error"), None
        try:
            await self._ctx.db(self.conflicts.resolve, self.memory, control.supersession, keep)
        except ClaudeMemoryError as exc:
            control.done = True
            logger.info("conflict %s: %s", control.supersession, exc.message)
            return make_toast("already_decided", lang, "info"), None
        control.done = True
        key = f"conflict_{choice}"
        return make_toast(key, lang, "success"), decided_card(
            t(key, lang), "green", t("conflict_decided", lang)
        )


def _pending_text(entity: PendingEntity) -> str:
    """A capture's words, or what a model's change would do and why it waits for the person
    (memory.loop.reach)."""
    if not entity.proposed:
        return entity.content
    return f"{entity.title}\n{entity.content}\n\n(waits for you: it {entity.why})"


def _note_or_none(memory: MemoryBackend, note_id: str) -> Any:
    try:
        return memory.get(note_id)
    except ClaudeMemoryError:
        return None


def _unexpected(exc: BaseException) -> str:
    """An unexpected error for a card: its cleaned text (no URL credential, no server path:
    `storage.public_text`, as at every door) and what to do; the traceback is in the log."""
    return f"{exception_text(exc)}; {next_step(exc)}"


def memory_search(store: Any) -> SearchFn:
    """Adapt the memory store's (blocking) search to the bridge's `/recall` command: the notes
    the sender's `reader` reads (bridge/whose.py)."""

    async def search(query: str, limit: int, reader: Reader) -> list[dict[str, Any]]:
        def run() -> list[dict[str, Any]]:
            return [hit.to_dict() for hit in store.search(query, limit, reader=reader)]

        return await asyncio.to_thread(run)

    return search
