"""Claude Code itself (the bundled CLI, fake model) with the app up, then down with another
program on its port: the installed command hooks inject the memory both ways, served by the
app while it runs and directly once it is gone; the other program's answer never reaches the
model."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memory.clients.hook_process import read_run_file
from tests.fakes.anthropic_api import FakeMessagesAPI, text
from tests.hooks.claude_code import claude_env, first_request, run_claude, seed
from tests.hooks.conftest import free_port
from tests.hooks.test_server_mode import IMPOSTOR_JSON, IMPOSTOR_TEXT, Impostor, _http, start_app

pytestmark = pytest.mark.e2e


def test_context_is_injected_with_the_app_up_and_with_it_down(
    fake_model: FakeMessagesAPI,
    mem_home: Path,
    tmp_path: Path,
    make_project: Callable[..., Path],
    claude_code: Callable[..., dict[str, str]],
) -> None:
    seed(mem_home)
    project = make_project("shop/app")
    # nothing depends on a port: the run file says it
    env = claude_code(without=("CLAUDE_MEMORY_PORT",), CLAUDE_MEMORY_HOOK_SERVER="1")
    log = mem_home / "logs" / "hooks.log"
    app = start_app(mem_home, tmp_path / "server.log")
    try:
        fake_model.on("up: the webhook", text("Checked while the app runs."))
        run_claude("up: the webhook signatures?", cwd=project, env=env)
        served = log.read_text()
    finally:
        app.stop(signal.SIGKILL)  # a crash: the run file stays behind
    seen = first_request(fake_model, "up: the webhook").all_text()
    assert "about Lin" in seen  # SessionStart, served
    assert "webhook signature check" in seen and "HMAC-SHA256" in seen  # UserPromptSubmit
    assert "session-start handled by the app" in served
    assert "user-prompt-submit handled by the app" in served
    assert "working directly" not in served

    address = read_run_file(mem_home)
    assert address is not None
    impostor = Impostor(_http("200 OK", IMPOSTOR_JSON), port=address.port)
    try:
        fake_model.on("down: the webhook", text("Checked without the app."))
        run_claude("down: the webhook signatures?", cwd=project, env=env)
    finally:
        impostor.close()
    seen = first_request(fake_model, "down: the webhook").all_text()
    assert "about Lin" in seen
    assert "webhook signature check" in seen and "HMAC-SHA256" in seen
    assert IMPOSTOR_TEXT not in seen
    assert impostor.received == []  # a dead app's run file is not even tried
    direct = log.read_text()[len(served) :]
    assert "user-prompt-submit: working directly, search: keywords only (stale run file" in direct
    assert "handled by the app" not in direct


def test_an_http_hook_to_a_closed_port_leaves_the_prompt_without_context(
    fake_model: FakeMessagesAPI, mem_home: Path, make_project: Callable[..., Path]
) -> None:
    """Why UserPromptSubmit stays a command hook (docs/claude-code.md, "Why command hooks"):
    with an `http` hook and the app down, Claude Code goes on (a non-blocking error) and the
    prompt reaches the model with no memory at all; the command hook works directly instead."""
    seed(mem_home)
    project = make_project("shop/app")
    env = claude_env(fake_model, mem_home)
    config = Path(env["CLAUDE_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    hook = {
        "type": "http",
        "url": f"http://127.0.0.1:{free_port()}/api/hooks/user-prompt-submit",
        "timeout": 5,
    }
    settings = {"hooks": {"UserPromptSubmit": [{"hooks": [hook]}]}}
    (config / "settings.json").write_text(json.dumps(settings))
    fake_model.on("refused: the webhook", text("Answered without memory."))
    started = time.monotonic()
    run_claude("refused: the webhook signatures?", cwd=project, env=env)
    elapsed = time.monotonic() - started
    seen = first_request(fake_model, "refused: the webhook").all_text()
    assert "HMAC-SHA256" not in seen and "<memory-context>" not in seen
    assert elapsed < 60  # refused at once, not after the hook's timeout per retry
