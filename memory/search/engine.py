"""The one search algorithm, whatever backend answers: a plan and filters become ranked rows.

Keyword side (notes with every word first, then any word, then identifier substrings when
BM25 found too few), vector side (the nearest notes that pass the filters), fusion and the
multi-factor score are written here once; a backend answers the few questions of
`SearchQueries` in its own SQL (`memory.sqlite.store`, `memory.postgres.store`). A backend's
rows are mappings with the columns `memory.search.keyword` ranks (`id`, `title`, `tags` as
JSON text, `summary`, `body`, `type`, `importance`, `updated_ts`, ...).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

from memory.config import RankingWeights
from memory.model import SearchHit, parse_datetime, utcnow
from memory.search.bilingual import chinese_names, english_query
from memory.search.filters import Filters
from memory.search.fusion import FusionWeights, idf
from memory.search.keyword import (
    Candidate,
    ParsedQuery,
    parse_query,
    snippet,
    without_excluded,
)
from memory.search.plan import QueryVector, SearchPlan
from memory.search.ranking import (
    KeywordSide,
    Scored,
    fused_ranking,
    keyword_ranking,
    keyword_side,
)
from memory.search.relevance import DEFAULT_CALIBRATION

NO_KEYWORD_EVIDENCE: Final = min(DEFAULT_CALIBRATION.coverage_zero, DEFAULT_CALIBRATION.alone_zero)
"""A note holding less of the query than this (IDF-weighted) has no keyword evidence."""

DF_CAP: Final = 5000
"""Document frequencies for query-word IDF count up to this many notes (cheap, and words
that common weigh little either way)."""
IDF_NOTES_AT_LEAST: Final = 50
"""Query-word IDF counts the notes as at least this many. In a memory of three notes a word
two of them hold ("billing" in a decision and in the session summary quoting it) would weigh
less than a word none holds, and the note a prompt is about would explain too little of it to
be injected; a word in 2 of 50 notes is rare, as it is to the person."""


class SearchQueries(Protocol):
    """What one search asks its backend, inside one read (a connection or a transaction)."""

    def keyword_candidates(
        self, parsed: ParsedQuery, filters: Filters, limit: int, *, require_all: bool
    ) -> list[Candidate]:
        """The best BM25 matches that pass `filters`, best first, at most `limit` (`bm25` as
        FTS5 gives it: negative, lower is better); with `require_all` only notes holding
        every query word."""
        ...

    def identifier_rows(self, parsed: ParsedQuery, filters: Filters, limit: int) -> list[Any]:
        """Notes whose identifiers contain a query identifier, newest first (none when the
        query has no identifier to look for)."""
        ...

    def doc_freqs(self, parsed: ParsedQuery) -> tuple[int, list[int]]:
        """(notes, notes holding each query word, counted up to `DF_CAP`) among the notes
        whose statistics rank this search (`Filters.statistics`: a narrowing filter's
        notes, else the whole index)."""
        ...

    def nearest(self, vector: QueryVector, k: int, filters: Filters) -> list[tuple[str, float]]:
        """The `k` notes passing `filters` whose best chunk is nearest by cosine, best
        first: [(id, cosine)]."""
        ...

    def rows_by_id(self, ids: list[str]) -> dict[str, Any]:
        """The ranking rows of these notes (missing ones left out)."""
        ...


def rank(
    queries: SearchQueries,
    plan: SearchPlan,
    filters: Filters,
    limit: int,
    now_ts: float,
    *,
    weights: RankingWeights,
    fusion: FusionWeights,
) -> list[Scored]:
    """The `limit` best notes for `plan`, scored (docs/search.md, docs/retrieval.md)."""
    parsed = plan.parsed
    idf_weights = _Once(lambda: term_weights(queries, parsed))
    if plan.vector_first and plan.vector is not None:
        return _hybrid(
            queries, plan, [], filters, limit, now_ts, plan.vector, idf_weights, fusion, weights
        )
    pool = max(limit * 5, 50)
    candidates: list[Candidate] = []
    if len(parsed.terms) > 1:
        # Notes with every word first: far fewer rows to rank than the OR of common words.
        candidates = queries.keyword_candidates(parsed, filters, pool, require_all=True)
    if len(candidates) < limit:
        any_word = (
            parsed
            if plan.floor <= 0 or len(parsed.terms) < 2
            else words_to_match(parsed, idf_weights())
        )
        candidates = queries.keyword_candidates(any_word, filters, pool, require_all=False)
    if len(candidates) < limit:
        seen = {c.row["id"] for c in candidates}
        extra = without_excluded(parsed, queries.identifier_rows(parsed, filters, pool))
        candidates += [Candidate(r, None) for r in extra if r["id"] not in seen]
    found = plan.semantic()
    if found is not None:
        return _hybrid(
            queries,
            plan,
            candidates,
            filters,
            limit,
            now_ts,
            found,
            idf_weights,
            fusion,
            weights,
            translated=_translated_side(queries, parsed, filters, pool),
        )
    return keyword_ranking(
        parsed, candidates, now_ts, weights, limit, term_weights=idf_weights, floor=plan.floor
    )


def _hybrid(
    queries: SearchQueries,
    plan: SearchPlan,
    candidates: list[Candidate],
    filters: Filters,
    limit: int,
    now_ts: float,
    semantic: QueryVector,
    term_weights: Callable[[], list[float]],
    fusion: FusionWeights,
    weights: RankingWeights,
    *,
    translated: KeywordSide | None = None,
) -> list[Scored]:
    """Keyword candidates and the notes nearest by vector, fused (`memory.search.fusion`),
    then scored like keyword results with the fused relevance."""
    parsed = plan.parsed
    side = keyword_side(parsed, candidates, term_weights)
    rows: dict[str, Any] = dict(side.rows)
    if translated is not None:
        rows.update(translated.rows)
    nearest = queries.nearest(semantic, fusion.vector_depth, filters)
    missing = [note_id for note_id, _ in nearest if note_id not in rows]
    if missing:
        extra = queries.rows_by_id(missing)
        rows.update({r["id"]: r for r in without_excluded(parsed, list(extra.values()))})
    return fused_ranking(
        side, rows, nearest, fusion, now_ts, weights, limit, floor=plan.floor, translated=translated
    )


def _translated_side(
    queries: SearchQueries, parsed: ParsedQuery, filters: Filters, pool: int
) -> KeywordSide | None:
    """The keyword hits of the query's words in the other language (`memory.search.bilingual`:
    a Chinese query's words in English, else an English query's pinyin names in Chinese), None
    when it has none or no dictionary is at hand."""
    texts = [t.text for t in parsed.terms]
    english = english_query(texts)
    groups = [] if english else chinese_names(texts, parsed.phrase)
    if not english and not groups:
        return None
    text = english or " ".join(w for group in groups for w in group)
    other = dataclasses.replace(parse_query(text), excluded=parsed.excluded)
    if other.empty:
        return None
    found = queries.keyword_candidates(other, filters, pool, require_all=False)
    # a Chinese query's English: each word its own; an English query's pinyin names: the
    # spellings of one name are alternatives, counted once (a note holds 刘畅 or it does not)
    of_group = (
        [_group_of(t.text, groups, own=len(groups) + i) for i, t in enumerate(other.terms)]
        if groups
        else None
    )
    return keyword_side(other, found, _Once(lambda: term_weights(queries, other)), groups=of_group)


def _group_of(term: str, groups: Sequence[tuple[str, ...]], *, own: int) -> int:
    """The group of alternatives a translated query's word came from, `own` (a group of its
    own) when none: parsing may cut a word the dictionary gave."""
    return next((i for i, group in enumerate(groups) if any(term in w for w in group)), own)


class _Once:
    """A value computed at its first call (a database query some searches never need)."""

    def __init__(self, compute: Callable[[], list[float]]) -> None:
        self._compute = compute
        self._value: list[float] | None = None

    def __call__(self) -> list[float]:
        if self._value is None:
            self._value = self._compute()
        return self._value


def words_to_match(
    parsed: ParsedQuery, weights: Sequence[float], share: float = NO_KEYWORD_EVIDENCE
) -> ParsedQuery:
    """The words an any-word query needs: the query without its most common words whose IDF
    (`weights`) together is under `share` of the whole. A note holding none but those holds
    under `share` of the query, which counts as no keyword evidence at all
    (`memory.search.relevance`): it could never pass a relevance floor by its keywords, yet
    ranking every note holding "issue" or 问题 was most of a prompt's search (BM25 reads each
    match's length). The coverage and relevance of the notes found still count every word."""
    total = sum(weights)
    if len(parsed.terms) < 2 or total <= 0:
        return parsed
    dropped: set[int] = set()
    mass = 0.0
    for i in sorted(range(len(weights)), key=lambda i: (weights[i], i)):  # most common first
        if (mass + weights[i]) / total >= share:
            break
        mass += weights[i]
        dropped.add(i)
    if not dropped:
        return parsed
    kept = tuple(t for i, t in enumerate(parsed.terms) if i not in dropped)
    return dataclasses.replace(parsed, terms=kept)


def term_weights(queries: SearchQueries, parsed: ParsedQuery) -> list[float]:
    """IDF of each query word among the notes whose statistics rank the search (a narrowing
    filter's notes, else the whole index; document frequency counted up to `DF_CAP` notes):
    a scope's weights are the same whatever else the home holds. A word no note holds
    weighs as one held by a single note: in a small memory BM25's IDF would make it weigh
    several times more, and a prompt's every chatty word would then sink the share of it a
    note explains (the coverage behind keyword trust and calibrated relevance); and the notes
    count as at least `IDF_NOTES_AT_LEAST`."""
    total, found = queries.doc_freqs(parsed)
    return [idf(max(1, min(n, DF_CAP)), max(total, IDF_NOTES_AT_LEAST)) for n in found]


def hit(scored: Scored, parsed: ParsedQuery) -> SearchHit:
    """What a caller sees of a ranked row."""
    row = scored.row
    return SearchHit(
        id=row["id"],
        title=row["title"],
        type=row["type"],
        scope=row["scope"],
        summary=row["summary"],
        path=row["path"],
        tags=tuple(json.loads(row["tags"])),
        status=row["status"],
        updated=parse_datetime(row["updated"]) or utcnow(),  # ISO text or a timestamptz
        score=scored.score,
        parts=scored.parts,
        relevance=scored.relevance,
        snippet=snippet(row["body"], parsed),
        superseded_by=row["superseded_by"],
        created=parse_datetime(row["created"]),
    )


def hits(ranked: Sequence[Scored], parsed: ParsedQuery) -> list[SearchHit]:
    return [hit(s, parsed) for s in ranked]
