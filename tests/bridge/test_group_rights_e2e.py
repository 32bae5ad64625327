"""Groups: a member's /stop or /clear acts only within their rights (bridge/rights.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bridge.strings import t
from settings import Settings
from tests.bridge.conftest import feishu_app, message_id, wait_answer
from tests.fakes.anthropic_api import FakeMessagesAPI, text
from tests.fakes.feishu_platform import OWNER_OPEN_ID, FakeFeishu
from tests.helpers import wait_until

pytestmark = pytest.mark.e2e

GROUP = "oc_team"
ALICE = "ou_alice00000000000000000000000000"
BOB = "ou_bob0000000000000000000000000000"
CAROL = "ou_carol0000000000000000000000000"  # the group's owner in Feishu


def _say(fake: FakeFeishu, words: str, sender: str) -> dict[str, object]:
    event = fake.group_text_event(words, mention_bot=True, chat_id=GROUP, sender=sender)
    fake.push_event(event)
    return event


async def test_a_member_cannot_stop_or_clear_anothers_turn(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    # Each member has their own conversation in the group (bridge/scopes.py): Bob's /stop and
    # /clear act on Bob's, and Alice's turn and conversation go on untouched.
    fake_model.on("slow report", text("The whole report, every line of it.", delay=4))
    fake_feishu.set_chat(GROUP, owner=CAROL)
    async with feishu_app(feishu_settings(feishu_allowed_chats=[GROUP])) as (_, bridge):
        asked = _say(fake_feishu, "write the slow report", ALICE)
        await wait_until(lambda: bool(fake_model.requests_for("slow report")), timeout=30)
        stop = _say(fake_feishu, "/stop", BOB)
        stopped = await wait_answer(fake_feishu, message_id(stop))
        answer = await wait_answer(fake_feishu, message_id(asked), timeout=30)

        clear = _say(fake_feishu, "/clear", BOB)
        cleared = await wait_answer(fake_feishu, message_id(clear))
        generations = {m: bridge.state.generation(f"{GROUP}:{m}") for m in (ALICE, BOB)}
    assert stopped == t("stop_idle")
    assert answer == "The whole report, every line of it."
    assert cleared == t("cleared", generation=2)
    assert generations == {ALICE: 1, BOB: 2}


async def test_in_a_shared_group_conversation_only_owners_and_admins_clear_it(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("slow report", text("The whole report, every line of it.", delay=4))
    fake_feishu.set_chat(GROUP, owner=CAROL)
    settings = feishu_settings(feishu_allowed_chats=[GROUP], feishu_group_conversations="shared")
    async with feishu_app(settings) as (_, bridge):
        asked = _say(fake_feishu, "write the slow report", ALICE)
        await wait_until(lambda: bool(fake_model.requests_for("slow report")), timeout=30)
        stop = _say(fake_feishu, "/stop", BOB)
        assert await wait_answer(fake_feishu, message_id(stop)) == t("stop_refused")
        answer = await wait_answer(fake_feishu, message_id(asked), timeout=30)

        clear = _say(fake_feishu, "/clear", BOB)
        refused = await wait_answer(fake_feishu, message_id(clear))
        assert bridge.state.generation(GROUP) == 1

        owner_clear = _say(fake_feishu, "/new", CAROL)
        cleared = await wait_answer(fake_feishu, message_id(owner_clear))
        generation = bridge.state.generation(GROUP)
    assert answer == "The whole report, every line of it."
    assert refused == t("clear_refused")
    assert cleared == t("cleared", generation=2)
    assert generation == 2


async def test_the_assistants_owner_stops_a_members_turn(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("endless", text("never delivered", delay=30))
    async with feishu_app(feishu_settings(feishu_allowed_chats=[GROUP])):
        asked = _say(fake_feishu, "an endless job", ALICE)
        await wait_until(lambda: bool(fake_model.requests_for("endless")), timeout=30)
        stop = _say(fake_feishu, "/stop", OWNER_OPEN_ID)
        assert await wait_answer(fake_feishu, message_id(stop)) == t("stop_done")
        answer = await wait_answer(fake_feishu, message_id(asked), timeout=30)
    assert "never delivered" not in answer
    assert "已停止。" in answer  # in the chat's language
    assert fake_feishu.chat_lookups == 0  # the owner's right needs no call to Feishu
