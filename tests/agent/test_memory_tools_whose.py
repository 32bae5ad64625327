"""The agent's memory tools in a Feishu member's turn (issue #33, docs/memory-format.md "Whose a
note is"): what the model asks for, by any scope or id, stays within the member's own notes and
their group's team notes; saves go to the member's own scope; the owner's notes and other
members' are "not found", as a missing note. The store is real."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.events import TurnResult
from agent.memory_tools import build_memory_tools
from agent.recorder import MemoryRecorder
from agent.sessions import TurnInfo
from memory.config import MemoryConfig
from memory.loop.entities import PendingStore
from memory.loop.episodes import EpisodeStore
from memory.model import OWNER, NoteDraft, Reader
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore

ALICE, BOB = "ou_alice0000000000000000000000000", "ou_bob00000000000000000000000000"
GROUP = "oc_team000000000000000000000000"


class Turn:
    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.changes: list[dict[str, Any]] = []

    def record_memory_change(self, change: dict[str, Any]) -> None:
        self.changes.append(change)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(MemoryConfig.for_home(tmp_path / "home", fsync=False)) as opened:
        yield opened


def _tools(store: MemoryStore, turn: Turn, tmp_path: Path) -> dict[str, Any]:
    pending = PendingStore(StateDB(tmp_path / "home" / "state.db"))
    built = build_memory_tools(
        store, conversation_id="feishu:x", pending=pending, current_turn=lambda: turn
    )
    return {t.name: t.handler for t in built}


def _said(answer: dict[str, Any]) -> str:
    return str(answer["content"][0]["text"])


async def test_a_members_tools_never_reach_the_owners_or_another_members_notes(
    store: MemoryStore, tmp_path: Path
) -> None:
    owner = store.save(
        NoteDraft(content="My bank PIN hint is the cat's birthday.", type="identity")
    )
    bob = store.save(NoteDraft(content="Bob's cat is called Mochi.", scope=f"person:{BOB}"))
    team = store.save(
        NoteDraft(content="The team cat photo channel is #cats.", scope=f"team:{GROUP}")
    )
    alice = Reader(
        owner=False, scopes=(f"person:{ALICE}", f"team:{GROUP}"), saves_to=f"person:{ALICE}"
    )
    tools = _tools(store, Turn(alice), tmp_path)

    searches = [
        _said(await tools["memory_search"]({"query": "cat"})),
        _said(await tools["memory_search"]({"query": "cat", "scope": "user"})),
        _said(await tools["memory_search"]({"query": "cat", "scope": f"person:{BOB}"})),
    ]
    got = _said(await tools["memory_get"]({"ids": [owner.id, bob.id, team.id]}))
    update = await tools["memory_update"]({"id": owner.id, "content": "changed"})
    deprecate = await tools["memory_deprecate"]({"id": bob.id, "reason": "x"})
    team_change = await tools["memory_update"]({"id": team.id, "content": "changed"})

    assert team.id in searches[0] and owner.id not in searches[0] and bob.id not in searches[0]
    assert searches[1] == searches[2] == "No memories found."
    assert "PIN" not in got and "Mochi" not in got and "#cats" in got
    assert f"note {owner.id!r} not found" in got and f"note {bob.id!r} not found" in got
    assert update["is_error"] and "not found" in _said(update)
    assert deprecate["is_error"] and "not found" in _said(deprecate)
    assert team_change["is_error"] and "team note" in _said(team_change)
    assert store.get(owner.id).body.startswith("My bank PIN")
    assert store.get(bob.id).status == "active"
    assert store.get(team.id).body.startswith("The team cat")


async def test_a_members_saves_go_to_their_own_scope_and_nowhere_else(
    store: MemoryStore, tmp_path: Path
) -> None:
    alice = Reader(
        owner=False, scopes=(f"person:{ALICE}", f"team:{GROUP}"), saves_to=f"person:{ALICE}"
    )
    tools = _tools(store, Turn(alice), tmp_path)
    saved = _said(await tools["memory_save"]({"content": "Alice prefers tea without sugar."}))
    refused = [
        await tools["memory_save"]({"content": "Everyone prefers tea.", "scope": scope})
        for scope in ("user", f"team:{GROUP}", f"person:{BOB}", "project:x")
    ]
    note_id = saved.split("[", 1)[1].split("]", 1)[0]
    assert store.get(note_id).scope == f"person:{ALICE}"
    assert store.get(note_id).path.startswith("people/")
    assert all(r["is_error"] and "not this conversation's" in _said(r) for r in refused)
    assert [n.scope for n in store.list(limit=100) if "Everyone" in n.body] == []


async def test_the_owners_tools_read_their_own_scopes_and_no_members(
    store: MemoryStore, tmp_path: Path
) -> None:
    mine = store.save(NoteDraft(content="I take my tea with lemon.", type="preference"))
    bob = store.save(NoteDraft(content="Bob takes his tea with milk.", scope=f"person:{BOB}"))
    tools = _tools(store, Turn(OWNER), tmp_path)
    found = _said(await tools["memory_search"]({"query": "tea"}))
    saved = _said(
        await tools["memory_save"]({"content": "I drink tea at four.", "type": "preference"})
    )
    assert mine.id in found and bob.id not in found
    assert store.get(saved.split("[", 1)[1].split("]", 1)[0]).scope == "user"


async def test_what_is_captured_from_a_members_words_and_their_session_are_theirs(
    store: MemoryStore, tmp_path: Path
) -> None:
    state = StateDB(tmp_path / "home" / "state.db")
    episodes = EpisodeStore(state, store)
    recorder = MemoryRecorder(store, episodes, PendingStore(state), summarizer=None)
    alice = Reader(
        owner=False, scopes=(f"person:{ALICE}", f"team:{GROUP}"), saves_to=f"person:{ALICE}"
    )
    conversation = f"feishu:{GROUP}:{ALICE}:v1"
    result = TurnResult(
        reply="好的。", conversation_id=conversation, session_id=None, is_error=False, log_file=""
    )
    await recorder.on_turn(
        TurnInfo(conversation, "我决定以后都用 pytest 写测试", result, 0, time.time(), alice)
    )
    episode = episodes.active(conversation)
    [captured] = [n for n in store.list(limit=100) if "pytest" in n.body]
    assert captured.scope == f"person:{ALICE}"  # a sure capture: saved at once, as hers
    assert episode is not None and episode.scope == f"person:{ALICE}"  # so is its summary
