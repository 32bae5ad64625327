"""PostgreSQL ranks keyword matches as SQLite's FTS5 does (memory/search/fts5.py): the same notes,
moved into the database, answer every query with the same hits in the same order and with
the same scores, down to the last bit of the float."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from memory.config import MemoryConfig
from memory.model import NoteDraft
from memory.postgres.store import PostgresMemoryStore
from memory.sqlite.store import MemoryStore
from storage.postgres import PostgresDatabase
from tests.memory.corpus import CORPUS
from tests.memory.test_search_bilingual import QUERIES
from tests.storage.conftest import sqlite_and_postgres

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)

EXTRA = [
    NoteDraft(
        title="Connection pool leaks",
        content="The connection pool leaked connections after timeouts; leaking stopped once "
        "getConnPoolSize() and auth_timeout were fixed. " + "pool " * 40,
        tags=("postgres", "连接池"),
        summary="pool leaks and how they stopped",
    ),
    NoteDraft(title="Café crème", content="Le café crème du matin, CAFÉ noir l'après-midi."),
    NoteDraft(
        title="哈哈哈 重复的字",
        content="哈哈哈哈，连接连接池池。数据库 数据 库 数据库连接池泄漏，redis 缓存。",
        type="general",
    ),
    # a phrase across two columns ("alpha beta") is no phrase for FTS5
    NoteDraft(title="Release alpha", tags=("beta", "rollout"), content="Rollout notes, alpha."),
    NoteDraft(
        title="Generalization of happiness",
        content="Generalizations generalize; happily the happy generalist was happier.",
        scope="project:api",
    ),
]

EDGE_QUERIES = [
    "leak*",
    "conn*",
    '"connection pool"',
    "pool -redis",
    "pool leaks -timeouts",
    "café",
    "CAFE creme",
    "auth_timeout",
    "getConnPoolSize",
    "哈哈",
    "连接池 池",
    "数据库连接池泄漏",
    "泄漏 leak",
    "the pool",
    "generalization happy",
    "数据库 OR 缓存",
    "pool postgres 连接池",
    '"alpha beta"',
    '"release alpha"',
]


@pytest.fixture
def stores(tmp_path: Path, database_url: str) -> Iterator[tuple[MemoryStore, PostgresMemoryStore]]:
    with sqlite_and_postgres(tmp_path / "home", database_url, NOW) as (home, moved):
        for draft in [*CORPUS.values(), *EXTRA]:
            home.save(draft)
        moved.restore(list(home.iter_notes()))
        yield home, moved


def _hits(
    store: MemoryStore | PostgresMemoryStore,
    query: str,
    *,
    type: str | None = None,
    scope: str | None = None,
    tag: str | None = None,
) -> list[tuple[str, float]]:
    found = store.search_detailed(
        query, limit=20, type=type, scope=scope, tag=tag, record_access=False, mode="keyword"
    )
    return [(hit.id, hit.score) for hit in found.hits]


def _differences(
    home: MemoryStore, moved: PostgresMemoryStore, queries: list[str], **filters: str
) -> dict[str, tuple[object, object]]:
    out: dict[str, tuple[object, object]] = {}
    for query in queries:
        a, b = _hits(home, query, **filters), _hits(moved, query, **filters)
        if a != b:
            out[query] = (a, b)
    return out


def test_every_query_gets_the_same_hits_with_the_same_scores(
    stores: tuple[MemoryStore, PostgresMemoryStore],
) -> None:
    home, moved = stores
    queries = [q for q, _ in QUERIES] + EDGE_QUERIES
    assert not _differences(home, moved, queries)
    # not vacuous: most queries find several notes, and scores differ between them
    found = [_hits(moved, q) for q in queries]
    assert sum(len(f) > 1 for f in found) > len(queries) // 2
    assert len({score for f in found for _, score in f}) > len(queries)


def test_filters_keep_the_two_in_step(stores: tuple[MemoryStore, PostgresMemoryStore]) -> None:
    home, moved = stores
    queries = ["连接池", "pool", "generalization", "缓存 redis"]
    assert not _differences(home, moved, queries, type="bug")
    assert not _differences(home, moved, queries, scope="project:api")
    assert not _differences(home, moved, queries, tag="db")


def test_changes_on_both_sides_keep_the_scores_equal(
    stores: tuple[MemoryStore, PostgresMemoryStore],
) -> None:
    # word counts, averages and document frequencies all move with an update and a delete
    home, moved = stores
    [first, second] = [hit.id for hit in home.search("pool", limit=2, record_access=False)]
    for store in (home, moved):
        store.update(first, content="A short note now: pool pool pool, 连接池 gone quiet.")
        store.delete(second)
    queries = ["pool", "连接池", "leak*", "pool leaks -timeouts", "数据库 OR 缓存"]
    assert not _differences(home, moved, queries)


def test_a_database_written_before_fts5_words_is_brought_up_to_date_on_open(
    stores: tuple[MemoryStore, PostgresMemoryStore], database_url: str, tmp_path: Path
) -> None:
    home, _ = stores
    with psycopg.connect(database_url, autocommit=True) as conn:
        # as text version 1 left the rows: Snowball stems, no word counts
        conn.execute(
            "UPDATE memory_notes SET text_version = 1, fts_tokens = 0,"
            " search = to_tsvector('memory_text', title || ' ' || body)"
        )
    db = PostgresDatabase(database_url, min_size=1, max_size=2)
    db.open()
    try:
        config = MemoryConfig.for_home(tmp_path / "other", fsync=False)
        with PostgresMemoryStore.open(db, config, clock=lambda: NOW) as reopened:
            assert not _differences(home, reopened, ["pool", "leak*", "连接池", "café"])
    finally:
        db.close()
