"""Reciprocal rank fusion of keyword and vector results (pure functions, no I/O).

    fused(d) = w_kw * coverage(d)^p / (k + rank_kw(d)) + w_vec / (k + rank_vec(d))

A list that does not contain `d` adds nothing. Ranks start at 1. `coverage(d)` is the share
of the query's words the note contains (1 when not given): a keyword hit that matched one
common word of a Chinese question asked about an English note ranks first among the keyword
hits, and plain RRF would trust that rank as much as a hit holding every word. Raised to
`p` = 2 it keeps such hits from pushing the vector retriever's answer out of the top 5.
The fused value is divided by
its maximum, (w_kw + w_vec) / (k + 1), so a note ranked first by both retrievers gets relevance
1.0; that relevance then takes the place of the keyword relevance in the multi-factor score
(docs/search.md). Weights were tuned on the bilingual set and LoCoMo (docs/retrieval.md):
keywords weigh twice as much as vectors, as equal weights fell below keyword-only on LoCoMo.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class FusionWeights:
    keyword: float = 2.0
    vector: float = 1.0
    k: float = 60.0
    """RRF's damping constant: larger values flatten the difference between ranks."""
    vector_depth: int = 50
    """Vector results taken into the fusion (the keyword side brings its own pool)."""
    coverage_power: float = 2.0
    """How hard keyword hits holding few of the query's words are discounted (0: not)."""

    def __post_init__(self) -> None:
        if self.keyword < 0 or self.vector < 0 or self.keyword + self.vector <= 0:
            raise ValueError("fusion weights must be >= 0 and not both 0")
        if self.k < 0:
            raise ValueError("the RRF constant k must be >= 0")

    @property
    def best(self) -> float:
        """The fused value of a note ranked first by both lists."""
        return (self.keyword + self.vector) / (self.k + 1)


DEFAULT_WEIGHTS: Final = FusionWeights()


def rrf(rankings: Sequence[tuple[Sequence[K], float]], k: float = 60.0) -> dict[K, float]:
    """Weighted reciprocal rank fusion of ranked lists [(items best first, weight)].
    A duplicate inside one list counts at its best rank."""
    fused: dict[K, float] = {}
    for items, weight in rankings:
        seen: set[K] = set()
        for rank, item in enumerate(items, 1):
            if item in seen:
                continue
            seen.add(item)
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return fused


def fuse(
    keyword: Sequence[K],
    vector: Sequence[K],
    weights: FusionWeights = DEFAULT_WEIGHTS,
    *,
    keyword_coverage: Sequence[float] | None = None,
) -> list[tuple[K, float]]:
    """[(item, relevance in 0..1)], best first; ties keep keyword order, then vector order.
    `keyword_coverage[i]` (0..1) is the share of the query's words in `keyword[i]`."""
    fused = rrf([(vector[: weights.vector_depth], weights.vector)], weights.k)
    seen: set[K] = set()
    for rank, item in enumerate(keyword, 1):
        if item in seen:
            continue
        seen.add(item)
        strength = 1.0
        if keyword_coverage is not None and weights.coverage_power > 0:
            strength = max(0.0, min(1.0, keyword_coverage[rank - 1])) ** weights.coverage_power
        fused[item] = fused.get(item, 0.0) + weights.keyword * strength / (weights.k + rank)
    first: dict[K, int] = {}
    for i, item in enumerate([*keyword, *vector]):
        first.setdefault(item, i)
    best = weights.best
    ranked = sorted(fused.items(), key=lambda pair: (-pair[1], first[pair[0]]))
    return [(item, min(1.0, value / best)) for item, value in ranked]
