"""End to end with the real Codex CLI (npm `@openai/codex`, pinned in scripts/test), offline.

`claude-memory install codex` writes the hooks, their trust entries and the MCP server into an
isolated CODEX_HOME; `codex exec` runs against the fake Responses API
(tests/fakes/openai_responses.py) on the loopback, with a dead proxy for anything else, so
nothing reaches the network. No `--dangerously-bypass-hook-trust`: the hooks run because
install trusted them. scripts/test installs the CLI into a cache folder; without it (no
npm) these tests skip.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memory.config import MemoryConfig
from memory.model import NoteDraft
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore
from tests.fakes.openai_responses import API_KEY_ENV, FakeResponsesAPI, call, text
from tests.hooks.conftest import CLAUDE_MEMORY

pytestmark = pytest.mark.e2e

CODEX_VERSION = "0.169.0"
CODEX = Path(
    os.environ.get("CLAUDE_MEMORY_TEST_CODEX")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / f"claude-memory-tests/codex-{CODEX_VERSION}/node_modules/.bin/codex"
)
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"

if not CODEX.exists():
    pytest.skip(
        f"the Codex CLI {CODEX_VERSION} is not installed (scripts/test installs it with npm)",
        allow_module_level=True,
    )


@pytest.fixture
def fake_codex_model() -> Iterator[FakeResponsesAPI]:
    fake = FakeResponsesAPI().start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def codex_env(fake_codex_model: FakeResponsesAPI, mem_home: Path, tmp_path: Path) -> dict[str, str]:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(fake_codex_model.codex_config())
    dead = "http://127.0.0.1:9"  # anything not on the loopback fails instead of going out
    return {
        **os.environ,
        "CODEX_HOME": str(codex_home),
        API_KEY_ENV: "dummy",
        "HTTP_PROXY": dead,
        "HTTPS_PROXY": dead,
        "ALL_PROXY": dead,
        "NO_PROXY": "127.0.0.1,localhost",
        "CLAUDE_MEMORY_HOME": str(mem_home),
        "CLAUDE_MEMORY_HOOK_SERVER": "0",
    }


def install_codex(env: dict[str, str]) -> str:
    proc = subprocess.run(
        [str(CLAUDE_MEMORY), "install", "codex"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def run_codex(prompt: str, *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(CODEX), "exec", "--skip-git-repo-check", "-C", str(cwd), prompt],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def seed(home: Path) -> None:
    with MemoryStore.open(MemoryConfig.for_home(home)) as store:
        store.save(
            NoteDraft(
                content="Webhook signatures are checked with HMAC-SHA256 using the "
                "WEBHOOK_SECRET setting.",
                title="webhook signature check",
                type="architecture",
            )
        )


def test_a_codex_session_gets_memory_context_and_its_work_is_recorded(
    fake_codex_model: FakeResponsesAPI,
    codex_env: dict[str, str],
    mem_home: Path,
    make_project: Callable[..., Path],
) -> None:
    seed(mem_home)
    project = make_project("shop/app")
    out = install_codex(codex_env)
    assert "trusted" in out
    fake_codex_model.on(
        "check the webhook",
        call("exec_command", {"cmd": "echo signature-verified"}),
        text("The webhook check passed."),
    )
    run_codex("please check the webhook signatures", cwd=project, env=codex_env)

    (first, *_rest) = fake_codex_model.turn_requests("check the webhook")
    context = "\n".join(first.messages("developer"))
    assert "<memory-context>" in context  # SessionStart / UserPromptSubmit additionalContext
    assert "HMAC-SHA256" in context and "webhook signature check" in context
    assert any(r.continues_turn for r in fake_codex_model.requests)  # the tool did run

    rollouts = list(Path(codex_env["CODEX_HOME"]).glob("sessions/*/*/*/rollout-*.jsonl"))
    assert len(rollouts) == 1
    match = re.search(f"({UUID})$", rollouts[0].stem)
    assert match
    session_id = match.group(1)

    state = StateDB(mem_home / "state.db")
    try:
        episodes = state.read("SELECT id, key, status, source FROM mem_episodes")
        messages = state.read(
            "SELECT role, title, content FROM mem_episode_messages ORDER BY id",
        )
    finally:
        state.close()
    # one session id everywhere: the UUID of the rollout file, never the `rollout-...` name
    assert [(e["key"], e["source"]) for e in episodes] == [(f"codex:{session_id}", "codex")]
    roles = [m["role"] for m in messages]
    assert roles.count("user") == 1 and "please check the webhook" in messages[0]["content"]
    observations = [m for m in messages if m["role"] == "observation"]
    assert len(observations) == 1 and "signature-verified" in observations[0]["content"]
    assert [m["content"] for m in messages if m["role"] == "assistant"] == [
        "The webhook check passed."
    ]
    assert episodes[0]["status"] == "completed"  # SessionEnd ran within Codex's 3 s
    log = (mem_home / "logs" / "hooks.log").read_text()
    assert "failed" not in log and "overran" not in log
    assert fake_codex_model.unknown_paths == []


class AppServer:
    """`codex app-server`: JSON-RPC over stdio, as Codex's own UI talks to it."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [str(CODEX), "app-server"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdout is not None
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if not ready:
                continue
            line = self.proc.stdout.readline()
            assert line, "codex app-server exited"
            message = json.loads(line)
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return dict(message["result"])
        raise AssertionError(f"no answer to {method}")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.terminate()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def test_codex_itself_lists_the_installed_hooks_as_trusted(
    codex_env: dict[str, str], make_project: Callable[..., Path]
) -> None:
    """Our trust hashes are Codex's: its own `hooks/list` says trusted, not modified."""
    install_codex(codex_env)
    server = AppServer(codex_env)
    try:
        server.request(
            "initialize", {"clientInfo": {"name": "claude-memory-tests", "version": "0"}}
        )
        server.send({"method": "initialized"})
        listed = server.request("hooks/list", {"cwds": [str(make_project("app"))]})
    finally:
        server.close()
    hooks = [h for entry in listed["data"] for h in entry["hooks"]]
    ours = {h["eventName"]: h for h in hooks if "claude-memory" in h["command"]}
    assert set(ours) == {
        "sessionStart",
        "userPromptSubmit",
        "postToolUse",
        "stop",
        "sessionEnd",
        "preCompact",
        "postCompact",
    }, hooks
    assert {h["trustStatus"] for h in ours.values()} == {"trusted"}, ours
    assert ours["sessionEnd"]["timeoutSec"] == 3


MEMORY_TOOLS = {"memory_search", "memory_get", "memory_save", "search_observations"}
"""Some of the tools `claude-memory mcp` lists (Codex 0.169 offers them as functions of an
`mcp__claude_memory` namespace)."""


def tool_names(request: Any) -> set[str]:
    """The function names a Responses request offers the model (MCP tools included, under
    whatever prefix or namespace Codex gives them)."""
    names: set[str] = set()
    for tool in request.body.get("tools") or []:
        for key in ("name", "namespace"):
            if isinstance(tool.get(key), str):
                names.add(tool[key])
        for inner in tool.get("tools") or []:  # a namespace of functions
            if isinstance(inner, dict) and isinstance(inner.get("name"), str):
                names.add(inner["name"])
    return names


@pytest.fixture
def cpu_burners() -> Iterator[None]:
    """Two processes that keep two cores busy: the machine a Codex user runs builds on."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()


def test_the_memory_tools_are_in_codex_first_request_on_a_busy_machine(
    fake_codex_model: FakeResponsesAPI,
    codex_env: dict[str, str],
    make_project: Callable[..., Path],
    cpu_burners: None,
) -> None:
    """Issue #32: `codex exec` sent its first model request before `claude-memory mcp` had
    listed its tools in 9 of 15 runs on a busy machine (the server took 0.5-1.8 s to answer
    `initialize`), while the injected text told the model to call them."""
    install_codex(codex_env)
    project = make_project("app")
    runs = 10
    for n in range(runs):
        fake_codex_model.on(f"question {n}", text("ok"))
        run_codex(f"question {n}: what do we know?", cwd=project, env=codex_env)
    missing = []
    for n in range(runs):
        first = fake_codex_model.turn_requests(f"question {n}")[0]
        names = tool_names(first)
        if not names >= MEMORY_TOOLS:
            missing.append((n, sorted(names)))
    assert not missing, missing


def test_three_codex_exec_resume_runs_are_one_episode_with_a_summary(
    fake_codex_model: FakeResponsesAPI,
    codex_env: dict[str, str],
    mem_home: Path,
    make_project: Callable[..., Path],
) -> None:
    """Issue #32: `codex exec resume` split a session into one-prompt episodes, none of them
    worth a summary."""
    install_codex(codex_env)
    project = make_project("app")
    prompts = (
        "plan the gamma migration of the billing tables",
        "now move the invoices table",
        "and then the refunds table",
    )
    for prompt in prompts:
        fake_codex_model.on(prompt, text("Done."))
    run_codex(prompts[0], cwd=project, env=codex_env)
    rollouts = list(Path(codex_env["CODEX_HOME"]).glob("sessions/*/*/*/rollout-*.jsonl"))
    match = re.search(f"({UUID})$", rollouts[0].stem)
    assert match
    session = match.group(1)
    resume = [str(CODEX), "exec", "--skip-git-repo-check", "-C", str(project), "resume", session]
    for prompt in prompts[1:]:
        proc = subprocess.run(
            [*resume, prompt],
            env=codex_env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    state = StateDB(mem_home / "state.db")
    try:
        rows = state.read("SELECT key, status, turns, summary FROM mem_episodes")
    finally:
        state.close()
    assert [(r["key"], r["status"], r["turns"]) for r in rows] == [
        (f"codex:{session}", "completed", 3)
    ]
    assert "gamma migration" in rows[0]["summary"] and "refunds" in rows[0]["summary"]


def test_codex_exec_runs_the_memory_tools_and_gives_the_model_their_text(
    fake_codex_model: FakeResponsesAPI,
    codex_env: dict[str, str],
    mem_home: Path,
    make_project: Callable[..., Path],
) -> None:
    """`codex exec` (approval policy never) refused every call of our tools: 'MCP tool call
    requires approval'. The read tools say they are read-only, and install lets memory_save
    run without asking (issue #32)."""
    seed(mem_home)
    install_codex(codex_env)
    fake_codex_model.on(
        "look it up",
        call("memory_search", {"query": "webhook signature HMAC"}, namespace=NAMESPACE),
        call("memory_save", {"content": "Deploys go out on Fridays."}, namespace=NAMESPACE),
        text("Found it and saved the deploy day."),
    )
    run_codex("look it up in memory please", cwd=make_project("app"), env=codex_env)
    outputs = [
        "".join(part.get("text", "") for part in item["output"])
        if isinstance(item["output"], list)
        else str(item["output"])
        for request in fake_codex_model.requests
        for item in request.input
        if item.get("type") == "function_call_output"
    ]
    searched = next(o for o in outputs if "webhook signature check" in o)
    assert "[mem_" in searched and '{"result"' not in searched
    assert any("Saved as [mem_" in o for o in outputs), outputs
    assert not any("requires approval" in o for o in outputs), outputs
    with MemoryStore.open(MemoryConfig.for_home(mem_home)) as store:
        assert any("Deploys go out on Fridays." in n.body for n in store.iter_notes())


NAMESPACE = "mcp__claude_memory"
"""Codex 0.169 offers an MCP server's tools as the functions of one namespace."""
