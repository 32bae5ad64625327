"""The query parser: any text becomes a safe FTS query."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.search.keyword import match_pattern, parse_query
from memory.sqlite.store import MemoryStore
from tests.memory.corpus import load_corpus

SPECIAL = "\"*()-+:^{}[],.;!?'\\/_ \t\nORANDNOTNEAR"
ALPHABET = st.sampled_from(list(SPECIAL) + list("abcxyzJWT连接池缓存修复的了é🙂0189"))


def test_chinese_is_segmented_into_words() -> None:
    query = parse_query("如何修复连接池泄漏")
    assert [t.text for t in query.terms] == ["修复", "连接池", "泄漏"]  # 如何 is a stop word
    assert query.fts() == '("修 复" OR "连 接 池" OR "泄 漏")'


def test_identifiers_stay_whole_and_mixed_text_splits() -> None:
    query = parse_query("原因是JWT auth_timeout GPT-4")
    assert [t.text for t in query.terms] == ["原因", "JWT", "auth_timeout", "GPT-4"]
    assert query.trigram() == '"jwt" OR "auth_timeout" OR "gpt-4"'


def test_operators_prefixes_and_exclusions() -> None:
    query = parse_query('cache* OR "exact phrase" -redis AND (deploy)')
    assert [(t.text, t.prefix) for t in query.terms] == [
        ("cache", True),
        ("exact phrase", False),
        ("deploy", False),
    ]
    assert [t.text for t in query.excluded] == ["redis"]
    assert query.fts() == '("cache"* OR "exact phrase" OR "deploy") NOT ("redis")'


def test_queries_of_only_symbols_have_no_terms() -> None:
    for text in ["", "   ", "***", '"""', "()", "-", "🙂", "。，！"]:
        assert parse_query(text).empty


def test_stop_words_are_kept_when_nothing_else_is_left() -> None:
    assert [t.text for t in parse_query("the").terms] == ["the"]
    assert [t.text for t in parse_query("OR").terms] == ["OR"]
    assert [t.text for t in parse_query("-foo").terms] == ["foo"]


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.text(alphabet=ALPHABET, max_size=40) | st.text(max_size=40))
def test_any_text_searches_without_error(store: MemoryStore, text: str) -> None:
    if store.count() == 1:
        load_corpus(store)
    hits = store.search(text, record_access=False)
    assert isinstance(hits, list)


@pytest.mark.parametrize(
    ("term", "prefix", "text", "found"),
    [
        ("leak", False, "a pool leak here", True),
        ("leak", False, "leaks everywhere", True),  # English endings, like the index's stems
        ("leak", False, "leakers", True),
        ("leak", False, "leakage", False),  # not a word ending: another word
        ("leak", False, "noleak", False),
        ("leak", True, "leakage", True),  # `leak*`
        ("leak", False, "连接池leak泄漏", True),  # CJK beside a Latin word is an edge
        ("leak", False, "éleak", False),  # a non-ASCII letter is not
        ("auth timeout", False, "set auth_timeout=5", True),
        ("auth timeout", False, "auth-timeouts", True),
        ("auth timeout", False, "oauth_timeout", False),
        ("连 接 池", False, "修复连接池泄漏", True),
        ("连 接 池", False, "连接 池", True),
        ("连 接 池", False, "连池", False),
        ("v2", False, "api v2, not v20", True),
        ("v2", False, "v20 v21", False),
        ("pool", False, "poolpool pool", True),  # a later occurrence counts
    ],
)
def test_a_term_is_found_where_the_index_finds_its_words(
    term: str, prefix: bool, text: str, found: bool
) -> None:
    assert match_pattern(term, prefix).search(text) is found
