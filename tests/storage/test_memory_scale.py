"""A team's memory at scale (issue #34): what `doctor` says about the memory in PostgreSQL, one
note per fact when two app instances save it at the same moment, and the SQLite vector search
of large stores (signs first, then exact) finding what the exact scan finds.

The timings themselves are the bench's (bench/memory_bench.py, docs/search.md).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import psycopg
import pytest

from memory.config import MemoryConfig
from memory.encoders.models import HashingEncoder
from memory.model import NoteDraft
from memory.postgres import store as store_module
from memory.postgres.health import doctor_lines, inspect
from memory.postgres.store import PostgresMemoryStore
from memory.sqlite import vectors
from memory.sqlite.store import MemoryStore
from settings import Settings
from storage.postgres import PostgresDatabase
from tests.conftest import running_app


@pytest.fixture
def pg_store(database_url: str, tmp_path: Path) -> Iterator[PostgresMemoryStore]:
    db = PostgresDatabase(database_url, min_size=1, max_size=2)
    db.open()
    try:
        store = PostgresMemoryStore.open(db, MemoryConfig.for_home(tmp_path / "pg"))
        try:
            yield store
        finally:
            store.close()
    finally:
        db.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(MemoryConfig.for_home(tmp_path / "home", fsync=False)) as opened:
        yield opened


def _embed(store: PostgresMemoryStore | MemoryStore, encoder: HashingEncoder) -> None:
    pending = store.vectors.pending(encoder.name)
    store.vectors.write(encoder.name, [(n, encoder.encode(list(n.chunks))) for n in pending])


def test_doctor_reports_the_notes_indexes_vector_index_and_pool(
    pg_store: PostgresMemoryStore, database_url: str
) -> None:
    for n in range(3):
        pg_store.save(NoteDraft(content=f"部署步骤 {n}: run the migration before the deploy"))
    _embed(pg_store, HashingEncoder())

    lines = doctor_lines(inspect(database_url), pool_max=10)

    text = "\n".join(what for _, what, _ in lines)
    assert all(ok for ok, _, _ in lines), text
    assert "4 notes, schema" in text  # and the profile skeleton
    assert "memory_notes_search" not in text  # valid indexes are counted, not named
    assert "HNSW index memory_note_vectors_hnsw_" in text
    assert "4 notes, HNSW" in text
    assert "up to 10 connections in each of an instance's two pools" in text


def test_doctor_names_an_invalid_index_and_how_to_rebuild_it(
    pg_store: PostgresMemoryStore, database_url: str
) -> None:
    # what an interrupted CREATE INDEX CONCURRENTLY leaves behind, as the catalog shows it
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE pg_index SET indisvalid = false"
            " WHERE indexrelid = 'memory_notes_tag_keys'::regclass"
        )
    try:
        lines = doctor_lines(inspect(database_url), pool_max=10)
    finally:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("REINDEX INDEX memory_notes_tag_keys")

    [(ok, what, hint)] = [line for line in lines if line[1].startswith("memory indexes")]
    assert not ok
    assert "invalid: memory_notes_tag_keys" in what
    assert "REINDEX INDEX" in hint


def test_doctor_says_when_the_pools_could_exceed_the_server_connections(
    database_url: str,
) -> None:
    state = inspect(database_url)
    [(ok, what, hint)] = [
        line
        for line in doctor_lines(state, pool_max=state.max_connections)
        if line[1].startswith("database pool")
    ]
    assert not ok
    assert f"the server allows {state.max_connections}" in what
    assert "CLAUDE_MEMORY_DATABASE_POOL_MAX_SIZE" in hint


async def test_the_same_fact_saved_through_two_instances_at_once_is_one_note(
    make_settings: Callable[..., Settings], database_url: str, tmp_path: Path
) -> None:
    a = make_settings(home=tmp_path / "home-a", database_url=database_url)
    b = make_settings(home=tmp_path / "home-b", database_url=database_url)
    facts = [
        f"团队约定 {n}: the staging database is reset every Monday at 0{n}:00" for n in range(4)
    ]
    async with running_app(a) as client_a, running_app(b) as client_b:
        saves = [
            client.post("/api/memories", json={"content": fact})
            for fact in facts
            for client in (client_a, client_b, client_a, client_b)
        ]
        answers = await asyncio.gather(*saves)
        assert {answer.status_code for answer in answers} <= {200, 201}
    ids = [answer.json()["id"] for answer in answers]
    for n in range(len(facts)):
        assert len(set(ids[n * 4 : n * 4 + 4])) == 1, ids  # every save of a fact: one note
    with psycopg.connect(database_url) as conn:
        [(notes,)] = conn.execute(
            "SELECT count(*) FROM memory_notes WHERE body LIKE '团队约定 %'"
        ).fetchall()
    assert notes == len(facts)


# --- SQLite: large vector matrices -------------------------------------------------------------


def _clustered(rows: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors around 40 topics, as a text encoder's vectors cluster by subject."""
    rng = np.random.default_rng(seed)
    topics = rng.standard_normal((40, dim)).astype(np.float32)
    matrix = topics[rng.integers(0, 40, rows)] + 0.8 * rng.standard_normal((rows, dim)).astype(
        np.float32
    )
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def test_a_large_sqlite_memory_finds_the_nearest_notes_the_exact_scan_finds(
    store: MemoryStore,
) -> None:
    # 21 notes of 1,000 chunks each: past COARSE_MIN_ROWS, so signs pick the rows compared
    notes = [
        store.save(NoteDraft(content=f"长笔记 {n}: chunked note number {n}")) for n in range(21)
    ]
    matrix = _clustered(21_000, 64, seed=3)
    pending = {p.id: p for p in store.vectors.pending("clustered-64")}
    items = [(pending[s.id], matrix[i * 1000 : i * 1000 + 1000]) for i, s in enumerate(notes)]
    assert store.vectors.write("clustered-64", items) == 21
    assert vectors.COARSE_MIN_ROWS <= 21_000

    rng = np.random.default_rng(4)
    for row in rng.choice(21_000, 20, replace=False):
        query = matrix[row] + 0.05 * rng.standard_normal(64).astype(np.float32)
        query /= np.linalg.norm(query)
        scores = matrix @ query
        best = {notes[int(r) // 1000].id: float(scores[r]) for r in np.argsort(-scores)[::-1]}
        exact = sorted(best.items(), key=lambda kv: -kv[1])[:5]

        found = store.vectors.search("clustered-64", query, 5)

        assert [i for i, _ in found] == [i for i, _ in exact]
        assert [round(s, 5) for _, s in found] == [round(s, 5) for _, s in exact]


def test_a_large_sqlite_memory_scans_everything_when_the_filters_keep_too_few(
    store: MemoryStore,
) -> None:
    notes = [
        store.save(NoteDraft(content=f"长笔记 {n}: chunked note number {n}")) for n in range(21)
    ]
    matrix = _clustered(21_000, 64, seed=5)
    pending = {p.id: p for p in store.vectors.pending("clustered-64")}
    store.vectors.write(
        "clustered-64",
        [(pending[s.id], matrix[i * 1000 : i * 1000 + 1000]) for i, s in enumerate(notes)],
    )
    query = matrix[0]
    # the one note the filter keeps is the farthest from the query: the signs' candidates hold
    # none of its rows, and the search still finds it
    far = min(range(21), key=lambda i: float((matrix[i * 1000 : i * 1000 + 1000] @ query).max()))
    keep = {notes[far].id}

    found = store.vectors.search("clustered-64", query, 1, allowed=lambda ids: keep & set(ids))

    assert [i for i, _ in found] == [notes[far].id]


def test_a_restore_with_repeats_keeps_the_last_of_each_id_and_path(
    pg_store: PostgresMemoryStore,
) -> None:
    # a batch is written in two round trips, not note by note: the replacements one by one
    # would have made must still hold (`memory migrate` of a home edited while it was read)
    base = pg_store.get(pg_store.save(NoteDraft(content="部署清单 deploy checklist")).id)
    a = replace(base, id=f"{base.id}a", path="project/a.md", title="first a")
    b = replace(base, id=f"{base.id}b", path="project/b.md", title="first b")
    a_again = replace(a, title="second a")  # the same id, later in the list
    c = replace(base, id=f"{base.id}c", path="project/b.md", title="c takes b's path")

    pg_store.restore([a, b, a_again, c], batch=10)

    titles = {n.path: (n.id, n.title) for n in pg_store.iter_notes() if n.source != "profile"}
    assert titles["project/a.md"] == (a.id, "second a")
    assert titles["project/b.md"] == (c.id, "c takes b's path")
    assert b.id not in {i for i, _ in titles.values()}


def test_a_vectors_batch_skips_only_the_note_edited_since_it_was_read(
    pg_store: PostgresMemoryStore,
) -> None:
    encoder = HashingEncoder()
    topics = ["Redis 缓存淘汰策略", "Kubernetes pod 重启循环", "PostgreSQL vacuum 计划",
              "飞书卡片大小限制", "Docker compose healthcheck"]  # fmt: skip
    saved = [pg_store.save(NoteDraft(content=t)).id for t in topics]
    pending = [p for p in pg_store.vectors.pending(encoder.name) if p.id in saved]
    pg_store.update(saved[2], content="PostgreSQL vacuum 计划: edited while being embedded")

    written = pg_store.vectors.write(
        encoder.name, [(p, encoder.encode(list(p.chunks))) for p in pending]
    )

    assert written == 4
    assert [p.id for p in pg_store.vectors.pending(encoder.name) if p.id in saved] == [saved[2]]
    pg_store.attach_encoder(encoder)
    found = pg_store.search_detailed("飞书卡片大小限制", mode="vector", limit=5)
    assert found.mode == "vector" and found.hits[0].id == saved[3]


def _open_pg(url: str, home: Path) -> tuple[PostgresDatabase, PostgresMemoryStore]:
    db = PostgresDatabase(url, min_size=1, max_size=2)
    db.open()
    return db, PostgresMemoryStore.open(db, MemoryConfig.for_home(home))


def test_a_large_memorys_word_counts_are_made_once_for_every_instance(
    pg_store: PostgresMemoryStore, database_url: str, tmp_path: Path
) -> None:
    # from SLACK_MIN notes on, BM25's whole-table counts may lag by a thousandth of the notes:
    # counting a common word reads all its postings (50-230 ms at 1M notes), so the first
    # instance to count one keeps it in the database for the others and for restarts
    base = pg_store.get(pg_store.save(NoteDraft(content="seed")).id)
    notes = [
        replace(
            base,
            id=f"{base.id}{n:05d}",
            path=f"user/bulk-{n}.md",
            title=f"note {n}",
            body="部署 deploy checklist" if n % 3 == 0 else f"unrelated text {n}",
        )
        for n in range(store_module.SLACK_MIN)
    ]
    pg_store.restore(notes)
    first = [(h.id, h.score) for h in pg_store.search("deploy", record_access=False)]
    kept = {r["key"]: r for r in pg_store._db.fetch("SELECT * FROM memory_count_cache")}
    assert {"", "\x01deploi"} <= set(kept), sorted(kept)
    assert kept["\x01deploi"]["counts"] == [sum(1 for n in range(len(notes)) if n % 3 == 0)]

    # another instance reads the kept count ("deploy" stemmed as FTS5 stems it) instead of
    # counting: one made wrong on purpose
    # shows in its scores
    with pg_store._db.connection() as conn:
        conn.execute("UPDATE memory_count_cache SET counts = '{1}' WHERE key = '\x01deploi'")
    db, other = _open_pg(database_url, tmp_path / "other")
    try:
        scores = [(h.id, h.score) for h in other.search("deploy", record_access=False)]
        assert [i for i, _ in scores] and scores != first
        # past the slack (10 notes changed at 10k notes) it counts again, and keeps that
        for n in range(11):
            other.save(NoteDraft(content=f"another unrelated note number {n} 更多"))
        db2, third = _open_pg(database_url, tmp_path / "third")
        try:
            again = [(h.id, h.score) for h in third.search("deploy", record_access=False)]
            assert [i for i, _ in again] == [i for i, _ in first]
            [row] = db2.fetch("SELECT counts FROM memory_count_cache WHERE key = '\x01deploi'")
            assert row["counts"] == kept["\x01deploi"]["counts"]

            # a word every note holds is counted to just past half the notes only: from there
            # FTS5's IDF is its floor, so it ranks as with its whole count (planted below)
            capped = [(h.id, h.score) for h in third.search("note deploy", record_access=False)]
            [row] = db2.fetch("SELECT counts FROM memory_count_cache WHERE key = '\x01note'")
            total = third.count()
            assert row["counts"] == [total // 2 + 1]
            with db2.connection() as conn:
                conn.execute(
                    "UPDATE memory_count_cache SET counts = %s WHERE key = '\x01note'",
                    ([total - 1],),
                )
            db3, fourth = _open_pg(database_url, tmp_path / "fourth")
            try:
                whole = [(h.id, h.score) for h in fourth.search("note deploy", record_access=False)]
            finally:
                fourth.close()
                db3.close()
            assert capped and [i for i, _ in whole] == [i for i, _ in capped]
            # the same scores but for their freshness, computed at each search's own moment
            assert [v for _, v in whole] == pytest.approx([v for _, v in capped], rel=1e-6)
        finally:
            third.close()
            db2.close()
    finally:
        other.close()
        db.close()


def test_a_search_answers_while_background_embedding_holds_its_hit(
    pg_store: PostgresMemoryStore, database_url: str
) -> None:
    saved = pg_store.save(NoteDraft(content="连接池泄漏 fixed by closing idle connections"))
    with psycopg.connect(database_url) as writer:
        # the row lock `vectors.write` holds on each note of its batch until the batch commits
        writer.execute(
            "SELECT doc_key FROM memory_notes WHERE id = %s FOR NO KEY UPDATE", (saved.id,)
        )
        release = threading.Timer(8, writer.rollback)  # a search that waits, waits 8 s
        release.start()
        started = time.perf_counter()
        hits = pg_store.search("连接池泄漏")
        waited = time.perf_counter() - started
        release.cancel()
        writer.rollback()
    assert [h.id for h in hits] == [saved.id]
    assert waited < 5, f"the search waited {waited:.1f} s for the embedding's lock"


# --- keyword search from the postings (docs/postgres.md, "Where a search's time goes") ------


@pytest.fixture
def pg_capped(database_url: str, tmp_path: Path) -> Iterator[PostgresMemoryStore]:
    """A PostgreSQL memory that ranks at most 5 matches of a word (`max_ranked_matches`)."""
    db = PostgresDatabase(database_url, min_size=1, max_size=2)
    db.open()
    config = replace(MemoryConfig.for_home(tmp_path / "pg"), max_ranked_matches=5)
    try:
        store = PostgresMemoryStore.open(db, config)
        try:
            yield store
        finally:
            store.close()
    finally:
        db.close()


def test_a_rare_word_finds_its_notes_past_a_common_words_newest_matches(
    pg_capped: PostgresMemoryStore,
) -> None:
    # three older notes hold the rare word; twelve newer ones the common word
    rare = [
        pg_capped.save(NoteDraft(content=f"奥米伽 rollback plan {n}", title=f"奥米伽回滚 {n}")).id
        for n in range(3)
    ]
    for n in range(12):
        pg_capped.save(NoteDraft(content=f"部署 deploy checklist step {n} for the api"))

    found = [h.id for h in pg_capped.search("部署 奥米伽", record_access=False, floor=0)]

    # each word's own newest matches are ranked, not the newest five of either word
    assert set(rare) <= set(found), found


def _postings(db: PostgresDatabase, sql: str) -> list[tuple[str, int, int, int]]:
    return sorted((r["term"], r["changed"], r["f"], r["d"]) for r in db.fetch(sql))


def test_the_postings_follow_every_write(pg_store: PostgresMemoryStore) -> None:
    first = pg_store.save(NoteDraft(content="连接池 pool_size 的上限是 20", title="连接池上限"))
    second = pg_store.save(NoteDraft(content="缓存 cache ttl is 60 seconds", tags=("缓存",)))
    third = pg_store.save(NoteDraft(content="告警 alert routing goes to the oncall"))
    pg_store.update(
        first.id, content="数据库 database pool holds 40 connections", title="数据库上限"
    )
    pg_store.deprecate(second.id)
    pg_store.delete(third.id)
    pg_store.rebuild()
    pg_store.restore([pg_store.get(first.id)])  # the same note again: replaced

    db = pg_store._db
    held = _postings(db, "SELECT term, changed, f, d FROM memory_note_terms")
    derived = _postings(
        db,
        "SELECT o.term, n.changed, o.f, n.fts_tokens AS d"
        " FROM memory_notes n, memory_note_terms_of(n.search) o",
    )
    assert held == derived
    # what a user sees of it: the new words find the note, the old ones and the deleted note
    # are gone
    assert [h.id for h in pg_store.search("数据库", record_access=False)] == [first.id]
    assert pg_store.search("连接池", record_access=False) == []
    assert pg_store.search("告警", record_access=False) == []
    assert [h.id for h in pg_store.search("缓存", include_inactive=True)] == [second.id]


def test_a_scopes_newest_notes_are_listed_without_sorting_the_whole_scope(
    store: MemoryStore,
) -> None:
    # the prompt's brief lists the newest 200 `user` notes on every session start: in a home
    # of 100k notes, 40k of them the user's, sorting them all took 250 ms
    for n in range(3):
        store.save(NoteDraft(content=f"我喜欢简洁的回答 {n}", scope="user"))
    conn = store.index.conn()
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        listed = store.list(scope="user", status="active", limit=200, sort="updated")
    finally:
        conn.set_trace_callback(None)
    assert len([n for n in listed if n.scope == "user"]) >= 3
    [sql] = [s for s in statements if "ORDER BY n.updated_ts" in s]
    plan = " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
    assert "notes_scope_updated" in plan, plan
