"""With `claude-memory serve` running, hooks ask it over loopback (and fall back when they
must): the same results, a shorter path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from memory.config import MemoryConfig
from memory.loop.episodes import EpisodeStore
from memory.model import NoteDraft
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore
from tests.hooks.conftest import free_port, run_hook_process

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Server:
    port: int
    home: Path
    token: str


@pytest.fixture
def server(mem_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    port = free_port()
    token = "hook-test-token"
    with MemoryStore.open(MemoryConfig.for_home(mem_home)) as store:
        store.save(
            NoteDraft(
                content="Canary releases get 5% of traffic for an hour.",
                title="canary policy",
                type="decision",
            )
        )
    env = {
        **os.environ,
        "CLAUDE_MEMORY_PORT": str(port),
        "CLAUDE_MEMORY_API_TOKEN": token,
        "ANTHROPIC_API_KEY": "dummy",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
    }
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "serve"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 40
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError((tmp_path / "server.log").read_text()[-3000:]) from None
                time.sleep(0.1)
        monkeypatch.setenv("CLAUDE_MEMORY_HOOK_SERVER", "1")
        monkeypatch.setenv("CLAUDE_MEMORY_PORT", str(port))
        yield Server(port, mem_home, token)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _payload(cwd: Path, **fields: object) -> str:
    return json.dumps({"session_id": "srv-1", "cwd": str(cwd), **fields})


def test_hooks_are_served_by_the_running_server(
    server: Server, make_project: Callable[..., Path]
) -> None:
    project = make_project("app")
    env = {"CLAUDE_MEMORY_API_TOKEN": server.token}
    start = run_hook_process("session-start", _payload(project, source="startup"), env=env)
    assert (start.returncode, start.stderr) == (0, "")
    prompt = run_hook_process(
        "user-prompt-submit", _payload(project, prompt="how do canary releases work?"), env=env
    )
    assert prompt.output is not None
    context = prompt.output["hookSpecificOutput"]["additionalContext"]
    assert "canary policy" in context
    tool = run_hook_process(
        "post-tool-use",
        _payload(
            project,
            tool_name="Bash",
            tool_input={"command": "make deploy"},
            tool_response={"stdout": "ok"},
        ),
        env=env,
    )
    assert (tool.returncode, tool.stdout) == (0, "")
    log = (server.home / "logs" / "hooks.log").read_text()
    assert log.count("handled by the server") == 3
    state = StateDB(server.home / "state.db")
    try:
        with MemoryStore.open(MemoryConfig.for_home(server.home)) as store:
            (episode,) = EpisodeStore(state, store).list()
            titles = [m.title for m in EpisodeStore(state, store).messages(episode.id)]
    finally:
        state.close()
    assert "执行: make deploy" in titles


def test_a_hook_without_the_token_works_directly(
    server: Server, make_project: Callable[..., Path]
) -> None:
    run = run_hook_process(
        "user-prompt-submit",
        _payload(make_project("app"), prompt="how do canary releases work?"),
        env={"CLAUDE_MEMORY_API_TOKEN": ""},
    )
    assert run.output is not None and "canary policy" in run.stdout
    log = (server.home / "logs" / "hooks.log").read_text()
    assert "handled by the server" not in log


def test_a_hook_for_another_home_never_writes_into_the_servers_home(
    server: Server, make_project: Callable[..., Path], tmp_path: Path
) -> None:
    other = tmp_path / "other-home"
    run = run_hook_process(
        "session-start",
        _payload(make_project("app"), source="startup"),
        env={"CLAUDE_MEMORY_HOME": str(other), "CLAUDE_MEMORY_API_TOKEN": server.token},
    )
    assert (run.returncode, run.stdout) == (0, "")
    assert (other / "state.db").exists()  # done directly, in its own home
    state = StateDB(server.home / "state.db")
    try:
        assert state.read("SELECT count(*) AS n FROM mem_episodes")[0]["n"] == 0
    finally:
        state.close()


def test_the_route_rejects_bad_requests(server: Server) -> None:
    url = f"http://127.0.0.1:{server.port}/api/hooks"
    auth = {"Authorization": f"Bearer {server.token}"}
    assert httpx.post(f"{url}/stop", json={}).status_code == 401
    assert httpx.post(f"{url}/nope", json={}, headers=auth).status_code == 404
    assert httpx.post(f"{url}/stop", json={"home": "/elsewhere"}, headers=auth).status_code == 409
    bad = httpx.post(f"{url}/stop", json={"home": str(server.home), "request": {}}, headers=auth)
    assert bad.status_code == 422
