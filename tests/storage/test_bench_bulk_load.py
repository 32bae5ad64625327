"""The bench's bulk load of a PostgreSQL store (issue #34: 1M notes load in an hour, not six)
makes the database `restore()` note by note makes: the same indexes with their options, the
postings' trigger on, the same postings, the same search results. Otherwise the bench would time
a store no user has."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.memory_bench import indexes_deferred, make_notes, query, restore_in_parallel
from memory.config import MemoryConfig
from memory.postgres.store import PostgresMemoryStore
from storage.postgres import PostgresDatabase


def _open(url: str, home: Path) -> tuple[PostgresDatabase, PostgresMemoryStore]:
    db = PostgresDatabase(url, min_size=1, max_size=2)
    db.open()
    return db, PostgresMemoryStore.open(db, MemoryConfig.for_home(home))


def _shape(db: PostgresDatabase) -> dict[str, list[object] | int]:
    indexes = db.fetch(
        "SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS ddl, i.indisvalid AS valid"
        " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE i.indrelid IN ('memory_notes'::regclass, 'memory_note_terms'::regclass)"
    )
    triggers = db.fetch(
        "SELECT tgname, tgenabled FROM pg_trigger"
        " WHERE tgrelid = 'memory_notes'::regclass AND NOT tgisinternal"
    )
    postings = db.fetch(
        "SELECT n.id, t.term, t.f, t.d FROM memory_note_terms t"
        " JOIN memory_notes n ON n.changed = t.changed"
    )
    return {
        "indexes": sorted((r["name"], r["ddl"], r["valid"]) for r in indexes),
        "triggers": sorted((r["tgname"], r["tgenabled"]) for r in triggers),
        "postings": sorted((r["id"], r["term"], r["f"], r["d"]) for r in postings),
        "orphans": db.fetch(
            "SELECT count(*) AS n FROM memory_note_terms t"
            " WHERE NOT EXISTS (SELECT 1 FROM memory_notes n WHERE n.changed = t.changed)"
        )[0]["n"],
    }


@pytest.fixture
def two_stores(
    database_url: str, fresh_database_url: str, tmp_path: Path
) -> Iterator[tuple[PostgresMemoryStore, PostgresMemoryStore, str]]:
    one, by_note = _open(database_url, tmp_path / "a")
    two, bulk = _open(fresh_database_url, tmp_path / "b")
    try:
        yield by_note, bulk, fresh_database_url
    finally:
        for store, db in ((by_note, one), (bulk, two)):
            store.close()
            db.close()


def test_a_bulk_load_makes_the_store_restore_makes_note_by_note(
    two_stores: tuple[PostgresMemoryStore, PostgresMemoryStore, str], tmp_path: Path
) -> None:
    by_note, bulk, bulk_url = two_stores
    notes = make_notes(random.Random(3), datetime(2026, 11, 1, tzinfo=UTC), 600)

    by_note.restore(notes)
    with indexes_deferred(bulk._db):
        restore_in_parallel(bulk_url, MemoryConfig.for_home(tmp_path / "b"), notes, part=100)

    expected, found = _shape(by_note._db), _shape(bulk._db)
    assert found["triggers"] == expected["triggers"] == [("memory_note_terms", "O")]
    assert found["indexes"] == expected["indexes"]
    postings = found["postings"]
    assert postings == expected["postings"]
    assert isinstance(postings, list) and len(postings) > 600 * 50
    assert found["orphans"] == expected["orphans"] == 0
    rng = random.Random(5)
    for q in [query(rng) for _ in range(40)]:
        want = by_note.search(q, record_access=False)
        got = bulk.search(q, record_access=False)
        assert [h.id for h in got] == [h.id for h in want]
        # the same scores but for their freshness, computed at each search's own moment
        assert [h.score for h in got] == pytest.approx([h.score for h in want], rel=1e-6)
    # and it stays kept by the trigger afterwards
    bulk.delete(notes[0].id)
    assert not bulk._db.fetch(
        "SELECT 1 FROM memory_note_terms t WHERE NOT EXISTS"
        " (SELECT 1 FROM memory_notes n WHERE n.changed = t.changed)"
    )
