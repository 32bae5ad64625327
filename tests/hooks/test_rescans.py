"""The app rescans the note files in a background task (`memory/clients/rescans.py`): no
prompt waits for a full scan, and a note edited in place by hand is still recalled, by the
prompts after the scan. Claude Code's `file-changed` syncs only for a note file."""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memory.clients.hooks import HookService, run_hook
from memory.clients.notes_watch import is_note_file
from memory.clients.rescans import RescanPolicy, Rescans, rescan_due
from memory.config import MemoryConfig
from memory.model import NoteDraft
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore

POLICY = RescanPolicy(interval=2.0, idle_interval=30.0, quiet=0.25, window=1.0, max_wait=60.0)


@pytest.mark.parametrize(
    ("now", "last_scan", "cost", "last_request", "in_flight", "due"),
    [
        (1.0, 0.0, 0.0, 0.5, 0, False),  # too soon after the last scan
        (3.0, 0.0, 0.0, 2.5, 0, True),  # a request ended 0.5 s ago: the user reads the answer
        (3.0, 0.0, 0.0, 2.9, 0, False),  # it ended 0.1 s ago: wait for quiet
        (3.0, 0.0, 0.0, 1.5, 0, False),  # 1.5 s ago: too late, the next prompt may be near
        (3.0, 0.0, 0.0, 2.0, 1, False),  # a request in flight
        (10.0, 0.0, 0.0, float("-inf"), 0, False),  # nobody asked: the idle interval
        (31.0, 0.0, 0.0, float("-inf"), 0, True),
        (31.0, 0.0, 0.0, 30.9, 0, False),  # ... yet not right on a request's heels
        (50.0, 0.0, 0.0, 50.0, 1, False),  # a steady stream of requests postpones it
        (63.0, 0.0, 0.0, 63.0, 1, True),  # ... for max_wait at most: scan anyway
        (2.2, 0.0, 0.12, 1.5, 0, False),  # a 120 ms scan: at most every 2.4 s
        (2.5, 0.0, 0.12, 2.0, 0, True),
        (4.0, 2.0, 0.0, 1.0, 0, False),  # the request came before the last scan
    ],
)
def test_rescan_due_table(
    now: float, last_scan: float, cost: float, last_request: float, in_flight: int, due: bool
) -> None:
    assert (
        rescan_due(
            POLICY,
            now=now,
            last_scan=last_scan,
            scan_cost=cost,
            last_request=last_request,
            in_flight=in_flight,
        )
        is due
    )


@pytest.fixture
def app_store(mem_home: Path) -> Iterator[MemoryStore]:
    """The store as the app opens it: no read rescans on a timer (and, as on a large home,
    no read rescans every file either)."""
    config = MemoryConfig.for_home(mem_home, rescan_interval=math.inf, rescan_every_read_below=0)
    with MemoryStore.open(config) as opened:
        yield opened


def _edit_in_place(path: Path, old: str, new: str) -> None:
    # an editor writing the file in place: its folder's mtime does not move
    text = path.read_text(encoding="utf-8").replace(old, new)
    with open(path, "r+", encoding="utf-8") as handle:
        handle.write(text)
        handle.truncate()


async def test_a_note_edited_by_hand_is_recalled_after_the_background_rescan(
    app_store: MemoryStore,
    state: StateDB,
    make_project: Callable[..., Path],
) -> None:
    project = make_project("app")
    note = app_store.save(NoteDraft(content="Deploys go out on Tuesdays.", title="deploy day"))
    _edit_in_place(
        app_store.abspath(app_store.get(note.id).path),
        "Deploys go out on Tuesdays.",
        "Deploys go out on Tuesdays, canary first in Zanzibar.",
    )
    service = HookService(state, lambda: app_store)
    rescans = Rescans(
        app_store,
        RescanPolicy(interval=0.05, idle_interval=60.0, quiet=0.05, max_wait=5.0),
        tick=0.01,
    )

    async def prompt(session: str) -> str:
        raw = json.dumps(
            {"session_id": session, "cwd": str(project), "prompt": "which canary runs first?"}
        )
        with rescans.serving():
            return await asyncio.to_thread(
                run_hook,
                "user-prompt-submit",
                raw,
                service,
                client="claude-code",
                cwd=str(project),
                environ=os.environ,
            )

    async with rescans:
        # no prompt scans the files: the one right after the edit answers on the index as it is
        assert f"[{note.id}]" not in await prompt("s1")
        deadline = time.monotonic() + 5
        while rescans.scans == 0:
            assert time.monotonic() < deadline, "no rescan after a served prompt"
            await asyncio.sleep(0.01)
        assert f"[{note.id}]" in await prompt("s2")


@pytest.mark.parametrize(
    ("relpath", "is_note"),
    [
        ("user/mem_01abc.md", True),
        ("projects/p1/20261125-deploy-day-x1.md", True),
        ("_index.json", False),  # rewritten by the store itself
        ("README.md", False),
        ("user/.tmp-x1.md", False),  # an atomic write's temp file
        ("user/.mem_01abc.md.swp", False),  # an editor's swap file
        ("user/notes.txt", False),
    ],
)
def test_file_changed_syncs_only_for_a_note(
    app_store: MemoryStore, relpath: str, is_note: bool
) -> None:
    assert is_note_file(app_store, str(app_store.root / relpath)) is is_note
    assert not is_note_file(app_store, str(app_store.root.parent / "elsewhere.md"))
