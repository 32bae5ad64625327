"""Fusion of keyword and vector results: weighted reciprocal rank fusion with two trust
factors (pure functions, no I/O; tuned in docs/retrieval.md).

    fused(d) = w_kw * trust_kw(d) / (k + rank_kw(d)) + w_vec * trust_vec(d) / (k + rank_vec(d))

A list that does not contain `d` adds nothing; ranks start at 1; w_kw = 1.5, w_vec = 1, k = 10.
Plain RRF trusts every rank the same, which fails both ways on our data:

- `trust_kw(d)`: the IDF-weighted share of the query's words that the note contains, as a ramp
  from `coverage_start` (0.1: nothing) to `coverage_floor` (0.6: full weight). A Chinese
  question about an English note still gets keyword hits, matched on common words such as
  用户; they rank first among the keyword hits and, trusted fully, push the right note (found
  by vectors only) out of the top 5. A hit holding the rare words of the question keeps full
  weight, so LoCoMo, where keywords are strong, is not hurt. A hit sharing only a word or two
  in ten with a paraphrased question counts for nothing (set B of docs/retrieval.md: with
  trust from 0 and w_kw = 2, such hits pushed the right note out of the top 5 for 6 % of the
  questions).
- `trust_vec(d)`: how far the note's cosine stands above the other vector candidates of this
  query: z = (cos - mean) / std over the top `vector_depth`, trust = clip((z - 1) / 2, 0, 3).
  A confident vector match (z >= 3 typically is the answer) can outweigh keyword hits; a flat
  list, common on conversational text where the encoder is weak, adds little.

The fused values are divided by the largest one, giving a relevance in 0..1 that takes the
place of keyword relevance in the multi-factor score (docs/search.md). It orders hits against
each other only: whether a hit is relevant at all is its calibrated relevance
(`memory.search.relevance`), which the floor is applied to. With no keyword hits
(vector mode, or a question no note shares a word with) relevance is the cosine spread
between the lowest and the highest candidate.
"""

from __future__ import annotations

import dataclasses
import math
import unicodedata
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from memory._record import record
from memory.search.keyword import HAYSTACK_CHARS, ParsedQuery, TermPattern, match_pattern

if TYPE_CHECKING:
    from memory.model import SearchHit

K = TypeVar("K", bound=Hashable)

SearchMode = Literal["auto", "keyword", "vector", "hybrid"]
"""`auto`: hybrid when an encoder and vectors are available, else keyword."""
UsedMode = Literal["keyword", "vector", "hybrid"]
"""How a search actually ran."""


@record
class FusionWeights:
    keyword: float = 1.5
    vector: float = 1.0
    k: float = 10.0
    """RRF's damping constant: larger values flatten the difference between ranks."""
    vector_depth: int = 50
    """Vector candidates taken into the fusion (the keyword side brings its own pool)."""
    coverage_floor: float = 0.6
    """Keyword hits holding at least this IDF-weighted share of the query keep full weight;
    below it their weight falls linearly (0: every keyword hit fully trusted)."""
    coverage_start: float = 0.1
    """The share at which a keyword hit starts to count (below `coverage_floor`)."""
    confidence_start: float = 1.0
    """z-score of a vector hit's cosine at which it starts to count."""
    confidence_span: float = 2.0
    """z-score span over which a vector hit's trust grows by 1 (0: every hit trusted 1)."""
    confidence_max: float = 3.0
    translated: float = 1.0
    """Weight of the keyword search with a Chinese query's words in English
    (`memory.search.bilingual`); its hits are trusted by their coverage on their own ramp:
    a dictionary gives several words for one, so a right note holds less of them."""
    translated_start: float = 0.05
    translated_full: float = 0.2
    cosine_start: float = 1.0
    """Absolute cosine at which a vector hit counts whatever the others' (0..1; 1: never, the
    default: measured on the life set, docs/retrieval.md)."""
    cosine_span: float = 0.15
    """Cosine span over which that trust grows to 1. A good cross-language match can sit
    among near neighbours (a z-score under 1: no trust from the spread); its own cosine
    still says it is a match (issue #29: zh->en recall 0.65 with the spread alone)."""

    def __post_init__(self) -> None:
        if self.keyword < 0 or self.vector < 0 or self.keyword + self.vector <= 0:
            raise ValueError("fusion weights must be >= 0 and not both 0")
        if self.k < 0:
            raise ValueError("the RRF constant k must be >= 0")
        if not 0 <= self.coverage_floor <= 1:
            raise ValueError("coverage_floor must be in 0..1")
        if self.coverage_floor > 0 and not 0 <= self.coverage_start < self.coverage_floor:
            raise ValueError("coverage_start must be in 0..coverage_floor")


DEFAULT_WEIGHTS: Final = FusionWeights()


@record
class SearchOutcome:
    """Search results and how they were found."""

    hits: list[SearchHit]
    mode: UsedMode
    notice: str | None = None
    """Set when semantic search was wanted but not available (keyword results instead)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "results": [h.to_dict() for h in self.hits],
            "mode": self.mode,
            "notice": self.notice,
        }


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


def keyword_trust(coverage: float, weights: FusionWeights = DEFAULT_WEIGHTS) -> float:
    """0 up to `coverage_start`, rising linearly to 1 at `coverage_floor`."""
    if weights.coverage_floor <= 0:
        return 1.0
    start = weights.coverage_start
    return max(0.0, min(1.0, (coverage - start) / (weights.coverage_floor - start)))


def vector_trust(scores: Sequence[float], weights: FusionWeights = DEFAULT_WEIGHTS) -> list[float]:
    """Trust of each vector hit from the z-score of its cosine among `scores`."""
    if weights.confidence_span <= 0 or len(scores) < 3:
        return [1.0] * len(scores)
    mean = sum(scores) / len(scores)
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
    if std <= 1e-9:
        return [1.0] * len(scores)
    out = []
    for score in scores:
        z = (score - mean) / std
        trust = (z - weights.confidence_start) / weights.confidence_span
        out.append(max(0.0, min(weights.confidence_max, trust), _cosine_trust(score, weights)))
    return out


def _cosine_trust(cosine: float, weights: FusionWeights) -> float:
    if weights.cosine_span <= 0:
        return 0.0
    return max(0.0, min(1.0, (cosine - weights.cosine_start) / weights.cosine_span))


def fuse(
    keyword: Sequence[K],
    vector: Sequence[K],
    weights: FusionWeights = DEFAULT_WEIGHTS,
    *,
    keyword_coverage: Sequence[float] | None = None,
    vector_scores: Sequence[float] | None = None,
    translated: Sequence[K] = (),
    translated_coverage: Sequence[float] | None = None,
) -> list[tuple[K, float]]:
    """[(item, relevance in 0..1)], best first; ties keep keyword order, then vector order.

    `keyword_coverage[i]` (0..1): the (IDF-weighted) share of the query's words in
    `keyword[i]`; `vector_scores[i]`: the cosine of `vector[i]`. Without them every hit is
    fully trusted (plain weighted RRF). `translated`: the hits of the query's words in the
    other language (`memory.search.bilingual`), with their own coverage, a third list."""
    vector = vector[: weights.vector_depth]
    if not keyword and not translated and vector_scores is not None:
        return _by_cosine(vector, vector_scores[: len(vector)])
    fused: dict[K, float] = {}
    translated_ramp = dataclasses.replace(
        weights, coverage_start=weights.translated_start, coverage_floor=weights.translated_full
    )
    for items, coverage, weight, ramp in (
        (keyword, keyword_coverage, weights.keyword, weights),
        (translated, translated_coverage, weights.translated, translated_ramp),
    ):
        seen: set[K] = set()
        for rank, item in enumerate(items, 1):
            if item in seen:
                continue
            seen.add(item)
            trust = 1.0 if coverage is None else keyword_trust(coverage[rank - 1], ramp)
            fused[item] = fused.get(item, 0.0) + weight * trust / (weights.k + rank)
    trusts = (
        [1.0] * len(vector)
        if vector_scores is None
        else vector_trust(vector_scores[: len(vector)], weights)
    )
    seen = set()
    for rank, (item, trust) in enumerate(zip(vector, trusts, strict=True), 1):
        if item in seen:
            continue
        seen.add(item)
        fused[item] = fused.get(item, 0.0) + weights.vector * trust / (weights.k + rank)
    first: dict[K, int] = {}
    for i, item in enumerate([*keyword, *vector, *translated]):
        first.setdefault(item, i)
    ranked = sorted(fused.items(), key=lambda pair: (-pair[1], first[pair[0]]))
    top = ranked[0][1] if ranked and ranked[0][1] > 0 else 1.0
    return [(item, value / top) for item, value in ranked]


def _by_cosine(vector: Sequence[K], scores: Sequence[float]) -> list[tuple[K, float]]:
    """Vectors alone: relevance spread linearly between the lowest and highest cosine, so
    the multi-factor score cannot lift a barely similar note over the best match."""
    if not vector:
        return []
    low, high = min(scores), max(scores)
    span = high - low
    out: dict[K, float] = {}
    for item, score in zip(vector, scores, strict=True):
        if item not in out:
            out[item] = (score - low) / span if span > 1e-9 else 1.0
    return list(out.items())


def idf(doc_freq: int, total: int) -> float:
    """BM25's inverse document frequency (always > 0)."""
    return math.log((total - doc_freq + 0.5) / (doc_freq + 0.5) + 1.0)


def keyword_coverage(
    query: ParsedQuery,
    title: str,
    tags: Sequence[str],
    summary: str,
    body: str,
    *,
    term_weights: Sequence[float] | None = None,
    substring: bool = False,
    patterns: Sequence[TermPattern] | None = None,
) -> float:
    """Share of the query's words found in a note, each word weighted by `term_weights`
    (e.g. its IDF; equal weights when None). Words are matched as the keyword ranking
    matches them; `substring` for hits of the identifier index, which may sit inside a word.
    `patterns`: `term_patterns(query)`, computed once per query by callers scoring many
    notes."""
    if not query.terms:
        return 0.0
    if patterns is None:
        patterns = term_patterns(query)
    weights = list(term_weights) if term_weights is not None else [1.0] * len(query.terms)
    hay = _fold(" \n ".join((title, " ".join(tags), summary, body[:HAYSTACK_CHARS])))
    hits = [
        term.norm.replace(" ", "") in hay if substring else pattern.search(hay)
        for term, pattern in zip(query.terms, patterns, strict=True)
    ]
    return weighted_share(hits, weights)


def weighted_share(hits: Sequence[bool], weights: Sequence[float]) -> float:
    """The share of the weights of the words found (`hits`, one per query word), 0 without
    words or weight: a note's keyword coverage."""
    total = sum(weights)
    if total <= 0:
        return 0.0
    return sum(w for hit, w in zip(hits, weights, strict=True) if hit) / total


def grouped_share(hits: Sequence[bool], weights: Sequence[float], groups: Sequence[int]) -> float:
    """`weighted_share` over groups of alternative words (`groups[i]`: word i's group): a
    group weighs what its heaviest word does and is found when any of its words is."""
    weight: dict[int, float] = {}
    found: set[int] = set()
    for hit, w, group in zip(hits, weights, groups, strict=True):
        weight[group] = max(weight.get(group, 0.0), w)
        if hit:
            found.add(group)
    total = sum(weight.values())
    return sum(weight[g] for g in found) / total if total > 0 else 0.0


def term_patterns(query: ParsedQuery) -> list[TermPattern]:
    return [match_pattern(t.norm, t.prefix) for t in query.terms]


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()
