"""`claude-memory memory import-native`: Claude Code auto memory and Codex memories as notes."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from memory.clients.native import find_native, import_notes, parse_front_matter
from memory.clients.project import identify
from memory.config import MemoryConfig
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore
from tests.hooks.conftest import CLAUDE_MEMORY, Hook, context_of

TOPICS = {
    "user_role.md": (
        "---\nname: user-role\ndescription: who the user is\nmetadata:\n  type: user\n---\n"
        "The user is a backend engineer who prefers Go.\n"
    ),
    "feedback_tests.md": (
        "---\nname: run-tests-first\ndescription: testing habit\ntype: feedback\n---\n"
        "Run the tests before committing.\n**Why:** CI is slow.\n"
        "The deploy token is ghp_abcdefghijklmnopqrstuvwxyz0123456789.\n"
    ),
    "project_db.md": (
        "---\nname: db-choice\nmetadata:\n  type: project\n---\nWe use PostgreSQL 16 for orders.\n"
    ),
}
INDEX = (
    "# Memory\n- [User role](user_role.md) — who the user is\n"
    "- [Tests](feedback_tests.md) — testing habit\n- [DB](project_db.md)\n"
    "- Release every Tuesday.\n"
)


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("---\nname: a\nmetadata:\n  type: user\n---\nbody", {"name": "a", "type": "user"}),
        ("---\nname: a\ntype: feedback\n---\nbody", {"name": "a", "type": "feedback"}),
        ("---\ntype: project\nmetadata:\n  type: user\n---\nx", {"type": "project"}),
        ("no front matter", {}),
    ],
)
def test_front_matter(text: str, fields: dict[str, str]) -> None:
    parsed, _ = parse_front_matter(text)
    assert {k: parsed[k] for k in fields} == fields


def write_claude_memory(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in TOPICS.items():
        (folder / name).write_text(text)
    (folder / "MEMORY.md").write_text(INDEX)


def auto_memory_dir(project: Path) -> Path:
    name = re.sub(r"[^A-Za-z0-9]", "-", os.path.realpath(project))
    return Path(os.environ["CLAUDE_CONFIG_DIR"]) / "projects" / name / "memory"


def import_twice(project: Path) -> list[str]:
    outs = []
    for _ in range(2):
        proc = subprocess.run(
            [str(CLAUDE_MEMORY), "memory", "import-native", "--project", str(project)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout)
    return outs


def test_claude_code_and_codex_memories_imported_twice_give_the_notes_once(
    mem_home: Path,
    make_project: Callable[..., Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project = make_project("shop/app", remote="git@github.com:acme/shop.git")
    write_claude_memory(auto_memory_dir(project))
    codex = tmp_path / "codex-home"
    (codex / "memories").mkdir(parents=True)
    (codex / "memories" / "memory_summary.md").write_text("User works on the shop in Go.\n")
    monkeypatch.setenv("CODEX_HOME", str(codex))

    first, second = import_twice(project)
    assert first.startswith("imported 5 new") and second.startswith("imported 0 new, 0 changed, 5")
    with _open(mem_home) as store:
        notes = {n.source: n for n in store.iter_notes() if n.source}
    assert len(notes) == 5
    scope = identify(project).scope
    dir_name = auto_memory_dir(project).parent.name
    role = notes[f"claude-code:auto-memory:{dir_name}/user_role.md"]
    assert (role.type, role.scope, role.title) == ("identity", "user", "user-role")
    tests = notes[f"claude-code:auto-memory:{dir_name}/feedback_tests.md"]
    assert (tests.type, tests.scope) == ("preference", "user")
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in tests.body  # redacted on save
    database = notes[f"claude-code:auto-memory:{dir_name}/project_db.md"]
    assert (database.type, database.scope) == ("project", scope)
    index = notes[f"claude-code:auto-memory:{dir_name}/MEMORY.md"]
    assert "Release every Tuesday" in index.body and "user_role.md" not in index.body
    assert notes["codex:memories:memory_summary.md"].scope == "user"


def _open(home: Path) -> MemoryStore:
    from memory.config import MemoryConfig

    return MemoryStore.open(MemoryConfig.for_home(home))


def test_a_changed_memory_file_replaces_its_note_and_dry_run_writes_nothing(
    mem_home: Path, make_project: Callable[..., Path], tmp_path: Path
) -> None:
    project = make_project("app")
    custom = tmp_path / "my-memories"  # autoMemoryDirectory in the user's settings
    write_claude_memory(custom)
    settings = Path(os.environ["CLAUDE_CONFIG_DIR"]) / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"autoMemoryDirectory": str(custom)}))
    identity = identify(project)
    with _open(mem_home) as store:
        notes, searched = find_native(os.environ, identity, ["claude-code"])
        assert searched == [str(custom)] and len(notes) == 4
        assert import_notes(store, notes, dry_run=True).added
        assert not [n for n in store.iter_notes() if n.source]
        assert len(import_notes(store, notes).added) == 4
        (custom / "project_db.md").write_text(
            "---\nname: db-choice\nmetadata:\n  type: project\n---\nWe moved orders to SQLite.\n"
        )
        notes, _ = find_native(os.environ, identity, ["claude-code"])
        report = import_notes(store, notes)
        assert len(report.replaced) == 1 and len(report.unchanged) == 3
        active = [n for n in store.iter_notes() if n.status == "active" and n.source]
        assert len(active) == 4
        assert any("SQLite" in n.body for n in active)
        assert not any("PostgreSQL 16" in n.body for n in active)


# --- at session start (CLAUDE_MEMORY_NATIVE_MEMORY) ---------------------------------------------


def _imports(home: Path) -> list[dict[str, object]]:
    state = StateDB(home / "state.db")
    try:
        return [dict(r) for r in state.read("SELECT * FROM mem_native_imports")]
    finally:
        state.close()


def test_session_start_imports_native_memories_only_when_they_changed(
    hook: Hook, make_project: Callable[..., Path], mem_home: Path
) -> None:
    project = make_project("app")
    folder = auto_memory_dir(project)
    write_claude_memory(folder)
    hook("session-start", cwd=project, session_id="s1", source="startup")
    with MemoryStore.open(MemoryConfig.for_home(mem_home)) as store:
        imported = {
            n.source: n for n in store.iter_notes() if (n.source or "").startswith("claude-code:")
        }
    assert len(imported) == 4  # three topics and the index's own line
    (first,) = _imports(mem_home)

    hook("session-start", cwd=project, session_id="s2", source="startup")
    assert _imports(mem_home) == [first]  # nothing changed: no import, not even a store read

    (folder / "project_db.md").write_text(
        "---\nname: db-choice\nmetadata:\n  type: project\n---\nWe use PostgreSQL 17 now.\n"
    )
    hook("session-start", cwd=project, session_id="s3", source="startup")
    with MemoryStore.open(MemoryConfig.for_home(mem_home)) as store:
        db = [n for n in store.iter_notes() if (n.source or "").endswith("/project_db.md")]
    # ids are time-ordered to the millisecond; `created` only to the second
    assert [n.status for n in sorted(db, key=lambda n: n.id)][-1] == "active"
    assert any("PostgreSQL 17" in n.body and n.status == "active" for n in db)
    assert not any("PostgreSQL 16" in n.body and n.status == "active" for n in db)


def test_native_memory_off_leaves_them_alone(
    hook: Hook,
    make_project: Callable[..., Path],
    mem_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAUDE_MEMORY_NATIVE_MEMORY", "off")
    project = make_project("app")
    write_claude_memory(auto_memory_dir(project))
    brief = context_of(hook("session-start", cwd=project, source="startup"))
    assert "prefers Go" not in brief
    assert _imports(mem_home) == []


def test_a_native_memory_still_holding_a_credential_is_refused_and_the_others_imported(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    project = make_project("app")
    folder = auto_memory_dir(project)
    write_claude_memory(folder)
    (folder / "nas.md").write_text(
        "---\nname: nas\nmetadata:\n  type: reference\n---\n"
        "NAS login: admin, password → Zebra-4471\n"
    )
    with _open(mem_home) as store:
        notes, _ = find_native(os.environ, identify(project), ["claude-code"])
        report = import_notes(store, notes)
        assert [Path(s).name for s in report.refused] == ["nas.md"]
        assert len(report.added) == 4
        assert not [n for n in store.iter_notes() if "Zebra-4471" in n.body]


def test_a_list_of_memories_is_summarised_by_its_lines_not_the_first_alone() -> None:
    from memory.clients.native import list_summary

    body = "# Memories\n- The user works on the shop in Go.\n- Deploys on Fridays.\n- Uses uv.\n"
    assert list_summary(body) == "The user works on the shop in Go; Deploys on Fridays; Uses uv"
    assert list_summary("- one fact\n") is None  # one line: the usual summary
