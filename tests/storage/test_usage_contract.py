"""What is recorded counts (issue #19), on SQLite and PostgreSQL alike: a note injected into a
prompt or read in full counts as an access (`record_access`), and a note used more ranks above
an otherwise equal one (the usage part of the score, docs/search.md)."""

from __future__ import annotations

import math

import pytest

from memory.search.keyword import USAGE_SATURATION, usage
from tests.storage.test_memory_contract import Open, ids, open_store, save  # noqa: F401


@pytest.mark.parametrize(
    ("count", "pending", "expected"),
    [
        (0, 0, 0.0),
        (1, 0, math.log(2) / math.log(21)),
        (0, 1, math.log(2) / math.log(21)),  # SQLite: counted, not yet in the file
        (3, 0, math.log(4) / math.log(21)),
        (USAGE_SATURATION, 0, 1.0),
        (500, 7, 1.0),
        (-4, 0, 0.0),  # a hand-edited file may say anything
    ],
)
def test_the_usage_part_of_a_score(count: int, pending: int, expected: float) -> None:
    assert usage({"access_count": count, "access_pending": pending}) == pytest.approx(expected)
    assert usage({"id": "x"}) == 0.0


def test_reads_and_injections_count_as_accesses_on_every_instance(
    open_store: Open,  # noqa: F811
) -> None:
    store = open_store(access_flush_batch=1)
    note_id = save(store, "Kubernetes cluster runs on three nodes.")
    other = save(store, "Unrelated note about bread.")
    store.record_access([note_id, note_id, "mem_unknown"])
    store.record_access([note_id])
    store.record_access([])
    assert store.get(note_id).access_count == 2 and store.get(other).access_count == 0
    store.flush_access_counts()
    store.close()
    assert open_store().get(note_id).access_count == 2


def test_a_note_used_more_ranks_above_an_equal_one(open_store: Open) -> None:  # noqa: F811
    store = open_store()
    first = save(store, "Redis cache keeps the user sessions.")
    second = save(store, "Redis cache keeps the shop orders.")
    before = store.search("redis cache", limit=5)
    assert {h.id for h in before} == {first, second}
    lower = before[-1]
    assert lower.parts.usage == before[0].parts.usage  # each search counted both alike
    for _ in range(5):
        store.record_access([lower.id])
    after = store.search("redis cache", limit=5)
    assert after[0].id == lower.id
    assert after[0].parts.usage > after[1].parts.usage
