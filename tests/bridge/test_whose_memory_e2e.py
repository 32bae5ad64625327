"""Memory per person in a group, and for the team on purpose (issue #33, docs/feishu.md "Whose
memory"), through the real lark clients, the strict fake platform, the app and the fake model:
in a group of 5, what a member asks to remember reaches their own turns (in the group and in
their direct chat) and nobody else's; a team fact the owner saves with `/team-remember` reaches
every member's turn in that group; a member may not save to the team memory; the machine
owner's own notes never reach another member, neither injected nor through the model's memory
tools, `/recall` or `/memory`; the API says whose each note is and filters by person and group.
What each turn was given is read from what the fake model received."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bridge.strings import t
from bridge.whose import WHOSE_INSTRUCTIONS
from settings import Settings
from tests.bridge.conftest import feishu_app, message_id, replies, wait_answer
from tests.fakes.anthropic_api import FakeMessagesAPI, RecordedRequest, text, tool
from tests.fakes.feishu_platform import OWNER_OPEN_ID, FakeFeishu
from tests.helpers import wait_until

pytestmark = pytest.mark.e2e

GROUP = "oc_team000000000000000000000000"
ALICE = "ou_alice0000000000000000000000000"  # a member with a direct chat too
BOB = "ou_bob00000000000000000000000000"
CAROL = "ou_carol0000000000000000000000000"  # the group's owner in Feishu
DAN = "ou_dan00000000000000000000000000"
NAMES = {OWNER_OPEN_ID: "Owen", ALICE: "Alice", BOB: "Bob", CAROL: "Carol", DAN: "Dan"}
ALICE_CHAT = "oc_alicep2p00000000000000000000"

OWNERS_TRIP = "我下周三去上海出差，住外滩附近"  # the machine owner's own, said in his direct chat
ALICES_TRIP = "我下周三去杭州出差，住西湖附近"  # Alice's, said in the group
TEAM_FACT = "我们团队的周报每周五下午五点前提交到共享盘"
TRIP_QUESTION = "我下周三去哪里出差？"
REPORT_QUESTION = "我们的周报什么时候交？"


def _in_group(fake: FakeFeishu, words: str, sender: str) -> dict[str, Any]:
    event = fake.group_text_event(words, mention_bot=True, chat_id=GROUP, sender=sender)
    fake.push_event(event)
    return event


def _turn(fake_model: FakeMessagesAPI, who: str, question: str) -> RecordedRequest:
    """The request that started `who`'s turn asking `question` in the group."""
    [request] = fake_model.requests_for(f"[{NAMES[who]}] {question}")
    return request


def _settings(feishu_settings: Callable[..., Settings]) -> Settings:
    # the machine owner first; Alice may talk to the bot directly too; the group is served
    return feishu_settings(
        feishu_allowed_users=[OWNER_OPEN_ID, ALICE], feishu_allowed_chats=[GROUP]
    )


def _team(fake: FakeFeishu) -> None:
    fake.set_chat(GROUP, owner=CAROL)
    for open_id, name in NAMES.items():
        fake.set_user(open_id, name)


async def test_a_members_memory_reaches_their_own_turns_and_a_team_fact_everyones(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    _team(fake_feishu)
    fake_model.on(TRIP_QUESTION, text("查一下。"))
    fake_model.on(REPORT_QUESTION, text("查一下。"))
    async with feishu_app(_settings(feishu_settings)) as (client, _):
        said = fake_feishu.push_text(f"/remember {OWNERS_TRIP}")  # the owner, directly
        owners_saved = await wait_answer(fake_feishu, message_id(said))
        said = _in_group(fake_feishu, f"/remember {ALICES_TRIP}", ALICE)
        alices_saved = await wait_answer(fake_feishu, message_id(said))
        said = _in_group(fake_feishu, "/team-remember 周报改到周一交", BOB)
        bob_refused = await wait_answer(fake_feishu, message_id(said))
        said = _in_group(fake_feishu, f"/team-remember {TEAM_FACT}", OWNER_OPEN_ID)
        await wait_until(lambda: bool(replies(fake_feishu, message_id(said))), timeout=20)
        [team_card] = replies(fake_feishu, message_id(said))

        for member in NAMES:  # all five ask in the group, each in their own conversation
            for question in (TRIP_QUESTION, REPORT_QUESTION):
                await wait_answer(fake_feishu, message_id(_in_group(fake_feishu, question, member)))
        direct = fake_feishu.push_text(f"{TRIP_QUESTION}（私聊）", sender=ALICE, chat_id=ALICE_CHAT)
        await wait_answer(fake_feishu, message_id(direct))
        direct_report = fake_feishu.push_text(
            f"{REPORT_QUESTION}（私聊）", sender=ALICE, chat_id=ALICE_CHAT
        )
        await wait_answer(fake_feishu, message_id(direct_report))
        owners_direct = fake_feishu.push_text(f"{TRIP_QUESTION}（我自己）")  # the owner, directly
        await wait_answer(fake_feishu, message_id(owners_direct))

        alice_notes = (await client.get("/api/memories", params={"person": ALICE})).json()
        team_notes = (await client.get("/api/memories", params={"group": GROUP})).json()
        everything = (await client.get("/api/memories", params={"limit": 100})).json()
        searched = await client.post(
            "/api/memories/search", json={"query": "出差", "person": ALICE}
        )

    assert owners_saved == t("remembered", id=owners_saved.split("`")[1])
    assert alices_saved.startswith(t("remembered_for_you", id="x").split("（")[0])
    assert bob_refused == t("team_refused")
    assert team_card.msg_type == "interactive"
    assert (
        team_card.text.startswith(t("team_remembered_title")) and "周五下午五点" in team_card.text
    )

    for member in NAMES:
        trip = _turn(fake_model, member, TRIP_QUESTION).all_text()
        report = _turn(fake_model, member, REPORT_QUESTION).all_text()
        assert ("杭州" in trip) is (member == ALICE), NAMES[member]  # Alice's own, hers alone
        # the owner's own memory stays out of the group, the owner's turns too: all read them
        assert "外滩" not in trip, NAMES[member]
        assert "周五下午五点" in report, NAMES[member]  # the team fact: everyone's, here
        assert "周报改到周一" not in report
    # the model is told whose memory it reads here
    assert WHOSE_INSTRUCTIONS in _turn(fake_model, BOB, TRIP_QUESTION).all_text()
    [alone] = fake_model.requests_for(f"{TRIP_QUESTION}（私聊）")
    assert "杭州" in alone.all_text() and "外滩" not in alone.all_text()
    [owners_own] = fake_model.requests_for(f"{TRIP_QUESTION}（我自己）")
    assert "外滩" in owners_own.all_text()  # the owner's memory: in their direct chat
    [alone_report] = fake_model.requests_for(f"{REPORT_QUESTION}（私聊）")
    assert "周五下午五点" not in alone_report.all_text()  # a team's fact stays in its group

    # whose each note is, by name, and the filters by person and by group
    [alices] = [n for n in alice_notes["items"] if "杭州" in n["summary"] + n["title"]]
    assert alices["whose"] == {"kind": "person", "id": ALICE, "name": "Alice"}
    assert alices["scope"] == f"person:{ALICE}"
    assert {n["scope"] for n in alice_notes["items"]} == {f"person:{ALICE}"}
    assert [n["whose"] for n in team_notes["items"]] == [
        {"kind": "team", "id": GROUP, "name": GROUP}
    ]
    hits = searched.json()["results"]
    assert hits and {h["scope"] for h in hits} == {f"person:{ALICE}"}
    assert hits[0]["whose"]["name"] == "Alice"
    owners = [n for n in everything["items"] if "外滩" in n["summary"] + n["title"]]
    assert [n["whose"]["kind"] for n in owners] == ["owner"]


async def test_the_owners_notes_never_reach_another_member_by_any_door(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    _team(fake_feishu)
    fake_model.on(
        "翻一下记忆",  # Bob's turn: the model tries every way to the memory
        tool("mcp__memory__memory_search", {"query": "出差"}),
        tool("mcp__memory__memory_search", {"query": "出差", "scope": "user"}),
        tool("mcp__memory__memory_search", {"query": "出差", "scope": f"person:{ALICE}"}),
        text("没找到。"),
    )
    async with feishu_app(_settings(feishu_settings)) as (_, bridge):
        said = fake_feishu.push_text(f"/remember {OWNERS_TRIP}")
        await wait_answer(fake_feishu, message_id(said))
        said = _in_group(fake_feishu, f"/remember {ALICES_TRIP}", ALICE)
        await wait_answer(fake_feishu, message_id(said))
        assert bridge.memory is not None
        owners_id = next(n.id for n in bridge.memory.list() if "外滩" in n.body)
        fake_model.on(
            "打开那条",  # ...and by the id, as if it had seen it somewhere
            tool("mcp__memory__memory_get", {"ids": [owners_id]}),
            tool("mcp__memory__memory_update", {"id": owners_id, "content": "改掉"}),
            text("打不开。"),
        )
        tries = [_in_group(fake_feishu, "翻一下记忆，我下周三去哪里出差？", BOB)]
        tries.append(_in_group(fake_feishu, "打开那条记忆", BOB))
        for event in tries:
            await wait_answer(fake_feishu, message_id(event))
        commands = [
            await wait_answer(fake_feishu, message_id(_in_group(fake_feishu, words, BOB)))
            for words in ("/recall 出差", "/memory 上海出差", "/recall 杭州")
        ]
        alices = await wait_answer(
            fake_feishu, message_id(_in_group(fake_feishu, "/recall 出差", ALICE))
        )
        owner_note = bridge.memory.get(owners_id)

    bobs = [r for r in fake_model.message_requests() if "[Bob]" in r.all_text()]
    assert len(bobs) >= 6  # both turns, each with its tool round trips
    seen = "\n".join(r.all_text() for r in bobs)
    assert "外滩" not in seen and "杭州" not in seen  # nothing of the owner's or Alice's
    assert f"note {owners_id!r} not found" in seen  # by id: as if there were no such note
    assert owner_note.body.startswith(OWNERS_TRIP)  # and nothing changed it
    assert commands == [t("recall_none", query=q) for q in ("出差", "上海出差", "杭州")]
    assert "杭州" in alices and "外滩" not in alices  # Alice's /recall: her own
