"""Whose a note is (issue #33, docs/memory-format.md "Whose a note is"), on SQLite and PostgreSQL
alike: a chat member's reader sees only their own notes and their group's team notes, whatever
scope a search asks for, through every read (search in each mode, list, count, top notes); the
machine owner's reader sees their own scopes and no member's or team's."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from errors import InvalidInputError
from memory.backend import MemoryBackend
from memory.config import MemoryConfig
from memory.encoders.models import HashingEncoder
from memory.model import OWNER, NoteDraft, Reader, normalize_scope
from memory.postgres.store import PostgresMemoryStore
from memory.sqlite.store import MemoryStore
from storage.postgres import PostgresDatabase
from tests.storage.test_memory_contract import embed_pending

ALICE = "ou_alice0000000000000000000000000"
BOB = "ou_bob00000000000000000000000000"
GROUP = "oc_team000000000000000000000000"
ALICE_IN_GROUP = Reader(
    owner=False, scopes=(f"person:{ALICE}", f"team:{GROUP}"), saves_to=f"person:{ALICE}"
)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryBackend]:
    config = replace(MemoryConfig.for_home(tmp_path / "home", fsync=False))
    if request.param == "sqlite":
        with MemoryStore.open(config) as sqlite_store:
            yield sqlite_store
        return
    db = PostgresDatabase(request.getfixturevalue("database_url"), min_size=1, max_size=4)
    db.open()
    try:
        with PostgresMemoryStore.open(db, config) as postgres_store:
            yield postgres_store
    finally:
        db.close()


def _tea(store: MemoryBackend) -> dict[str, str]:
    """One tea note in each kind of scope."""
    notes = {
        "user": "The owner drinks jasmine tea every morning.",
        "project:kiln": "The kiln project brews oolong tea in the demo.",
        f"person:{ALICE}": "Alice prefers pu-erh tea, strong and hot.",
        f"person:{BOB}": "Bob prefers green tea, cold brewed.",
        f"team:{GROUP}": "Team tea break is at three every afternoon.",
        "team:oc_other": "The other team drinks black tea at standup.",
    }
    return {
        scope: store.save(NoteDraft(content=text, scope=scope, type="preference")).id
        for scope, text in notes.items()
    }


def _scopes(store: MemoryBackend, reader: Reader, **kwargs: object) -> set[str]:
    return {h.scope for h in store.search("tea", limit=20, reader=reader, **kwargs)}  # type: ignore[arg-type]


def test_the_new_scopes_are_accepted_and_malformed_ones_refused() -> None:
    assert normalize_scope(f"person:{ALICE}") == f"person:{ALICE}"
    assert normalize_scope(f"team:{GROUP}") == f"team:{GROUP}"
    for bad in ("person:", "team:a b", "person:../x", "persons:x"):
        with pytest.raises(InvalidInputError):
            normalize_scope(bad)


def test_a_member_reads_their_own_and_their_groups_team_notes_only(store: MemoryBackend) -> None:
    ids = _tea(store)
    mine = {f"person:{ALICE}", f"team:{GROUP}"}
    assert _scopes(store, ALICE_IN_GROUP) == mine
    # any scope asked for stays within the reader's: the owner's, another member's, none
    assert _scopes(store, ALICE_IN_GROUP, scope="user") == set()
    assert _scopes(store, ALICE_IN_GROUP, scope=f"person:{BOB}") == set()
    assert _scopes(store, ALICE_IN_GROUP, scope="project:kiln") == set()
    assert _scopes(store, ALICE_IN_GROUP, scope=f"team:{GROUP}") == {f"team:{GROUP}"}
    assert {n.scope for n in store.list(reader=ALICE_IN_GROUP, limit=100)} == mine
    assert store.count(reader=ALICE_IN_GROUP) == 2
    assert {n.scope for n, _ in store.top_notes(limit=50, reader=ALICE_IN_GROUP)} == mine
    # in her direct chat: her own notes, no team's
    alone = Reader(owner=False, scopes=(f"person:{ALICE}",), saves_to=f"person:{ALICE}")
    assert [h.id for h in store.search("tea", reader=alone)] == [ids[f"person:{ALICE}"]]


def test_the_owner_reads_their_own_scopes_and_no_members_or_teams(store: MemoryBackend) -> None:
    _tea(store)
    assert _scopes(store, OWNER) == {"user", "project:kiln"}
    in_group = Reader(owner=True, scopes=(f"team:{GROUP}",), saves_to="user")
    assert _scopes(store, in_group) == {"user", "project:kiln", f"team:{GROUP}"}
    # a scope asked for brings the user's notes along (as a project's does), never the member's
    assert _scopes(store, OWNER, scope=f"person:{ALICE}") == {"user"}
    # without a reader (the web page, the CLI): every note, as before
    assert len({h.scope for h in store.search("tea", limit=20)}) == 6


def test_a_members_hybrid_and_vector_searches_stay_within_their_scopes(
    store: MemoryBackend,
) -> None:
    pytest.importorskip("numpy")
    encoder = HashingEncoder()
    store.attach_encoder(encoder)
    _tea(store)
    embed_pending(store, encoder)
    for mode in ("hybrid", "vector", "keyword"):
        outcome = store.search_detailed("tea", limit=20, mode=mode, reader=ALICE_IN_GROUP)
        assert outcome.mode == mode
        assert {h.scope for h in outcome.hits} == {f"person:{ALICE}", f"team:{GROUP}"}, mode
