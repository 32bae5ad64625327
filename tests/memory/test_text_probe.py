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
from memory.loop.personal import packaged_text_probe, text_features
from memory.loop.prompt import CHAT, MemoryLoop, Place
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
        yield store


def _retrieved(store: MemoryStore, tmp_path: Path, place: Place, prompt: str) -> list[str]:
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
        (CHAT, "我想知道猫能不能吃鱼", False),  # in the first person, still general
        # the person's own world does
        (PROJECT, "我们 ledger 的 Redis 缓存 TTL 是多少来着？", True),
        (CHAT, "我家猫对什么过敏来着？", True),
    ],
)
def test_without_vectors_a_first_turn_brings_notes_only_to_prompts_about_the_persons_world(
    store: MemoryStore, tmp_path: Path, place: Place, prompt: str, injected: bool
) -> None:
    assert bool(_retrieved(store, tmp_path, place, prompt)) is injected


def test_the_features_are_the_same_whatever_the_width_or_case_of_the_text() -> None:
    assert text_features("ＭＹ Ｒｅｄｉｓ 缓存") == text_features("my redis 缓存")
    assert text_features("") == {}


def test_the_packaged_text_probe_reads() -> None:
    probe = packaged_text_probe()
    assert probe is not None
    assert 0.0 <= probe.probability("x" * 10_000) <= 1.0
