"""A note's history on both backends: notes in SQLite files with versions in `state.db`, and
notes and versions in PostgreSQL. Every change a user can make through a store is a version
with who made it; a version comes back by `restore_version`, a deleted note too."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from errors import InvalidInputError, NotFoundError
from memory.backend import MemoryBackend
from memory.config import MemoryConfig
from memory.history.store import HistoryStore
from memory.model import NoteDraft
from memory.notes.changes import ChangeSource, acting_as
from memory.postgres.state import PostgresStateDB
from memory.postgres.store import PostgresMemoryStore
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore
from storage.postgres import PostgresDatabase


@dataclass
class Opened:
    store: MemoryBackend
    history: HistoryStore


Open = Callable[..., Opened]


@pytest.fixture(params=["sqlite", "postgresql"])
def open_memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Open]:
    """Another instance on the same memory each call (its own pool on PostgreSQL)."""
    config = MemoryConfig.for_home(tmp_path / "home", fsync=False)
    closers: list[Callable[[], None]] = []

    def make(keep: int = 50) -> Opened:
        store: MemoryBackend
        if request.param == "sqlite":
            store = MemoryStore.open(config)
            state = StateDB(tmp_path / "home" / "state.db")
            closers.append(state.close)
        else:
            db = PostgresDatabase(request.getfixturevalue("database_url"), min_size=1, max_size=4)
            db.open()
            closers.append(db.close)
            store = PostgresMemoryStore.open(db, config)
            pg_state = PostgresStateDB(db)
            closers.append(pg_state.close)
            state = pg_state  # type: ignore[assignment]
        closers.append(store.close)
        history = HistoryStore(state, keep=keep)
        store.attach_history(history)
        return Opened(store, history)

    yield make
    for close in reversed(closers):
        close()


WEB = ChangeSource("web")
MCP = ChangeSource("mcp", "sess-1")


def kinds(history: HistoryStore, note_id: str) -> list[tuple[int, str, str]]:
    return [(v.number, v.kind, v.source.label()) for v in history.versions(note_id)]


def test_every_change_is_a_version_with_its_source(open_memory: Open) -> None:
    m = open_memory()
    with acting_as(WEB):
        note_id = m.store.save(NoteDraft(content="We deploy on Fridays.", title="Deploys")).id
        m.store.update(note_id, content="We deploy on Thursdays.")
    with acting_as(MCP):
        newer = m.store.save(NoteDraft(content="Deploys moved to Mondays entirely.")).id
        m.store.supersede(note_id, newer)
    m.store.deprecate(newer, "no more deploys")  # no door said: the note's source names it
    m.store.delete(newer)
    assert kinds(m.history, note_id) == [
        (3, "supersede", "mcp · sess-1"),
        (2, "edit", "web"),
        (1, "create", "web"),
    ]
    assert kinds(m.history, newer) == [
        (3, "delete", "unknown"),
        (2, "deprecate", "unknown"),
        (1, "create", "mcp · sess-1"),
    ]
    first = m.history.version(note_id, 1)
    assert first.snapshot.body == "We deploy on Fridays."
    assert first.snapshot.title == "Deploys"
    assert "We deploy on Fridays." in first.snapshot.text()


def test_source_inferred_from_the_note_when_no_door_says(open_memory: Open) -> None:
    m = open_memory()
    note_id = m.store.save(NoteDraft(content="Summary of a session.", source="codex:abc-123")).id
    [version] = m.history.versions(note_id)
    assert version.source == ChangeSource("codex", "abc-123")


def test_a_duplicate_save_makes_no_version(open_memory: Open) -> None:
    m = open_memory()
    first = m.store.save(NoteDraft(content="The staging database is called blue."))
    again = m.store.save(NoteDraft(content="The staging database is called blue."))
    assert again.deduplicated and again.id == first.id
    assert [v.kind for v in m.history.versions(first.id)] == ["create"]


def test_restore_brings_back_title_text_and_tags_as_a_new_version(open_memory: Open) -> None:
    m = open_memory()
    with acting_as(WEB):
        note_id = m.store.save(
            NoteDraft(content="Use uv for Python.", title="Tooling", tags=("python",))
        ).id
        m.store.update(note_id, content="Use pip for Python.", title="Pip", tags=["pip"])
        restored = m.store.restore_version(note_id, 1)
    assert (restored.title, restored.body.rstrip(), restored.tags) == (
        "Tooling",
        "Use uv for Python.",
        ("python",),
    )
    assert m.store.get(note_id).body.rstrip() == "Use uv for Python."
    newest = m.history.versions(note_id)[0]
    assert (newest.number, newest.kind, newest.restored_from, newest.source) == (
        3,
        "restore",
        1,
        WEB,
    )


def test_a_deleted_note_is_restored_under_its_id(open_memory: Open) -> None:
    m = open_memory()
    note_id = m.store.save(NoteDraft(content="Alice owns the billing service.", scope="user")).id
    m.store.delete(note_id)
    with pytest.raises(NotFoundError):
        m.store.get(note_id)
    assert [v.note_id for v in m.history.deleted()] == [note_id]
    back = m.store.restore_version(note_id, 2)  # the delete version holds the last content
    assert back.id == note_id
    assert m.store.get(note_id).body.rstrip() == "Alice owns the billing service."
    assert m.history.deleted() == []
    assert [v.kind for v in m.history.versions(note_id)] == ["restore", "delete", "create"]


def test_unknown_note_and_version_are_not_found(open_memory: Open) -> None:
    m = open_memory()
    note_id = m.store.save(NoteDraft(content="Something to keep.")).id
    with pytest.raises(NotFoundError, match="version"):
        m.store.restore_version(note_id, 9)
    with pytest.raises(NotFoundError, match="note history"):
        m.store.restore_version("no-such-note", 1)
    assert m.history.versions("no-such-note") == []


def test_a_note_from_before_history_gets_a_baseline_first(open_memory: Open) -> None:
    m = open_memory()
    m.store.attach_history(None)
    note_id = m.store.save(NoteDraft(content="Old note written before history.")).id
    m.store.attach_history(m.history)
    with acting_as(WEB):
        m.store.update(note_id, content="Old note, now edited.")
    assert [(v.kind, v.snapshot.body) for v in m.history.versions(note_id)] == [
        ("edit", "Old note, now edited."),
        ("baseline", "Old note written before history."),
    ]
    m.store.restore_version(note_id, 1)
    assert m.store.get(note_id).body.rstrip() == "Old note written before history."


def test_only_the_newest_versions_are_kept(open_memory: Open) -> None:
    m = open_memory(keep=3)
    note_id = m.store.save(NoteDraft(content="v1")).id
    for n in range(2, 7):
        m.store.update(note_id, content=f"v{n}")
    assert [v.number for v in m.history.versions(note_id)] == [6, 5, 4]
    with pytest.raises(NotFoundError):
        m.history.version(note_id, 1)


def test_another_instance_sees_and_restores_the_same_history(open_memory: Open) -> None:
    one, two = open_memory(), open_memory()
    note_id = one.store.save(NoteDraft(content="Shared: the VPN is split tunnel.")).id
    one.store.update(note_id, content="Shared: the VPN is full tunnel.")
    assert [v.number for v in two.history.versions(note_id)] == [2, 1]
    two.store.restore_version(note_id, 1)
    assert one.store.get(note_id).body.rstrip() == "Shared: the VPN is split tunnel."
    assert [v.number for v in one.history.versions(note_id)] == [3, 2, 1]


def test_snapshots_are_redacted_like_notes(open_memory: Open) -> None:
    m = open_memory()
    secret = "sk-ant-api03-" + "A" * 80
    note_id = m.store.save(NoteDraft(content=f"The key is {secret} for prod.")).id
    [version] = m.history.versions(note_id)
    assert secret not in version.snapshot.body
    assert secret not in version.snapshot.text()


def test_restore_without_history_is_refused(open_memory: Open) -> None:
    m = open_memory()
    note_id = m.store.save(NoteDraft(content="No history here.")).id
    m.store.attach_history(None)
    with pytest.raises(InvalidInputError, match="history"):
        m.store.restore_version(note_id, 1)


def test_a_restore_brings_back_the_status_the_version_had(open_memory: Open) -> None:
    m = open_memory()
    winner = m.store.save(NoteDraft(content="Deploys run on Fridays.", type="decision")).id
    loser = m.store.save(NoteDraft(content="Standups are at nine.", type="decision")).id
    m.store.supersede(loser, winner)
    m.store.delete(loser)
    back = m.store.restore_version(loser, m.history.versions(loser)[0].number)
    assert (back.status, back.superseded_by) == ("superseded", winner)
    retired = m.store.save(NoteDraft(content="Standups are at ten.")).id
    m.store.deprecate(retired, "kept the older note")
    m.store.delete(retired)
    again = m.store.restore_version(retired, m.history.versions(retired)[0].number)
    assert (again.status, again.superseded_by) == ("deprecated", None)
    # a live note's earlier version brings its status back too: restore v1, it is active
    live = m.store.restore_version(retired, 1)
    assert (live.status, m.store.get(retired).status) == ("active", "active")
    assert [v.kind for v in m.history.versions(retired)][:2] == ["restore", "restore"]


def test_a_pending_update_orders_a_search_on_both_backends(open_memory: Open) -> None:
    opened = open_memory()
    old = opened.store.save(NoteDraft(content="The team lunch is on Tuesdays at the noodle bar."))
    new = opened.store.save(
        NoteDraft(content="Team lunch moved: Thursdays, at the dumpling place.")
    )
    other = opened.store.save(
        NoteDraft(content="The noodle bar near the office closes on Mondays.")
    )
    assert opened.history.pending_successors([old.id, new.id, other.id]) == {}
    opened.history.propose_supersession(new.id, old.id, "may update it")
    assert opened.history.pending_successors([old.id, new.id, other.id]) == {old.id: new.id}
    assert opened.history.pending_successors([old.id, other.id]) == {}  # the newer not among them
    found = [h.id for h in opened.store.search("team lunch noodle bar Tuesdays")]
    assert found.index(new.id) == found.index(old.id) - 1
