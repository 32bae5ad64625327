"""Keyword search: turn any user text into a safe FTS5 query, and rank what it finds.

Query side (see docs/search.md):
- Quoted text is one phrase; other text is split into words. Runs of Chinese characters are
  segmented with rjieba (`连接池泄漏` -> `连接池`, `泄漏`); English words and identifiers stay
  whole (`auth_timeout`, `GPT-4`).
- Every word is sent as a quoted FTS phrase (CJK characters spaced, as in the index), so FTS
  syntax in user text (`*`, `OR`, `-`, `(`, `:`, `^`, `NEAR`) can never break the query.
  `-word` excludes, `word*` is a prefix, a bare `OR`/`AND`/`NOT` is ignored, and words are
  OR-ed; ranking rewards notes that contain more of them.

Score = relevance x 0.65 + type weight x 0.20 + recency x 0.10 + importance x 0.05 (weights
come from `MemoryConfig.ranking`); each part is in 0..1 and returned with the hit.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Sequence
from typing import Any, Final

from memory import _text
from memory._record import record
from memory.config import RankingWeights
from memory.model import DAY, TYPE_PROFILES, ScoreParts

MAX_QUERY_CHARS: Final = 2000
MAX_TERMS: Final = 32

_STOPWORD_TEXT: Final = """
    的 了 是 在 和 与 及 或 也 都 就 而 吗 呢 吧 啊 呀 么 我 你 他 她 它 我们 你们 他们 这 那 这个
    那个 有 个 一个 不 没有 怎么 怎样 什么 如何 为什么 哪些 哪个 关于 一下 请 把 被 对 从 到 给 让
    a an the of to in on for and or is are was were be been being with at by from as it its
    this that these those how what why when where which who do does did i you we my our your
    me us can could should would will about into than then there here
"""
STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())
_OPERATORS: Final = frozenset({"OR", "AND", "NOT", "NEAR"})
_CHUNK_RE = re.compile(r'"([^"]*)"|(\S+)')
_WORD_RE = re.compile(r"\w+(?:[.\-'+#]\w+)*", re.UNICODE)
_HAS_ALNUM_RE = re.compile(r"[^\W_]")
_NORM_RE = re.compile(r"[\W_]+")

_rjieba: Any = None


def segment(text: str) -> list[str]:
    """Dictionary segmentation of a CJK run (rjieba, imported on first use: ~0.1 s)."""
    global _rjieba
    if _rjieba is None:
        if _without_dictionary:
            return segment_cheaply(text)
        import rjieba

        _rjieba = rjieba
    return [w for w in _rjieba.cut(text) if w.strip()]


# --- segmentation for short-lived processes (memory/clients/hook_process.py) -----------------

_without_dictionary = False
_STOP_CHARS: Final = frozenset(w for w in STOPWORDS if len(w) == 1 and not w.isascii())


def segment_without_dictionary() -> None:
    """From now on this process cuts CJK runs with `segment_cheaply` unless rjieba is loaded
    already: for a hook working directly, whose whole budget (~0.15 s) is less than rjieba's
    start (0.1-0.2 s)."""
    global _without_dictionary
    _without_dictionary = True


def segment_cheaply(text: str) -> list[str]:
    """A CJK run without a dictionary: cut at one-character stopwords (`的`, `和`, ...), then
    pieces of three or more characters into overlapping pairs (`连接池泄漏` -> `连接`, `接池`,
    `池泄`, `泄漏`). The index holds every CJK character as a token, so each pair still
    matches as a phrase. Lone characters stay (`猫和狗` -> `猫`, `狗`): common ones weigh
    little in BM25."""
    pieces: list[str] = []
    current = ""
    for char in text:
        if char in _STOP_CHARS:
            pieces.append(current)
            current = ""
        else:
            current += char
    pieces.append(current)
    words: list[str] = []
    for piece in pieces:
        if len(piece) >= 3:
            words.extend(piece[i : i + 2] for i in range(len(piece) - 1))
        elif piece:
            words.append(piece)
    return words


def normalize_for_match(text: str) -> str:
    """Lower case, punctuation to spaces, CJK characters spaced: mirrors the FTS tokenizer."""
    spaced = _text.space_cjk(unicodedata.normalize("NFKC", text).casefold())
    return " " + " ".join(_NORM_RE.sub(" ", spaced).split()) + " "


@record
class Term:
    text: str
    """The word as the user wrote it (for snippets and display)."""
    norm: str
    """`normalize_for_match(text)` without the outer spaces."""
    prefix: bool = False

    @property
    def fts(self) -> str:
        words = " ".join(_text.space_cjk(self.text).replace('"', " ").split())
        return f'"{words}"' + ("*" if self.prefix else "")

    @property
    def is_latin(self) -> bool:
        return not _text.CJK_RUN_RE.search(self.text)


@record
class ParsedQuery:
    terms: tuple[Term, ...]
    excluded: tuple[Term, ...]
    phrase: str
    """The whole query normalised, for the verbatim-match boost ("" for one-term queries)."""

    @property
    def empty(self) -> bool:
        return not self.terms

    def fts(self, *, require_all: bool = False) -> str:
        """`("a" OR "b") NOT ("c")`; with `require_all`, the words are AND-ed."""
        expr = "(" + (" AND " if require_all else " OR ").join(t.fts for t in self.terms) + ")"
        if self.excluded:
            expr += " NOT (" + " OR ".join(t.fts for t in self.excluded) + ")"
        return expr

    def trigram(self) -> str | None:
        """Substring query over identifiers (3+ characters), or None."""
        words = [t for t in self.terms if t.is_latin and len(t.norm.replace(" ", "")) >= 3]
        if not words:
            return None
        return " OR ".join('"' + t.text.lower().replace('"', " ") + '"' for t in words)


def _make_term(text: str, prefix: bool = False) -> Term | None:
    text = text.strip()
    if not text or not _HAS_ALNUM_RE.search(text):
        return None
    norm = normalize_for_match(text).strip()
    if not norm:
        return None
    return Term(text=text, norm=norm, prefix=prefix)


def _words(chunk: str) -> list[str]:
    """Words of an unquoted chunk: CJK runs segmented, other text split into identifiers."""
    words: list[str] = []
    for piece in _text.split_cjk_runs(chunk):
        if not piece:
            continue
        if _text.CJK_RUN_RE.match(piece):
            words.extend(segment(piece))
        else:
            words.extend(m.group(0) for m in _WORD_RE.finditer(piece))
    return words


def parse_query(query: str) -> ParsedQuery:
    """Parse free text into terms. Never raises; an all-punctuation query has no terms."""
    query = unicodedata.normalize("NFKC", query or "")[:MAX_QUERY_CHARS]
    positive: list[Term] = []
    negative: list[Term] = []
    operators: list[Term] = []
    for match in _CHUNK_RE.finditer(query):
        quoted, chunk = match.group(1), match.group(2)
        if quoted is not None:
            term = _make_term(" ".join(quoted.split()))
            if term:
                positive.append(term)
            continue
        if chunk in _OPERATORS:
            term = _make_term(chunk)
            if term:
                operators.append(term)
            continue
        negate = chunk.startswith("-") and len(chunk) > 1 and bool(_HAS_ALNUM_RE.match(chunk[1]))
        body = chunk[1:] if negate else chunk.lstrip("+")
        prefix = body.endswith("*")
        words = _words(body)
        for i, word in enumerate(words):
            term = _make_term(word, prefix=prefix and i == len(words) - 1 and word.isascii())
            if term:
                (negative if negate else positive).append(term)
    if not positive:
        # "-foo" alone or a bare "OR": search the words themselves rather than nothing.
        positive, negative = negative or operators, []
    content = [t for t in positive if t.text.casefold() not in STOPWORDS]
    if content:
        positive = content
    terms = _unique(positive)[:MAX_TERMS]
    excluded = tuple(
        t for t in _unique(negative)[:MAX_TERMS] if t.norm not in {x.norm for x in terms}
    )
    whole = normalize_for_match(" ".join(t.text for t in terms)).strip()
    return ParsedQuery(terms=terms, excluded=excluded, phrase=whole if len(terms) > 1 else "")


def _unique(terms: Sequence[Term]) -> tuple[Term, ...]:
    seen: dict[tuple[str, bool], Term] = {}
    for term in terms:
        seen.setdefault((term.norm, term.prefix), term)
    return tuple(seen.values())


# --- ranking ---------------------------------------------------------------------------------

HAYSTACK_CHARS: Final = 20_000


@record
class Candidate:
    row: Any
    bm25: float | None
    """FTS5 bm25 (negative, lower is better); None for substring-only matches."""


def recency(updated_ts: float, now_ts: float, half_life_days: float) -> float:
    age = max(0.0, now_ts - updated_ts)
    return float(0.5 ** (age / (half_life_days * DAY)))


class TermPattern:
    """Finds a normalised term in raw (NFKC, case-folded) text the way the FTS tokenizer
    would (`match_pattern`). `search(text)` is true when the term occurs.

    The word edges ("no Latin letter or digit before or after; a CJK character is fine") are
    checked around each match in Python: as lookarounds they need a character class of every
    CJK range, which `re` takes 2-7 ms to compile, and every query brings new terms and a new
    phrase (most of the CPU of a served prompt hook went there)."""

    __slots__ = ("_core", "_head", "_tail")

    def __init__(self, core: re.Pattern[str], *, head: bool, tail: bool) -> None:
        self._core = core
        self._head = head
        self._tail = tail

    def search(self, text: str) -> bool:
        pos = 0
        while (found := self._core.search(text, pos)) is not None:
            start, end = found.span()
            if not (self._head and start and _latin_alnum(text[start - 1])) and not (
                self._tail and end < len(text) and _latin_alnum(text[end])
            ):
                return True
            pos = start + 1
        return False


def _latin_alnum(char: str) -> bool:
    """A letter or digit that is not CJK (what `[^\\W_]` matches, minus CJK characters)."""
    return char.isalnum() and not _text.CJK_RUN_RE.match(char)


_SUFFIXES: Final = "(?:ers|ing|es|ed|er|s)?"
"""English endings a Latin word may carry, like the index's stemming. Longest first, so the
one match tried at a position is the longest ending: a shorter one is followed by a letter
and fails the word edge anyway."""


def match_pattern(norm: str, prefix: bool = False) -> TermPattern:
    """A matcher that finds a normalised term in raw (NFKC, case-folded) text the way the FTS
    tokenizer would: Latin words need word boundaries, CJK characters do not, and any
    punctuation may separate the parts (`auth_timeout`, `auth-timeout`, `连接 池`)."""
    tokens = norm.split()
    parts: list[str] = []
    for i, token in enumerate(tokens):
        if i:
            cjk_edge = bool(
                _text.CJK_RUN_RE.match(tokens[i - 1][-1]) or _text.CJK_RUN_RE.match(token[0])
            )
            parts.append(r"[\W_]*" if cjk_edge else r"[\W_]+")
        parts.append(re.escape(token))
    head = not _text.CJK_RUN_RE.match(tokens[0][0])
    tail = not (prefix or _text.CJK_RUN_RE.match(tokens[-1][-1]))
    if tail and tokens[-1].isalpha():
        parts.append(_SUFFIXES)
    return TermPattern(re.compile("".join(parts)), head=head, tail=tail)


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _haystack(row: Any) -> tuple[str, str]:
    """(title + tags, everything searchable), folded for matching."""
    title = _fold(row["title"] + " \n " + " ".join(_tags(row)))
    return title, title + " \n " + _fold(row["summary"] + " \n " + row["body"][:HAYSTACK_CHARS])


def without_excluded(query: ParsedQuery, rows: Sequence[Any]) -> list[Any]:
    """Drop rows that contain an excluded (`-word`) term: for matches found outside FTS."""
    if not query.excluded:
        return list(rows)
    patterns = [match_pattern(t.norm, t.prefix) for t in query.excluded]
    return [r for r in rows if not any(p.search(_haystack(r)[1]) for p in patterns)]


def relevance(query: ParsedQuery, candidates: Sequence[Candidate]) -> list[float]:
    """Relevance in 0..1 for each candidate:
    0.50 x BM25 scaled by the best BM25 of this query
    + 0.35 x share of the query's words the note contains
    + 0.15 x boost (1: the whole query appears verbatim, or all words are in the title;
                    0.5: some word is in the title).
    Substring-only (trigram) matches get no BM25 part; their words count as found when they
    occur inside a longer word."""
    return relevance_with_hits(query, candidates)[0]


def relevance_with_hits(
    query: ParsedQuery, candidates: Sequence[Candidate]
) -> tuple[list[float], list[list[bool]]]:
    """`relevance`, and for each candidate which of the query's words it contains (matched as
    `fusion.keyword_coverage` matches them): the keyword side weighs those by IDF without
    folding each note and matching each word a second time."""
    best = max((-c.bm25 for c in candidates if c.bm25 is not None), default=0.0)
    words = [match_pattern(t.norm, t.prefix) for t in query.terms]
    inside = [re.compile(re.escape(t.norm.replace(" ", ""))) for t in query.terms]
    phrase = match_pattern(query.phrase) if query.phrase else None
    n_terms = max(len(query.terms), 1)
    out: list[float] = []
    hits: list[list[bool]] = []
    for cand in candidates:
        row = cand.row
        title, hay = _haystack(row)
        patterns = inside if cand.bm25 is None else words
        hit = [bool(p.search(hay)) for p in patterns]
        hits.append(hit)
        found = sum(hit)
        in_title = sum(1 for p in patterns if p.search(title))
        bm25_part = (-cand.bm25 / best) if cand.bm25 is not None and best > 0 else 0.0
        if (phrase is not None and phrase.search(hay)) or in_title == n_terms:
            boost = 1.0
        elif in_title:
            boost = 0.5
        else:
            boost = 0.0
        out.append(min(1.0, 0.5 * bm25_part + 0.35 * found / n_terms + 0.15 * boost))
    return out, hits


def _tags(row: Any) -> list[str]:
    return list(json.loads(row["tags"]))


def score_parts(row: Any, rel: float, now_ts: float) -> ScoreParts:
    profile = TYPE_PROFILES.get(row["type"], TYPE_PROFILES["general"])
    return ScoreParts(
        relevance=rel,
        type_weight=profile.weight,
        recency=recency(row["updated_ts"], now_ts, profile.half_life_days),
        importance=float(row["importance"]),
        usage=usage(row),
    )


USAGE_SATURATION: Final = 20
"""Accesses (search hits, injections, full reads) at which a note's usage part reaches 1."""


def usage(row: Any) -> float:
    """How much a note has been used, 0..1 on a log scale: 0 never, ~0.23 once, 0.5 at 3-4
    times, 1 from `USAGE_SATURATION` on (a row without counts: 0). The SQLite index keeps
    accesses not yet written to the file apart (`access_pending`)."""
    keys = row.keys()
    count = int(row["access_count"] or 0) if "access_count" in keys else 0
    if "access_pending" in keys:
        count += int(row["access_pending"] or 0)
    return min(1.0, math.log1p(max(count, 0)) / math.log1p(USAGE_SATURATION))


def combine(parts: ScoreParts, weights: RankingWeights) -> float:
    return (
        parts.relevance * weights.relevance
        + parts.type_weight * weights.type
        + parts.recency * weights.recency
        + parts.importance * weights.importance
        + parts.usage * weights.usage
    )


def snippet(body: str, query: ParsedQuery, width: int = 80) -> str:
    """A one-line excerpt around the first query word found in the body."""
    lower = body[:HAYSTACK_CHARS].casefold()
    positions = [p for t in query.terms if (p := lower.find(t.text.casefold())) >= 0]
    if not positions:
        return ""
    start = max(0, min(positions) - width // 3)
    piece = " ".join(body[start : start + width].split())
    return ("…" if start > 0 else "") + piece + ("…" if start + width < len(body) else "")
