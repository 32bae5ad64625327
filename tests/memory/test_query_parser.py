"""The query parser: any text becomes a safe FTS query."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.search.keyword import parse_query
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
