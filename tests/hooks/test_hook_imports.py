"""What a prompt hook loads when no app runs (issue #20).

Without the app, every prompt starts `claude-memory hook user-prompt-submit`, and most of its
time is imports (docs/claude-code.md, "Latency"). This states that without a clock: the
installed entry runs with `-X importtime` (`PYTHONPROFILEIMPORTTIME`, the hook's command line
unchanged) and the modules it loaded are checked against what the direct path must not load.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from memory.config import MemoryConfig
from memory.model import NoteDraft
from memory.sqlite.store import MemoryStore
from tests.hooks.conftest import CLAUDE_MEMORY, after_answer_done

NOT_ON_THE_DIRECT_PROMPT_PATH = (
    # the app, its frameworks and the layers above memory: nothing is served here
    "fastapi",
    "starlette",
    "pydantic",
    "pydantic_settings",
    "anyio",
    "httpx",
    "uvicorn",
    "mcp",
    "claude_agent_sdk",
    "lark_oapi",
    "settings",
    "app",
    "agent",
    "bridge",
    "web",
    # what other events and paths need: note files in YAML, the dictionary segmenter, vectors
    # and encoders, supersessions, tool observations, the installer and the MCP server
    "yaml",
    "rjieba",
    "numpy",
    "memory.encoders.models",
    "memory.history.conflicts",
    "memory.clients.observations",
    "memory.clients.installer",
    "memory.clients.mcp_server",
    # the standard library's costly corners: OpenSSL (`hashlib`), `secrets` (`random`, `hmac`),
    # `difflib`, and what a hook process never needs
    "_hashlib",
    "hashlib",
    "secrets",
    "random",
    "hmac",
    "difflib",
    "importlib.util",
    "argparse",
    "tempfile",
    "logging.handlers",
    "socket",
    "http.client",
    "urllib.request",
    "email",
)


def imported_modules(stderr: str) -> set[str]:
    """The module names of `-X importtime`'s report."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


@pytest.fixture
def recalled(mem_home: Path) -> Path:
    with MemoryStore.open(MemoryConfig.for_home(mem_home)) as store:
        store.save(
            NoteDraft(
                content="The login rate limit is 5 attempts per minute per IP, set in "
                "gateway.yaml.",
                title="login rate limit",
                type="architecture",
                scope="user",
            )
        )
    return mem_home


def prompt_reporting_imports(
    project: Path, prompt: str, **env: str
) -> subprocess.CompletedProcess[bytes]:
    """`claude-memory hook user-prompt-submit` as Claude Code runs it, with Python's report of
    every module it imports on stderr (`PYTHONPROFILEIMPORTTIME`)."""
    payload = {
        "session_id": "s",
        "cwd": str(project),
        "hook_event_name": "UserPromptSubmit",
        "prompt": prompt,
    }
    full = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1", **env}
    full.pop("PYTHONDONTWRITEBYTECODE", None)
    return subprocess.run(
        [str(CLAUDE_MEMORY), "hook", "user-prompt-submit"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=full,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "prompt",
    [
        "how is our login rate limit configured, as we noted?",
        "我们的 login rate limit 是怎么配置的？",
    ],
)
def test_a_direct_prompt_hook_loads_nothing_it_does_not_use(
    recalled: Path, make_project: Callable[..., Path], prompt: str
) -> None:
    proc = prompt_reporting_imports(make_project("app"), prompt)

    # the whole direct path ran: no app, the index searched, the note injected
    assert proc.returncode == 0
    assert "hook_process" in (recalled / "logs" / "hooks.log").read_text(encoding="utf-8")
    context = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "login rate limit" in context
    loaded = imported_modules(proc.stderr.decode())
    assert "memory.sqlite.store" in loaded  # the report is read right
    assert sorted(loaded & set(NOT_ON_THE_DIRECT_PROMPT_PATH)) == []


def test_prompt_hooks_that_end_without_closing_sqlite_lose_nothing(
    recalled: Path, make_project: Callable[..., Path]
) -> None:
    """The installed hook ends without closing its SQLite handles (closing the last connection
    is a checkpoint: milliseconds a prompt). What each prompt wrote is there for the next."""
    project = make_project("app")
    for n in range(3):
        payload = {
            "session_id": f"s{n}",  # a session injects a note once
            "cwd": str(project),
            "hook_event_name": "UserPromptSubmit",
            "prompt": f"prompt {n}: how is our login rate limit configured, as we noted?",
        }
        proc = subprocess.run(
            [str(CLAUDE_MEMORY), "hook", "user-prompt-submit"],
            input=json.dumps(payload).encode(),
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0
        assert (
            "login rate limit" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
        )
    # each prompt's record and use count are written after its answer, by a child process
    after_answer_done(recalled, times=3)
    # no checkpoint at exit: the index's last writes are still in its WAL
    assert (recalled / "index.db-wal").stat().st_size > 0

    with sqlite3.connect(recalled / "state.db") as state:
        said = [r[0] for r in state.execute("SELECT content FROM mem_episode_messages ORDER BY id")]
    assert [s.split(":")[0] for s in said] == ["prompt 0", "prompt 1", "prompt 2"]
    with sqlite3.connect(recalled / "index.db") as index:
        (pending,) = index.execute("SELECT sum(access_pending) FROM notes").fetchone()
    assert pending == 3  # the injected note counted once per prompt, none lost


COMPILED_ON_A_PROMPT = """
import json, re, sys
from memory.clients.hook_process import main
main(["user-prompt-submit"], leave_open=True)
from memory import _text
cjk = sorted(
    value.pattern
    for name, module in list(sys.modules.items())
    if name.startswith("memory")
    for value in list(vars(module).values())
    if isinstance(value, re.Pattern) and _text.CJK_CHAR in value.pattern
)
print(json.dumps(cjk), file=sys.stderr)
"""


def test_a_direct_prompt_compiles_the_cjk_character_class_once(
    recalled: Path, make_project: Callable[..., Path]
) -> None:
    """`re` walks each of the class's ~28,000 characters to compile a pattern holding it
    (1.2-2 ms each): one pattern serves the prompt's splitting, spacing and counting."""
    payload = {
        "session_id": "s",
        "cwd": str(make_project("app")),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "我们的 login rate limit 是怎么配置的？",
    }
    proc = subprocess.run(
        [sys.executable, "-c", COMPILED_ON_A_PROMPT],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert "login rate limit" in proc.stdout.decode()
    compiled = json.loads(proc.stderr.decode().strip().splitlines()[-1])
    assert len(compiled) == 1


ON_THE_SERVED_PATH = frozenset(
    # what `python -c pass` loads, then the hook's own modules and the four it needs
    {"__future__", "cli", "gc", "memory", "memory.clients", "memory.settings_fields"}
    | {"memory.clients.hook_process", "_thread", "_socket", "_sha256", "_sha2", "_operator"}
)


def test_a_served_prompt_hook_loads_only_the_lightest_modules(
    mem_home: Path, tmp_path: Path, make_project: Callable[..., Path]
) -> None:
    """The served path's own work is ~10 ms a prompt (docs/claude-code.md, "Where a served
    hook's time goes"): `threading` alone (functools, collections, ...) was 2-4 ms of it."""
    from tests.hooks.test_server_mode import seed, start_app

    seed(mem_home)
    baseline = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, check=True
    )
    app = start_app(mem_home, tmp_path / "server.log")
    try:
        proc = prompt_reporting_imports(
            make_project("app"),
            "what is our canary policy for releases?",
            CLAUDE_MEMORY_HOOK_SERVER="1",
        )
    finally:
        app.stop()
    assert proc.returncode == 0
    assert "user-prompt-submit handled by the app" in (mem_home / "logs" / "hooks.log").read_text()
    assert "canary policy" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    extra = imported_modules(proc.stderr.decode()) - imported_modules(baseline.stderr.decode())
    assert sorted(extra - ON_THE_SERVED_PATH) == [], sorted(extra - ON_THE_SERVED_PATH)
