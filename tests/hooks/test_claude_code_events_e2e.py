"""The newer hook events with the real Claude Code CLI (bundled with claude-agent-sdk), offline:
a `git commit` made through the Bash tool writes the session's L2 summary, `/compact` records
the compaction's summary, briefs the next turn with the 'save what matters' reminder and
rewrites the summary; the SessionStart output with `watchPaths` is taken by the CLI."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from memory.sqlite.state import StateDB
from tests.fakes.anthropic_api import FakeMessagesAPI, text, tool
from tests.hooks.claude_code import run_claude, seed

pytestmark = pytest.mark.e2e


def git_repo(folder: Path) -> None:
    for args in (
        ["init", "-q"],
        ["config", "user.email", "dev@example.org"],
        ["config", "user.name", "Dev"],
    ):
        subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)
    (folder / "notes.txt").write_text("hello\n", encoding="utf-8")


def episodes(home: Path) -> list[dict[str, object]]:
    state = StateDB(home / "state.db")
    try:
        return [dict(r) for r in state.read("SELECT * FROM mem_episodes ORDER BY started")]
    finally:
        state.close()


def session_id(proc: subprocess.CompletedProcess[str]) -> str:
    return str(json.loads(proc.stdout)["session_id"])


def test_a_commit_through_bash_writes_the_session_summary(
    fake_model: FakeMessagesAPI,
    mem_home: Path,
    make_project: Callable[..., Path],
    claude_code: Callable[..., dict[str, str]],
) -> None:
    project = make_project("shop/app")
    git_repo(project)
    env = claude_code()
    fake_model.on(
        "commit the notes",
        tool("Bash", {"command": "git add notes.txt && git commit -qm 'add notes'"}),
        text("Committed."),
    )
    proc = run_claude(
        "please commit the notes file", cwd=project, env=env, args=("--output-format", "json")
    )
    sid = session_id(proc)
    log = subprocess.run(
        ["git", "log", "--oneline"], cwd=project, capture_output=True, text=True, check=True
    )
    assert "add notes" in log.stdout  # the CLI really ran the commit
    summary = mem_home / "memory" / "sessions" / f"{sid}.md"
    # one prompt and no file edited: without the commit trigger this session gets no summary
    assert summary.is_file()
    assert "commit the notes file" in summary.read_text(encoding="utf-8")
    (episode,) = episodes(mem_home)
    assert episode["status"] == "completed" and "commit the notes" in str(episode["summary"])


def test_compact_records_the_summary_and_reminds_the_next_turn(
    fake_model: FakeMessagesAPI,
    mem_home: Path,
    make_project: Callable[..., Path],
    claude_code: Callable[..., dict[str, str]],
) -> None:
    project = make_project("app")
    env = claude_code()
    echo = fake_model.default
    # the CLI's compaction request asks the model for a summary of the conversation
    fake_model.default = lambda req: (
        text("We decided to shard orders by tenant. Still need to backfill old orders.")
        if "summary" in (req.prompt or "").lower()
        else echo(req)
    )
    first = run_claude(
        "we decided to shard the orders table by tenant",
        cwd=project,
        env=env,
        args=("--output-format", "json"),
    )
    sid = session_id(first)
    run_claude("/compact", cwd=project, env=env, args=("--resume", sid))
    run_claude("what next?", cwd=project, env=env, args=("--resume", sid))

    state = StateDB(mem_home / "state.db")
    try:
        compactions = state.read(
            "SELECT title, content FROM mem_episode_messages WHERE kind = 'compaction'"
        )
    finally:
        state.close()
    assert compactions, "PostCompact recorded nothing"
    assert compactions[0]["title"] == "上下文压缩 (manual)"
    assert "Still need to backfill old orders." in compactions[0]["content"]
    seen = fake_model.requests_for("what next?")[0].all_text()
    assert "The conversation was just compacted" in seen
    summary = mem_home / "memory" / "sessions" / f"{sid}.md"
    text_now = summary.read_text(encoding="utf-8")
    # the whole session (its first run and the compaction), not only the last episode
    assert "shard the orders table" in text_now and "Still need to backfill" in text_now


def test_three_resumed_runs_are_one_episode_with_a_summary(
    fake_model: FakeMessagesAPI,
    mem_home: Path,
    make_project: Callable[..., Path],
    claude_code: Callable[..., dict[str, str]],
) -> None:
    """Issue #32: three prompts over three `claude -p --resume` runs were three one-prompt
    episodes and none got a summary (the rule counted per episode)."""
    project = make_project("app")
    env = claude_code()
    first = run_claude(
        "plan the gamma migration of the billing tables",
        cwd=project,
        env=env,
        args=("--output-format", "json"),
    )
    sid = session_id(first)
    for prompt in ("now move the invoices table", "and then the refunds table"):
        run_claude(prompt, cwd=project, env=env, args=("--resume", sid))
    (episode,) = episodes(mem_home)
    assert episode["key"] == f"claude-code:{sid}" and episode["status"] == "completed"
    assert episode["turns"] == 3
    summary = str(episode["summary"])
    assert "gamma migration" in summary and "refunds" in summary, summary


def test_our_own_summary_write_starts_no_file_changed_hook(
    fake_model: FakeMessagesAPI,
    mem_home: Path,
    make_project: Callable[..., Path],
    claude_code: Callable[..., dict[str, str]],
) -> None:
    """Issue #32: each rewrite of the session's summary (here: after a `git commit`) came back
    from Claude Code's watcher as 2-5 `file-changed` hook processes, a Python start and an
    index sync each, for a file the hooks had just written themselves."""
    project = make_project("app")
    git_repo(project)
    env = claude_code()
    fake_model.on(
        "commit the notes",
        tool("Bash", {"command": "git add notes.txt && git commit -qm 'add notes'"}),
        tool("Bash", {"command": "sleep 3"}),  # the watcher reports after 0.5 s of quiet
        text("Committed."),
    )
    proc = run_claude(
        "please commit the notes file", cwd=project, env=env, args=("--output-format", "json")
    )
    assert (mem_home / "memory" / "sessions" / f"{session_id(proc)}.md").is_file()
    log = (mem_home / "logs" / "hooks.log").read_text(encoding="utf-8")
    assert "hook post-tool-use done" in log
    assert "file-changed" not in log, log


def test_a_capture_and_an_mcp_save_start_no_file_changed_hook_with_the_app_up(
    fake_model: FakeMessagesAPI,
    mem_home: Path,
    tmp_path: Path,
    make_project: Callable[..., Path],
    claude_code: Callable[..., dict[str, str]],
) -> None:
    """Issue #32: each note our own processes wrote during a session (a decision the prompt
    stated, captured by the prompt hook; a `memory_save` through the MCP server) came back from
    Claude Code's watcher as a `file-changed` hook process. With the app up the session start
    names no folder to watch (the app's rescans find hand edits): no such process at all."""
    from tests.hooks.test_server_mode import start_app

    seed(mem_home)
    project = make_project("app")
    env = claude_code(without=("CLAUDE_MEMORY_PORT",), CLAUDE_MEMORY_HOOK_SERVER="1")
    fake_model.on(
        "PostgreSQL",
        tool("Bash", {"command": "sleep 2"}),  # the capture is written after the answer
        tool("mcp__claude-memory__memory_save", {"content": "Deploys go out on Fridays."}),
        tool("Bash", {"command": "sleep 2"}),  # the watcher reports after 0.5 s of quiet
        text("Noted."),
    )
    app = start_app(mem_home, tmp_path / "server.log")
    try:
        run_claude("我们决定用 PostgreSQL 做任务队列", cwd=project, env=env)
    finally:
        app.stop()
    notes = [p.read_text(encoding="utf-8") for p in (mem_home / "memory").rglob("*.md")]
    assert any("我们决定用 PostgreSQL 做任务队列" in n for n in notes)  # captured
    assert any("Deploys go out on Fridays." in n for n in notes)  # saved by the MCP server
    log = (mem_home / "logs" / "hooks.log").read_text(encoding="utf-8")
    assert "session-start handled by the app" in log
    assert log.count("hook post-tool-use done") == 3  # the hook processes that did run
    assert "file-changed" not in log, log
