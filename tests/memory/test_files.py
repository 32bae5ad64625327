"""Note files: front matter round trip, layout, atomic writes, ids."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from errors import InvalidInputError
from memory.model import (
    ENTITY_TYPE_MAP,
    FRONT_MATTER_KEYS,
    TYPE_PROFILES,
    NoteDraft,
    new_note_id,
    normalize_scope,
    normalize_tags,
    normalize_type,
    path_note_id,
)
from memory.notes.files import (
    atomic_write,
    create_inbox_note,
    ensure_memory_layout,
    fast_front_matter,
    note_from_draft,
    parse_note,
    render_note,
    safe_relpath,
)


def test_render_then_parse_gives_the_same_note() -> None:
    note = note_from_draft(
        NoteDraft(
            content="# 标题\n\n正文 body\n",
            title="标题: with colon",
            type="bug",
            scope="project:api",
            tags=["a", "b c"],
            importance=0.7,
            expires_at="2031-05-01",
            source="web",
            extra={"mood": "calm"},
        ),
        relpath="inbox/x.md",
        now=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    parsed = parse_note(render_note(note).encode(), "inbox/x.md")
    assert parsed.ok and parsed.warnings == ()
    assert parsed.note == note
    assert parsed.note.extra == {"mood": "calm"}


def test_file_without_front_matter_is_a_plain_note() -> None:
    parsed = parse_note(b"# My idea\n\nSome text.\n", "user/idea.md", mtime=0)
    assert parsed.ok
    note = parsed.note
    assert note.title == "My idea" and note.summary == "Some text."
    assert note.id == path_note_id("user/idea.md") and note.type == "general"
    assert note.created == datetime(1970, 1, 1, tzinfo=UTC)


def test_dates_written_by_hand_without_quotes_are_understood() -> None:
    text = "---\ncreated: 2024-03-01\nupdated: 2024-03-02T10:00:00+08:00\n---\nbody\n"
    note = parse_note(text.encode(), "a.md").note
    assert note.created == datetime(2024, 3, 1, tzinfo=UTC)
    assert note.updated == datetime(2024, 3, 2, 2, tzinfo=UTC)


def test_yaml_that_is_not_a_mapping_is_reported() -> None:
    parsed = parse_note(b"---\n- just\n- a list\n---\nbody text\n", "a.md")
    assert not parsed.ok and "not a mapping" in parsed.warnings[0]
    assert "body text" in parsed.note.body


def test_layout_is_created_once_and_never_overwritten(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    ensure_memory_layout(root)
    for folder in ("user", "learned", "projects", "sessions", "inbox"):
        assert (root / folder).is_dir()
    profile = (root / "user" / "profile.md").read_text(encoding="utf-8")
    for section in ("## Preferences", "## Technical background", "## Communication style"):
        assert section in profile
    assert "front matter" in (root / "MEMORY_SCHEMA.md").read_text(encoding="utf-8")
    (root / "README.md").write_text("mine", encoding="utf-8")
    ensure_memory_layout(root)
    assert (root / "README.md").read_text(encoding="utf-8") == "mine"


def test_create_inbox_note_writes_a_sanitized_capture(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    ensure_memory_layout(root)
    note = create_inbox_note(
        root, NoteDraft(content="captured: token ghp_1234567890abcdefghijABCDEFGHIJ123456")
    )
    assert note.path.startswith("inbox/")
    text = (root / note.path).read_text(encoding="utf-8")
    assert "ghp_1234" not in text and "[REDACTED:github_token]" in text
    assert parse_note(text.encode(), note.path).note.id == note.id


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "a" / "note.md"
    atomic_write(target, "one")
    atomic_write(target, "two")
    assert target.read_text(encoding="utf-8") == "two"
    assert [p.name for p in target.parent.iterdir()] == ["note.md"]
    with pytest.raises(FileExistsError):
        atomic_write(target, "three", exclusive=True)
    assert [p.name for p in target.parent.iterdir()] == ["note.md"]


@pytest.mark.parametrize("bad", ["../x.md", "/etc/x.md", "a/../../x.md", "x.txt", "README.md"])
def test_paths_outside_the_root_or_not_notes_are_refused(bad: str) -> None:
    with pytest.raises(InvalidInputError):
        safe_relpath(bad)


def test_type_weights_and_half_lives() -> None:
    expected = {
        "identity": (1.0, 3650),
        "preference": (0.9, 365),
        "decision": (0.9, 180),
        "architecture": (0.8, 180),
        "project": (0.8, 90),
        "research": (0.8, 365),
        "code": (0.6, 90),
        "bug": (0.6, 90),
        "conversation": (0.3, 30),
        "general": (0.5, 60),
    }
    assert {k: (v.weight, v.half_life_days) for k, v in TYPE_PROFILES.items()} == expected
    assert set(ENTITY_TYPE_MAP.values()) <= set(TYPE_PROFILES)
    assert normalize_type("HABIT") == "preference" and normalize_type("file") == "code"


@pytest.mark.parametrize("scope", ["user", "project:api", "project:我的项目", "chat:oc_123:abc"])
def test_valid_scopes(scope: str) -> None:
    assert normalize_scope(scope) == scope


@pytest.mark.parametrize("scope", ["users", "project:", "project:a/b", "chat:", "teams:x", "x y"])
def test_invalid_scopes(scope: str) -> None:
    with pytest.raises(InvalidInputError):
        normalize_scope(scope)


def test_ids_are_short_unique_and_sortable_by_time() -> None:
    ids = [new_note_id(time.time() + i) for i in range(50)]
    assert ids == sorted(ids) and len(set(ids)) == 50
    assert all(len(i) == 20 and i.startswith("mem_") for i in ids)
    same_ms = {new_note_id(1_700_000_000.0) for _ in range(200)}
    assert len(same_ms) == 200


def test_path_ids_are_stable_per_path() -> None:
    assert path_note_id("inbox/a.md") == path_note_id("inbox/a.md")
    assert path_note_id("inbox/a.md") != path_note_id("inbox/b.md")


TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=0, max_size=60)


@settings(max_examples=300, deadline=None)
@given(
    title=TEXT.filter(lambda t: t.strip() != ""),
    summary=TEXT,
    tags=st.lists(TEXT, max_size=4),
    source=st.one_of(st.none(), TEXT),
    importance=st.floats(min_value=0, max_value=1),
    extra=st.dictionaries(
        st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True).filter(
            lambda k: k not in FRONT_MATTER_KEYS
        ),
        st.one_of(st.none(), st.booleans(), st.integers(), TEXT, st.lists(TEXT, max_size=2)),
        max_size=3,
    ),
)
def test_fast_front_matter_agrees_with_yaml(
    title: str,
    summary: str,
    tags: list[str],
    source: str | None,
    importance: float,
    extra: dict[str, object],
) -> None:
    note = note_from_draft(
        NoteDraft(content="body", title=title, summary=summary or None, source=source or None),
        relpath="a.md",
    )
    note = replace(
        note,
        title=title,
        summary=summary,
        tags=normalize_tags([t for t in tags if "\n" not in t and "\r" not in t]),
        source=source,
        importance=importance,
        extra=extra,
    )
    text = render_note(note)
    front = text.split("---\n", 2)[1]
    fast = fast_front_matter(front)
    if fast is not None:
        assert fast == yaml.safe_load(front)
    parsed = parse_note(text.encode(), "a.md")
    assert parsed.ok
    one_line = {t: " ".join(t.split()) for t in (title, summary)}
    if all(text == clean and text for text, clean in one_line.items()):
        assert parsed.note == note
