"""In the app, what a prompt's answer does not need (the prompt in the session's episode, the
decision it states captured, the injected notes' use counts) is written after the answer is
sent (`HookService(after_answer=True)`, `finish()`); a hook process writes it at once. Either
way the same things end up stored."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from memory.clients.hooks import HookService, run_hook
from memory.model import NoteDraft
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore
from tests.hooks.conftest import after_answer_done, run_hook_process

DECISION = "我们决定以后都用 PostgreSQL 做主数据库。"


def _prompt(service: HookService, project: Path, prompt: str) -> str:
    raw = json.dumps({"session_id": "s1", "cwd": str(project), "prompt": prompt})
    return run_hook(
        "user-prompt-submit",
        raw,
        service,
        client="claude-code",
        cwd=str(project),
        environ=os.environ,
    )


def _recorded(state: StateDB) -> list[str]:
    rows = state.read("SELECT content FROM mem_episode_messages WHERE role = 'user'")
    return [str(r["content"]) for r in rows]


def _captured(store: MemoryStore) -> list[str]:
    return [n.id for n in store.list(limit=50) if n.type == "decision" and "PostgreSQL" in n.body]


def test_a_served_prompt_is_recorded_and_captured_after_its_answer(
    store: MemoryStore, state: StateDB, make_project: Callable[..., Path], mem_home: Path
) -> None:
    project = make_project("app")
    service = HookService(state, lambda: store, after_answer=True)
    _prompt(service, project, DECISION)
    assert service.has_later
    assert _recorded(state) == [] and _captured(store) == []  # the answer went first

    service.finish()
    assert not service.has_later
    assert _recorded(state) == [DECISION]
    assert len(_captured(store)) == 1
    summary = mem_home / "memory" / "sessions" / "s1.md"  # a capture is a summary trigger
    assert "PostgreSQL" in summary.read_text(encoding="utf-8")


def test_a_hook_process_writes_the_same_at_once(
    store: MemoryStore, state: StateDB, make_project: Callable[..., Path]
) -> None:
    service = HookService(state, lambda: store)
    _prompt(service, make_project("app"), DECISION)
    assert not service.has_later
    assert _recorded(state) == [DECISION]
    assert len(_captured(store)) == 1


def test_an_injected_note_counts_as_used_once_the_answer_is_out(
    store: MemoryStore, state: StateDB, make_project: Callable[..., Path]
) -> None:
    project = make_project("app")
    note = store.save(
        NoteDraft(content="Canary releases get 5% of traffic for an hour.", title="canary policy")
    )
    service = HookService(state, lambda: store, after_answer=True)
    assert f"[{note.id}]" in _prompt(service, project, "what did we decide about canary releases?")
    assert store.get(note.id).access_count == 0
    service.finish()
    assert store.get(note.id).access_count == 1


def test_a_hook_process_answers_first_and_does_the_rest_outside_claude_codes_pipes(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    # `run_hook_process` returns once the hook has exited and its stdout and stderr are closed,
    # which is what Claude Code waits for: the capture, ~70 ms of a direct prompt, comes after
    payload = {"session_id": "s1", "cwd": str(make_project("app")), "prompt": DECISION}
    run = run_hook_process(
        "user-prompt-submit", json.dumps(payload), env={"CLAUDE_MEMORY_HOOK_SERVER": "0"}
    )
    assert (run.returncode, run.stderr) == (0, "")
    log = mem_home / "logs" / "hooks.log"
    after_answer_done(mem_home)
    lines = log.read_text(encoding="utf-8").splitlines()
    answered = next(i for i, line in enumerate(lines) if "user-prompt-submit done in" in line)
    rest = next(i for i, line in enumerate(lines) if "work after the answer done" in line)
    assert answered < rest and "(in the background)" in lines[rest]
    state = StateDB(mem_home / "state.db")  # and the same things end up stored
    try:
        assert _recorded(state) == [DECISION]
    finally:
        state.close()
    captured = list((mem_home / "memory" / "projects").rglob("*postgresql*.md"))
    assert len(captured) == 1 and "decision" in captured[0].read_text(encoding="utf-8")
