"""A note edited by hand during a Claude Code session is what the next prompt recalls.

Claude Code watches the folders a `SessionStart` hook names in `watchPaths` and runs the
`FileChanged` hooks with the changed file (`{"file_path": ..., "event": "change|add|unlink"}`;
the hook cannot add context, only react). Our session start names the notes folder; our
`file-changed` hook brings the index up to date with the files (the store's incremental sync:
a stat per note, a hash only for what changed), so a hook process that then answers a prompt
on the index as it is (it skips the opening scan to stay fast) finds the edited text.

Only a store whose notes are files has something to watch (`NoteFiles`: the SQLite store);
on PostgreSQL the notes live in the database and nothing is watched.

What is watched is the notes folder's subfolders but `sessions/`: the session summaries are
ours, rewritten by the hooks during a session, and each rewrite came back as 2-5 `file-changed`
hook processes (a Python start and an index sync each) for nothing (issue #32). A summary edited
by hand, or a folder made during the session, is found by the next scan (the session start's,
the app's). A session the app starts is not watched at all (`hooks.answer`): a note our own
processes wrote (a capture, an MCP save) started one `file-changed` process each, and the app
rescans the notes itself; working directly, that one process per write remains.

The app also rescans the notes folder itself, in a background task (`rescans.py`): a note
edited in place is found without Claude Code's help, and no request waits for the scan.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

UNWATCHED: Final = frozenset({"sessions"})
"""Folders of the notes that only the memory itself writes during a session."""


@runtime_checkable
class NoteFiles(Protocol):
    """A memory whose truth is a folder of note files, with an incremental sync."""

    root: Path

    def sync(self) -> Any: ...


def watch_paths(store: object) -> list[str]:
    """What Claude Code should watch for this memory: the folders of its notes but the
    session summaries (or nothing)."""
    if not isinstance(store, NoteFiles):
        return []
    root = os.path.realpath(store.root)
    try:
        entries = list(os.scandir(root))
    except OSError:  # no notes folder (yet): nothing to watch
        return []
    return sorted(
        entry.path
        for entry in entries
        if entry.is_dir(follow_symlinks=False)
        and not entry.name.startswith(".")
        and entry.name not in UNWATCHED
    )


def is_note_file(store: object, file_path: str) -> bool:
    """`file_path` is a note of `store`: inside its notes folder and named as a note (not
    `_index.json`, a temp file of an atomic write or an editor's swap file: Claude Code
    reports those too, and each would cost a full sync, ~120 ms at 10k notes)."""
    from memory.notes.files import is_note_name

    if not isinstance(store, NoteFiles) or not file_path:
        return False
    root = os.path.realpath(store.root)
    path = os.path.realpath(file_path)
    return path.startswith(root + os.sep) and is_note_name(os.path.basename(path))


def note_changed(store: object, file_path: str) -> bool:
    """A watched file changed: sync the index with the notes when it is one of them.
    Returns whether it was a note file (and so whether a sync ran)."""
    if not is_note_file(store, file_path):
        return False
    assert isinstance(store, NoteFiles)
    store.sync()
    return True
