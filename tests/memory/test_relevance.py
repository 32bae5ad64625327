"""Calibrated relevance and the floor (memory/search/relevance.py): pure, table-driven."""

from __future__ import annotations

import pytest

from errors import InvalidInputError
from memory.search.ranking import text_relevance
from memory.search.relevance import (
    DEFAULT_FLOOR,
    DEFAULT_INJECT_FLOOR,
    Calibration,
    Evidence,
    calibrated,
    check_floor,
)


@pytest.mark.parametrize(
    ("evidence", "expected"),
    [
        # no evidence at all: nothing
        (Evidence(), 0.0),
        # the vector side alone: a ramp from cosine 0.10 (an unrelated prompt's usual best)
        # to 0.50
        (Evidence(cosine=0.05), 0.0),
        (Evidence(cosine=0.10), 0.0),
        (Evidence(cosine=0.30), 0.5),
        (Evidence(cosine=0.50), 1.0),
        (Evidence(cosine=0.90), 1.0),
        (Evidence(cosine=-0.2), 0.0),
        # the keyword side beside vectors: a ramp from 0.25 to 0.75 of the query's IDF
        (Evidence(coverage=0.25), 0.0),
        (Evidence(coverage=0.50), 0.5),
        (Evidence(coverage=1.00), 1.0),
        # keyword search alone rises faster (0.24 to 0.46): its keywords carry a hit alone
        (Evidence(coverage=0.24, vectors=False), 0.0),
        (Evidence(coverage=0.35, vectors=False), 0.5),  # the inject floor
        (Evidence(coverage=0.46, vectors=False), 1.0),
        # one word of four: under the search floor; one of three: found, not injected
        (Evidence(coverage=0.25, vectors=False), 0.01 / 0.22),
        (Evidence(coverage=1 / 3, vectors=False), (1 / 3 - 0.24) / 0.22),
        # both sides: a noisy OR, more than either alone
        (Evidence(coverage=0.50, cosine=0.30), 0.75),
        (Evidence(coverage=1.00, cosine=0.05), 1.0),
    ],
)
def test_calibrated_relevance_from_a_hits_own_evidence(evidence: Evidence, expected: float) -> None:
    assert calibrated(evidence) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("evidence", "returned", "injected"),
    [
        # nonsense: nothing shared, the nearest note far off
        (Evidence(), False, False),
        (Evidence(cosine=0.12), False, False),
        (Evidence(coverage=0.25, vectors=False), False, False),
        # an unrelated prompt's nearest note (cosine 0.17 is the median on the unrelated set):
        # a search the user asks for shows it, low; nothing injects it unasked
        (Evidence(cosine=0.17), True, False),
        # a common word shared with a chatty prompt, and a vector that says nothing
        (Evidence(coverage=0.30, cosine=0.12), True, False),
        # a weak paraphrase: found by a search, too weak to inject
        (Evidence(cosine=0.28), True, False),
        # a paraphrase with no shared word, found by its meaning (median target cosine 0.37)
        (Evidence(cosine=0.37), True, True),
        # the note holds the rare words of the question
        (Evidence(coverage=0.80), True, True),
        (Evidence(coverage=0.80, vectors=False), True, True),
        # keyword search alone: one word of three is found by a search, not injected
        (Evidence(coverage=1 / 3, vectors=False), True, False),
        (Evidence(coverage=0.40, vectors=False), True, True),
    ],
)
def test_the_default_floors_search_wide_and_inject_only_strong_evidence(
    evidence: Evidence, returned: bool, injected: bool
) -> None:
    relevance = calibrated(evidence)
    assert (relevance >= DEFAULT_FLOOR) is returned
    assert (relevance >= DEFAULT_INJECT_FLOOR) is injected


def test_relevance_does_not_depend_on_the_other_hits() -> None:
    # the same evidence gives the same number whatever else a search found: a single weak
    # hit is not promoted to 1.0 because it is the best one
    assert calibrated(Evidence(cosine=0.2)) == calibrated(Evidence(cosine=0.2))
    assert calibrated(Evidence(cosine=0.2)) < 0.3


@pytest.mark.parametrize(
    ("floor", "ok"), [(0.0, True), (0.4, True), (1.0, True), (-0.1, False), (1.5, False)]
)
def test_a_floor_is_a_relevance(floor: float, ok: bool) -> None:
    if ok:
        assert check_floor(floor) == floor
    else:
        with pytest.raises(InvalidInputError):
            check_floor(floor)


def test_a_calibration_ramp_must_rise() -> None:
    with pytest.raises(ValueError, match="rise"):
        Calibration(cosine_zero=0.5, cosine_full=0.5)


SUMMARY = "Done: fixed the login redirect bug in the auth service. Open: add tests for it."


@pytest.mark.parametrize(
    ("query", "low", "high"),
    [
        ("What's the weather like today?", 0.0, 0.0),  # "the" is a stopword, nothing else
        ("How do I boil an egg?", 0.0, 0.0),  # "do" is inside "Done", not a word of it
        ("auth service", 1.0, 1.0),
        ("login redirect bug", 1.0, 1.0),
        ("is the login bug fixed", 0.5, 1.0),  # "fixed" by its stem
        ("login page colours", 0.0, 0.49),  # one word of three: not enough to inject
        ("", 0.0, 0.0),
    ],
)
def test_text_relevance_of_a_session_summary(query: str, low: float, high: float) -> None:
    assert low <= text_relevance(query)("login bug", SUMMARY) <= high
