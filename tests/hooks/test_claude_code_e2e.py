"""End to end with the real Claude Code CLI (bundled with claude-agent-sdk), offline.

`claude-memory install claude-code` writes the hooks into an isolated CLAUDE_CONFIG_DIR (the
`claude_code` fixture, tests/hooks/claude_code.py); each `claude -p` run is a new session
against the fake Messages API. What the model receives is read from the fake's recorded
requests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memory.sqlite.state import StateDB
from tests.fakes.anthropic_api import FakeMessagesAPI, text, tool
from tests.hooks.claude_code import CLAUDE, PLUGIN, claude_env, first_request, run_claude, seed

pytestmark = pytest.mark.e2e


def test_installed_hooks_inject_memory_and_record_observations(
    fake_model: FakeMessagesAPI,
    mem_home: Path,
    make_project: Callable[..., Path],
    claude_code: Callable[..., dict[str, str]],
) -> None:
    seed(mem_home)
    project = make_project("shop/app")
    env = claude_code()  # installed: PostToolUse is among the hooks in settings.json

    fake_model.on(
        "check the webhook",
        tool("Bash", {"command": "echo signature-verified"}),
        text("The webhook check passed."),
    )
    run_claude("please check the webhook signatures", cwd=project, env=env)

    request = first_request(fake_model, "check the webhook")
    seen = request.all_text()
    assert "about Lin" in seen and "answer in Chinese" in seen  # SessionStart context
    assert "webhook signature check" in seen  # UserPromptSubmit recall
    assert "HMAC-SHA256" in seen

    state = StateDB(mem_home / "state.db")
    try:
        observations = state.read(
            "SELECT id, kind, title, content FROM mem_episode_messages WHERE role = 'observation'"
        )
        replies = state.read("SELECT content FROM mem_episode_messages WHERE role = 'assistant'")
        episodes = state.read("SELECT status, title, key FROM mem_episodes")
    finally:
        state.close()
    assert [(o["kind"], o["title"]) for o in observations] == [
        ("how-it-works", "执行: echo signature-verified")
    ]
    assert "signature-verified" in observations[0]["content"]
    assert [r["content"] for r in replies] == ["The webhook check passed."]
    assert len(episodes) == 1 and episodes[0]["title"].startswith("app 开发会话")
    assert episodes[0]["status"] == "completed"  # SessionEnd ran when `claude -p` exited

    run_claude("what did we do last time?", cwd=project, env=env)
    seen_next = first_request(fake_model, "what did we do last time").all_text()
    assert f"| {observations[0]['id']} |" in seen_next
    assert "Ran: echo signature-verified" in seen_next  # stored 执行:, an English session
    assert "get_observations" in seen_next

    log = (mem_home / "logs" / "hooks.log").read_text()
    assert "failed" not in log and "overran" not in log


def test_the_mcp_server_connects_after_install(
    mem_home: Path, make_project: Callable[..., Path], claude_code: Callable[..., dict[str, str]]
) -> None:
    env = claude_code()
    proc = subprocess.run(
        [str(CLAUDE), "mcp", "list"],
        cwd=make_project("app"),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    line = next(x for x in proc.stdout.splitlines() if x.startswith("claude-memory"))
    assert "Connected" in line, proc.stdout
    # the server the CLI started for the health check is gone with it: no orphans
    deadline = time.monotonic() + 10
    while mcp_servers_of(mem_home) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert mcp_servers_of(mem_home) == []


def mcp_servers_of(home: Path) -> list[int]:
    """Live `claude-memory --home <home> mcp` processes."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and str(home).encode() in argv and b"mcp" in argv:
            found.append(int(entry.name))
    return found


def test_the_plugin_folder_validates_and_its_hooks_run(
    fake_model: FakeMessagesAPI, mem_home: Path, make_project: Callable[..., Path], tmp_path: Path
) -> None:
    env = claude_env(fake_model, mem_home)
    check = subprocess.run(
        [str(CLAUDE), "plugin", "validate", str(PLUGIN)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    seed(mem_home)
    # the plugin's commands use `claude-memory` from PATH
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    run_claude(
        "hello from the plugin",
        cwd=make_project("app"),
        env=env,
        args=("--plugin-dir", str(PLUGIN)),
    )
    seen = first_request(fake_model, "hello from the plugin").all_text()
    assert "about Lin" in seen


class LiveSession:
    """One `claude -p` session kept open (stream-json on stdin): each `ask` is one prompt of
    the same Claude Code session; `end` closes stdin, and the CLI runs SessionEnd."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [
                str(CLAUDE),
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--allowedTools",
                "Bash Write",
            ],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def ask(self, prompt: str) -> dict[str, object]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        message = {"type": "user", "message": {"role": "user", "content": prompt}}
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            event = json.loads(line)
            if event.get("type") == "result":
                assert not event.get("is_error"), event
                return dict(event)
        raise AssertionError(f"the session ended before answering {prompt!r}")

    def end(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        try:
            assert self.proc.wait(timeout=120) == 0
        finally:
            self.proc.stdout.close()


def test_two_sessions_in_one_project_keep_their_own_episode_window_and_summary(
    fake_model: FakeMessagesAPI,
    mem_home: Path,
    make_project: Callable[..., Path],
    claude_code: Callable[..., dict[str, str]],
) -> None:
    seed(mem_home)
    project = make_project("shop/app")
    env = claude_code()
    for name in ("alpha", "beta"):
        fake_model.on(
            f"{name} one: the webhook",
            tool("Write", {"file_path": str(project / f"{name}.txt"), "content": name}),
            text(f"{name} wrote its file."),
        )
    a, b = LiveSession(project, env), LiveSession(project, env)
    try:
        a.ask("alpha one: the webhook signatures")
        b.ask("beta one: the webhook signatures")
        a.ask("alpha two: the webhook signatures again")
        b.ask("beta two: the webhook signatures again")
    finally:
        a.end()
        b.end()

    def turn(trigger: str) -> str:
        return first_request(fake_model, trigger).turn_text()

    # Each session's first prompt recalls the note; B's is not held back by A's window, and
    # neither session's second prompt repeats what that session already got.
    assert "HMAC-SHA256" in turn("alpha one") and "HMAC-SHA256" in turn("beta one")
    assert "HMAC-SHA256" not in turn("alpha two")
    assert "HMAC-SHA256" not in turn("beta two")
    assert "about Lin" in first_request(fake_model, "beta one").all_text()  # B's own brief

    state = StateDB(mem_home / "state.db")
    try:
        episodes = state.read("SELECT id, key, status, turns, summary FROM mem_episodes")
        users = {
            e["key"]: [
                r["content"]
                for r in state.read(
                    "SELECT content FROM mem_episode_messages WHERE episode_id = ?"
                    " AND role = 'user' ORDER BY id",
                    (e["id"],),
                )
            ]
            for e in episodes
        }
    finally:
        state.close()
    assert len(episodes) == 2, episodes
    assert {e["status"] for e in episodes} == {"completed"}
    assert all(e["turns"] == 2 for e in episodes), episodes
    by_first = {messages[0].split(":")[0]: key for key, messages in users.items()}
    assert users[by_first["alpha one"]] == [
        "alpha one: the webhook signatures",
        "alpha two: the webhook signatures again",
    ]
    summaries = {e["key"]: e["summary"] for e in episodes}
    assert summaries[by_first["alpha one"]].startswith("Done: alpha one")
    assert summaries[by_first["beta one"]].startswith("Done: beta one")
    log = (mem_home / "logs" / "hooks.log").read_text()
    assert "failed" not in log and "overran" not in log


def test_claude_code_gives_the_model_the_tools_text(
    fake_model: FakeMessagesAPI,
    mem_home: Path,
    make_project: Callable[..., Path],
    claude_code: Callable[..., dict[str, str]],
) -> None:
    """The model calls memory_search and memory_save through the real Claude Code, unasked
    (install allows them; `claude -p` refused them: "you haven't granted it yet"), and reads
    plain text (with an output schema it read `{"result": "..."}`, issue #32)."""
    seed(mem_home)
    project = make_project("shop/app")
    env = claude_code()
    fake_model.on(
        "look up the webhook",
        tool("mcp__claude-memory__memory_search", {"query": "webhook signature HMAC"}),
        tool("mcp__claude-memory__memory_save", {"content": "Deploys go out on Fridays."}),
        text("Found it."),
    )
    run_claude("please look up the webhook check in memory", cwd=project, env=env)
    # Claude Code 2.1.327 defers MCP tools behind its ToolSearch; a call by name still runs
    results = [r for req in fake_model.message_requests() for r in req.tool_results]
    said = [
        r["content"]
        if isinstance(r["content"], str)
        else "".join(b.get("text", "") for b in r["content"])
        for r in results
    ]
    assert not any(r.get("is_error") for r in results), said
    searched, saved = said
    assert searched.startswith("[mem_") and "webhook signature check" in searched, searched
    assert '{"result"' not in searched
    assert saved.startswith("Saved as [mem_"), saved
