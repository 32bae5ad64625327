"""Fixtures for the Claude Code / Codex integration: a memory home, project folders, and ways
to run a hook in-process (fast) or as the real `claude-memory` process (the CLI's view)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memory.clients.hook_process import HookSettings, hook_direct
from memory.config import MemoryConfig
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore
from tests.fakes.anthropic_api import FakeMessagesAPI

CLAUDE_MEMORY = Path(sys.executable).parent / "claude-memory"

MCP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
"""The first request an MCP client sends, for tests that speak the protocol on raw stdio."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def mem_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The memory home of the test; hooks never look for a server unless a test asks."""
    home = tmp_path / "cm-home"
    monkeypatch.setenv("CLAUDE_MEMORY_HOME", str(home))
    monkeypatch.setenv("CLAUDE_MEMORY_HOOK_SERVER", "0")
    monkeypatch.setenv("CLAUDE_MEMORY_PORT", str(free_port()))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return home


@pytest.fixture
def claude_code(fake_model: FakeMessagesAPI, mem_home: Path) -> Callable[..., dict[str, str]]:
    """`claude_code(without=(...), **env)`: the shared prelude of the Claude Code end-to-end
    files (tests/hooks/claude_code.py): the environment of a Claude Code run against the fake
    model with this test's memory home (`env` added to it, the variables named in `without`
    left out), after `claude-memory install claude-code` ran in it."""
    from tests.hooks.claude_code import claude_env, install_claude_code

    def prepare(*, without: tuple[str, ...] = (), **extra: str) -> dict[str, str]:
        env = claude_env(fake_model, mem_home, **extra)
        for name in without:
            env.pop(name, None)
        install_claude_code(env)
        return env

    return prepare


@pytest.fixture
def store(mem_home: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(MemoryConfig.for_home(mem_home)) as opened:
        yield opened


@pytest.fixture
def state(mem_home: Path) -> Iterator[StateDB]:
    db = StateDB(mem_home / "state.db")
    try:
        yield db
    finally:
        db.close()


@pytest.fixture
def make_project(tmp_path: Path) -> Callable[..., Path]:
    """A project folder; with `remote`, a git checkout whose origin is that URL."""

    def make(relpath: str, remote: str | None = None) -> Path:
        folder = tmp_path / "work" / relpath
        folder.mkdir(parents=True, exist_ok=True)
        if remote is not None:
            (folder / ".git").mkdir(exist_ok=True)
            (folder / ".git" / "config").write_text(
                '[core]\n\tbare = false\n[remote "origin"]\n'
                f"\turl = {remote}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
                encoding="utf-8",
            )
        return folder

    return make


Hook = Callable[..., dict[str, Any] | None]


def parse_stdout(out: str) -> dict[str, Any] | None:
    """Empty, or exactly one JSON object and nothing else (the hook contract)."""
    if out == "":
        return None
    value, end = json.JSONDecoder().raw_decode(out)
    assert out[end:].strip() == "", f"more than one JSON value on stdout: {out!r}"
    assert isinstance(value, dict)
    return value


def context_of(output: dict[str, Any] | None) -> str:
    if output is None:
        return ""
    return str(output["hookSpecificOutput"].get("additionalContext", ""))


@pytest.fixture
def hook(mem_home: Path) -> Hook:
    """Run a hook in this process (the same code path as the command, without the budget
    thread); returns the parsed stdout object or None."""

    def call(event: str, /, *, cwd: Path, session_id: str | None = "sess-1", **fields: Any):
        payload: dict[str, Any] = {
            "hook_event_name": event,
            "cwd": str(cwd),
            "transcript_path": "",
            **fields,
        }
        if session_id is not None:
            payload["session_id"] = session_id
        environ = dict(os.environ)
        settings = HookSettings.from_env(event, environ)
        return parse_stdout(hook_direct(event, json.dumps(payload).encode(), settings, environ))

    return call


@dataclass
class HookRun:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> dict[str, Any] | None:
        return parse_stdout(self.stdout)


def run_hook_process(
    event: str,
    stdin: str | bytes,
    *,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
    timeout: float = 30,
) -> HookRun:
    """`claude-memory hook <event>` as the CLI runs it."""
    started = time.monotonic()
    proc = subprocess.run(
        [str(CLAUDE_MEMORY), *args, "hook", event],
        input=stdin.encode("utf-8") if isinstance(stdin, str) else stdin,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        check=False,
    )
    return HookRun(
        proc.returncode,
        proc.stdout.decode("utf-8"),
        proc.stderr.decode("utf-8", "replace"),
        time.monotonic() - started,
    )


def after_answer_done(home: Path, times: int = 1, timeout: float = 15) -> None:
    """Wait until the hook processes working directly have done `times` prompts' work after
    their answer (a forked child does it once Claude Code has the answer: the prompt's record,
    capture, use counts)."""
    log = home / "logs" / "hooks.log"
    deadline = time.monotonic() + timeout
    while not (
        log.exists()
        and log.read_text(encoding="utf-8").count("work after the answer done") >= times
    ):
        assert time.monotonic() < deadline, "the work after the answer never finished"
        time.sleep(0.05)


def hooks_gone(home: Path, timeout: float = 15) -> None:
    """Wait until no hook process of `home` runs any more (a forked child doing a prompt's work
    after its answer included): for when its log line cannot be written (a full disk)."""
    deadline = time.monotonic() + timeout
    mine = f"CLAUDE_MEMORY_HOME={home}".encode()
    while True:
        running = []
        for proc in Path("/proc").iterdir():
            try:
                if b"hook" in (proc / "cmdline").read_bytes() and mine in (
                    proc / "environ"
                ).read_bytes().split(b"\0"):
                    running.append(proc.name)
            except OSError:  # not a process, or gone meanwhile
                continue
        if not running:
            return
        assert time.monotonic() < deadline, f"hook processes still running: {running}"
        time.sleep(0.05)
