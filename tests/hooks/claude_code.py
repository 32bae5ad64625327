"""The prelude the Claude Code end-to-end files share: the real Claude Code CLI (bundled with
claude-agent-sdk) pointed at the fake Messages API with this test's memory home, our hooks
installed by `claude-memory install claude-code`, a seeded memory; and `claude -p` runs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import claude_agent_sdk

from memory.config import MemoryConfig
from memory.model import NoteDraft
from memory.sqlite.store import MemoryStore
from tests.fakes.anthropic_api import FakeMessagesAPI, RecordedRequest
from tests.hooks.conftest import CLAUDE_MEMORY

CLAUDE = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
PLUGIN = Path(__file__).resolve().parents[2] / "plugin"


def claude_env(fake: FakeMessagesAPI, home: Path, **extra: str) -> dict[str, str]:
    """The environment of a Claude Code run whose model is `fake` and memory home `home`."""
    return {
        **os.environ,
        "ANTHROPIC_BASE_URL": fake.url,
        "ANTHROPIC_API_KEY": "dummy",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "CLAUDE_MEMORY_HOME": str(home),
        "CLAUDE_MEMORY_HOOK_SERVER": "0",
        **extra,
    }


def install_claude_code(env: dict[str, str]) -> None:
    """`claude-memory install claude-code` as a user runs it: our hooks and MCP server go into
    the CLAUDE_CONFIG_DIR of `env` (the test's own, tests/conftest.py `isolated_env`)."""
    done = subprocess.run(
        [str(CLAUDE_MEMORY), "install", "claude-code"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    settings = json.loads((Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json").read_text())
    assert "PostToolUse" in settings["hooks"]


def run_claude(
    prompt: str, *, cwd: Path, env: dict[str, str], args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(CLAUDE), "-p", prompt, "--allowedTools", "Bash", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def first_request(fake: FakeMessagesAPI, trigger: str) -> RecordedRequest:
    requests = fake.requests_for(trigger)
    assert requests, [r.prompt for r in fake.message_requests()]
    return requests[0]


def seed(home: Path) -> None:
    """A profile note (in every brief) and a learned note the webhook prompts recall."""
    with MemoryStore.open(MemoryConfig.for_home(home)) as store:
        store.save(
            NoteDraft(
                content="The user's name is Lin; answer in Chinese, briefly.",
                title="about Lin",
                type="identity",
                path="user/about-lin.md",  # the profile: in every brief (learned notes are not)
            )
        )
        store.save(
            NoteDraft(
                content="Webhook signatures are checked with HMAC-SHA256 using the "
                "WEBHOOK_SECRET setting.",
                title="webhook signature check",
                type="architecture",
            )
        )
