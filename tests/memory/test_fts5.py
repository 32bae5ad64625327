"""memory/search/fts5.py: FTS5's words, laid out as a tsvector, and FTS5's IDF."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from memory.config import MemoryConfig
from memory.search import fts5
from memory.sqlite.store import MemoryStore
from tests.memory.corpus import CORPUS


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Leaks leaking LEAKED", ["leak", "leak", "leak"]),
        ("Café crème", ["cafe", "creme"]),
        ("连接池泄漏", ["连", "接", "池", "泄", "漏"]),
        ("auth_timeout getConnPoolSize", ["auth", "timeout", "getconnpools"]),
        ("GPT-4, v2.1", ["gpt", "4", "v2", "1"]),
        ("generalizations", ["gener"]),
        ("  ...  ", []),
    ],
)
def test_words_are_the_ones_fts5_makes(text: str, words: list[str]) -> None:
    assert fts5.shared_tokenizer().words(text) == words


def test_the_tokenizer_agrees_with_the_sqlite_index_note_by_note(tmp_path: Path) -> None:
    with MemoryStore.open(MemoryConfig.for_home(tmp_path / "home", fsync=False)) as store:
        for draft in CORPUS.values():
            store.save(draft)
        conn = sqlite3.connect(store.config.index_path)
        conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, notes_fts, 'instance')")
        indexed: dict[int, list[list[tuple[int, str]]]] = {}
        scope_words: dict[int, list[str]] = {}
        for term, doc, col, offset in conn.execute("SELECT term, doc, col, offset FROM v"):
            if col == "scope":
                scope_words.setdefault(doc, []).append(term)
                continue
            indexed.setdefault(doc, [[] for _ in fts5.COLUMNS])[fts5.COLUMNS.index(col)].append(
                (offset, term)
            )
        rows = conn.execute("SELECT nid, title, tags, summary, body, scope FROM notes").fetchall()
        conn.close()
    assert len(rows) == len(CORPUS) + 1  # and the profile
    for nid, title, tags, summary, body, scope in rows:
        mine = fts5.shared_tokenizer().columns(fts5.fts_columns_json(title, tags, summary, body))
        theirs = [[w for _, w in sorted(col)] for col in indexed[nid]]
        assert mine == theirs
        # one word for the note's scope, which FTS5 keeps as it is (no stem, no split)
        assert scope_words[nid] == [fts5.scope_word(scope)]
        assert fts5.shared_tokenizer().words(fts5.scope_word(scope)) == [fts5.scope_word(scope)]


@pytest.mark.parametrize(
    ("columns", "extra", "literal"),
    [
        ([["a", "b"], ["c"]], (), "'a':1A 'b':2A 'c':4B"),
        # one empty position after every column, empty ones too; the body has no letter
        ([[], [], ["s"], ["x", "y", "x"]], (), "'s':3C 'x':5,7 'y':6"),
        ([["a"], [], [], ["a"]], (), "'a':1A,5"),
        # rjieba's words without positions, once, and not when already a word
        ([["a"]], ("连接池", "连接池", "a"), "'a':1A '连接池'"),
        ([["it's", "back\\slash"]], (), "'it''s':1A 'back\\\\slash':2A"),
        ([["x" * 2047, "ok"]], ("y" * 2047,), "'ok':2A"),
    ],
)
def test_tsvector_text(columns: list[list[str]], extra: tuple[str, ...], literal: str) -> None:
    assert fts5.tsvector_text(columns, extra) == literal


def test_tsvector_text_keeps_within_the_tsvector_limits() -> None:
    many = fts5.tsvector_text([["w"] * 300])
    assert many.count(",") == fts5.MAX_POSITIONS - 1
    late = fts5.tsvector_text([["p"] * 16_382 + ["y", "z", "y"]])
    assert late.endswith(" 'y':16383A 'z':16383A")


@pytest.mark.parametrize(
    ("words", "prefix", "query"),
    [
        (["a"], False, "'a'"),
        (["a"], True, "'a':*"),
        (["连", "接", "池"], False, "( '连' <-> '接' <-> '池' )"),
        (["auth", "time"], True, "( 'auth' <-> 'time':* )"),
        ([], False, None),
        (["x" * 2047], False, None),
    ],
)
def test_phrase_query(words: list[str], prefix: bool, query: str | None) -> None:
    assert fts5.phrase_query(words, prefix=prefix) == query


@pytest.mark.parametrize(
    ("rows", "hits", "idf"),
    [
        (10, 1, math.log(9.5 / 1.5)),
        (10, 0, math.log(10.5 / 0.5)),
        (10, 5, 1e-6),  # half the notes: log(1) = 0, FTS5 keeps a sliver
        (10, 9, 1e-6),
        # counts read apart while notes were saved (a scope's cached count, then its hits):
        # once a ValueError in a search thread
        (10, 11, 1e-6),
        (10, 40, 1e-6),
    ],
)
def test_bm25_idf(rows: int, hits: int, idf: float) -> None:
    assert fts5.bm25_idf(rows, hits) == idf


def test_ts_rank_cd_weights_are_the_bm25_column_weights_scaled() -> None:
    assert fts5.TS_RANK_CD_WEIGHTS == "{0.1, 0.4, 0.6, 1.0}"
    assert fts5.RANK_SCALE == 10.0


def test_phrase_freq_inverts_bm25_term_and_survives_counts_read_apart() -> None:
    idf, words, avgdl = fts5.bm25_idf(100, 3), 12.0, 20.0
    for freq in (1, 2, 5, 40):
        score = fts5.bm25_term(idf, freq, words, avgdl)
        assert fts5.phrase_freq(score, idf, words, avgdl) == freq
    # an IDF from counts read while notes were saved can be too small for the score FTS5 gave
    score = fts5.bm25_term(idf, 3, words, avgdl)
    assert fts5.phrase_freq(score, 1e-6, words, avgdl) == 1
