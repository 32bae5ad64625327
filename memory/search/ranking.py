"""What every memory backend does the same way, whatever stores the notes (pure, no I/O).

`MemoryStore` (SQLite + files) and `PostgresMemoryStore` both call these, so the two rank,
validate and rewrite notes identically: the multi-factor score of keyword and fused
(keyword + vector) candidates, the fields `update` accepts and how it cleans them, and how a
derived title or summary follows a new body. Rows are anything indexable by column name
(`sqlite3.Row`, a dict) with the columns `memory.search.keyword.score_parts` and
`memory.search.keyword.relevance` read: id, title, tags (JSON text), summary, body, type,
updated_ts, importance.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Final

from errors import InvalidInputError
from memory import _text
from memory._record import record
from memory.config import RankingWeights
from memory.model import (
    Note,
    ScoreParts,
    normalize_id,
    normalize_importance,
    normalize_scope,
    normalize_status,
    normalize_tags,
    normalize_type,
    parse_datetime,
)
from memory.notes.capture import sanitize, without_credentials
from memory.search.fusion import (
    FusionWeights,
    fuse,
    grouped_share,
    keyword_coverage,
    term_patterns,
    weighted_share,
)
from memory.search.keyword import (
    Candidate,
    ParsedQuery,
    combine,
    parse_query,
    relevance_with_hits,
    score_parts,
)
from memory.search.relevance import DEFAULT_CALIBRATION, Calibration, Evidence, calibrated
from storage.text import require_text

UPDATABLE: Final = frozenset(
    {
        "title",
        "summary",
        "content",
        "body",
        "type",
        "scope",
        "tags",
        "importance",
        "status",
        "superseded_by",
        "expires_at",
        "source",
    }
)
MAX_LIMIT: Final = 1000


# --- arguments -------------------------------------------------------------------------------


def check_limit(limit: int) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise InvalidInputError(f"limit must be a positive integer, got {limit!r}")
    return min(limit, MAX_LIMIT)


def check_offset(offset: int) -> int:
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise InvalidInputError(f"offset must be a non-negative integer, got {offset!r}")
    return offset


def check_updatable(changes: dict[str, Any]) -> None:
    if not changes:  # an update that changes nothing is a caller's mistake, not "Updated"
        raise InvalidInputError("nothing to change: send at least one field to change")
    unknown = set(changes) - UPDATABLE
    if unknown:
        raise InvalidInputError(
            f"cannot update {', '.join(sorted(unknown))}; "
            f"updatable fields: {', '.join(sorted(UPDATABLE))}"
        )


def clean_changes(changes: dict[str, Any], *, max_note_bytes: int) -> dict[str, Any]:
    """`update`'s keyword arguments validated and sanitized, as `Note` field values
    (`content` becomes `body`); a credential left after redaction is refused
    (`CredentialError`)."""
    clean: dict[str, Any] = {}
    for key, value in changes.items():
        require_text(key, value)
        if key in ("content", "body"):
            if not isinstance(value, str) or not sanitize(value).strip():
                raise InvalidInputError("content must be non-empty text")
            if len(value.encode("utf-8")) > max_note_bytes:
                raise InvalidInputError(f"content is larger than {max_note_bytes} bytes")
            clean["body"] = without_credentials("content", sanitize(value).strip("\r\n") + "\n")
        elif key in ("title", "summary"):
            if not isinstance(value, str):
                raise InvalidInputError(f"{key} must be text")
            text = without_credentials(key, sanitize(value))
            clean[key] = _text.shorten(text, 300 if key == "title" else 1000)
            if key == "title" and not clean[key]:
                raise InvalidInputError("title must not be empty")
        elif key == "type":
            clean[key] = normalize_type(value)
        elif key == "scope":
            clean[key] = normalize_scope(value)
        elif key == "tags":
            clean[key] = tuple(
                without_credentials("tags", sanitize(t)) for t in normalize_tags(value)
            )
        elif key == "importance":
            clean[key] = normalize_importance(value)
        elif key == "status":
            clean[key] = normalize_status(value)
        elif key == "superseded_by":
            clean[key] = normalize_id(value) if value else None
        elif key == "expires_at":
            clean[key] = parse_datetime(value, "expires_at")
        elif key == "source":
            clean[key] = without_credentials("source", sanitize(str(value))) if value else None
    return clean


def rederived(old: Note, changes: dict[str, Any], relpath: str) -> dict[str, Any]:
    """`changes` (with a new `body`) plus the title and summary that were derived from the
    old body and now follow the new one; ones written by hand or changed too stay."""
    new_body = changes["body"]
    if "summary" not in changes and old.summary == _text.derive_summary(old.body):
        changes = {**changes, "summary": _text.derive_summary(new_body)}
    stem = PurePosixPath(relpath).stem
    if "title" not in changes and old.title == _text.derive_title(old.body, stem):
        changes = {**changes, "title": _text.derive_title(new_body, old.title)}
    return changes


# --- ranking ---------------------------------------------------------------------------------


@record
class Scored:
    """A row with its total score and the parts it was made of."""

    score: float
    parts: ScoreParts
    row: Any
    relevance: float = 0.0
    """Calibrated relevance (`memory.search.relevance`): the hit's own evidence, 0..1."""


def rank_rows(
    rows: Iterable[tuple[Any, float]],
    now_ts: float,
    weights: RankingWeights,
    limit: int,
    *,
    evidence: Mapping[str, Evidence] | None = None,
    floor: float = 0.0,
) -> list[Scored]:
    """(row, relevance) pairs scored (relevance, type weight, recency, importance), best
    first; ties broken by id so the same data always gives the same order. With `evidence`
    (by id) each hit gets its calibrated relevance and those below `floor` are left out."""
    scored = []
    for row, rel in rows:
        own = calibrated(evidence.get(row["id"], Evidence())) if evidence is not None else rel
        if own < floor:
            continue
        parts = score_parts(row, rel, now_ts)
        scored.append((combine(parts, weights), row["id"], parts, row, own))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [Scored(score, parts, row, own) for score, _id, parts, row, own in scored[:limit]]


def keyword_ranking(
    parsed: ParsedQuery,
    candidates: Sequence[Candidate],
    now_ts: float,
    weights: RankingWeights,
    limit: int,
    *,
    term_weights: Callable[[], Sequence[float]],
    floor: float = 0.0,
) -> list[Scored]:
    """Keyword candidates ranked by the multi-factor score (docs/search.md); each hit's
    calibrated relevance from its keyword coverage alone, those below `floor` left out."""
    if not candidates:
        return []
    rels, hits = relevance_with_hits(parsed, candidates)
    side = keyword_side(parsed, candidates, term_weights, found=(rels, hits))
    return rank_rows(
        ((cand.row, rel) for cand, rel in zip(candidates, rels, strict=True)),
        now_ts,
        weights,
        limit,
        evidence={
            i: Evidence(coverage=c, vectors=False)
            for i, c in zip(side.ids, side.coverage, strict=True)
        },
        floor=floor,
    )


@dataclass(slots=True)
class KeywordSide:
    """The keyword half of a hybrid search: rows by id, ids best first, and how much of the
    query (IDF-weighted) each holds, the trust `memory.search.fusion.fuse` gives it."""

    rows: dict[str, Any] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)
    coverage: list[float] = field(default_factory=list)


def keyword_side(
    parsed: ParsedQuery,
    candidates: Sequence[Candidate],
    term_weights: Callable[[], Sequence[float]],
    *,
    found: tuple[Sequence[float], Sequence[Sequence[bool]]] | None = None,
    groups: Sequence[int] | None = None,
) -> KeywordSide:
    """`term_weights()` (each query word's IDF, a database query) runs only when there are
    candidates. `found`: the candidates' `relevance_with_hits`, when the caller has it
    already; each candidate's coverage is its words found, weighted by their IDF. `groups`
    (one per query word): words of one group are alternatives, found when any of them is
    (`grouped_share`)."""
    side = KeywordSide()
    if not candidates:
        return side
    rels, hits = found if found is not None else relevance_with_hits(parsed, candidates)
    weights = term_weights()
    order = sorted(range(len(candidates)), key=lambda i: (-rels[i], candidates[i].row["id"]))
    for i in order:
        row = candidates[i].row
        side.rows[row["id"]] = row
        side.ids.append(row["id"])
        side.coverage.append(
            weighted_share(hits[i], weights)
            if groups is None
            else GROUPED_EVIDENCE * grouped_share(hits[i], weights, groups)
        )
    return side


GROUPED_EVIDENCE: Final = 0.35
"""What an English query's pinyin names found in a note count for, as a share of the names
found (their many spellings make a Chinese word of another meaning a possible match:
刘长 as well as 刘畅; tuned on the life set's tuning third, docs/retrieval.md)."""

TRANSLATED_EVIDENCE: Final = 0.8
"""The share of a translated keyword hit's coverage that counts as evidence (calibrated
relevance)."""


def fused_ranking(
    side: KeywordSide,
    rows: dict[str, Any],
    nearest: Sequence[tuple[str, float]],
    fusion: FusionWeights,
    now_ts: float,
    weights: RankingWeights,
    limit: int,
    *,
    floor: float = 0.0,
    translated: KeywordSide | None = None,
) -> list[Scored]:
    """Keyword ids and the nearest notes by vector [(id, cosine)] fused into one relevance
    (`memory.search.fusion.fuse`), then scored like keyword hits. `rows`: every row that may be
    returned (keyword rows and the vector hits that passed the filters); vector hits
    without a row are dropped. Hits whose calibrated relevance (coverage and cosine) is below
    `floor` are left out. `translated`: the keyword hits of the query's words in the other
    language (`memory.search.bilingual`); their coverage counts as keyword evidence at
    `TRANSLATED_EVIDENCE` of its value (a dictionary's words are a guess at the note's)."""
    kept = [(note_id, score) for note_id, score in nearest if note_id in rows]
    other = translated or KeywordSide()
    fused = fuse(
        side.ids,
        [note_id for note_id, _ in kept],
        fusion,
        keyword_coverage=side.coverage,
        vector_scores=[score for _, score in kept],
        translated=other.ids,
        translated_coverage=other.coverage,
    )
    cosines = dict(kept)
    coverage = {i: c * TRANSLATED_EVIDENCE for i, c in zip(other.ids, other.coverage, strict=True)}
    for i, c in zip(side.ids, side.coverage, strict=True):
        coverage[i] = max(c, coverage.get(i, 0.0))
    evidence = {i: Evidence(coverage.get(i), cosines.get(i)) for i, _ in fused}
    return rank_rows(
        ((rows[note_id], rel) for note_id, rel in fused),
        now_ts,
        weights,
        limit,
        evidence=evidence,
        floor=floor,
    )


def text_relevance(
    query: str, calibration: Calibration = DEFAULT_CALIBRATION
) -> Callable[[str, str], float]:
    """A scorer of texts outside the notes index (a past session's title and summary) for a
    query, on the same scale as a note's relevance: the share of the query's words a text
    holds, on the keyword ramp of a search with vectors (half the words: 0.5). Words weigh
    alike (no index to count them in; stopwords are left out as in every query), and there is
    no vector side, so a text sharing one everyday word of a prompt does not count: the
    session's summary note, which is in the index with its vectors, is what a paraphrase
    finds. The query is parsed once for all the texts."""
    parsed = parse_query(query)
    patterns = term_patterns(parsed)

    def score(title: str, text: str) -> float:
        if not parsed.terms:
            return 0.0
        coverage = keyword_coverage(parsed, title, (), "", text, patterns=patterns)
        return calibrated(Evidence(coverage=coverage), calibration)

    return score
