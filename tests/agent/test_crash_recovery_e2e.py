"""A crash never hides a turn: the app killed (SIGKILL) in the middle of a turn whose Bash step
had run; after a restart on the same home the conversation shows the user's message, the step
and an "interrupted" state, and the model is told on the next turn."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.fakes.anthropic_api import FakeMessagesAPI, text, tool

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(home: Path, fake_model: FakeMessagesAPI, log: Path) -> Iterator[str]:
    """`claude-memory serve` as a real process in a process group of its own; yields its URL.
    Killed with SIGKILL on exit, as a crash would (the test may have killed it already)."""
    port = free_port()
    env = {
        **os.environ,
        "CLAUDE_MEMORY_HOME": str(home),
        "CLAUDE_MEMORY_PORT": str(port),
        "ANTHROPIC_BASE_URL": fake_model.url,
        "ANTHROPIC_API_KEY": "dummy",
    }
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli", "serve"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 40
        while True:
            try:
                httpx.get(f"{base}/health", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.1)
        yield base
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def _wait_for(what: str, check: object, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.1)


def test_a_turn_killed_after_its_bash_step_shows_as_interrupted_and_the_model_is_told(
    tmp_path: Path, fake_model: FakeMessagesAPI
) -> None:
    home = tmp_path / "home"
    log = tmp_path / "server.log"
    # The Bash step runs, then the model stalls on its answer: the app dies meanwhile.
    fake_model.on(
        "tidy the build folder",
        tool("Bash", {"command": "echo step-that-ran"}),
        text("All tidy: removed the old artifacts.", delay=20),
    )
    with serving(home, fake_model, log) as base:

        def send() -> None:
            with contextlib.suppress(httpx.TransportError):  # the app dies under it
                httpx.post(
                    f"{base}/api/chat", json={"message": "please tidy the build folder"}, timeout=90
                )

        caller = threading.Thread(target=send, daemon=True)
        caller.start()
        _wait_for(
            "the Bash step's result reached the model",
            lambda: any(
                "step-that-ran" in str(r.tool_results) for r in fake_model.message_requests()
            ),
        )
        # While the model still writes, the turn is on record with its step.
        during = httpx.get(f"{base}/api/conversations/main", timeout=5).json()
        (running,) = during["history"]
        assert running["message"] == "please tidy the build folder"
        assert running["status"] == "running"
        assert [s["summary"] for s in running["tools"]] == ["echo step-that-ran"]
    # killed (SIGKILL to the app's process group) on leaving the block

    fake_model.on("what happened", text("Your last request was cut off; I will check."))
    with serving(home, fake_model, log) as base:
        after = httpx.get(f"{base}/api/conversations/main", timeout=5).json()
        (turn,) = after["history"]
        assert turn["message"] == "please tidy the build folder"
        assert turn["status"] == "interrupted"
        assert turn["is_error"] is True
        (step,) = turn["tools"]
        assert step["name"] == "Bash" and step["summary"] == "echo step-that-ran"
        assert step["status"] == "ok" and "step-that-ran" in step["detail"]
        assert "interrupted" in turn["reply"].lower()

        reply = httpx.post(f"{base}/api/chat", json={"message": "what happened?"}, timeout=90)
        assert reply.status_code == 200, reply.text
        assert reply.json()["status"] == "completed"
        (request,) = fake_model.requests_for("what happened")
        told = request.turn_text()
        assert "interrupted" in told.lower(), told
        history = httpx.get(f"{base}/api/conversations/main", timeout=5).json()["history"]
        assert [t["status"] for t in history] == ["interrupted", "completed"]
        assert history[1]["message"] == "what happened?"  # the note is not the user's words
