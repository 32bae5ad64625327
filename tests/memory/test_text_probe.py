"""The text probe (`memory.loop.personal`): whether a prompt is about the person's world when no
vector can tell (the hooks working directly: keyword search only), through a real keyword-only
store and the first turn of a project session as the hooks assemble it. The prompts here were
written after the probe was trained and are in no training set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory.config import MemoryConfig
from memory.loop.episodes import EpisodeStore
from memory.loop.personal import Reading, packaged_text_probe, text_features
from memory.loop.prompt import CHAT, MemoryLoop, Place
from memory.loop.recall import own_world
from memory.model import NoteDraft
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore

PROJECT = Place(key="ledger", name="ledger", scope="project:ledger")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    config = MemoryConfig.for_home(tmp_path / "home", fsync=False)
    with MemoryStore.open(config) as store:  # no encoder: keywords only, as the direct hooks
        store.save(
            NoteDraft(
                content="ledger 的 Redis 缓存 TTL 定成 24 小时，key 前缀 ledger:idem:。",
                scope="project:ledger",
            )
        )
        store.save(
            NoteDraft(
                content="The ledger weather widget calls the weather API once an hour.",
                scope="project:ledger",
            )
        )
        store.save(NoteDraft(content="我家的猫叫团子，对鱼过敏，每天吃两顿。", scope="user"))
        store.save(NoteDraft(content="The db pool holds 20 connections.", scope="project:ledger"))
        yield store


def _retrieved(store: MemoryStore, tmp_path: Path, place: Place, prompt: str) -> list[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    state = StateDB(tmp_path / "state.db")
    try:
        loop = MemoryLoop(lambda: store, EpisodeStore(state, store))
        context = loop.prompt("s1", place, prompt)
        return [i.id for i in context.injected if i.reason == "retrieved"]
    finally:
        state.close()


@pytest.mark.parametrize(
    ("place", "prompt", "injected"),
    [
        # general questions that share a word with a note bring nothing, even in the project
        (PROJECT, "今天天气怎么样？", False),
        (PROJECT, "What is a good TTL for an idempotency key in Redis?", False),
        # the person's own world does
        (PROJECT, "我们 ledger 的 Redis 缓存 TTL 是多少来着？", True),
        # a chat without vectors keeps the word rules (the first person, a name the note names)
        (CHAT, "我家猫对什么过敏来着？", True),
        (CHAT, "猫可以吃鱼吗？", False),
    ],
)
def test_without_vectors_a_first_turn_brings_notes_only_to_prompts_about_the_persons_world(
    store: MemoryStore, tmp_path: Path, place: Place, prompt: str, injected: bool
) -> None:
    assert bool(_retrieved(store, tmp_path, place, prompt)) is injected


def test_a_prompt_read_as_personal_needs_less_of_each_hit(
    store: MemoryStore, tmp_path: Path
) -> None:
    # both hits sit at relevance 0.42, under the inject floor (0.5), above its personal share
    asked = "what did I set the connections limit to?"  # read as personal
    work = "how many connections do I allow?"  # read as the project's work only
    assert [round(h.relevance, 2) for h in store.search(asked, floor=0)] == [0.42]
    assert [round(h.relevance, 2) for h in store.search(work, floor=0)] == [0.42]
    assert _retrieved(store, tmp_path / "a", PROJECT, asked)
    assert not _retrieved(store, tmp_path / "b", PROJECT, work)


def test_the_features_are_the_same_whatever_the_width_or_case_of_the_text() -> None:
    assert text_features("ＭＹ Ｒｅｄｉｓ 缓存") == text_features("my redis 缓存")
    assert text_features("") == {}


def test_the_packaged_text_probe_reads() -> None:
    probe = packaged_text_probe()
    assert probe is not None
    assert 0.0 <= probe.probability("x" * 10_000) <= 1.0


def test_the_words_alone_decide_in_a_project_session_only() -> None:
    general = Reading(personal=False, work=False, by_meaning=False)
    in_project = own_world("what tea do I like", "project:ledger", general)
    assert not in_project("The user drinks oolong tea.", "user")
    in_chat = own_world("what tea do I like", None, general)
    assert in_chat("The user drinks oolong tea.", "user")  # the first person, as before
