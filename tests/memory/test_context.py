"""Index-first context: budgeted note lines and `_index.json` (the assembled context that users
get is tested in test_loop.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from memory._text import estimate_tokens
from memory.config import MemoryConfig
from memory.loop.context import select_context_entries
from memory.model import NoteDraft
from memory.sqlite.store import MemoryStore
from tests.memory.corpus import load_corpus


@pytest.fixture
def corpus(store: MemoryStore) -> dict[str, str]:
    return load_corpus(store)


@pytest.mark.parametrize("budget", [0, 10, 30, 60, 120, 300, 1500])
@pytest.mark.parametrize("query", [None, "连接池 JWT", "leak"])
def test_listing_never_exceeds_its_budget(
    store: MemoryStore, corpus: dict[str, str], budget: int, query: str | None
) -> None:
    entries = select_context_entries(store, query, budget_tokens=budget)
    assert sum(e.tokens for e in entries) <= budget
    assert all(e.tokens == estimate_tokens(e.line) + 1 for e in entries)
    if budget >= 120:
        assert entries and all(e.line.startswith(f"- [{e.id}] ") for e in entries)


def test_token_estimate_counts_cjk_as_one_token_each() -> None:
    assert estimate_tokens("连接池") == 3
    assert estimate_tokens("abcdefgh") == 2
    assert estimate_tokens("修复 bug") == 2 + 1


def test_query_puts_the_most_relevant_notes_first(
    store: MemoryStore, corpus: dict[str, str]
) -> None:
    entries = select_context_entries(store, "修复连接池泄漏", budget_tokens=1500)
    assert entries[0].id == corpus["pool_leak"]
    assert entries[0].line.startswith(f"- [{corpus['pool_leak']}] bug · 修复连接池泄漏")


def test_without_a_query_important_lasting_types_come_first(
    store: MemoryStore, corpus: dict[str, str]
) -> None:
    ids = [e.id for e in select_context_entries(store, None, budget_tokens=1500)]
    assert set(ids) >= set(corpus.values())
    assert ids.index(corpus["person"]) < ids.index(corpus["meeting"])  # identity > conversation


def test_excluded_ids_are_skipped(store: MemoryStore, corpus: dict[str, str]) -> None:
    entries = select_context_entries(
        store, "连接池", budget_tokens=1500, exclude_ids={corpus["pool_leak"]}
    )
    assert corpus["pool_leak"] not in [e.id for e in entries]


def test_context_does_not_count_as_access(store: MemoryStore, corpus: dict[str, str]) -> None:
    select_context_entries(store, "连接池")
    assert store.get(corpus["pool_leak"]).access_count == 0


def test_inactive_notes_stay_out_of_context(store: MemoryStore, corpus: dict[str, str]) -> None:
    store.deprecate(corpus["pool_leak"])
    for query in ("连接池", None):
        assert corpus["pool_leak"] not in [e.id for e in select_context_entries(store, query)]


def test_index_json_lists_every_note_newest_first(config: MemoryConfig) -> None:
    now = [datetime.now(UTC) + timedelta(minutes=1)]
    with MemoryStore.open(config, clock=lambda: now[0]) as store:
        ids = load_corpus(store)
        now[0] += timedelta(minutes=1)
        store.update(ids["cache"], importance=0.9)  # now the newest
    data = json.loads((config.root / "_index.json").read_text(encoding="utf-8"))
    notes = data["notes"]
    assert data["count"] == len(notes) == len(ids) + 1
    assert notes[0]["id"] == ids["cache"]
    stamps = [n["updated_at"] for n in notes]
    assert stamps == sorted(stamps, reverse=True) and data["truncated"] is False
    for key in ("path", "title", "type", "tags", "updated_at", "mtime", "size", "summary"):
        assert key in notes[0]
    assert (config.root / notes[0]["path"]).is_file()


def test_index_json_follows_changes(config: MemoryConfig) -> None:
    eager = MemoryConfig.for_home(config.root.parent, index_json_interval=0)
    with MemoryStore.open(eager) as store:
        first = store.save(NoteDraft(content="first listed note"))
        listing = config.root / "_index.json"
        assert first.id in listing.read_text(encoding="utf-8")
        store.abspath(first.path).unlink()
        store.sync()
        assert first.id not in listing.read_text(encoding="utf-8")
        second = store.save(NoteDraft(content="second listed note"))
        assert second.id in listing.read_text(encoding="utf-8")


def test_index_json_is_capped_to_the_newest_notes(config: MemoryConfig) -> None:
    capped = MemoryConfig.for_home(config.root.parent, index_json_limit=3)
    with MemoryStore.open(capped) as store:
        ids = load_corpus(store)
    data = json.loads((config.root / "_index.json").read_text(encoding="utf-8"))
    assert data["count"] == len(ids) + 1 and data["truncated"] is True
    assert len(data["notes"]) == 3


def test_a_process_that_changed_nothing_does_not_rewrite_the_listing(
    config: MemoryConfig,
) -> None:
    with MemoryStore.open(config) as store:
        store.save(NoteDraft(content="listed once"))
    listing = config.root / "_index.json"
    before = listing.stat().st_mtime_ns
    with MemoryStore.open(config) as store:
        store.search("listed")
    assert listing.stat().st_mtime_ns == before
