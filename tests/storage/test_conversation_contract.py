"""One contract for conversation state, run against SQLite and PostgreSQL alike."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agent.conversations import ConversationBackend, ConversationStore

Open = Callable[[], ConversationBackend]


@pytest.fixture(params=["sqlite", "postgresql"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Open]:
    """Opens another store on the same storage each call (another process, a restart)."""
    opened: list[ConversationBackend] = []
    if request.param == "sqlite":

        def make() -> ConversationBackend:
            return ConversationStore(tmp_path / "state.db")

    else:
        db = request.getfixturevalue("pg_sync_db")

        def make() -> ConversationBackend:
            return ConversationStore(db)

    def tracked() -> ConversationBackend:
        store = make()
        opened.append(store)
        return store

    yield tracked
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Open) -> ConversationBackend:
    return open_store()


def _turn(store: ConversationBackend, cid: str, message: str, **overrides: Any) -> None:
    values: dict[str, Any] = {
        "started": 1000.0,
        "message": message,
        "reply": f"echo: {message}",
        "is_error": False,
        "log_file": f"/logs/{cid}.jsonl",
        "session_id": None,
        "cost_usd": 0.25,
        "injected": [],
    }
    values.update(overrides)
    store.record_turn(cid, **values)


def test_unknown_conversation_is_none_and_deleting_it_says_so(store: ConversationBackend) -> None:
    assert store.get("nope") is None
    assert store.turns("nope") == []
    assert store.delete("nope") is False


def test_ensure_creates_once_and_keeps_the_first_title_and_source(
    store: ConversationBackend,
) -> None:
    store.ensure("c1", title="first title " + "x" * 100, source="feishu")
    store.ensure("c1", title="second", source="web")
    conv = store.get("c1")
    assert conv is not None
    assert conv.title == ("first title " + "x" * 100)[:80]
    assert conv.source == "feishu"
    assert (conv.session_id, conv.turns, conv.cost_usd) == (None, 0, 0.0)
    assert conv.created == conv.updated > 0


def test_recorded_turns_count_cost_and_adopt_the_session_id(store: ConversationBackend) -> None:
    store.ensure("c1", title="t", source="web")
    _turn(store, "c1", "one", session_id="s-1", cost_usd=0.5)
    _turn(store, "c1", "two", session_id=None, cost_usd=None, is_error=True)
    conv = store.get("c1")
    assert conv is not None
    assert conv.turns == 2
    assert conv.cost_usd == pytest.approx(0.5)
    assert conv.session_id == "s-1"  # a turn without a session id keeps the known one
    turns = store.turns("c1")
    assert [t.message for t in turns] == ["one", "two"]
    assert [t.is_error for t in turns] == [False, True]
    assert turns[0].session_id == "s-1" and turns[1].cost_usd is None
    assert store.turns("c1", limit=1)[0].message == "one"


def test_turn_text_and_injected_records_round_trip(store: ConversationBackend) -> None:
    store.ensure("c1", title="中文标题", source="web")
    injected = [{"id": "n-1", "title": "偏好 ✓", "score": 0.5, "tags": ["a", "b"]}]
    _turn(store, "c1", "我的猫叫 Tom 🐈\nline two", reply="好的", injected=injected)
    conv = store.get("c1")
    turn = store.turns("c1")[0]
    assert conv is not None and conv.title == "中文标题"
    assert turn.message == "我的猫叫 Tom 🐈\nline two"
    assert (turn.reply, turn.injected) == ("好的", injected)
    assert turn.to_public()["injected"] == injected


def test_a_message_with_a_nul_character_is_still_recorded(store: ConversationBackend) -> None:
    store.ensure("c1", title="t", source="web")
    _turn(store, "c1", "before\x00after")
    message = store.turns("c1")[0].message
    assert message.startswith("before") and message.endswith("after")


def test_set_session_replaces_and_clears(store: ConversationBackend) -> None:
    store.ensure("c1", title="t", source="web")
    store.set_session("c1", "s-1")
    assert (c := store.get("c1")) is not None and c.session_id == "s-1"
    store.set_session("c1", None)
    assert (c := store.get("c1")) is not None and c.session_id is None


def test_list_is_most_recently_updated_first_and_limited(store: ConversationBackend) -> None:
    for cid in ("a", "b", "c"):
        store.ensure(cid, title=cid, source="web")
    _turn(store, "a", "bump a")
    assert store.list()[0].id == "a"
    assert len(store.list(limit=2)) == 2
    assert {c.id for c in store.list()} == {"a", "b", "c"}


def test_delete_removes_the_conversation_and_its_turns_only(store: ConversationBackend) -> None:
    for cid in ("c1", "c2"):
        store.ensure(cid, title=cid, source="web")
        _turn(store, cid, f"hi {cid}")
    assert store.delete("c1") is True
    assert store.get("c1") is None and store.turns("c1") == []
    assert store.get("c2") is not None and len(store.turns("c2")) == 1


def test_state_survives_reopening(open_store: Open) -> None:
    first = open_store()
    first.ensure("c1", title="t", source="web")
    _turn(first, "c1", "remember me", session_id="s-9")
    first.close()
    again = open_store()
    conv = again.get("c1")
    assert conv is not None and conv.session_id == "s-9" and conv.turns == 1
    assert again.turns("c1")[0].message == "remember me"


def test_concurrent_turns_from_two_stores_lose_nothing(open_store: Open) -> None:
    stores = [open_store(), open_store()]
    stores[0].ensure("c1", title="t", source="web")
    start = threading.Barrier(4)

    def writer(n: int) -> None:
        start.wait()
        for i in range(10):
            _turn(stores[n % 2], "c1", f"w{n}-{i}", cost_usd=0.1)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(writer, range(4)))
    conv = stores[1].get("c1")
    assert conv is not None and conv.turns == 40
    assert conv.cost_usd == pytest.approx(4.0)
    messages = [t.message for t in stores[0].turns("c1")]
    assert sorted(messages) == sorted(f"w{n}-{i}" for n in range(4) for i in range(10))
    for n in range(4):  # each writer's turns keep their order
        mine = [m for m in messages if m.startswith(f"w{n}-")]
        assert mine == [f"w{n}-{i}" for i in range(10)]


def test_a_turn_is_on_record_from_its_start_and_counted_at_its_end(
    store: ConversationBackend,
) -> None:
    store.ensure("c1", title="t", source="web")
    _turn(store, "c1", "before", status="completed")
    turn_id, previous = store.begin_turn(
        "c1", started=1001.0, message="run the tests", log_file="/logs/c1.jsonl", session_id=None
    )
    assert previous is not None and previous.message == "before"
    store.update_turn(
        turn_id,
        reply="Running them",
        tools=[{"name": "Bash", "summary": "pytest", "status": "started"}],
        session_id="s-1",
    )
    conv = store.get("c1")
    assert conv is not None and conv.turns == 1  # not counted while it runs
    running = store.turns("c1")[-1]
    assert (running.message, running.reply, running.status) == (
        "run the tests",
        "Running them",
        "running",
    )
    assert running.to_public()["status"] == "running"
    assert running.tools == [{"name": "Bash", "summary": "pytest", "status": "started"}]
    assert [t.id for t in store.open_turns()] == [turn_id]
    store.finish_turn(
        turn_id,
        reply="All passed",
        is_error=False,
        session_id="s-1",
        cost_usd=0.5,
        injected=[],
        tools=[{"name": "Bash", "summary": "pytest", "status": "ok"}],
        status="completed",
    )
    done = store.turns("c1")[-1]
    assert (done.reply, done.status, done.tools[0]["status"]) == ("All passed", "completed", "ok")
    store.update_turn(turn_id, reply="late progress", tools=[], session_id=None)
    assert store.turns("c1")[-1].reply == "All passed"  # a finished turn is never rewritten
    conv = store.get("c1")
    assert conv is not None and (conv.turns, conv.session_id) == (2, "s-1")
    assert conv.cost_usd == pytest.approx(0.75)
    assert store.open_turns() == []


def test_a_turn_left_running_is_marked_interrupted_once_and_counted_once(
    open_store: Open,
) -> None:
    crashed = open_store()
    crashed.ensure("c1", title="t", source="web")
    crashed.ensure("c2", title="t", source="web")
    turn_id, previous = crashed.begin_turn(
        "c1", started=1000.0, message="deploy", log_file="/l", session_id="s-7"
    )
    assert previous is None
    crashed.begin_turn("c2", started=1000.0, message="other", log_file="/l", session_id=None)
    crashed.close()
    again = open_store()  # a restart
    (left,) = again.open_turns("c1")
    assert (left.id, left.conversation_id, left.session_id) == (turn_id, "c1", "s-7")
    assert len(again.open_turns()) == 2
    steps = [{"name": "Bash", "summary": "echo hi", "status": "ok", "detail": "hi"}]
    assert again.mark_interrupted(turn_id, reply="Interrupted", tools=steps, session_id="s-7")
    assert not again.mark_interrupted(turn_id, reply="again", tools=[], session_id=None)
    (turn,) = again.turns("c1")
    assert (turn.status, turn.is_error, turn.reply, turn.tools) == (
        "interrupted",
        True,
        "Interrupted",
        steps,
    )
    conv = again.get("c1")
    assert conv is not None and (conv.turns, conv.session_id) == (1, "s-7")
    # Its process finishing after all (it was alive) does not count the turn twice.
    again.finish_turn(
        turn_id,
        reply="done",
        is_error=False,
        session_id=None,
        cost_usd=None,
        injected=[],
        tools=[],
        status="completed",
    )
    conv = again.get("c1")
    assert conv is not None and conv.turns == 1
    _, previous = again.begin_turn(
        "c1", started=1002.0, message="next", log_file="/l", session_id=None
    )
    assert previous is not None and previous.message == "deploy"
    assert [t.conversation_id for t in again.open_turns()] == ["c2", "c1"]
