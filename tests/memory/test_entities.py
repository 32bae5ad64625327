"""Entity detection: bilingual patterns, confidence, and the pending list."""

from __future__ import annotations

from pathlib import Path

import pytest

from errors import NotFoundError
from memory.loop.entities import AUTO_SAVE_CONFIDENCE, PendingStore, detect_entities
from memory.sqlite.state import StateDB


@pytest.mark.parametrize(
    ("text", "kind", "auto"),
    [
        ("我决定以后都用 pytest 写测试", "decision", True),
        ("以后都用 uv 管理依赖", "preference", True),
        ("我们决定采用 PostgreSQL", "decision", True),
        ("We decided to use PostgreSQL for the backend.", "decision", True),
        ("I prefer short answers", "preference", True),
        ("From now on always answer in Chinese", "preference", True),
        ("不要再用 var 声明变量", "preference", False),
        ("数据库采用 PostgreSQL 16", "architecture", False),
        ("我觉得 pytest 还不错", "preference", False),
        ("maybe we should use redis", "decision", False),
        ("也许换成 MySQL", "decision", False),
    ],
)
def test_detection_table(text: str, kind: str, auto: bool) -> None:
    (found,) = detect_entities(text)
    assert found.type == kind
    assert (found.confidence >= AUTO_SAVE_CONFIDENCE) is auto, found.confidence


@pytest.mark.parametrize(
    "text",
    ["今天天气不错", "hello", "how do I deploy?", "ok", "", "```\nwe decided\n```"],
)
def test_ordinary_messages_are_not_entities(text: str) -> None:
    assert detect_entities(text) == []


def test_each_sentence_is_its_own_candidate() -> None:
    found = detect_entities("我决定用 Rust 重写。以后都用 cargo fmt 格式化。")
    assert {c.content for c in found} == {"我决定用 Rust 重写。", "以后都用 cargo fmt 格式化。"}


def test_secrets_never_reach_a_candidate() -> None:
    (found,) = detect_entities(
        "I decided to use the key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"
    )
    assert "sk-ant" not in found.content


def test_pending_store_round_trip(tmp_path: Path) -> None:
    store = PendingStore(StateDB(tmp_path / "state.db"))
    (candidate,) = detect_entities("maybe we should use redis")
    first = store.add(candidate, source="t")
    again = store.add(candidate, source="t")
    assert again.id == first.id, "the same pending text is queued once"
    assert [p.id for p in store.list()] == [first.id]
    store.resolve(first.id, "rejected")
    assert store.list() == []
    assert store.list(status=None)[0].status == "rejected"
    with pytest.raises(NotFoundError):
        store.get("pend_missing")
