"""A note's history: the pure parts (who, what kind, what is kept) and the hand edits the SQLite
store finds on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from errors import InvalidInputError
from memory.config import MemoryConfig
from memory.history.store import HistoryStore
from memory.model import NoteDraft
from memory.notes.changes import (
    KEEP_VERSIONS,
    ChangeSource,
    Snapshot,
    acting_as,
    conversation_source,
    current_source,
    infer_source,
    kind_of_update,
    versions_to_drop,
)
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore


@pytest.mark.parametrize(
    ("note_source", "expected"),
    [
        ("claude-code:3f2a-11", ChangeSource("claude-code", "3f2a-11")),
        ("codex:019a-22", ChangeSource("codex", "019a-22")),
        ("claude-code", ChangeSource("claude-code")),
        ("episode:claude-code:sess-9", ChangeSource("claude-code", "sess-9")),
        ("episode:web:abc", ChangeSource("unknown", "web:abc")),
        ("conversation:feishu:oc_1", ChangeSource("feishu", "feishu:oc_1")),
        ("conversation:c-42", ChangeSource("chat", "c-42")),
        ("mcp:my-project", ChangeSource("mcp")),
        ("feishu", ChangeSource("feishu")),
        ("agent", ChangeSource("unknown")),
        ("", ChangeSource("unknown")),
        (None, ChangeSource("unknown")),
        ("CLAUDE-CODE: s1 ", ChangeSource("claude-code", "s1")),
    ],
)
def test_infer_source_from_a_notes_source_field(
    note_source: str | None, expected: ChangeSource
) -> None:
    assert infer_source(note_source) == expected


@pytest.mark.parametrize(
    ("changes", "kind"),
    [
        ({"body": "x"}, "edit"),
        ({"title": "t", "tags": ["a"]}, "edit"),
        ({"status": "superseded", "superseded_by": "n2"}, "supersede"),
        ({"superseded_by": "n2"}, "supersede"),
        ({"status": "deprecated"}, "deprecate"),
        ({"status": "active"}, "edit"),
    ],
)
def test_kind_of_an_update(changes: dict[str, object], kind: str) -> None:
    assert kind_of_update(changes) == kind


@pytest.mark.parametrize(
    ("newest", "keep", "drop"),
    [(1, 50, 0), (50, 50, 0), (51, 50, 1), (120, 50, 70), (3, 1, 2)],
)
def test_versions_past_the_cap_are_dropped(newest: int, keep: int, drop: int) -> None:
    assert versions_to_drop(newest, keep) == drop
    assert KEEP_VERSIONS == 50


def _snap(**fields: object) -> Snapshot:
    base: dict[str, object] = {
        "title": "T",
        "summary": "S",
        "body": "B",
        "tags": ("a",),
        "type": "general",
        "scope": "user",
        "importance": 0.5,
        "status": "active",
        "superseded_by": None,
        "expires_at": None,
        "source": None,
        "path": "general/a.md",
    }
    return Snapshot(**{**base, **fields})  # type: ignore[arg-type]


def test_a_moved_file_is_the_same_content_but_an_edit_is_not() -> None:
    assert _snap().digest() == _snap(path="elsewhere/a.md").digest()
    assert _snap().digest() != _snap(body="B!").digest()
    assert _snap().digest() != _snap(tags=("b",)).digest()
    assert _snap().digest() != _snap(status="deprecated").digest()
    assert Snapshot.from_json(_snap(tags=("数据库",)).to_json()) == _snap(tags=("数据库",))


def test_the_door_holds_inside_and_is_gone_outside() -> None:
    assert current_source() is None
    with acting_as(conversation_source("feishu:oc_9")) as who:
        assert current_source() == who == ChangeSource("feishu", "feishu:oc_9")
    assert current_source() is None


# --- hand edits, seen by the SQLite store's sync -------------------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def history(home: Path) -> Iterator[HistoryStore]:
    home.mkdir(parents=True, exist_ok=True)
    state = StateDB(home / "state.db")
    yield HistoryStore(state)
    state.close()


@pytest.fixture
def store(home: Path, history: HistoryStore) -> Iterator[MemoryStore]:
    store = MemoryStore.open(MemoryConfig.for_home(home, fsync=False))
    store.attach_history(history)
    yield store
    store.close()


def _edit_by_hand(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")
    # a later mtime than the store's own write, whatever the file system's granularity
    later = time.time_ns() + 2_000_000_000
    os.utime(path, ns=(later, later))


def _rows(history: HistoryStore, note_id: str) -> list[tuple[int, str, str]]:
    return [(v.number, v.kind, v.source.label()) for v in history.versions(note_id)]


def test_a_hand_edit_is_a_version_by_hand_edit(store: MemoryStore, history: HistoryStore) -> None:
    with acting_as(ChangeSource("web")):
        saved = store.save(NoteDraft(content="The cache lives in Redis."))
    _edit_by_hand(store.abspath(saved.path), "Redis", "Memcached")
    assert store.get(saved.id).body.strip() == "The cache lives in Memcached."
    assert _rows(history, saved.id) == [(2, "edit", "hand edit"), (1, "create", "web")]
    store.sync()  # seen once, not again
    assert len(history.versions(saved.id)) == 2
    assert history.version(saved.id, 2).snapshot.body == "The cache lives in Memcached."


def test_a_file_added_or_deleted_by_hand_is_a_version(
    store: MemoryStore, history: HistoryStore
) -> None:
    path = store.root / "inbox" / "by-hand.md"
    path.write_text("---\nid: hand-1\ntitle: By hand\n---\nWritten in an editor.\n", "utf-8")
    store.sync()
    assert _rows(history, "hand-1") == [(1, "create", "hand edit")]
    path.unlink()
    store.sync()
    assert _rows(history, "hand-1") == [(2, "delete", "hand edit"), (1, "create", "hand edit")]
    restored = store.restore_version("hand-1", 1)
    assert restored.id == "hand-1"
    assert "Written in an editor." in store.get("hand-1").body


def test_a_hand_edit_missed_elsewhere_is_caught_up_before_the_next_change(
    store: MemoryStore, history: HistoryStore, home: Path
) -> None:
    saved = store.save(NoteDraft(content="Builds run on Jenkins."))
    # a process without history (a hook, the CLI) reads the edited file first
    other = MemoryStore.open(MemoryConfig.for_home(home, fsync=False))
    _edit_by_hand(store.abspath(saved.path), "Jenkins", "Buildkite")
    other.sync()
    other.close()
    with acting_as(ChangeSource("cli")):
        store.update(saved.id, content="Builds run on GitHub Actions.")
    assert [(v.kind, v.source.door, v.snapshot.body) for v in history.versions(saved.id)] == [
        ("edit", "cli", "Builds run on GitHub Actions."),
        ("edit", "hand edit", "Builds run on Buildkite."),
        ("create", "unknown", "Builds run on Jenkins."),
    ]


def test_a_hand_edit_that_breaks_the_front_matter_is_not_a_version(
    store: MemoryStore, history: HistoryStore
) -> None:
    saved = store.save(NoteDraft(content="Keep this safe."))
    _edit_by_hand(store.abspath(saved.path), "---\n", "--\n")
    store.sync()
    assert [v.kind for v in history.versions(saved.id)] == ["create"]


@pytest.mark.parametrize(
    "breakage",
    [
        pytest.param(("\nimportance:", "\nbroken: [oops\nimportance:"), id="broken-yaml"),
        pytest.param(("Keep this", "Keep \udcff this"), id="invalid-utf8"),
    ],
)
def test_a_refused_change_to_a_broken_file_adds_no_version_and_delete_keeps_the_last_good(
    store: MemoryStore, history: HistoryStore, breakage: tuple[str, str]
) -> None:
    # Found by a new user (26 Nov): a refused PUT "caught up" the broken file as a hand
    # edit whose body was the raw file, front matter and all; restoring it put YAML in a body.
    saved = store.save(NoteDraft(content="Keep this safe.", tags=["vault"]))
    path = store.abspath(saved.path)
    old, new = breakage
    text = path.read_text(encoding="utf-8").replace(old, new)
    later = time.time_ns() + 2_000_000_000
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    os.utime(path, ns=(later, later))
    with pytest.raises(InvalidInputError, match="broken front matter or invalid UTF-8"):
        store.update(saved.id, tags=["pinned"])
    with pytest.raises(InvalidInputError):
        store.restore_version(saved.id, 1)
    assert [v.kind for v in history.versions(saved.id)] == ["create"]
    store.delete(saved.id)
    assert [v.kind for v in history.versions(saved.id)] == ["delete", "create"]
    assert history.version(saved.id, 2).snapshot.body == "Keep this safe."
    restored = store.restore_version(saved.id, 2)
    assert restored.body.strip() == "Keep this safe." and restored.tags == ("vault",)


def test_cli_changes_are_the_cli_door_and_rm_is_restorable(home: Path) -> None:
    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "memory.cli", "--home", str(home), *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    note_id = json.loads(cli("add", "Staging runs on port 8443.", "--json"))["id"]
    cli("rm", note_id)
    state = StateDB(home / "state.db")
    try:
        history = HistoryStore(state)
        assert [(v.kind, v.source.door) for v in history.versions(note_id)] == [
            ("delete", "cli"),
            ("create", "cli"),
        ]
        assert [v.note_id for v in history.deleted()] == [note_id]
    finally:
        state.close()


async def test_the_chat_agents_tools_name_their_conversation(
    store: MemoryStore, history: HistoryStore
) -> None:
    from agent.memory_tools import build_memory_tools

    tools = {t.name: t for t in build_memory_tools(store, conversation_id="feishu:oc_7")}
    await tools["memory_save"].handler({"content": "飞书里说：周报周五发。"})
    [note] = [n for n in store.list() if "周报" in n.body]
    await tools["memory_update"].handler({"id": note.id, "content": "飞书里说：周报周四发。"})
    assert [(v.kind, v.source) for v in history.versions(note.id)] == [
        ("edit", ChangeSource("feishu", "feishu:oc_7")),
        ("create", ChangeSource("feishu", "feishu:oc_7")),
    ]


def test_a_deleted_note_comes_back_with_its_creation_date(
    store: MemoryStore, history: HistoryStore
) -> None:
    saved = store.save(NoteDraft(content="Backups run nightly.", created="2024-01-02T03:04:05Z"))
    store.delete(saved.id)
    last = history.versions(saved.id)[0]
    restored = store.restore_version(saved.id, last.number)
    assert restored.created.isoformat().startswith("2024-01-02T03:04:05")
    assert restored.body.strip() == "Backups run nightly."
