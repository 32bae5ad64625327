"""CLI: `claude-memory memory ...` through `memory.cli.commands.register` and
`python -m memory.cli`."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory.cli.commands import main, module_command, register
from memory.config import MemoryConfig
from memory.model import NoteDraft
from memory.sqlite.store import MemoryStore


def run(home: Path, *argv: str) -> int:
    return main(["--home", str(home), *argv], lambda args: MemoryConfig.for_home(home, fsync=False))


def test_register_adds_the_memory_command(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="claude-memory")
    subparsers = parser.add_subparsers(dest="command", required=True)
    register(subparsers, lambda args: MemoryConfig.for_home(home, fsync=False))
    args = parser.parse_args(["memory", "add", "用户偏好简洁的中文回答", "--type", "Habit"])
    assert args.func(args) == 0
    assert "saved mem_" in capsys.readouterr().out
    args = parser.parse_args(["memory", "search", "简洁", "--json"])
    assert args.func(args) == 0
    [hit] = json.loads(capsys.readouterr().out)
    assert hit["type"] == "preference" and "score_parts" in hit


def test_add_search_list_show_rm(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(home, "add", "修复连接池泄漏", "--title", "连接池", "--type", "bug", "--json") == 0
    saved = json.loads(capsys.readouterr().out)
    assert saved["deduplicated"] is False
    assert run(home, "add", "修复连接池泄漏") == 0
    assert f"duplicate of {saved['id']}" in capsys.readouterr().out

    assert run(home, "search", "连接池") == 0
    out = capsys.readouterr().out
    assert saved["id"] in out and "relevance " in out and "recency" in out

    assert run(home, "list", "--type", "bug") == 0
    assert saved["id"] in capsys.readouterr().out

    assert run(home, "show", saved["id"]) == 0
    out = capsys.readouterr().out
    assert "title: 连接池" in out and "修复连接池泄漏" in out

    assert run(home, "rm", saved["id"]) == 0
    assert f"deleted {saved['id']}" in capsys.readouterr().out
    assert run(home, "show", saved["id"]) == 1
    assert "not found" in capsys.readouterr().err


def test_add_reads_stdin(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("from stdin: remember the kiwi\n"))
    assert run(home, "add", "-", "--tags", "fruit,food") == 0
    capsys.readouterr()
    assert run(home, "search", "kiwi", "--json") == 0
    [hit] = json.loads(capsys.readouterr().out)
    assert hit["tags"] == ["fruit", "food"]


def test_bad_input_gives_an_error_and_exit_code_1(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(home, "add", "text", "--type", "wizard") == 1
    assert "unknown type" in capsys.readouterr().err
    assert run(home, "search", "  ") == 1
    assert "query is empty" in capsys.readouterr().err


def test_reindex_shows_progress_and_stats(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with MemoryStore.open(MemoryConfig.for_home(home, fsync=False)) as store:
        for i in range(5):
            store.save(NoteDraft(content=f"note number {i} about topic{i}"))
    (home / "index.db").unlink()
    assert run(home, "reindex") == 0
    captured = capsys.readouterr()
    assert "indexed 6 notes" in captured.out
    assert "[" in captured.err and "6/6" in captured.err  # the progress bar
    assert run(home, "stats", "--json") == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["total"] == 6
    assert run(home, "stats") == 0
    assert "notes: 6" in capsys.readouterr().out


def test_export_and_import_round_trip(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with MemoryStore.open(MemoryConfig.for_home(home, fsync=False)) as store:
        a = store.save(NoteDraft(content="导出测试 alpha", type="decision", tags=["x"]))
        b = store.save(NoteDraft(content="export test beta", scope="project:demo"))
    jsonl = tmp_path / "out" / "notes.jsonl"
    tree = tmp_path / "tree"
    assert run(home, "export", str(jsonl)) == 0
    assert run(home, "export", str(tree)) == 0
    lines = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    assert {r["id"] for r in lines} >= {a.id, b.id}
    assert all("body" in r and "path" in r for r in lines)
    assert (tree / a.path).read_bytes() == (home / "memory" / a.path).read_bytes()
    capsys.readouterr()

    other = tmp_path / "other-home"
    assert run(other, "import", str(jsonl), "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["added"] == 2 and report["skipped"] == 1  # the profile skeleton exists
    with MemoryStore.open(MemoryConfig.for_home(other, fsync=False)) as store:
        note = store.get(a.id)
        assert note.type == "decision" and note.tags == ("x",) and note.path == a.path
    assert run(other, "import", str(jsonl), "--json") == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == 3

    third = tmp_path / "third-home"
    assert run(third, "import", str(tree)) == 0
    assert "imported 2 notes" in capsys.readouterr().out
    with MemoryStore.open(MemoryConfig.for_home(third, fsync=False)) as store:
        assert store.get(b.id).scope == "project:demo"


def test_import_claude_code_memory_files_by_section(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claude_md = tmp_path / "CLAUDE.md"
    claude_md.write_text(
        "# Project guide\n\nIntro paragraph about the repo.\n\n"
        "## Commands\n\nRun `uv run pytest`.\n\n### Slow tests\n\nUse -m e2e.\n\n"
        "## Style\n\n- ruff format\n- type hints\n\n"
        "```md\n## not a heading inside code\n```\n",
        encoding="utf-8",
    )
    assert run(home, "import", str(claude_md), "--scope", "project:guide", "--json") == 0
    assert json.loads(capsys.readouterr().out)["added"] == 3
    with MemoryStore.open(MemoryConfig.for_home(home, fsync=False)) as store:
        titles = {n.title: n for n in store.list(scope="project:guide")}
        assert set(titles) == {
            "Project guide",
            "Project guide: Commands",
            "Project guide: Style",
        }
        assert "Use -m e2e." in store.get(titles["Project guide: Commands"].id).body
        assert "not a heading" in store.get(titles["Project guide: Style"].id).body
        assert titles["Project guide: Style"].tags == ("claude-code", "imported")


def test_jsonl_import_of_an_unknown_type_imports_it_as_general_and_says_so(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue #29: a line whose type the store does not know was dropped (an error among
    # successes: exit 0). It is imported as general, as a hand-written note's unknown type is.
    path = tmp_path / "notes.jsonl"
    lines = [
        {"id": "mem_known", "body": "连接池泄漏的修复", "type": "bug"},
        {"id": "mem_entity", "body": "We chose PostgreSQL", "type": "Decision"},
        {"id": "mem_event", "body": "Release party on Friday", "type": "event", "tags": ["x"]},
        {"id": "mem_number", "body": "A type that is a number", "type": 42},
        {"id": "mem_listed", "body": "A type that is a list", "type": ["a", "b"]},
        {"id": "mem_untyped", "body": "No type at all"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")

    assert run(home, "import", str(path)) == 0
    out = capsys.readouterr().out
    assert "imported 6 notes" in out and "0 errors" in out
    assert "  warning: notes.jsonl:3: unknown type 'event', imported as general" in out
    assert "(tagged type:event)" in out
    assert "  warning: notes.jsonl:4: type 42 is not a name, imported as general" in out
    assert '  warning: notes.jsonl:5: type ["a", "b"] is not a name, imported as general' in out
    assert out.count("warning:") == 3  # known types, entity names and no type say nothing

    with MemoryStore.open(MemoryConfig.for_home(home, fsync=False)) as store:
        types = {n.id: (n.type, n.tags) for n in store.list(limit=20)}
    assert types["mem_known"] == ("bug", ())
    assert types["mem_entity"] == ("decision", ())
    assert types["mem_event"] == ("general", ("x", "type:event"))
    assert types["mem_number"] == ("general", ())
    assert types["mem_listed"] == ("general", ())
    assert types["mem_untyped"] == ("general", ())


def test_jsonl_import_warnings_are_in_the_json_report_and_type_overrides_them(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"body": "A meetup", "type": "event"}) + "\n", encoding="utf-8")
    assert run(home, "import", str(path), "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["added"], report["errors"]) == (1, [])
    assert report["warnings"] == [
        "one.jsonl:1: unknown type 'event', imported as general (tagged type:event)"
    ]

    other = tmp_path / "other-home"
    assert run(other, "import", str(path), "--type", "project", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["added"], report["warnings"]) == (1, [])  # --type: the line's is not read
    with MemoryStore.open(MemoryConfig.for_home(other, fsync=False)) as store:
        [note] = [n for n in store.list(limit=10) if n.id != "mem_user_profile"]
    assert (note.type, note.tags) == ("project", ())


def test_import_of_an_unknown_file_type_is_refused(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "notes.csv"
    bad.write_text("a,b\n", encoding="utf-8")
    assert run(home, "import", str(bad)) == 1
    assert "cannot import" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["argv", "stdin"])
def test_invalid_utf8_is_one_clear_line_and_nothing_is_written(home: Path, where: str) -> None:
    # Found by a new user (26 Nov): a byte that is not UTF-8 ended `memory add` in a
    # traceback. Python reads such bytes as lone surrogates; they are refused before a write.
    bad = b"bad \xff bytes"
    argv = [sys.executable, "-m", "memory.cli", "--home", str(home), "add"]
    done = subprocess.run(
        [*argv, os.fsdecode(bad)] if where == "argv" else [*argv, "-"],
        input=bad if where == "stdin" else None,
        capture_output=True,
        timeout=60,
        check=False,
    )
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode != 0
    assert "Traceback" not in err
    assert "content is not valid text" in err and "\\udcff" in err, err
    notes = MemoryStore.open(MemoryConfig.for_home(home, fsync=False))
    try:
        assert [n.id for n in notes.list(limit=10)] == ["mem_user_profile"]
    finally:
        notes.close()


def test_module_entry_point_runs(home: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memory.cli", "--home", str(home), "add", "via subprocess"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("saved mem_")


def test_module_entry_point_uses_the_settings_database(home: Path, tmp_path: Path) -> None:
    # `python -m memory.cli` reads the settings as `claude-memory memory` does: with a
    # database URL set it works on that database, never silently on SQLite in the home.
    url = f"postgresql://postgres:secret@/nope?host={tmp_path / 'no-server'}&connect_timeout=2"
    done = subprocess.run(
        [sys.executable, "-m", "memory.cli", "--home", str(home), "add", "not on SQLite"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "CLAUDE_MEMORY_DATABASE_URL": url},
    )
    assert done.returncode != 0
    assert "postgresql://" in done.stderr and "secret" not in done.stderr
    assert not list(home.rglob("*.md")), "a note was written to the home's files"


def test_the_module_command_is_the_root_command() -> None:
    assert module_command(["--home", "/h", "search", "连接池"]) == [
        sys.executable, "-m", "cli", "--home", "/h", "memory", "search", "连接池",
    ]  # fmt: skip
    assert module_command(["memory", "stats"])[2:] == ["cli", "memory", "stats"]
