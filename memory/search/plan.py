"""A search's query vector: encoded when the search starts, before its keyword side.

Both stores (SQLite and PostgreSQL) search the same way: the query's vector, or no vector and
why not (`notice`: the encoder is loading or failed, no note has vectors yet), then keywords,
then fusion. Repeated queries (hooks asking again, search as you type) come from a small cache
instead of the encoder.

Encoding first rather than beside the keyword search is measured (docs/retrieval.md): on two
cores E5's two threads need both, and a keyword search running meanwhile stalled them; at
10,000 notes hybrid search took 25-29 ms p50 / 36-40 ms p95 overlapped, 20 / 29-33 in turn.

A long query is shortened for its vector (`vector_text`): E5's cost grows with every token
(about 1 ms of CPU each on this class of machine), and a prompt pasted into a hook can be
hundreds of words long; its keywords still come from the whole text.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from memory import _text
from memory._record import record
from memory.search.fusion import SearchMode, UsedMode
from memory.search.keyword import ParsedQuery, parse_query
from memory.search.relevance import check_floor

if TYPE_CHECKING:  # loaded with the encoder itself: a keyword-only hook never needs it
    from memory.encoders.models import Encoder, EncoderUnavailableError

CACHE_SIZE: Final = 256
VECTOR_TOKENS: Final = 28.0
"""About how many of E5's tokens of a query go into its vector (`vector_text`): ~20 English
words or ~30 Chinese characters. E5 costs ~1 ms of CPU a token on two cores, and it is most of
a served prompt's time (docs/claude-code.md, "Where a served hook's time goes"). From 40 (issue
#32): ~30 instead of ~42 real tokens for the hook bench's 5-60-word prompts; the life set's
prompts are mostly shorter (served hooks: related gold injected .845 -> .842, one prompt of
373; unrelated .034 either way), and long prompts found their note more often (`HEAD_SHARE`)."""
HEAD_SHARE: Final = 0.5
"""The share of `VECTOR_TOKENS` a long query's start gets; its end gets the rest. Measured with
the life set's 349 questions made long by 2-4 unrelated sentences (bench/long_prompts.py), the
gold note in the top 5: question last .301 -> .424, question first .587 -> .559 (2/3 of 40
tokens -> half of 28): what a prompt asks is as often at its end as at its start."""
NO_VECTORS_YET: Final = (
    "semantic search has no vectors yet (notes are being embedded); keyword results only"
)


@record
class QueryVector:
    """A query's vector and the encoder (model name) it came from."""

    vector: Any
    model: str


Resolved = tuple[QueryVector | None, str | None]


@record
class SearchPlan:
    """What a search starts from, alike on both stores: the parsed query, its vector (or why
    there is none) and which side leads."""

    parsed: ParsedQuery
    vector: QueryVector | None
    notice: str | None
    vector_first: bool
    """Vectors alone rank: `mode="vector"`, or a query without words (emoji, punctuation)."""
    floor: float = 0.0
    """Hits whose calibrated relevance (`memory.search.relevance`) is below it are left out."""

    @property
    def empty(self) -> bool:
        """Nothing to search with: no words and no vector."""
        return self.parsed.empty and self.vector is None

    @property
    def used(self) -> UsedMode:
        if self.vector is None:
            return "keyword"
        return "vector" if self.vector_first else "hybrid"

    def semantic(self) -> QueryVector | None:
        return self.vector


def plan_search(
    query: str,
    mode: SearchMode,
    vectors: QueryVectors,
    encoder: Encoder | None,
    has_vectors: Callable[[str], bool],
    *,
    floor: float = 0.0,
) -> SearchPlan:
    """Parse `query` and get its vector unless `mode="keyword"` (which never touches the
    encoder). `floor`: the relevance below which hits are left out (0: all of them)."""
    parsed = parse_query(query)
    vector, notice = (
        (None, None) if mode == "keyword" else vectors.resolve(encoder, has_vectors, query)
    )
    return SearchPlan(parsed, vector, notice, mode == "vector" or parsed.empty, check_floor(floor))


@functools.cache
def _pieces_re() -> re.Pattern[str]:
    """Words and single CJK characters; compiled when a query first needs it (`re` walks the
    CJK class's ~28,000 characters, 1-2 ms a hook working directly never needs)."""
    return re.compile(f"[{_text.CJK_CHAR}]|[^\\s{_text.CJK_CHAR}]+")


def _tokens(piece: str) -> float:
    """E5's tokens for one word or CJK character, roughly (a least-squares fit of its
    tokenizer's counts over English and Chinese prompts, within ~35%)."""
    if len(piece) == 1 and _text.CJK_RUN_RE.match(piece):
        return 0.9
    return 0.25 + 0.27 * len(piece)


def vector_text(query: str, tokens: float = VECTOR_TOKENS, head_share: float = HEAD_SHARE) -> str:
    """`query`, or for a longer one its start and its end (`head_share` and the rest of about
    `tokens` tokens, joined by " … "): people put the setting first and the question last, or
    the question first and the details after."""
    pieces = [(_tokens(m.group()), m.start(), m.end()) for m in _pieces_re().finditer(query)]
    if sum(cost for cost, _, _ in pieces) <= tokens:
        return query
    head_end = 0
    used = 0.0
    for cost, _, end in pieces:
        if used + cost > tokens * head_share:
            break
        used += cost
        head_end = end
    tail_start = len(query)
    for cost, start, _ in reversed(pieces):
        if used + cost > tokens or start < head_end:
            break
        used += cost
        tail_start = start
    return f"{query[:head_end].rstrip()} … {query[tail_start:].lstrip()}".strip(" …")


_VECTOR_BUDGET: ContextVar[float | None] = ContextVar("query_vector_budget", default=None)


@contextlib.contextmanager
def vector_budget(seconds: float) -> Iterator[None]:
    """Searches run in this context wait at most `seconds` for a query's vector, then search
    on keywords and say so (`notice`). A hook's prompt is answered while the person waits: the
    hooks working directly never wait for a model, and a served hook must not wait seconds for
    an encoder busy embedding notes (issue #32)."""
    token = _VECTOR_BUDGET.set(seconds)
    try:
        yield
    finally:
        _VECTOR_BUDGET.reset(token)


@runtime_checkable
class BoundedEncoder(Protocol):
    """An encoder that can give up after a time (the app's worker-process encoder)."""

    def encode_within(self, texts: Sequence[str], kind: str, seconds: float) -> Any: ...


def _unavailable(exc: EncoderUnavailableError) -> str:
    return f"semantic search unavailable ({exc.message}); keyword results only"


class QueryVectors:
    """The query-vector cache of one store (thread-safe)."""

    def __init__(self, cache_size: int = CACHE_SIZE) -> None:
        self._cache: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def resolve(
        self, encoder: Encoder | None, has_vectors: Callable[[str], bool], query: str
    ) -> Resolved:
        """Encode `query` (no reason given when no encoder is set), or take it from the
        cache. Asks `has_vectors(model)` first: without note vectors there is nothing to
        compare with."""
        if encoder is None:
            return None, None
        from memory.encoders.models import EncoderUnavailableError

        try:
            model = encoder.name
            if not has_vectors(model):
                return None, NO_VECTORS_YET
            key = (model, query)
            with self._lock:
                cached = self._cache.get(key)
                if cached is not None:
                    self._cache.move_to_end(key)
            if cached is None:
                text = vector_text(query)
                budget = _VECTOR_BUDGET.get()
                if budget is not None and isinstance(encoder, BoundedEncoder):
                    cached = encoder.encode_within([text], "query", budget)[0]
                else:
                    cached = encoder.encode([text], "query")[0]
                with self._lock:
                    self._cache[key] = cached
                    while len(self._cache) > self._cache_size:
                        self._cache.popitem(last=False)
        except EncoderUnavailableError as exc:
            return None, _unavailable(exc)
        return QueryVector(cached, model), None

    def close(self) -> None:
        """Nothing runs in the background; kept so stores can close it alike."""
