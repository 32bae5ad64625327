"""L2 summaries at issue #19's trigger points, the compaction reminder, PostCompact, the
SessionStart sources and hand edits seen within a session: through the hook entry point
(`hook_direct`, what `claude-memory hook <event>` runs), with Claude Code's payloads."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memory.clients.hook_process import HookSettings, hook_direct
from memory.clients.triggers import is_git_commit, summary_trigger
from memory.config import MemoryConfig
from memory.loop.episodes import EpisodeStore
from memory.model import NoteDraft
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore
from tests.hooks.conftest import Hook, context_of

REMINDER = "The conversation was just compacted"


@pytest.mark.parametrize(
    ("event", "payload", "captured", "expected"),
    [
        ("user-prompt-submit", {"prompt": "我们决定用 PostgreSQL"}, True, "remember"),
        ("user-prompt-submit", {"prompt": "how does login work?"}, False, None),
        ("user-prompt-submit", {"prompt": "记住：测试库端口是 5433"}, False, "remember"),
        ("user-prompt-submit", {"prompt": "好的。帮我记一下周会改到周三"}, False, "remember"),
        (
            "user-prompt-submit",
            {"prompt": "Remember that staging deploys on Fridays"},
            False,
            "remember",
        ),
        ("user-prompt-submit", {"prompt": "ok. Don't forget the changelog"}, False, "remember"),
        ("user-prompt-submit", {"prompt": "我记不住这个命令"}, False, None),
        ("user-prompt-submit", {"prompt": "记住了，下次注意"}, False, None),
        ("user-prompt-submit", {"prompt": "I can't remember the flag"}, False, None),
        ("user-prompt-submit", {"prompt": "remember when we fixed that?"}, False, None),
        (
            "post-tool-use",
            {"tool_name": "Bash", "tool_input": {"command": "git commit -m 'fix login'"}},
            False,
            "commit",
        ),
        (
            "post-tool-use",
            {"tool_name": "Bash", "tool_input": {"command": "git add -A && git commit -qm x"}},
            False,
            "commit",
        ),
        (
            "post-tool-use",
            {"tool_name": "Bash", "tool_input": {"command": "git -C ../app commit --amend"}},
            False,
            "commit",
        ),
        (
            "post-tool-use",
            {
                "tool_name": "Bash",
                "tool_input": {"command": "git commit -m x"},
                "tool_response": {"exit_code": 1, "stderr": "nothing to commit"},
            },
            False,
            None,
        ),
        (
            "post-tool-use",
            {"tool_name": "Bash", "tool_input": {"command": "git log --oneline"}},
            False,
            None,
        ),
        (
            "post-tool-use",
            {"tool_name": "Bash", "tool_input": {"command": "echo 'git commit'"}},
            False,
            None,
        ),
        (
            "post-tool-use",
            {"tool_name": "Edit", "tool_input": {"command": "git commit"}},
            False,
            None,
        ),
        ("pre-compact", {"trigger": "auto"}, False, "compact"),
        ("post-compact", {"trigger": "manual", "compact_summary": "..."}, False, "compact"),
        ("session-end", {"reason": "clear"}, False, "clear"),
        ("session-end", {"reason": "prompt_input_exit"}, False, "end"),
        ("session-start", {"source": "clear"}, False, None),
        ("stop", {}, False, None),
        ("file-changed", {"file_path": "/x.md", "event": "change"}, False, None),
    ],
)
def test_summary_trigger_table(
    event: str, payload: dict[str, Any], captured: bool, expected: str | None
) -> None:
    assert summary_trigger(event, payload, captured=captured) == expected


@pytest.mark.parametrize(
    ("command", "commits"),
    [
        ("git commit", True),
        ("cd app; git commit -am 'x'", True),
        ("git -c user.name=bot commit -m x", True),
        ("if true; then git commit -m x; fi", True),
        ("git commit-tree HEAD^{tree}", False),
        ("gitk commit", False),
        ('grep "git commit" notes.md', False),
        ("git status", False),
    ],
)
def test_is_git_commit(command: str, commits: bool) -> None:
    assert is_git_commit(command) is commits


def _summary_file(home: Path, session: str) -> Path:
    return home / "memory" / "sessions" / f"{session}.md"


def _episode(state: StateDB, store: MemoryStore, key: str) -> Any:
    (episode,) = [e for e in EpisodeStore(state, store).list() if e.key == key]
    return episode


def test_asking_to_remember_writes_the_summary_and_a_commit_overwrites_it(
    hook: Hook, make_project: Callable[..., Path], mem_home: Path, state: StateDB
) -> None:
    project = make_project("app")
    hook("session-start", cwd=project, session_id="s1", source="startup")
    hook("user-prompt-submit", cwd=project, session_id="s1", prompt="how does the login flow work?")
    assert not _summary_file(mem_home, "s1").exists()  # no trigger point yet

    hook(
        "user-prompt-submit",
        cwd=project,
        session_id="s1",
        prompt="我们决定以后都用 PostgreSQL 做主数据库。",
    )
    first = _summary_file(mem_home, "s1").read_text(encoding="utf-8")
    assert "PostgreSQL" in first

    hook(
        "post-tool-use",
        cwd=project,
        session_id="s1",
        tool_name="Edit",
        tool_input={"file_path": f"{project}/db.py", "old_string": "a", "new_string": "b"},
        tool_response={},
    )
    hook(
        "post-tool-use",
        cwd=project,
        session_id="s1",
        tool_name="Bash",
        tool_input={"command": "git commit -am 'switch to PostgreSQL'"},
        tool_response={"stdout": "[main 1a2b3c4] switch to PostgreSQL", "stderr": ""},
    )
    second = _summary_file(mem_home, "s1").read_text(encoding="utf-8")
    assert second != first and "db.py" in second  # overwritten, now with the file changed
    assert list((mem_home / "memory" / "sessions").iterdir()) == [_summary_file(mem_home, "s1")]
    with MemoryStore.open(MemoryConfig.for_home(mem_home)) as s:
        assert len([n for n in s.list(type="conversation") if n.path.startswith("sessions/")]) == 1
        episode = _episode(state, s, "claude-code:s1")
    assert episode.status == "active"  # a trigger point keeps the session going
    assert "db.py" in episode.summary


def test_a_short_session_keeps_its_trigger_summary_when_it_ends(
    hook: Hook,
    make_project: Callable[..., Path],
    mem_home: Path,
    state: StateDB,
    store: MemoryStore,
) -> None:
    project = make_project("app")
    hook("session-start", cwd=project, session_id="s1", source="startup")
    hook("user-prompt-submit", cwd=project, session_id="s1", prompt="I prefer pytest over unittest")
    hook("session-end", cwd=project, session_id="s1", reason="prompt_input_exit")
    episode = _episode(state, store, "claude-code:s1")
    assert episode.status == "completed"
    assert "pytest" in episode.summary  # one prompt only, but the user asked to keep it
    assert "pytest" in _summary_file(mem_home, "s1").read_text(encoding="utf-8")


def test_a_resumed_session_with_one_more_prompt_updates_its_own_summary_file(
    hook: Hook, make_project: Callable[..., Path], mem_home: Path
) -> None:
    # Found by a new user (26 Nov): the resumed part alone (one prompt) was "too short" to
    # summarize, so the session's file kept describing the first part only.
    project = make_project("app")
    hook("session-start", cwd=project, session_id="rs1", source="startup")
    for prompt in ("Add a cache to atlas/api.py.", "Use an LRU of size 128.", "Expose stats."):
        hook("user-prompt-submit", cwd=project, session_id="rs1", prompt=prompt)
    hook("session-end", cwd=project, session_id="rs1", reason="other")
    first = _summary_file(mem_home, "rs1").read_text(encoding="utf-8")
    assert "cache" in first and "CHANGELOG" not in first
    hook("session-start", cwd=project, session_id="rs1", source="resume")
    hook("user-prompt-submit", cwd=project, session_id="rs1", prompt="Now write the CHANGELOG.")
    hook("session-end", cwd=project, session_id="rs1", reason="other")
    files = sorted((mem_home / "memory" / "sessions").glob("*.md"))
    assert [f.name for f in files] == ["rs1.md"]
    assert "CHANGELOG" in _summary_file(mem_home, "rs1").read_text(encoding="utf-8")


def test_pre_compact_writes_the_summary_and_the_compact_start_carries_the_reminder(
    hook: Hook, make_project: Callable[..., Path], mem_home: Path
) -> None:
    project = make_project("app")
    assert REMINDER not in context_of(
        hook("session-start", cwd=project, session_id="s1", source="startup")
    )
    hook("user-prompt-submit", cwd=project, session_id="s1", prompt="refactor the payment module")
    assert hook("pre-compact", cwd=project, session_id="s1", trigger="auto") is None
    assert "refactor the payment module" in _summary_file(mem_home, "s1").read_text("utf-8")
    after = context_of(hook("session-start", cwd=project, session_id="s1", source="compact"))
    assert REMINDER in after and "memory_save" in after


def test_post_compact_keeps_the_compaction_summary_in_the_timeline_and_the_summary(
    hook: Hook,
    make_project: Callable[..., Path],
    mem_home: Path,
    state: StateDB,
    store: MemoryStore,
) -> None:
    project = make_project("app")
    hook("session-start", cwd=project, session_id="s1", source="startup")
    hook("user-prompt-submit", cwd=project, session_id="s1", prompt="speed up the importer")
    compact_summary = (
        "The user wants the importer faster. We decided to batch inserts by 500 rows. "
        "Still need to benchmark the new batch size."
    )
    hook(
        "post-compact",
        cwd=project,
        session_id="s1",
        trigger="auto",
        compact_summary=compact_summary,
    )
    episode = _episode(state, store, "claude-code:s1")
    observations = [
        m for m in EpisodeStore(state, store).messages(episode.id) if m.role == "observation"
    ]
    assert [(m.kind, m.title) for m in observations] == [("compaction", "上下文压缩 (auto)")]
    assert "batch inserts by 500 rows" in observations[0].content
    summary = _summary_file(mem_home, "s1").read_text(encoding="utf-8")
    assert "Decisions: We decided to batch inserts by 500 rows" in summary
    assert "Open: Still need to benchmark" in summary


def test_clear_ends_the_old_session_with_its_summary_and_starts_fresh(
    hook: Hook,
    make_project: Callable[..., Path],
    mem_home: Path,
    state: StateDB,
    store: MemoryStore,
) -> None:
    project = make_project("app")
    hook("session-start", cwd=project, session_id="old", source="startup")
    hook("user-prompt-submit", cwd=project, session_id="old", prompt="add CSV export to reports")
    # `/clear` in Claude Code: SessionEnd(reason=clear) for the old id, then SessionStart(clear)
    hook("session-end", cwd=project, session_id="old", reason="clear")
    assert _episode(state, store, "claude-code:old").status == "completed"
    assert "CSV export" in _summary_file(mem_home, "old").read_text(encoding="utf-8")
    brief = context_of(hook("session-start", cwd=project, session_id="new", source="clear"))
    assert "Latest sessions in app:" in brief and "add CSV export to reports" in brief
    assert _episode(state, store, "claude-code:new").status == "active"


def test_fork_gets_a_new_episode_and_a_resume_brief(
    hook: Hook, make_project: Callable[..., Path], state: StateDB, store: MemoryStore
) -> None:
    project = make_project("app")
    store.save(NoteDraft(content="Lin likes short answers.", title="Lin", path="user/lin.md"))
    hook("session-start", cwd=project, session_id="parent", source="startup")
    for n in range(3):
        hook("user-prompt-submit", cwd=project, session_id="parent", prompt=f"tune cache {n}")
    hook(
        "post-tool-use",
        cwd=project,
        session_id="parent",
        tool_name="Bash",
        tool_input={"command": "pytest -q"},
        tool_response={"stdout": "3 passed"},
    )
    hook("session-end", cwd=project, session_id="parent", reason="other")
    startup = context_of(hook("session-start", cwd=project, session_id="x", source="startup"))
    fork = context_of(hook("session-start", cwd=project, session_id="child", source="fork"))
    assert "| id | time | type | title |" in startup
    # the forked conversation is already in the model's context: no project listing again
    assert "Lin likes short answers." in fork
    assert "| id | time | type | title |" not in fork and "Latest sessions" not in fork
    assert _episode(state, store, "claude-code:child").status == "active"
    assert _episode(state, store, "claude-code:parent").status == "completed"


def test_a_note_edited_by_hand_is_recalled_after_file_changed(
    hook: Hook, make_project: Callable[..., Path], mem_home: Path, store: MemoryStore
) -> None:
    project = make_project("app")
    note = store.save(NoteDraft(content="Deploys go out on Tuesdays.", title="deploy day"))
    start = hook("session-start", cwd=project, session_id="s1", source="startup")
    assert start is not None
    watched = start["hookSpecificOutput"]["watchPaths"]
    path = Path(os.path.realpath(mem_home / "memory")) / store.get(note.id).path
    assert path.is_file() and any(str(path).startswith(folder + os.sep) for folder in watched)

    # an editor writes the file in place: its folder's mtime does not move
    text = path.read_text(encoding="utf-8").replace(
        "Deploys go out on Tuesdays.", "Deploys go out on Tuesdays, canary first in Zanzibar."
    )
    with open(path, "r+", encoding="utf-8") as handle:
        handle.write(text)
        handle.truncate()
    prompt = "which canary did we say runs in zanzibar first?"
    assert f"[{note.id}]" not in context_of(
        hook("user-prompt-submit", cwd=project, session_id="s1", prompt=prompt)
    )  # a prompt hook uses the index as it is (no scan: it must be fast)

    changed = {"file_path": str(path), "event": "change"}
    assert hook("file-changed", cwd=project, session_id="s1", **changed) is None
    recalled = context_of(hook("user-prompt-submit", cwd=project, session_id="s1", prompt=prompt))
    assert f"[{note.id}]" in recalled


def test_file_changed_outside_the_notes_does_nothing(
    hook: Hook, make_project: Callable[..., Path], tmp_path: Path
) -> None:
    project = make_project("app")
    other = project / ".env"
    other.write_text("A=1\n", encoding="utf-8")
    assert hook("file-changed", cwd=project, file_path=str(other), **{"event": "change"}) is None


def test_codex_gets_no_watch_paths(make_project: Callable[..., Path], mem_home: Path) -> None:
    environ = dict(os.environ)
    settings = HookSettings.from_env("session-start", environ, client="codex")
    payload = {"session_id": "t1", "cwd": str(make_project("app")), "source": "startup"}
    out = hook_direct("session-start", json.dumps(payload).encode(), settings, environ)
    assert "watchPaths" not in out  # Codex's SessionStart output allows no such field
