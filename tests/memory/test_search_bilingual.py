"""Bilingual search: Chinese, English, mixed and identifier queries find the right notes."""

from __future__ import annotations

import pytest

from memory.sqlite.store import MemoryStore
from tests.memory.corpus import load_corpus

QUERIES: list[tuple[str, str]] = [
    # Chinese: two-character words, compounds inside longer text, names
    ("连接池", "pool_leak"),
    ("修复连接池泄漏", "pool_leak"),
    ("连接池泄漏", "pool_leak"),
    ("泄漏", "pool_leak"),
    ("缓存", "cache"),
    ("排序 权衡", "meeting"),
    ("王小明", "person"),
    ("飞书机器人", "feishu"),
    ("如何处理令牌过期", "jwt"),
    # English
    ("concise answers", "concise"),
    ("Docker", "deploy"),
    ("WAL busy timeout", "sqlite"),
    ("token bucket", "rate_limit"),
    ("memory leak", "indexer_leak"),
    # code identifiers
    ("JWT", "jwt"),
    ("auth_timeout", "jwt"),
    ("getConnPoolSize", "getconn"),
    ("ConnPool", "getconn"),
    ("rate_limit", "rate_limit"),
    ("max_retries", "retry"),
    ("FEISHU_APP_ID", "feishu"),
    # mixed
    ("jwt 过期", "jwt"),
    ("Redis 缓存", "cache"),
    ("重试 retry_backoff", "retry"),
    ("用户 prefers concise", "concise"),
    ("飞书 websocket", "feishu"),
    ("asyncio 后端工程师", "person"),
]


@pytest.fixture
def corpus(store: MemoryStore) -> dict[str, str]:
    return load_corpus(store)


@pytest.mark.parametrize(("query", "expected"), QUERIES)
def test_expected_note_is_in_top_three(
    store: MemoryStore, corpus: dict[str, str], query: str, expected: str
) -> None:
    hits = store.search(query, limit=3)
    assert corpus[expected] in [h.id for h in hits], [(h.title, h.score) for h in hits]


def test_compound_word_does_not_match_its_prefix_alone(
    store: MemoryStore, corpus: dict[str, str]
) -> None:
    # "网络连接超时" contains 连接 but not 连接池
    ids = [h.id for h in store.search("连接池", limit=10)]
    assert corpus["timeout"] not in ids


def test_short_english_word_does_not_match_inside_longer_words(
    store: MemoryStore, corpus: dict[str, str]
) -> None:
    ids = [h.id for h in store.search("PR", limit=10)]
    assert corpus["prefetch"] not in ids


def test_exact_title_match_ranks_first(store: MemoryStore, corpus: dict[str, str]) -> None:
    assert store.search("修复连接池泄漏", limit=1)[0].id == corpus["pool_leak"]
    assert store.search("Memory leak in the indexer", limit=1)[0].id == corpus["indexer_leak"]


def test_scope_filter_includes_user_notes(store: MemoryStore, corpus: dict[str, str]) -> None:
    # three topics at once: each note holds one of the words, weak evidence each (floor 0)
    api = {h.id for h in store.search("JWT 缓存 Docker", scope="project:api", limit=10, floor=0)}
    assert {corpus["jwt"], corpus["deploy"], corpus["cache"]} <= api
    web = {h.id for h in store.search("JWT 缓存 Docker", scope="project:web", limit=10, floor=0)}
    assert corpus["jwt"] not in web and corpus["cache"] in web


def test_type_filter(store: MemoryStore, corpus: dict[str, str]) -> None:
    hits = store.search("leak 泄漏", type="bug", limit=10)
    assert hits and all(h.type == "bug" for h in hits)
    assert corpus["getconn"] not in [h.id for h in hits]


def test_hits_carry_score_parts_that_add_up(store: MemoryStore, corpus: dict[str, str]) -> None:
    weights = store.config.ranking
    for hit in store.search("连接池 JWT cache", limit=10):
        p = hit.parts
        for value in (p.relevance, p.type_weight, p.recency, p.importance):
            assert 0.0 <= value <= 1.0
        expected = (
            p.relevance * weights.relevance
            + p.type_weight * weights.type
            + p.recency * weights.recency
            + p.importance * weights.importance
        )
        assert hit.score == pytest.approx(expected)
    top = store.search("JWT", limit=1)[0]
    assert top.parts.type_weight == pytest.approx(0.6)  # code
    assert top.parts.recency == pytest.approx(1.0, abs=1e-3)  # just written
    assert top.snippet and "JWT" in top.snippet


def test_negation_and_phrase_syntax(store: MemoryStore, corpus: dict[str, str]) -> None:
    ids = [h.id for h in store.search("leak -indexer", limit=10)]
    assert corpus["getconn"] in ids and corpus["indexer_leak"] not in ids
    ids = [h.id for h in store.search('"context manager"', limit=10)]
    assert ids == [corpus["indexer_leak"]]
    ids = [h.id for h in store.search("prefetch*", limit=10)]
    assert corpus["prefetch"] in ids
