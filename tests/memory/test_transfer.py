"""Import and export helpers."""

from __future__ import annotations

import io
import json
from pathlib import Path

from memory.cli.commands import ProgressBar
from memory.cli.transfer import export_jsonl, import_path, split_sections
from memory.model import NoteDraft
from memory.sqlite.store import MemoryStore


def test_a_file_without_repeated_headings_is_one_section() -> None:
    assert split_sections("# Only title\n\nSome text.\n", "MEMORY") == [
        ("Only title", "# Only title\n\nSome text.")
    ]
    assert split_sections("- bullet one\n- bullet two\n", "MEMORY") == [
        ("bullet one", "- bullet one\n- bullet two")
    ]
    assert split_sections("   \n", "MEMORY") == []


def test_sections_split_at_the_shallowest_repeated_level() -> None:
    text = "intro line\n## A\na body\n### A.1\ndeep\n## B\nb body\n## Empty\n"
    assert split_sections(text, "MEMORY") == [
        ("MEMORY", "intro line"),
        ("A", "a body\n### A.1\ndeep"),
        ("B", "b body"),
    ]


def test_folder_import_keeps_paths_and_splits_claude_files(
    store: MemoryStore, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    (src / "projects" / "x").mkdir(parents=True)
    (src / "projects" / "x" / "note.md").write_text(
        "---\nid: mem_keepme\ntype: decision\nscope: project:x\n---\nKeep the path.\n",
        encoding="utf-8",
    )
    (src / "MEMORY.md").write_text("## One\nfirst\n## Two\nsecond\n", encoding="utf-8")
    (src / ".hidden").mkdir()
    (src / ".hidden" / "skip.md").write_text("hidden\n", encoding="utf-8")
    (src / "README.md").write_text("# readme\n", encoding="utf-8")
    bar = io.StringIO()
    report = import_path(store, src, progress=ProgressBar(stream=bar))
    assert report.to_dict() == {
        "added": 3,
        "deduplicated": 0,
        "skipped": 0,
        "errors": [],
        "warnings": [],
    }
    note = store.get("mem_keepme")
    assert note.path == "projects/x/note.md" and note.type == "decision"
    assert {n.title for n in store.list(tag="claude-code")} == {"One", "Two"}
    assert bar.getvalue().endswith("3/3\n")


def test_jsonl_import_reports_bad_lines_and_keeps_going(store: MemoryStore, tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"body": "good one", "type": "bug"}),
                "not json",
                json.dumps({"title": "no body"}),
                json.dumps({"body": "bad type", "type": "wizard"}),
                json.dumps(["a list"]),
                json.dumps({"content": "good two", "tags": ["a"]}),
            ]
        ),
        encoding="utf-8",
    )
    report = import_path(store, path)
    assert report.added == 3 and len(report.errors) == 3
    assert all(e.startswith("in.jsonl:") for e in report.errors)
    assert report.warnings == [
        "in.jsonl:4: unknown type 'wizard', imported as general (tagged type:wizard)"
    ]


def test_an_unknown_type_that_cannot_be_a_tag_is_only_warned_about(
    store: MemoryStore, tmp_path: Path
) -> None:
    path = tmp_path / "in.jsonl"
    long_name = "x" * 120
    path.write_text(json.dumps({"body": "long type", "type": long_name}) + "\n", encoding="utf-8")
    report = import_path(store, path)
    assert report.added == 1 and report.errors == []
    [warning] = report.warnings
    assert warning.startswith("in.jsonl:1: unknown type 'xxx") and "tagged" not in warning
    [note] = store.list(type="general", limit=10)
    assert note.tags == ()


def test_a_warning_is_given_only_for_a_note_that_was_added(
    store: MemoryStore, tmp_path: Path
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(
        json.dumps({"id": "mem_twice", "body": "an event", "type": "event"}) + "\n",
        encoding="utf-8",
    )
    assert len(import_path(store, path).warnings) == 1
    again = import_path(store, path)
    assert (again.skipped, again.warnings) == (1, [])  # already there: nothing was imported


def test_export_writes_one_json_object_per_note(store: MemoryStore) -> None:
    store.save(NoteDraft(content="第一条 first", tags=["t"]))
    out = io.StringIO()
    assert export_jsonl(store, out) == 2
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {"id", "title", "type", "scope", "tags", "body", "path"} <= set(records[0])


def test_a_markdown_note_read_with_fallbacks_is_imported_with_a_warning(
    store: MemoryStore, tmp_path: Path
) -> None:
    note = tmp_path / "event.md"
    note.write_text("---\ntype: event\ntitle: Meetup\n---\nOn Friday.\n", encoding="utf-8")
    report = import_path(store, note)
    assert report.added == 1 and report.errors == []
    [warning] = report.warnings
    assert warning.startswith("event.md: type: unknown type 'event'")
    assert warning.endswith("using 'general'")
    [imported] = store.list(type="general", limit=10)
    assert imported.title == "Meetup"
