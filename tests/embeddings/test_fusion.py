"""Reciprocal rank fusion: pure functions, checked against hand-computed tables."""

from __future__ import annotations

import pytest

from memory.hybrid import FusionWeights, fuse, rrf


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


def test_fuse_first_in_both_lists_has_relevance_one() -> None:
    fused = fuse(["a", "b"], ["a", "c"], FusionWeights(keyword=2, vector=1, k=60))
    assert fused[0] == ("a", pytest.approx(1.0))
    assert [item for item, _ in fused] == ["a", "b", "c"]


def test_keyword_weight_two_to_one_breaks_a_rank_tie_towards_keywords() -> None:
    fused = fuse(["kw"], ["vec"], FusionWeights(keyword=2, vector=1, k=60))
    assert [item for item, _ in fused] == ["kw", "vec"]
    assert fused[0][1] == pytest.approx(2 / 3)  # 2/61 of the best 3/61


def test_equal_scores_keep_keyword_order_then_vector_order() -> None:
    fused = fuse(["b", "a"], ["d", "c"], FusionWeights(keyword=1, vector=1, k=60))
    assert [item for item, _ in fused] == ["b", "d", "a", "c"]


def test_keyword_hits_holding_few_query_words_are_discounted() -> None:
    weights = FusionWeights(keyword=2, vector=1, k=60)
    # a Chinese question about an English note: the only keyword hit shares one common word
    # of three with the question; the vector retriever finds the note
    plain = fuse(["junk"], ["note"], weights)
    discounted = fuse(["junk"], ["note"], weights, keyword_coverage=[1 / 3])
    assert [item for item, _ in plain] == ["junk", "note"]
    assert [item for item, _ in discounted] == ["note", "junk"]


def test_full_coverage_is_plain_rrf() -> None:
    weights = FusionWeights(keyword=2, vector=1, k=60)
    assert fuse(["a", "b"], ["b"], weights, keyword_coverage=[1.0, 1.0]) == fuse(
        ["a", "b"], ["b"], weights
    )


def test_vector_depth_limits_the_vector_list() -> None:
    fused = fuse([], ["a", "b", "c"], FusionWeights(vector_depth=2))
    assert [item for item, _ in fused] == ["a", "b"]


@pytest.mark.parametrize(
    "kwargs", [{"keyword": -1}, {"vector": -0.5}, {"keyword": 0, "vector": 0}, {"k": -1}]
)
def test_invalid_weights_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        FusionWeights(**kwargs)
