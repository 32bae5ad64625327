"""A scope ranks with its own statistics (docs/search.md, "Filters first"): what other
projects hold changes neither which notes a project search returns nor their scores, on
both backends, and the two backends still agree to the last bit."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory.backend import MemoryBackend
from memory.config import MemoryConfig
from memory.encoders.models import HashingEncoder
from memory.model import NoteDraft
from memory.postgres.store import PostgresMemoryStore
from memory.search import fts5
from memory.sqlite.scope_index import SCOPE_INDEX_CHARS
from memory.sqlite.store import MemoryStore
from storage.postgres import PostgresDatabase
from tests.storage.conftest import sqlite_and_postgres

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)

SMALL = [
    "Connection pool leak: the pool grew until restart; pool size now twenty.",
    "Redis cache keys expire after an hour; the pool of clients is shared.",
    "Deploy with Docker compose; the leak detector runs nightly.",
    "连接池泄漏：重启后恢复，连接池大小设为二十。",
    "Timeout retries back off exponentially; a leak of sockets showed up once.",
]
"""The project searched: a few notes holding the query words at different rates."""

QUERIES = [
    "pool",
    "leak",
    "pool leak",
    "连接池",
    "cache pool -docker",
    "timeout OR deploy",
    "leak* pool*",
    '"connection pool" 泄漏',
]


def _others(n: int) -> list[str]:
    """Notes of other projects where the query words are common (so the whole home's
    statistics differ from the project's)."""
    return [
        f"Note {i}: pool pool pool settings for service {i}; leak checks {'leak ' * (i % 3)}"
        f"and cache warmup {i}."
        for i in range(n)
    ]


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryBackend]:
    config = MemoryConfig.for_home(tmp_path / "home", fsync=False)
    opened: MemoryBackend
    db: PostgresDatabase | None = None
    if request.param == "sqlite":
        opened = MemoryStore.open(config, clock=lambda: NOW)
    else:
        db = PostgresDatabase(request.getfixturevalue("database_url"), min_size=1, max_size=2)
        db.open()
        opened = PostgresMemoryStore.open(db, config, clock=lambda: NOW)
    try:
        yield opened
    finally:
        opened.close()
        if db is not None:
            db.close()


Ranked = list[tuple[str, float, float]]


def _ranked(store: MemoryBackend, query: str, **kwargs: Any) -> Ranked:
    outcome = store.search_detailed(
        query, limit=10, scope="project:small", record_access=False, floor=0, **kwargs
    )
    return [(hit.id, hit.score, hit.relevance) for hit in outcome.hits]


def _rank_all(store: MemoryBackend, **kwargs: Any) -> dict[str, Ranked]:
    return {q: _ranked(store, q, **kwargs) for q in QUERIES}


def _save_all(store: MemoryBackend, texts: list[str], scope: str) -> None:
    for text in texts:
        assert not store.save(NoteDraft(content=text, scope=scope)).deduplicated


def test_a_project_ranks_the_same_whatever_other_projects_hold(store: MemoryBackend) -> None:
    _save_all(store, SMALL, "project:small")
    alone = _rank_all(store, mode="keyword")
    assert all(alone.values()) and len({h[0] for r in alone.values() for h in r}) >= 4
    # other projects: 50 notes full of the same words, so the whole home's statistics
    # (how rare "leak" is, how long a note is) are no longer the project's
    _save_all(store, _others(50), "project:big")
    assert _rank_all(store, mode="keyword") == alone
    # unscoped, the home's statistics rank: the project's notes score differently
    everywhere = store.search_detailed("pool leak", limit=50, record_access=False, floor=0)
    scores = {h.id: h.score for h in everywhere.hits}
    assert any(scores.get(i) != s for i, s, _ in alone["pool leak"])


def test_hybrid_search_in_a_project_ranks_the_same_whatever_other_projects_hold(
    store: MemoryBackend,
) -> None:
    pytest.importorskip("numpy")
    encoder = HashingEncoder()
    store.attach_encoder(encoder)
    _save_all(store, SMALL, "project:small")
    _embed(store, encoder)
    alone = _rank_all(store, mode="hybrid")
    _save_all(store, _others(50), "project:big")
    _embed(store, encoder)
    assert _rank_all(store, mode="hybrid") == alone


def _embed(store: MemoryBackend, encoder: HashingEncoder) -> None:
    while pending := store.vectors.pending(encoder.name, 8):
        matrix = encoder.encode([c for note in pending for c in note.chunks], "passage")
        items, row = [], 0
        for note in pending:
            items.append((note, matrix[row : row + len(note.chunks)]))
            row += len(note.chunks)
        store.vectors.write(encoder.name, items)


# --- the arithmetic that recovers a phrase's count from FTS5's bm25() ------------------------


@pytest.mark.parametrize(
    ("freq", "words", "avgdl", "rows", "hits"),
    [
        (1, 12.0, 30.5, 10_000, 2_000),
        (10, 3.0, 30.5, 10_000, 9_000),  # most notes hold it: FTS5's IDF floor (1e-6)
        (47, 400.0, 17.25, 101, 14),
        (6, 0.0, 1.0, 2, 1),
        (1234, 5_000.0, 80.0, 1_000_000, 1),
    ],
)
def test_a_phrase_count_comes_back_exactly_from_its_bm25(
    freq: int, words: float, avgdl: float, rows: int, hits: int
) -> None:
    idf = fts5.bm25_idf(rows, hits)
    score = fts5.bm25_term(idf, freq, words, avgdl)
    assert fts5.phrase_freq(score, idf, words, avgdl) == freq


@pytest.mark.parametrize(
    ("blob", "numbers"),
    [
        (b"", []),
        (bytes([5, 0, 127]), [5, 0, 127]),
        (bytes([0x81, 0x00, 0x01]), [128, 1]),
        (bytes([0x82, 0x80, 0x05]), [32773]),
    ],
)
def test_fts5_records_read_as_varints(blob: bytes, numbers: list[int]) -> None:
    assert fts5.varints(blob) == numbers


def test_the_shared_and_alone_rankings_use_the_filter_statistics_only_for_few_notes(
    store: MemoryBackend,
) -> None:
    # a project of most of the home is not "few" (docs/search.md): the home's statistics
    _save_all(store, SMALL, "project:small")
    _save_all(store, _others(3), "project:big")
    before = _rank_all(store, mode="keyword")
    assert all(before.values())
    everywhere = store.search_detailed("pool", limit=50, record_access=False, floor=0)
    scores = {h.id: h.score for h in everywhere.hits}
    # the same statistics as an unscoped search: the project's hits score alike
    for hit_id, score, _ in before["pool"]:
        assert scores[hit_id] == score


def test_both_backends_rank_a_project_alike_with_its_own_statistics(
    tmp_path: Path, database_url: str
) -> None:
    with sqlite_and_postgres(tmp_path / "home", database_url, NOW) as (home, moved):
        _save_all(home, SMALL, "project:small")
        _save_all(home, _others(50), "project:big")
        moved.restore(list(home.iter_notes()))
        for query in QUERIES:
            a = _ranked(home, query, mode="keyword")
            assert a and a == _ranked(moved, query, mode="keyword"), query


def test_a_project_searched_again_sees_every_change(store: MemoryBackend, tmp_path: Path) -> None:
    """What a scoped search keeps for the next (SQLite: the scope's notes, each word's walk
    among them, their sizes) never outlives a change to the index."""
    _save_all(store, SMALL, "project:small")
    _save_all(store, _others(50), "project:big")
    first = _ranked(store, "pool leak", mode="keyword")
    assert _ranked(store, "pool leak", mode="keyword") == first  # the second, from what was kept

    added = store.save(
        NoteDraft(content="pool leak: pool leak again, pool leak", scope="project:small")
    )
    after_save = _ranked(store, "pool leak", mode="keyword")
    assert after_save[0][0] == added.id

    store.update(added.id, content="Nothing about that any more.")
    assert added.id not in [h[0] for h in _ranked(store, "pool leak", mode="keyword")]
    assert [h[0] for h in _ranked(store, "pool leak", mode="keyword")] == [h[0] for h in first]

    gone = first[0][0]
    store.delete(gone)
    assert gone not in [h[0] for h in _ranked(store, "pool leak", mode="keyword")]

    if isinstance(store, MemoryStore):  # a hand edit of the file, seen on the next read
        path = store.root / store.get(first[1][0]).path
        path.write_text(path.read_text(encoding="utf-8").replace("pool", "lake"), encoding="utf-8")
        assert first[1][0] not in [h[0] for h in _ranked(store, "pool", mode="keyword")]


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"include_inactive": True},
        {"type": "decision"},
        {"tag": "infra"},
    ],
    ids=["active", "inactive-too", "type", "tag"],
)
def test_a_scope_searched_again_ranks_from_its_own_index_as_before(
    tmp_path: Path, kwargs: dict[str, Any]
) -> None:
    """SQLite: a scope's second search since the index changed builds the scope an index of
    its own (`memory.sqlite.scope_index`); what it returns and every score stay those of the
    first search (the walk in the home's index with the scope's statistics). A deprecated and
    an expired note count in the scope's statistics but are shown only when asked for."""
    config = MemoryConfig.for_home(tmp_path / "home", fsync=False)
    with MemoryStore.open(config, clock=lambda: NOW) as store:
        _save_all(store, SMALL, "project:small")
        for i, text in enumerate(SMALL[:3]):
            store.save(
                NoteDraft(
                    content=f"Decided: {text} ({i})",
                    scope="project:small",
                    type="decision",
                    tags=["infra"],
                )
            )
        old = store.save(NoteDraft(content="pool leak fixed long ago", scope="project:small"))
        store.update(old.id, status="deprecated")
        store.save(
            NoteDraft(
                content="pool leak workaround until November",
                scope="project:small",
                expires_at="2026-11-01T00:00:00Z",
            )
        )
        _save_all(store, _others(60), "project:big")
    for query in QUERIES:
        with MemoryStore.open(config, clock=lambda: NOW) as store:
            kept = store._kept_for_searches  # which path ranked is the point
            first = _ranked(store, query, mode="keyword", **kwargs)
            assert not kept().scope_indexes, "a scope searched once builds nothing"
            again = _ranked(store, query, mode="keyword", **kwargs)
            assert kept().scope_indexes, "the second search has the scope's own index"
            assert again == first, query
            shown = {hit_id for hit_id, _, _ in again}
            if kwargs.get("include_inactive") and query == "pool leak":
                assert old.id in shown
            elif not kwargs:
                assert old.id not in shown


@pytest.mark.parametrize("cap", [0, 5], ids=["uncapped", "capped"])
def test_a_scope_searched_again_finds_identifiers_in_its_own_index(
    tmp_path: Path, cap: int
) -> None:
    """SQLite: an identifier's substring (`ConnPool` in `getConnPoolSize`) searched again in a
    scope is found in the scope's own index: the home's trigram index, whose walk goes through
    every project's notes (1.3 ms of a 4 ms scoped search at 100k notes), is not read. Like the
    scope's words, every note of the scope holding it counts there; a first search, in the
    home's index, ranks only the home's newest `max_ranked_matches` matches (capped)."""
    config = MemoryConfig.for_home(tmp_path / "home", fsync=False, max_ranked_matches=cap)
    with MemoryStore.open(config, clock=lambda: NOW) as store:
        mine = [
            store.save(
                NoteDraft(
                    content=f"getConnPoolSize returns {n} idle sockets", scope="project:small"
                )
            ).id
            for n in range(3)
        ]
        _save_all(store, [f"getConnPoolSize of service {n}" for n in range(4)], "project:big")
        newest = store.save(
            NoteDraft(content="getConnPoolSize after the resize", scope="project:small")
        ).id
        _save_all(store, _others(20), "project:big")
    with MemoryStore.open(config, clock=lambda: NOW) as store:
        first = _ranked(store, "ConnPool", mode="keyword")
        conn = store.index.conn()
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        try:
            again = _ranked(store, "ConnPool", mode="keyword")
        finally:
            conn.set_trace_callback(None)
    found = [hit_id for hit_id, _, _ in again]
    assert sorted(found) == sorted([newest, *mine])
    assert not [s for s in statements if "notes_tri" in s]
    if cap:
        # the home's newest 5 holding it are project:big's 4 and the newest note
        assert [hit_id for hit_id, _, _ in first] == [newest]
    else:
        assert again == first


def test_scope_searches_in_threads_while_notes_are_saved_see_every_note(tmp_path: Path) -> None:
    """SQLite: searches of one scope in several threads (the app's worker threads) while
    another thread saves notes into it: every save drops the scope's own index under the
    searches' feet, none fails, and the last search finds every saved note."""
    config = MemoryConfig.for_home(tmp_path / "home", fsync=False)
    with MemoryStore.open(config, clock=lambda: NOW) as store:
        _save_all(store, SMALL, "project:small")
        _save_all(store, _others(60), "project:big")
        errors: list[BaseException] = []
        saved: list[str] = []
        done = threading.Event()

        def search() -> None:
            try:
                while not done.is_set():
                    _ranked(store, "pool leak", mode="keyword")
            except BaseException as exc:  # any failure, reported by the test
                errors.append(exc)

        threads = [threading.Thread(target=search) for _ in range(4)]
        for thread in threads:
            thread.start()
        try:
            for i in range(15):
                note = NoteDraft(
                    content=f"pool leak number {i} in {i * 7} sockets", scope="project:small"
                )
                saved.append(store.save(note).id)
        finally:
            done.set()
            for thread in threads:
                thread.join()
        assert not errors
        found = store.search_detailed(
            "pool leak", limit=50, scope="project:small", record_access=False, floor=0
        )
        assert set(saved) <= {hit.id for hit in found.hits}


def test_a_scope_of_huge_notes_is_searched_in_the_homes_index_not_copied_to_memory(
    tmp_path: Path,
) -> None:
    """SQLite: a scope's own index lives in memory, so a scope holding more text than
    `SCOPE_INDEX_CHARS` (a note may hold 20 MB) keeps the walk in the home's index: searched
    again, it builds nothing and ranks as before."""
    config = MemoryConfig.for_home(tmp_path / "home", fsync=False)
    with MemoryStore.open(config, clock=lambda: NOW) as store:
        _save_all(store, SMALL, "project:small")
        each = 450_000  # under the 500k characters the index keeps of a note
        big = [
            store.save(
                NoteDraft(
                    content=f"pool leak {i} " + "filler words " * (each // 13),
                    scope="project:small",
                )
            ).id
            for i in range(SCOPE_INDEX_CHARS // each + 1)
        ]
        _save_all(store, _others(60), "project:big")
        first = _ranked(store, "pool leak", mode="keyword")
        again = _ranked(store, "pool leak", mode="keyword")
        assert again == first and set(big) & {hit_id for hit_id, _, _ in first}
        assert not store._kept_for_searches().scope_indexes  # which path ranked is the point
