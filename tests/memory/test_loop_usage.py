"""The memory loop uses what is recorded (issue #19): an injected note counts as an access, and
a note the user marked not relevant to a prompt is left out of similar prompts' recall (every
front door: the chat agent and the Claude Code / Codex hooks share `MemoryLoop.prompt`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory.config import MemoryConfig
from memory.loop.episodes import EpisodeStore
from memory.loop.feedback import FeedbackStore
from memory.loop.prompt import MemoryLoop, Place
from memory.model import NoteDraft
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore

CHAT = Place(key="chat:c", name="chat", scope=None)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(MemoryConfig.for_home(tmp_path / "home", fsync=False)) as opened:
        yield opened


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateDB]:
    db = StateDB(tmp_path / "state.db")
    yield db
    db.close()


def test_an_injected_note_counts_as_an_access(store: MemoryStore, state: StateDB) -> None:
    note_id = store.save(NoteDraft(content="Deploys go through staging.", title="deploy")).id
    loop = MemoryLoop(lambda: store, EpisodeStore(state, store))
    assert note_id in loop.prompt("k1", CHAT, "our deploys to staging?").text
    assert note_id in loop.prompt("k2", CHAT, "our deploys to staging?").text
    assert store.get(note_id).access_count == 2
    loop.prompt("k1", CHAT, "our deploys to staging?")  # held back by k1's window: not injected
    assert store.get(note_id).access_count == 2


def test_a_note_marked_not_relevant_stays_out_of_similar_prompts(
    store: MemoryStore, state: StateDB
) -> None:
    pool = store.save(NoteDraft(content="The db pool holds 20 connections.", title="pool")).id
    loop = MemoryLoop(lambda: store, EpisodeStore(state, store))
    assert pool in loop.prompt("a", CHAT, "how big is our db pool").text
    FeedbackStore(state).mark_not_relevant(pool, "how big is our db pool")
    assert pool not in loop.prompt("b", CHAT, "how big is our db pool now?").text
    assert pool in loop.prompt("c", CHAT, "I need the db pool connections in prod").text
    assert [h.id for h in store.search("db pool")] == [pool]  # still searchable
