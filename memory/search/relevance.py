"""Calibrated relevance: how strongly the evidence says a note answers a query, in 0..1, a number
whose meaning does not depend on the other hits (pure; docs/retrieval.md, "Relevance and the
floor").

The ranking (fusion, the multi-factor score) orders notes against each other; it cannot say
"nothing here". This module scores each hit from its own evidence:

- the vector side: the absolute cosine of the note's best chunk with the query. On the
  packaged centered encoder an unrelated prompt's nearest note sits at cosine 0.10-0.28
  (median 0.17; `tests/data/unrelated_prompts.json`), a note answering a paraphrased question
  at 0.20-0.60 (median 0.37; `tests/data/bilingual_memory.json`);
- the keyword side: the IDF-weighted share of the query's words the note holds (the
  `coverage` of `memory.search.fusion.keyword_coverage`). Chatty or unrelated prompts still
  share a common word with some note (coverage up to 0.44 on the unrelated set); a note
  holding most of the question's rare words is evidence on its own.

Each side is a linear ramp from "no evidence" to "full evidence", and the two combine as a
noisy OR (either side can carry a hit, both together count more):

    vec = clip((cosine - 0.10) / 0.40, 0, 1)
    kw  = clip((coverage - 0.25) / 0.50, 0, 1)     keyword search alone: (coverage - 0.24) / 0.22
    relevance = 1 - (1 - vec) * (1 - kw)

Keyword search alone (no encoder, or no vectors yet: the hooks working directly) has only the
keyword side, so a note holding part of a chatty prompt's words must count for more there; with
vectors, a keyword hit whose vector says nothing is most often a shared common word.

A hit below the floor (`DEFAULT_FLOOR`, `MemoryConfig.relevance_floor`) is not returned by
default and never injected into a prompt. The ramps were fitted on the default encoder; another
encoder's cosines sit elsewhere, so its users may want another floor (the setting).
"""

from __future__ import annotations

from typing import Final

from errors import InvalidInputError
from memory._record import record
from memory.settings_fields import INJECT_FLOOR, RELEVANCE_FLOOR


@record
class Evidence:
    """What one hit has to show for itself."""

    coverage: float | None = None
    """IDF-weighted share (0..1) of the query's words in the note; None: not a keyword hit."""
    cosine: float | None = None
    """Cosine of the note's best chunk with the query; None: not among the vector hits."""
    vectors: bool = True
    """Whether the search had a vector side at all (False: keyword search alone)."""


@record
class Calibration:
    cosine_zero: float = 0.10
    """Cosine at which a vector hit starts to count (an unrelated prompt's typical best)."""
    cosine_full: float = 0.50
    """Cosine at which it is full evidence."""
    coverage_zero: float = 0.25
    coverage_full: float = 0.75
    alone_zero: float = 0.24
    """The keyword ramp of a search without vectors: one word of four in common is coincidence
    there too ("what's the weather like today?" and a profile saying what the user likes: 0.05,
    under the search floor)."""
    alone_full: float = 0.46
    """Full evidence at 46 % of the query's weight, so that the inject floor (0.5) asks for 35 %
    and the search floor (0.1) for 26 %, as before. Until 26 Nov it was 0.375 (zero 0.25): the
    inject floor then took one word of three (31 %), and a first turn without vectors injected a
    note for 12.5 % of the tuning prompts (4.2 % now; docs/retrieval.md)."""

    def __post_init__(self) -> None:
        if (
            self.cosine_full <= self.cosine_zero
            or self.coverage_full <= self.coverage_zero
            or self.alone_full <= self.alone_zero
        ):
            raise ValueError("a calibration ramp must rise: full > zero")


DEFAULT_CALIBRATION: Final = Calibration()
DEFAULT_FLOOR: Final = float(RELEVANCE_FLOOR.default)  # type: ignore[arg-type]
"""Relevance below which a search hit is left out (measured trade-off in docs/retrieval.md)."""
DEFAULT_INJECT_FLOOR: Final = float(INJECT_FLOOR.default)  # type: ignore[arg-type]
"""Relevance a hit needs to be injected into a prompt nobody asked to search: a search the user
asks for shows weak hits with their relevance, an injection puts them in the model's context
unasked, so it needs stronger evidence (docs/retrieval.md, "Two floors")."""


def calibrated(evidence: Evidence, calibration: Calibration = DEFAULT_CALIBRATION) -> float:
    """The hit's relevance in 0..1 from its own evidence alone."""
    c = calibration
    vec = 0.0 if evidence.cosine is None else _ramp(evidence.cosine, c.cosine_zero, c.cosine_full)
    zero, full = (
        (c.coverage_zero, c.coverage_full) if evidence.vectors else (c.alone_zero, c.alone_full)
    )
    kw = 0.0 if evidence.coverage is None else _ramp(evidence.coverage, zero, full)
    return 1.0 - (1.0 - vec) * (1.0 - kw)


def check_floor(floor: float) -> float:
    """A floor must be a relevance: 0 (every hit) to 1."""
    if not 0.0 <= floor <= 1.0:
        raise InvalidInputError(f"the relevance floor must be in 0..1, got {floor!r}")
    return floor


def _ramp(value: float, zero: float, full: float) -> float:
    return max(0.0, min(1.0, (value - zero) / (full - zero)))
