"""A home that takes no writes still gives its brief and its recall, and the person is told
once per session (a `systemMessage`).

Real filesystems, no injected errors: the home lives on a small tmpfs, remounted read-only or
filled to the last block. Mounting needs root (CAP_SYS_ADMIN), which the test container has;
elsewhere these tests are skipped, since root ignores chmod and nothing else makes a
filesystem refuse writes for real.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memory.config import MemoryConfig
from memory.model import NoteDraft
from memory.sqlite.store import MemoryStore
from tests.hooks.conftest import HookRun, context_of, hooks_gone, run_hook_process


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """An 8 MB tmpfs of this test's own (unmounted after)."""
    point = tmp_path / "fs"
    point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(point)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"no tmpfs can be mounted here: {done.stderr.decode().strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


Call = Callable[..., HookRun]


@pytest.fixture
def call(make_project: Callable[..., Path]) -> Call:
    """`call(event, session, **payload)`: the hook process in a project, as the CLI runs it."""
    project = make_project("app")

    def run(event: str, session: str, **fields: Any) -> HookRun:
        payload = {"session_id": session, "cwd": str(project), **fields}
        done = run_hook_process(event, json.dumps(payload))
        assert (done.returncode, done.stderr) == (0, "")
        return done

    return run


@pytest.fixture
def home(small_fs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: Call) -> Path:
    """A home in use on the small filesystem: a pinned preference (the brief), a
    project fact (a prompt's recall), and one session already started."""
    home = small_fs / "home"
    monkeypatch.setenv("CLAUDE_MEMORY_HOME", str(home))
    monkeypatch.setenv("CLAUDE_MEMORY_HOOK_SERVER", "0")
    monkeypatch.delenv("CODEX_HOME", raising=False)
    # which sessions were told lives outside the home, in this test's own temp folder
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    with MemoryStore.open(MemoryConfig.for_home(home)) as store:
        store.save(
            NoteDraft(
                content="I prefer short answers with the command first.",
                title="answer style",
                type="preference",
                scope="user",
                tags=["pinned"],  # every session's brief holds it
            )
        )
        store.save(
            NoteDraft(
                content="The login rate limit is 5 attempts per minute per IP, set in "
                "gateway.yaml.",
                title="login rate limit",
                type="architecture",
                scope="user",
            )
        )
    call("session-start", "before", source="startup")
    return home


def said(run: HookRun) -> str:
    output = run.output
    return "" if output is None else str(output.get("systemMessage", ""))


def remount_read_only(point: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True, capture_output=True)


def fill(point: Path) -> Path:
    """Write zeros until the filesystem has no block left; the filler's path."""
    filler = point / "filler"
    with open(filler, "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass
    return filler


def test_a_read_only_home_gives_the_brief_and_the_recall_and_says_so_once(
    home: Path, small_fs: Path, call: Call
) -> None:
    remount_read_only(small_fs)
    with pytest.raises(OSError):
        (home / "probe").write_text("x")  # really read-only, for root too

    start = call("session-start", "s2", source="startup")
    assert "short answers with the command first" in context_of(start.output)
    assert "read-only" in said(start) and "nothing from this session is saved" in said(start)

    prompt = call(
        "user-prompt-submit", "s2", prompt="how is our login rate limit configured in the gateway?"
    )
    assert "5 attempts per minute" in context_of(prompt.output)
    assert said(prompt) == ""  # once per session

    # another session is told too, on its first answer
    other = call(
        "user-prompt-submit",
        "s3",
        prompt="where is our login rate limit set and how many attempts does it allow?",
    )
    assert "gateway.yaml" in context_of(other.output)
    assert "read-only" in said(other)
    # the events that only write stay silent and exit 0
    assert call("post-tool-use", "s2", tool_name="Bash", tool_input={"command": "ls"}).stdout == ""
    assert call("session-end", "s2", reason="exit").stdout == ""


def test_a_full_disk_gives_the_brief_and_the_recall_and_saving_resumes_once_freed(
    home: Path, small_fs: Path, call: Call
) -> None:
    filler = fill(small_fs)
    start = call("session-start", "s2", source="startup")
    assert "short answers with the command first" in context_of(start.output)
    assert "full" in said(start)
    prompt = call(
        "user-prompt-submit", "s2", prompt="how is our login rate limit configured in the gateway?"
    )
    assert "5 attempts per minute" in context_of(prompt.output)
    assert said(prompt) == ""
    hooks_gone(home)  # its record, tried after the answer, failed on the full disk

    filler.unlink()
    again = call("session-start", "s4", source="startup")
    assert "short answers" in context_of(again.output) and said(again) == ""
    recorded = call(
        "user-prompt-submit", "s4", prompt="and where is our login rate limit for admins set?"
    )
    assert said(recorded) == ""
    # the prompt is on record again (written after its answer, by a child of the hook)
    deadline = time.monotonic() + 15
    while ("and where is our login rate limit for admins set?",) not in (rows := _prompts(home)):
        assert time.monotonic() < deadline, rows
        time.sleep(0.05)
    assert ("how is our login rate limit configured in the gateway?",) not in rows  # full


def _prompts(home: Path) -> list[tuple[str]]:
    with sqlite3.connect(home / "state.db") as db:
        return db.execute("SELECT content FROM mem_episode_messages WHERE role = 'user'").fetchall()


def test_a_home_that_cannot_be_opened_says_memory_is_off_once(tmp_path: Path) -> None:
    blocker = tmp_path / "home-is-a-file"
    blocker.write_text("not a folder")
    env = {
        "CLAUDE_MEMORY_HOME": str(blocker),
        "CLAUDE_MEMORY_HOOK_SERVER": "0",
        "TMPDIR": str(tmp_path),
    }
    payload = {"session_id": "s", "cwd": str(tmp_path), "source": "startup", "prompt": "hi"}
    first = run_hook_process("session-start", json.dumps(payload), env=env)
    assert first.returncode == 0 and first.stderr == ""
    assert "memory could not answer" in said(first)
    assert context_of(first.output) == ""
    later = run_hook_process("user-prompt-submit", json.dumps(payload), env=env)
    assert (later.returncode, later.stdout) == (0, "")


def test_the_told_marker_needs_no_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from memory.clients.degraded import first_telling

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert first_telling("/nowhere/home", "claude-code:a")
    assert not first_telling("/nowhere/home", "claude-code:a")
    assert first_telling("/nowhere/home", "codex:a")
    assert os.listdir(tmp_path / f"claude-memory-{os.getuid()}" / "told")


def test_the_app_serves_a_full_disk_and_its_later_work_gives_up_quietly(
    home: Path, small_fs: Path, make_project: Callable[..., Path]
) -> None:
    """The app's side (the hook route's `HookService`, work left for after the answer), its
    store and state opened before the disk filled up, as in a running app."""
    from memory.clients.hooks import HookService, answer, build_request
    from memory.clients.opening import open_state

    project = make_project("served")
    state = open_state(home / "state.db")
    store = MemoryStore.open(MemoryConfig.for_home(home))
    try:
        fill(small_fs)

        def served(event: str, **fields: Any) -> dict[str, Any]:
            service = HookService(state, lambda: store, after_answer=True, home=home)
            payload = {"session_id": "app-1", "cwd": str(project), **fields}
            request = build_request(event, payload, "claude-code", str(project), os.environ)
            text = answer(service, request)
            service.finish()  # after the answer: the prompt on record, use counts
            output: dict[str, Any] = json.loads(text)
            return output

        start = served("session-start", source="startup")
        assert "short answers" in start["hookSpecificOutput"]["additionalContext"]
        assert "full" in start["systemMessage"]
        prompt = served(
            "user-prompt-submit", prompt="how is our login rate limit configured in the gateway?"
        )
        assert "5 attempts" in prompt["hookSpecificOutput"]["additionalContext"]
        assert "systemMessage" not in prompt
    finally:
        store.close()
        state.close()
