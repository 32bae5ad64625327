"""Fusion of keyword and vector results: pure functions, checked against hand-made tables."""

from __future__ import annotations

import pytest

from memory.search.fusion import (
    FusionWeights,
    fuse,
    idf,
    keyword_coverage,
    keyword_trust,
    rrf,
    vector_trust,
)
from memory.search.keyword import parse_query

PLAIN = FusionWeights(keyword=2, vector=1, k=60)


@pytest.mark.parametrize(
    ("rankings", "k", "expected"),
    [
        # one list: 1/(k+rank)
        ([(["a", "b"], 1.0)], 0, {"a": 1.0, "b": 0.5}),
        # both lists agree on "a"
        ([(["a", "b"], 1.0), (["a", "c"], 1.0)], 0, {"a": 2.0, "b": 0.5, "c": 0.5}),
        # weights scale each list
        ([(["a"], 2.0), (["b"], 1.0)], 1, {"a": 1.0, "b": 0.5}),
        # a duplicate inside one list counts once, at its best rank
        ([(["a", "a", "b"], 1.0)], 0, {"a": 1.0, "b": 1 / 3}),
        # an empty list adds nothing
        ([([], 1.0), (["x"], 1.0)], 60, {"x": 1 / 61}),
    ],
)
def test_rrf_table(rankings: list[tuple[list[str], float]], k: float, expected: dict) -> None:
    assert rrf(rankings, k) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("keyword", "vector", "order", "relevance"),
    [
        (["a", "b"], ["a", "c"], ["a", "b", "c"], [1.0, (2 / 62) / (3 / 61), (1 / 62) / (3 / 61)]),
        # a rank tie between the lists goes to keywords (weight 2:1)
        (["kw"], ["vec"], ["kw", "vec"], [1.0, 0.5]),
        # equal values keep keyword order, then vector order
        (["b", "a"], [], ["b", "a"], [1.0, 61 / 62]),
        ([], [], [], []),
    ],
)
def test_plain_weighted_rrf_table(
    keyword: list[str], vector: list[str], order: list[str], relevance: list[float]
) -> None:
    fused = fuse(keyword, vector, PLAIN)
    assert [item for item, _ in fused] == order
    assert [value for _, value in fused] == pytest.approx(relevance)


def test_keyword_hits_holding_few_query_words_are_discounted() -> None:
    # a Chinese question about an English note: the only keyword hit shares one common word
    # with the question; the vector retriever finds the note
    plain = fuse(["junk"], ["note"], PLAIN)
    discounted = fuse(["junk"], ["note"], PLAIN, keyword_coverage=[0.2])
    assert [item for item, _ in plain] == ["junk", "note"]
    assert [item for item, _ in discounted] == ["note", "junk"]


@pytest.mark.parametrize(
    ("coverage", "trust"),
    [(0.0, 0.0), (0.05, 0.0), (0.1, 0.0), (0.35, 0.5), (0.6, 1.0), (0.9, 1.0), (1.0, 1.0)],
)
def test_keyword_trust_grows_linearly_from_its_start_to_the_floor(
    coverage: float, trust: float
) -> None:
    weights = FusionWeights(coverage_start=0.1, coverage_floor=0.6)
    assert keyword_trust(coverage, weights) == pytest.approx(trust)


@pytest.mark.parametrize(("coverage", "trust"), [(0.0, 0.0), (0.3, 0.5), (0.6, 1.0)])
def test_keyword_trust_from_zero(coverage: float, trust: float) -> None:
    weights = FusionWeights(coverage_start=0.0, coverage_floor=0.6)
    assert keyword_trust(coverage, weights) == pytest.approx(trust)


def test_a_keyword_hit_sharing_a_common_word_does_not_outrank_a_modest_vector_hit() -> None:
    # set B of docs/retrieval.md: a paraphrased question shares an everyday word with an
    # unrelated note (a fifth of the query's weight); the note it is about is a vector hit
    # standing out modestly (z about 1.8). With trust from 0 and w_kw = 2 the unrelated
    # note ranked first.
    others = [0.20 + 0.004 * (i % 25) for i in range(49)]
    scores = [0.30, *others]
    vector = ["note", *[f"other{i}" for i in range(49)]]
    assert 0.3 < vector_trust(scores)[0] < 0.5
    fused = fuse(["junk"], vector, FusionWeights(), keyword_coverage=[0.2], vector_scores=scores)
    assert [item for item, _ in fused[:2]] == ["note", "junk"]
    before = FusionWeights(keyword=2.0, coverage_start=0.0)
    assert fuse(["junk"], vector, before, keyword_coverage=[0.2], vector_scores=scores)[0][0] == (
        "junk"
    )


def test_a_confident_vector_hit_outweighs_a_keyword_hit() -> None:
    scores = [0.60] + [0.20 + 0.001 * i for i in range(49)]  # one clear winner
    vector = ["note", *[f"other{i}" for i in range(49)]]
    trust = vector_trust(scores)
    assert trust[0] > 2.5
    assert max(trust[1:]) < 0.5
    fused = fuse(["junk"], vector, FusionWeights(), vector_scores=scores)
    assert fused[0][0] == "note"


def test_a_flat_vector_list_adds_little() -> None:
    scores = [0.5 - 0.0001 * i for i in range(50)]
    assert max(vector_trust(scores)) < 0.4


@pytest.mark.parametrize("scores", [[], [0.5], [0.5, 0.4], [0.3, 0.3, 0.3]])
def test_too_few_or_equal_vector_scores_are_trusted_plainly(scores: list[float]) -> None:
    assert vector_trust(scores) == [1.0] * len(scores)


def test_vector_depth_limits_the_vector_list() -> None:
    fused = fuse([], ["a", "b", "c"], FusionWeights(vector_depth=2))
    assert [item for item, _ in fused] == ["a", "b"]


def test_keyword_coverage_weights_rare_words_more() -> None:
    query = parse_query("Caroline LGBTQ support group")
    body = "Caroline: I went to the LGBTQ meetup"
    assert keyword_coverage(query, "", [], "", body) == pytest.approx(0.5)
    weights = [idf(500, 600), idf(3, 600), idf(300, 600), idf(300, 600)]
    weighted = keyword_coverage(query, "", [], "", body, term_weights=weights)
    assert weighted > 0.5


def test_keyword_coverage_matches_chinese_words_and_title() -> None:
    query = parse_query("连接池泄漏")
    assert keyword_coverage(query, "修复连接池泄漏", [], "", "") == 1.0
    assert keyword_coverage(query, "", [], "", "连接池") == 0.5
    assert keyword_coverage(parse_query("ConnPool"), "", [], "", "getConnPoolSize") == 0.0
    assert (
        keyword_coverage(parse_query("ConnPool"), "", [], "", "getConnPoolSize", substring=True)
        == 1.0
    )


def test_idf_falls_as_words_get_common() -> None:
    assert idf(1, 1000) > idf(100, 1000) > idf(900, 1000) > 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"keyword": -1},
        {"vector": -0.5},
        {"keyword": 0, "vector": 0},
        {"k": -1},
        {"coverage_floor": 2},
        {"coverage_start": 0.6, "coverage_floor": 0.6},
        {"coverage_start": -0.1},
    ],
)
def test_invalid_weights_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        FusionWeights(**kwargs)
