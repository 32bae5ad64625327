"""Hand edits fully seen (issue #19): when a note's body is changed in its file and its summary
(or title) was derived from the old body, the store's sync derives it again from the new body
and writes it into the file; what a person wrote in the front matter stays."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from memory.model import NoteDraft
from memory.sqlite.store import MemoryStore


def front_matter(text: str) -> dict[str, object]:
    return dict(yaml.safe_load(text.split("---\n")[1]))


def hand_edit(path: Path, old: str, new: str) -> None:
    """Replace `old` in the body only (the title and summary lines may hold the same words),
    or, for a `summary:` line, in the front matter."""
    _, front, body = path.read_text(encoding="utf-8").split("---\n", 2)
    if old.startswith("summary:"):
        front = front.replace(old, new)
    else:
        assert old in body
        body = body.replace(old, new)
    path.write_text(f"---\n{front}---\n{body}", encoding="utf-8")


@pytest.mark.parametrize(
    ("draft", "edit", "summary", "title"),
    [
        pytest.param(
            NoteDraft(content="The pool holds 5 connections.\n\nSee db/pool.py."),
            ("holds 5", "holds 20"),
            "The pool holds 20 connections.",
            "The pool holds 20 connections.",
            id="derived summary and title follow the new body",
        ),
        pytest.param(
            NoteDraft(content="连接池有 5 个连接。", title="连接池"),
            ("5 个", "20 个"),
            "连接池有 20 个连接。",
            "连接池",
            id="a given title stays, the derived summary follows",
        ),
        pytest.param(
            NoteDraft(content="The pool holds 5 connections.", summary="pool size (ask Lin)"),
            ("holds 5", "holds 20"),
            "pool size (ask Lin)",
            "The pool holds 20 connections.",
            id="a written summary stays",
        ),
        pytest.param(
            NoteDraft(content="The pool holds 5 connections."),
            ("summary: The pool holds 5 connections.", "summary: pool, by hand"),
            "pool, by hand",
            "The pool holds 5 connections.",
            id="a summary edited by hand with the body unchanged stays",
        ),
    ],
)
def test_a_hand_edit_of_the_body_re_derives_what_was_derived(
    store: MemoryStore, draft: NoteDraft, edit: tuple[str, str], summary: str, title: str
) -> None:
    saved = store.save(draft)
    path = store.abspath(saved.path)
    hand_edit(path, *edit)

    store.sync()

    meta = front_matter(path.read_text(encoding="utf-8"))
    assert (meta["summary"], meta["title"]) == (summary, title)  # the file, the truth
    (listed,) = [n for n in store.list() if n.id == saved.id]
    assert (listed.summary, listed.title) == (summary, title)  # what listings show
    store.rebuild()
    assert store.get(saved.id).summary == summary  # a rebuild from the files agrees


def test_the_body_and_summary_edited_together_keep_the_persons_summary(
    store: MemoryStore,
) -> None:
    saved = store.save(NoteDraft(content="Deploys run on Fridays."))
    path = store.abspath(saved.path)
    hand_edit(path, "summary: Deploys run on Fridays.", "summary: deploy day")
    hand_edit(path, "on Fridays.", "on Mondays.")
    note = store.get(saved.id)  # a read sees the hand edit first
    assert note.summary == "deploy day" and note.body.startswith("Deploys run on Mondays.")


def test_a_read_after_a_hand_edit_shows_the_re_derived_summary(store: MemoryStore) -> None:
    saved = store.save(NoteDraft(content="周会在周一上午十点。"))
    path = store.abspath(saved.path)
    hand_edit(path, "周一上午十点", "周二下午三点")
    assert store.get(saved.id).summary == "周会在周二下午三点。"
    assert "summary: 周会在周二下午三点。" in path.read_text(encoding="utf-8")
