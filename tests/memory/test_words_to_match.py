"""Which words an any-word query matches (memory/search/engine.py, `words_to_match`): the most
common words go when a note holding only them could not pass a relevance floor anyway."""

from __future__ import annotations

import pytest

from memory.search.engine import NO_KEYWORD_EVIDENCE, words_to_match
from memory.search.fusion import keyword_coverage
from memory.search.keyword import parse_query
from memory.search.relevance import Evidence, calibrated


@pytest.mark.parametrize(
    ("query", "weights", "kept"),
    [
        # one word: nothing to leave out
        ("redis", [1.0], ["redis"]),
        # all alike: each holds a third, more than a quarter: all kept
        ("redis timeout config", [1.0, 1.0, 1.0], ["redis", "timeout", "config"]),
        # a common word holding a tenth of the query's weight goes
        ("redis timeout issue", [4.5, 4.5, 1.0], ["redis", "timeout"]),
        # two common words together under a quarter go; a third would pass it and stays
        ("tidy handle issue redis", [1.0, 1.0, 1.0, 7.0], ["issue", "redis"]),
        ("handle issue config redis", [1.0, 0.8, 1.5, 4.7], ["config", "redis"]),
        # ties: the earlier word goes first, the order of the rest is kept
        ("alpha beta gamma delta", [1.0, 1.0, 3.0, 3.0], ["beta", "gamma", "delta"]),
    ],
)
def test_the_most_common_words_under_a_quarter_of_the_query_are_not_matched(
    query: str, weights: list[float], kept: list[str]
) -> None:
    parsed = parse_query(query)
    assert [t.text for t in parsed.terms] == query.split()
    assert [t.text for t in words_to_match(parsed, weights).terms] == kept


def test_a_note_holding_only_the_words_left_out_has_no_keyword_relevance() -> None:
    parsed = parse_query("tidy handle issue redis")
    weights = [1.0, 1.0, 1.0, 7.0]
    left_out = {"tidy", "handle", "issue"} - {t.text for t in words_to_match(parsed, weights).terms}
    assert left_out == {"tidy", "handle"}
    coverage = keyword_coverage(parsed, "", (), "", " ".join(left_out), term_weights=weights)
    assert coverage < NO_KEYWORD_EVIDENCE
    for vectors in (True, False):
        assert calibrated(Evidence(coverage=coverage, vectors=vectors)) == 0.0
