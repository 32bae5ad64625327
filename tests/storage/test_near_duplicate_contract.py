"""Near duplicates and conflicts through the stores' one save, on SQLite and PostgreSQL (issue
#19): the pair set of tests/memory/test_near_duplicates.py saved for real; a note that changes
a claim (a negation, a number) is saved beside the old one as a pending supersession, which the
user resolves (keep new / keep old / keep both) with both notes' histories kept."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from errors import ConflictError, InvalidInputError, NotFoundError
from memory.backend import MemoryBackend
from memory.config import MemoryConfig
from memory.history.conflicts import ConflictStore
from memory.history.store import HistoryStore
from memory.model import NoteDraft
from memory.postgres.state import PostgresStateDB
from memory.postgres.store import PostgresMemoryStore
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore
from storage.postgres import PostgresDatabase
from tests.memory.test_near_duplicates import CONFLICTS, DIFFERENT, SAME, UNRELATED


@dataclass
class Opened:
    store: MemoryBackend
    history: HistoryStore
    conflicts: ConflictStore
    now: list[datetime]
    """The stores' clock: set `now[0]` to move it."""


@pytest.fixture(params=["sqlite", "postgresql"])
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opened]:
    config = MemoryConfig.for_home(tmp_path / "home", fsync=False)
    closers: list[Callable[[], None]] = []
    now = [datetime.now(UTC)]
    store: MemoryBackend
    if request.param == "sqlite":
        store = MemoryStore.open(config, clock=lambda: now[0])
        state = StateDB(tmp_path / "home" / "state.db")
        closers.append(state.close)
    else:
        db = PostgresDatabase(request.getfixturevalue("database_url"), min_size=1, max_size=4)
        db.open()
        closers.append(db.close)
        store = PostgresMemoryStore.open(db, config, clock=lambda: now[0])
        pg_state = PostgresStateDB(db)
        closers.append(pg_state.close)
        state = pg_state  # type: ignore[assignment]
    closers.append(store.close)
    history = HistoryStore(state)
    store.attach_history(history)
    yield Opened(store, history, ConflictStore(state), now)
    for close in reversed(closers):
        close()


def test_every_true_pair_is_merged_by_the_store(opened: Opened) -> None:
    store = opened.store
    missed = []
    for n, (a, b) in enumerate(SAME):
        scope = f"project:same{n}"  # one scope per pair: no pair meets another
        first = store.save(NoteDraft(content=a, scope=scope))
        again = store.save(NoteDraft(content=b, scope=scope))
        if not (again.deduplicated and again.id == first.id):
            missed.append((a, b))
    assert missed == []
    assert store.count() == len(SAME) + 1  # and the profile


def test_no_pair_that_differs_in_meaning_is_merged(opened: Opened) -> None:
    store = opened.store
    merged = []
    for n, (a, b) in enumerate(DIFFERENT + UNRELATED):
        scope = f"project:diff{n}"
        first = store.save(NoteDraft(content=a, scope=scope))
        other = store.save(NoteDraft(content=b, scope=scope))
        if other.deduplicated or other.id == first.id:
            merged.append((a, b))
    assert merged == []


def test_a_changed_claim_is_saved_as_a_pending_supersession(opened: Opened) -> None:
    store, conflicts = opened.store, opened.conflicts
    for n, (old_text, new_text, why) in enumerate(CONFLICTS):
        scope = f"project:c{n}"
        old = store.save(NoteDraft(content=old_text, scope=scope, type="decision"))
        new = store.save(NoteDraft(content=new_text, scope=scope, type="decision"))
        assert not new.deduplicated and new.id != old.id, old_text
        assert new.conflicts_with == old.id, (old_text, new_text)
        assert why in new.conflict_reason
        assert new.pending is not None and new.pending.startswith("sup_")
        assert (
            f"conflicts with [{old.id}]" in new.notice() and "Pending your choice" in new.notice()
        )
        # nothing is overwritten: both notes stay active until the user chooses
        assert store.get(old.id).status == store.get(new.id).status == "active"
    pending = conflicts.list()
    assert len(pending) == len(CONFLICTS)
    assert {(p.old_id, p.status) for p in pending} == {(p.old_id, "pending") for p in pending}


def test_unrelated_notes_other_types_and_explicit_supersedes_make_no_conflict(
    opened: Opened,
) -> None:
    store = opened.store
    for a, b in UNRELATED:
        store.save(NoteDraft(content=a, scope="project:u"))
        assert store.save(NoteDraft(content=b, scope="project:u")).conflicts_with is None
    store.save(NoteDraft(content="数据库端口是 5432", type="decision"))
    other_type = store.save(NoteDraft(content="数据库端口是 5433", type="bug"))
    assert other_type.conflicts_with is None
    old = store.save(NoteDraft(content="Keep logs for 14 days", type="decision"))
    named = store.save(
        NoteDraft(content="Keep logs for 30 days", type="decision", supersedes=old.id)
    )
    assert named.conflicts_with is None and store.get(old.id).status == "superseded"
    assert opened.conflicts.list() == []


def _pair(opened: Opened, old_text: str, new_text: str) -> tuple[str, str, str]:
    old = opened.store.save(NoteDraft(content=old_text, type="preference"))
    new = opened.store.save(NoteDraft(content=new_text, type="preference"))
    assert new.pending is not None
    return old.id, new.id, new.pending


def test_keep_new_supersedes_the_old_note_and_both_histories_stay(opened: Opened) -> None:
    store, conflicts, history = opened.store, opened.conflicts, opened.history
    old, new, pending = _pair(opened, "每周三 10:00 开会", "每周三 11:00 开会")
    resolved = conflicts.resolve(store, pending, "new")
    assert (resolved.status, resolved.keep) == ("resolved", "new")
    assert (store.get(old).status, store.get(old).superseded_by) == ("superseded", new)
    assert store.get(new).status == "active"
    assert [v.kind for v in history.versions(old)] == ["supersede", "create"]
    assert [v.kind for v in history.versions(new)] == ["create"]
    # final: the same choice again is a no-op, another one is refused
    assert conflicts.resolve(store, pending, "new") == resolved
    with pytest.raises(ConflictError):
        conflicts.resolve(store, pending, "old")
    assert conflicts.list() == [] and conflicts.list(None) == [resolved]


def test_keep_old_deprecates_the_new_note_with_the_reason(opened: Opened) -> None:
    store, conflicts, history = opened.store, opened.conflicts, opened.history
    old, new, pending = _pair(opened, "Use tabs for indentation", "Never use tabs for indentation")
    conflicts.resolve(store, pending, "old")
    assert store.get(old).status == "active"
    kept_out = store.get(new)
    assert kept_out.status == "deprecated" and old in kept_out.extra["deprecated_reason"]
    assert [v.kind for v in history.versions(new)] == ["deprecate", "create"]
    with pytest.raises(ConflictError):
        conflicts.resolve(store, pending, "both")


def test_keep_both_dismisses_the_link(opened: Opened) -> None:
    store, conflicts = opened.store, opened.conflicts
    old, new, pending = _pair(opened, "周末有空", "周末没空")
    assert conflicts.resolve(store, pending, "both").keep == "both"
    assert store.get(old).status == store.get(new).status == "active"


def test_unknown_ids_and_choices_are_refused_and_a_failed_choice_stays_pending(
    opened: Opened,
) -> None:
    store, conflicts = opened.store, opened.conflicts
    with pytest.raises(NotFoundError):
        conflicts.resolve(store, "sup_nope", "new")
    old, _new, pending = _pair(opened, "连接池大小为 20", "连接池大小为 50")
    with pytest.raises(InvalidInputError):
        conflicts.resolve(store, pending, "neither")  # type: ignore[arg-type]
    store.delete(old)
    with pytest.raises(NotFoundError):
        conflicts.resolve(store, pending, "old")  # a deleted note cannot be kept
    assert conflicts.get(pending).status == "pending"
    assert conflicts.resolve(store, pending, "both").keep == "both"


@pytest.mark.parametrize("gone", ["old", "new"])
def test_when_one_note_is_deleted_keeping_the_other_resolves_it(opened: Opened, gone: str) -> None:
    # Found by a new user (26 Nov): with the new note deleted, "keep old" answered 404 and
    # only "keep both" could clear the pending supersession.
    store, conflicts = opened.store, opened.conflicts
    old, new, pending = _pair(opened, "备份保留 14 天", "备份保留 30 天")
    kept = new if gone == "old" else old
    store.delete(old if gone == "old" else new)
    with pytest.raises(NotFoundError):
        conflicts.resolve(store, pending, gone)  # type: ignore[arg-type]
    resolved = conflicts.resolve(store, pending, "new" if gone == "old" else "old")
    assert resolved.status == "resolved"
    assert store.get(kept).status == "active" and conflicts.list() == []


def test_an_old_note_ranks_lower_by_age_but_is_never_deleted(opened: Opened) -> None:
    store, now = opened.store, opened.now
    now[0] = datetime(2030, 1, 1, tzinfo=UTC)
    old = store.save(NoteDraft(content="数据库端口是 5432", type="decision"))
    now[0] = datetime(2030, 7, 1, tzinfo=UTC)
    new = store.save(NoteDraft(content="数据库端口是 5433", type="decision"))
    assert new.conflicts_with == old.id  # pending: both stay active
    hits = store.search("数据库端口", record_access=False)
    assert [h.id for h in hits] == [new.id, old.id]
    assert hits[0].parts.recency > hits[1].parts.recency
    # ten years on, the old note has decayed further, and it is still there
    now[0] = datetime(2040, 1, 1, tzinfo=UTC)
    later = store.search("数据库端口", record_access=False)
    assert [h.id for h in later] == [new.id, old.id]
    assert later[1].parts.recency < hits[1].parts.recency
    assert store.get(old.id).status == "active" and store.count() == 3
