"""Memory in the chat: /remember, /recall, /forget (with its confirm card) and the "记住这个吗？"
card of a low-confidence capture, through the real lark clients, the fake platform and the app."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bridge.strings import t
from settings import Settings
from tests.bridge.conftest import feishu_app, message_id, replies, wait_answer
from tests.fakes.anthropic_api import FakeMessagesAPI, text
from tests.fakes.feishu_platform import OWNER_OPEN_ID, FakeFeishu
from tests.helpers import wait_until

pytestmark = pytest.mark.e2e

TRIP = "我下周三去上海出差"
GROUP = "oc_team"
ALICE = "ou_alice00000000000000000000000000"
BOB = "ou_bob0000000000000000000000000000"
CAROL = "ou_carol0000000000000000000000000"  # the group's owner in Feishu


def _ours(notes: list[Any]) -> list[Any]:
    """The notes saved from the chat (a new home may hold others)."""
    return [n for n in notes if (n.source or "").startswith(("feishu:", "conversation:feishu:"))]


def _tap_result(fake: FakeFeishu, frame: str) -> dict[str, Any]:
    ack = fake.ack_for(frame)
    assert ack is not None and ack.data is not None
    return ack.data


async def _tap(fake: FakeFeishu, frame: str) -> dict[str, Any]:
    await wait_until(lambda: fake.ack_for(frame) is not None, timeout=10)
    return _tap_result(fake, frame)


def _button_value(fake: FakeFeishu, card_id: str, element_id: str) -> dict[str, Any]:
    button = next(b for b in fake.card_buttons(card_id) if b.get("element_id") == element_id)
    return dict(button["behaviors"][0]["value"])


async def test_remembered_in_feishu_reaches_the_next_web_chat_prompt(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("出差", text("好的，记得带上身份证。"))
    async with feishu_app(feishu_settings()) as (client, bridge):
        saved = fake_feishu.push_text(f"/remember {TRIP}")
        first = await wait_answer(fake_feishu, message_id(saved))
        again = fake_feishu.push_text(f"/remember {TRIP}")
        second = await wait_answer(fake_feishu, message_id(again))
        usage = fake_feishu.push_text("/remember")
        usage_text = await wait_answer(fake_feishu, message_id(usage))
        assert bridge.memory is not None
        notes = _ours(bridge.memory.list())
        chat = await client.post("/api/chat", json={"message": "我的上海出差安排是什么？"})
        assert chat.status_code == 200, chat.text
        recall = fake_feishu.push_text("/recall 上海出差")
        recalled = await wait_answer(fake_feishu, message_id(recall))
    [note] = [n for n in notes if TRIP in n.body]
    assert first == t("remembered", id=note.id)
    assert second == t("remembered_known", id=note.id)  # the store's dedup answered
    assert usage_text.startswith("用法")
    assert note.source == "feishu:oc_p2pchat"
    [request] = fake_model.requests_for("上海出差安排")
    assert TRIP in request.all_text()  # the web prompt got the note from Feishu
    assert note.id in recalled
    assert fake_model.requests_for("/remember") == []  # commands never reach the model


async def test_a_secret_in_remember_is_redacted_like_every_front_door(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    key = "sk-ant-api03-" + "A1b2C3d4" * 6
    async with feishu_app(feishu_settings()) as (_, bridge):
        saved = fake_feishu.push_text(f"/remember 部署用的 key 是 {key}")
        await wait_answer(fake_feishu, message_id(saved))
        assert bridge.memory is not None
        [note] = _ours(bridge.memory.list())
        on_disk = (bridge.settings.home_dir).rglob("*.md")
        files = "".join(p.read_text(encoding="utf-8") for p in on_disk)
    assert "部署用的 key" in note.body
    assert key not in note.body and key not in files


async def test_forget_by_id_at_once_and_by_query_after_one_tap_on_the_confirm_card(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings()) as (client, bridge):
        for words in (TRIP, "周五和老王吃饭", "项目截止日期是月底"):
            event = fake_feishu.push_text(f"/remember {words}")
            await wait_answer(fake_feishu, message_id(event))
        assert bridge.memory is not None
        notes = {n.body.strip(): n.id for n in _ours(bridge.memory.list())}
        by_id = fake_feishu.push_text(f"/forget {notes['周五和老王吃饭']}")
        deleted = await wait_answer(fake_feishu, message_id(by_id))

        by_query = fake_feishu.push_text("/forget 上海出差")
        await wait_until(lambda: bool(replies(fake_feishu, message_id(by_query))), timeout=10)
        [card] = replies(fake_feishu, message_id(by_query))
        assert card.msg_type == "interactive" and TRIP in card.text
        still_there = (await client.get(f"/api/memories/{notes[TRIP]}")).status_code

        value = _button_value(fake_feishu, card.message_id, "forget_0")
        forged = await _tap(
            fake_feishu,
            fake_feishu.push_card_action({**value, "n": "guessed"}, message_id=card.message_id),
        )
        answer = await _tap(
            fake_feishu, fake_feishu.push_card_action(value, message_id=card.message_id)
        )
        late = await _tap(
            fake_feishu, fake_feishu.push_card_action(value, message_id=card.message_id)
        )
        gone = (await client.get(f"/api/memories/{notes[TRIP]}")).status_code
        kept = (await client.get(f"/api/memories/{notes['项目截止日期是月底']}")).status_code
    assert (
        deleted.startswith(f"已删除笔记 `{notes['周五和老王吃饭']}`")
        or notes["周五和老王吃饭"] in deleted
    )
    assert still_there == 200  # nothing goes before the tap
    assert forged["toast"]["type"] == "error" and "card" not in forged
    assert answer["toast"]["type"] == "success"
    assert answer["card"]["data"]["header"]["title"]["content"] == t("forget_done_title")
    assert late["toast"]["content"] == t("already_decided")
    assert (gone, kept) == (404, 200)


async def test_in_a_group_a_member_forgets_only_their_own_notes_and_admins_the_teams(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    # whose a note is (issue #33): the owner's notes are never a member's to delete, nor
    # another member's; a member's own are theirs; the group's team notes its admins'
    fake_feishu.set_chat(GROUP, owner=CAROL)
    settings = feishu_settings(feishu_allowed_chats=[GROUP])
    async with feishu_app(settings) as (client, bridge):
        saved = fake_feishu.push_text(f"/remember {TRIP}")  # the owner, in the direct chat
        await wait_answer(fake_feishu, message_id(saved))
        assert bridge.memory is not None
        [listed] = _ours(bridge.memory.list())
        note = {"id": listed.id}

        def say(words: str, sender: str) -> dict[str, Any]:
            event = fake_feishu.group_text_event(
                words, mention_bot=True, chat_id=GROUP, sender=sender
            )
            fake_feishu.push_event(event)
            return event

        await wait_answer(fake_feishu, message_id(say("/remember 我下周五去杭州出差", BOB)))
        await wait_answer(
            fake_feishu, message_id(say("/team-remember 团队出差统一订协议酒店", CAROL))
        )
        by_member = say(f"/forget {note['id']}", BOB)  # the owner's note: not his
        refused = await wait_answer(fake_feishu, message_id(by_member))
        query = say("/forget 出差", CAROL)  # the group's owner: the team's note, not the others'
        await wait_until(lambda: bool(replies(fake_feishu, message_id(query))), timeout=10)
        [card] = replies(fake_feishu, message_id(query))
        value = _button_value(fake_feishu, card.message_id, "forget_all")
        stranger_tap = await _tap(  # ...and a member's tap on her card is refused
            fake_feishu,
            fake_feishu.push_card_action(
                value, message_id=card.message_id, chat_id=GROUP, operator=BOB
            ),
        )
        team_note = next(n for n in bridge.memory.list() if "协议酒店" in n.body)
        after_member = (await client.get(f"/api/memories/{team_note.id}")).status_code
        owner_tap = await _tap(
            fake_feishu,
            fake_feishu.push_card_action(
                value, message_id=card.message_id, chat_id=GROUP, operator=CAROL
            ),
        )
        after_owner = (await client.get(f"/api/memories/{team_note.id}")).status_code
        bobs = next(n for n in bridge.memory.list() if "杭州" in n.body)
        own = say(f"/forget {bobs.id}", BOB)  # his own note: his to delete
        forgotten = await wait_answer(fake_feishu, message_id(own))
        left = {n.id for n in bridge.memory.list()}
    assert refused == t("forget_none", query=note["id"])  # as if there were no such note
    assert TRIP not in card.text and "杭州" not in card.text and "协议酒店" in card.text
    assert stranger_tap["toast"]["type"] == "error"
    assert after_member == 200
    assert owner_tap["toast"]["type"] == "success"
    assert after_owner == 404
    assert bobs.id in forgotten and bobs.id not in left
    assert note["id"] in left  # the owner's note stayed through all of it


async def test_a_low_confidence_capture_asks_and_one_tap_of_the_speaker_keeps_it(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("vim", text("好的。"))
    fake_feishu.set_chat(GROUP, owner=CAROL)
    settings = feishu_settings(feishu_allowed_chats=[GROUP])
    async with feishu_app(settings) as (_, bridge):
        assert bridge.pending is not None
        said = fake_feishu.group_text_event(
            "我更喜欢用 vim 写代码", mention_bot=True, chat_id=GROUP, sender=ALICE
        )
        fake_feishu.push_event(said)
        await wait_until(lambda: len(replies(fake_feishu, message_id(said))) >= 2, timeout=60)
        pending = [p for p in bridge.pending.list("pending") if "vim" in p.content]
        assert pending, "the sentence was not captured as a low-confidence candidate"
        card = next(
            m
            for m in replies(fake_feishu, message_id(said))
            if m.text.startswith(t("pending_title"))
        )
        keep = _button_value(fake_feishu, card.message_id, "keep_btn")
        by_bob = await _tap(
            fake_feishu,
            fake_feishu.push_card_action(
                keep, message_id=card.message_id, chat_id=GROUP, operator=BOB
            ),
        )
        by_alice = await _tap(
            fake_feishu,
            fake_feishu.push_card_action(
                keep, message_id=card.message_id, chat_id=GROUP, operator=ALICE
            ),
        )
        resolved = bridge.pending.get(pending[0].id)
        assert bridge.memory is not None
        notes = [{"id": n.id} for n in _ours(bridge.memory.list())]
        kept = bridge.memory.get(resolved.note_id or "")
    assert by_bob["toast"]["content"] == t("keep_refused")
    assert by_alice["toast"]["type"] == "success"
    assert by_alice["card"]["data"]["header"]["template"] == "green"
    assert resolved.status == "confirmed" and resolved.note_id
    assert any(n["id"] == resolved.note_id for n in notes)
    assert kept.scope == f"person:{ALICE}"  # captured from her words: hers (issue #33)
    assert OWNER_OPEN_ID  # the owner could have decided too (rights table, test_commands)


async def test_a_tap_on_a_card_the_bot_has_not_heard_back_about_yet_counts(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    # Feishu shows a card as soon as it has it; the bot learns the card's message id when its
    # send returns. A quick tap in between was refused as "not ours" on the bot's own card.
    fake_model.on("vim", text("好的。"))
    async with feishu_app(feishu_settings()) as (_, bridge):
        assert bridge.pending is not None
        fake_feishu.answer_late(1.0)  # every send answers the bot a second late
        said = fake_feishu.push_text("我更喜欢用 vim 写代码")
        await wait_until(
            lambda: any(
                m.text.startswith(t("pending_title"))
                for m in replies(fake_feishu, message_id(said))
            ),
            timeout=60,
        )
        card = next(
            m
            for m in replies(fake_feishu, message_id(said))
            if m.text.startswith(t("pending_title"))
        )
        keep = _button_value(fake_feishu, card.message_id, "keep_btn")
        tapped = await _tap(
            fake_feishu, fake_feishu.push_card_action(keep, message_id=card.message_id)
        )
        [entity] = [p for p in bridge.pending.list(None) if "vim" in p.content]
    assert tapped["toast"]["type"] == "success", tapped["toast"]
    assert entity.status == "confirmed"


async def test_a_forget_card_still_works_after_the_app_restarts(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    settings = feishu_settings()
    async with feishu_app(settings) as (_, bridge):
        saved = fake_feishu.push_text(f"/remember {TRIP}")
        await wait_answer(fake_feishu, message_id(saved))
        assert bridge.memory is not None
        [note] = _ours(bridge.memory.list())
        asked = fake_feishu.push_text("/forget 上海出差")
        await wait_until(lambda: bool(replies(fake_feishu, message_id(asked))), timeout=10)
        [card] = replies(fake_feishu, message_id(asked))
        value = _button_value(fake_feishu, card.message_id, "forget_0")
    async with feishu_app(settings) as (client, _):  # a restart: a new process, same home
        answer = await _tap(
            fake_feishu, fake_feishu.push_card_action(value, message_id=card.message_id)
        )
        late = await _tap(
            fake_feishu, fake_feishu.push_card_action(value, message_id=card.message_id)
        )
        elsewhere = await _tap(
            fake_feishu, fake_feishu.push_card_action(value, message_id="om_another_card")
        )
        gone = (await client.get(f"/api/memories/{note.id}")).status_code
    assert answer["toast"]["type"] == "success"
    assert answer["card"]["data"]["header"]["title"]["content"] == t("forget_done_title")
    assert late["toast"]["content"] == t("already_decided")
    assert elsewhere["toast"]["type"] == "error"  # still bound to its own card
    assert gone == 404


async def test_a_capture_is_kept_as_the_user_corrected_it_on_the_card(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("vim", text("好的。"))
    async with feishu_app(feishu_settings()) as (_, bridge):
        assert bridge.pending is not None and bridge.memory is not None
        said = fake_feishu.push_text("我更喜欢用 vim 写代码")
        await wait_until(lambda: len(replies(fake_feishu, message_id(said))) >= 2, timeout=60)
        card = next(
            m
            for m in replies(fake_feishu, message_id(said))
            if m.text.startswith(t("pending_title"))
        )
        shown = [e["tag"] for e in card.content["body"]["elements"]]
        [edit] = [b for b in fake_feishu.card_buttons(card.message_id) if b.get("name")]
        value = dict(edit["behaviors"][0]["value"])
        blank = await _tap(
            fake_feishu,
            fake_feishu.push_card_action(
                value, message_id=card.message_id, form_value={"text": "  "}, name=edit["name"]
            ),
        )
        corrected = "我写代码用 neovim，不用 vim"
        kept = await _tap(
            fake_feishu,
            fake_feishu.push_card_action(
                value, message_id=card.message_id, form_value={"text": corrected}, name=edit["name"]
            ),
        )
        [entity] = [p for p in bridge.pending.list(None) if "vim" in p.content]
        notes = [n.body.strip() for n in _ours(bridge.memory.list())]
    assert shown[-1] == "form"  # the server accepted the card with its form
    assert blank["toast"]["content"] == t("edit_empty") and "card" not in blank
    assert kept["toast"]["type"] == "success"
    assert corrected in kept["card"]["data"]["body"]["elements"][0]["content"]
    assert entity.status == "confirmed"
    assert corrected in notes and "我更喜欢用 vim 写代码" not in notes


async def test_a_remembered_contradiction_asks_which_to_keep_and_the_tap_settles_it(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    async with feishu_app(feishu_settings()) as (client, bridge):
        first = fake_feishu.push_text("/remember 我下周三去上海出差")
        await wait_answer(fake_feishu, message_id(first))
        second = fake_feishu.push_text("/remember 我下周三不去上海出差")
        await wait_until(lambda: len(replies(fake_feishu, message_id(second))) >= 2, timeout=20)
        [said, card] = replies(fake_feishu, message_id(second))
        asked = card.text
        assert bridge.memory is not None
        notes = {n.body.strip(): n.id for n in _ours(bridge.memory.list())}
        pending = (await client.get("/api/memories/supersessions")).json()["supersessions"]
        value = _button_value(fake_feishu, card.message_id, "keep_new_btn")
        answer = await _tap(
            fake_feishu, fake_feishu.push_card_action(value, message_id=card.message_id)
        )
        late = await _tap(
            fake_feishu,
            fake_feishu.push_card_action({**value, "cm": "keep_old"}, message_id=card.message_id),
        )
        old = (await client.get(f"/api/memories/{notes['我下周三去上海出差']}")).json()
        history = await client.get(f"/api/memories/{notes['我下周三去上海出差']}/history")
    assert said.text == t("remembered", id=notes["我下周三不去上海出差"])
    assert asked.startswith(t("conflict_title")) and "不去" in asked
    assert [p["new_id"] for p in pending] == [notes["我下周三不去上海出差"]]
    assert answer["toast"]["type"] == "success"
    assert late["toast"]["content"] == t("already_decided")
    assert old["status"] == "superseded"
    assert old["superseded_by"] == notes["我下周三不去上海出差"]
    assert history.status_code == 200 and "supersede" in history.text
