"""`claude-memory hook <event>` as a process: one JSON object or nothing, always exit 0."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memory.clients.conventions import EVENTS
from memory.config import MemoryConfig
from memory.model import NoteDraft
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore
from tests.hooks.conftest import CLAUDE_MEMORY, after_answer_done, run_hook_process


def real_payloads(cwd: Path, transcript: Path) -> dict[str, dict[str, Any]]:
    """Payloads shaped like Claude Code 2.x sends them."""
    base = {
        "session_id": "9f1c2d3e-0000-4000-8000-00000000abcd",
        "transcript_path": str(transcript),
        "cwd": str(cwd),
    }
    return {
        "session-start": {
            **base,
            "hook_event_name": "SessionStart",
            "source": "startup",
            "model": "claude-sonnet-4-5",
        },
        "user-prompt-submit": {
            **base,
            "hook_event_name": "UserPromptSubmit",
            "permission_mode": "default",
            "prompt": "how is our login rate limit configured, as we noted?",
        },
        "post-tool-use": {
            **base,
            "hook_event_name": "PostToolUse",
            "permission_mode": "default",
            "tool_name": "Bash",
            "tool_use_id": "toolu_01ABC",
            "tool_input": {"command": "pytest -q", "description": "Run tests"},
            "tool_response": {
                "stdout": "3 passed",
                "stderr": "",
                "interrupted": False,
                "isImage": False,
            },
        },
        "stop": {
            **base,
            "hook_event_name": "Stop",
            "permission_mode": "default",
            "stop_hook_active": False,
        },
        "session-end": {**base, "hook_event_name": "SessionEnd", "reason": "prompt_input_exit"},
        "pre-compact": {
            **base,
            "hook_event_name": "PreCompact",
            "trigger": "manual",
            "custom_instructions": "",
        },
        # Claude Code 2.1.327's PostCompact and FileChanged inputs
        "post-compact": {
            **base,
            "hook_event_name": "PostCompact",
            "trigger": "manual",
            "compact_summary": "The user asked about the login rate limit (gateway.yaml).",
        },
        "file-changed": {
            **base,
            "hook_event_name": "FileChanged",
            "file_path": str(cwd / "README.md"),
            "event": "change",
        },
    }


@pytest.fixture
def seeded(mem_home: Path) -> Path:
    with MemoryStore.open(MemoryConfig.for_home(mem_home)) as s:
        s.save(
            NoteDraft(
                content="Always answer in English with short sentences.",
                title="answer style",
                type="preference",
                tags=["pinned"],  # in every brief (learned preferences come when relevant)
            )
        )
        s.save(
            NoteDraft(
                content="The login rate limit is 5 attempts per minute per IP, set in "
                "gateway.yaml.",
                title="login rate limit",
                type="architecture",
            )
        )
    return mem_home


def test_every_event_prints_one_json_object_or_nothing(
    seeded: Path, make_project: Callable[..., Path], tmp_path: Path
) -> None:
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text(
        json.dumps(
            {
                "type": "assistant",
                "message": {
                    "id": "m1",
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Done."}],
                },
            }
        )
        + "\n"
    )
    payloads = real_payloads(make_project("app"), transcript)
    outputs = {}
    for event in EVENTS:
        run = run_hook_process(event, json.dumps(payloads[event]))
        assert run.returncode == 0, run.stderr
        assert run.stderr == ""
        outputs[event] = run.output  # parses as exactly one object, or is empty
    start = outputs["session-start"]
    assert start is not None
    assert start["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "Always answer in English" in start["hookSpecificOutput"]["additionalContext"]
    # Claude Code reports hand edits of the notes to the file-changed hook; the session
    # summaries, which the hooks themselves rewrite, are not watched
    notes = Path(os.path.realpath(seeded / "memory"))
    assert start["hookSpecificOutput"]["watchPaths"] == sorted(
        str(folder) for folder in notes.iterdir() if folder.is_dir() and folder.name != "sessions"
    )
    assert str(notes / "user") in start["hookSpecificOutput"]["watchPaths"]
    prompt = outputs["user-prompt-submit"]
    assert prompt is not None
    assert prompt["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert "login rate limit" in prompt["hookSpecificOutput"]["additionalContext"]
    for event in ("post-tool-use", "stop", "session-end", "pre-compact", "post-compact"):
        assert outputs[event] is None
    assert outputs["file-changed"] is None
    log = (seeded / "logs" / "hooks.log").read_text()
    assert "hook user-prompt-submit done" in log


@pytest.mark.parametrize(
    "stdin",
    [b"", b"{not json", b"[1, 2, 3]", b'"text"', b"\xff\xfe\x00garbage", b'{"cwd": 5}' * 3],
    ids=["empty", "broken", "array", "string", "binary", "concatenated"],
)
@pytest.mark.parametrize("event", ["session-start", "user-prompt-submit", "post-tool-use"])
def test_malformed_input_exits_zero_with_no_output(
    mem_home: Path, stdin: bytes, event: str
) -> None:
    run = run_hook_process(event, stdin)
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")


def test_unknown_event_and_missing_event_exit_zero_silently(mem_home: Path) -> None:
    for args in (["hook", "not-an-event"], ["hook"], ["hook", "--client", "nope", "stop"]):
        proc = subprocess.run(
            [str(CLAUDE_MEMORY), *args], input=b"{}", capture_output=True, timeout=30, check=False
        )
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


def test_a_missing_home_is_created_and_nothing_is_printed(
    tmp_path: Path, make_project: Callable[..., Path]
) -> None:
    home = tmp_path / "does" / "not" / "exist"
    payload = {"session_id": "s", "cwd": str(make_project("app")), "prompt": "what changed?"}
    run = run_hook_process(
        "user-prompt-submit", json.dumps(payload), env={"CLAUDE_MEMORY_HOME": str(home)}
    )
    assert (run.returncode, run.stdout) == (0, "")


def test_an_unusable_home_fails_open(tmp_path: Path, make_project: Callable[..., Path]) -> None:
    blocker = tmp_path / "home-is-a-file"
    blocker.write_text("not a folder")
    payload = {"session_id": "s", "cwd": str(make_project("app")), "source": "startup"}
    env = {"CLAUDE_MEMORY_HOME": str(blocker), "TMPDIR": str(tmp_path)}
    for event in ("session-start", "user-prompt-submit", "post-tool-use", "session-end"):
        run = run_hook_process(event, json.dumps(payload), env=env)
        if event == "session-start":  # said once, where the person sees it (test_degraded.py)
            output = run.output
            assert output is not None and "memory could not answer" in output["systemMessage"]
            assert "additionalContext" not in output["hookSpecificOutput"]
            continue
        assert (run.returncode, run.stdout, run.stderr) == (0, "", "")


def test_a_locked_index_overruns_the_budget_and_exits_zero_with_no_output(
    seeded: Path, make_project: Callable[..., Path]
) -> None:
    payload = {
        "session_id": "s",
        "cwd": str(make_project("app")),
        "prompt": "how is our login rate limit configured, as we noted?",
    }
    locks = []
    for name in ("index.db", "state.db"):
        conn = sqlite3.connect(seeded / name, isolation_level=None, timeout=1)
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        conn.execute("BEGIN EXCLUSIVE")
        locks.append(conn)
    try:
        run = run_hook_process(
            "user-prompt-submit", json.dumps(payload), env={"CLAUDE_MEMORY_HOOK_BUDGET": "1.5"}
        )
    finally:
        for conn in locks:
            conn.execute("ROLLBACK")
            conn.close()
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")
    assert run.seconds < 5
    assert "overran its 1.5 s budget" in (seeded / "logs" / "hooks.log").read_text()


def test_library_prints_never_reach_stdout(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    """Only the final JSON object may reach fd 1, even if something prints while we work."""
    code = (
        "import builtins, sys, memory.clients.hook_process as h\n"
        "orig = h.run_direct\n"
        "def noisy(*a, **k):\n"
        "    print('stray print'); sys.stdout.flush()\n"
        "    import os; os.write(1, b'stray fd write')\n"
        "    return orig(*a, **k)\n"
        "h.run_direct = noisy\n"
        "sys.exit(h.main(['hook', 'post-tool-use']))\n"
    )
    payload = {
        "session_id": "s",
        "cwd": str(make_project("app")),
        "tool_name": "Bash",
        "tool_input": {"command": "make"},
        "tool_response": {"stdout": "ok"},
    }
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (0, b"")


HEAVY = (
    "fastapi",
    "claude_agent_sdk",
    "lark_oapi",
    "pydantic_settings",
    "uvicorn",
    "httpx",
    "mcp",
    "starlette",
    "settings",
    "agent",
    "bridge",
    "web",
)


@pytest.mark.parametrize("event", ["post-tool-use", "user-prompt-submit", "session-start"])
def test_the_hook_path_imports_nothing_heavy(
    seeded: Path, make_project: Callable[..., Path], event: str
) -> None:
    code = (
        "import sys, cli\n"
        "code = cli.main(['hook', sys.argv[1]])\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[2:]))\n"
        "sys.stderr.write(','.join(heavy))\n"
        "sys.exit(code)\n"
    )
    payload = {
        "session_id": "s",
        "cwd": str(make_project("app")),
        "prompt": "rate limit?",
        "source": "startup",
        "tool_name": "Bash",
        "tool_input": {"command": "make"},
    }
    proc = subprocess.run(
        [sys.executable, "-c", code, event, *HEAVY],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stderr.decode() == ""


def test_light_events_do_not_even_load_the_store(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    code = (
        "import sys, cli\n"
        "cli.main(['hook', 'post-tool-use'])\n"
        "loaded = [m for m in ('memory.sqlite.store', 'yaml', 'rjieba') if m in sys.modules]\n"
        "sys.stderr.write(','.join(loaded))\n"
    )
    payload = {
        "session_id": "s",
        "cwd": str(make_project("app")),
        "tool_name": "Bash",
        "tool_input": {"command": "make"},
        "tool_response": {"stdout": "ok"},
    }
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert proc.stderr.decode() == ""


@pytest.mark.parametrize(
    ("run", "words"),
    [
        ("连接池泄漏", ["连接", "接池", "池泄", "泄漏"]),
        ("缓存和重试的问题", ["缓存", "重试", "问题"]),
        ("数据库", ["数据", "据库"]),
        ("猫", ["猫"]),
        ("的", []),
        ("我的猫", ["猫"]),
        ("猫和狗的问题", ["猫", "狗", "问题"]),
    ],
)
def test_a_hook_cuts_chinese_without_the_dictionary(run: str, words: list[str]) -> None:
    from memory.search.keyword import segment_cheaply

    assert segment_cheaply(run) == words


def test_a_chinese_prompt_recalls_a_chinese_note_without_loading_the_dictionary(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    """rjieba's start alone (0.1-0.2 s) is more than a direct hook's budget."""
    with MemoryStore.open(MemoryConfig.for_home(mem_home)) as s:
        s.save(
            NoteDraft(
                content="连接池泄漏的排查：先看 pool_size，再查未关闭的会话。",
                title="连接池泄漏排查",
                type="project",
            )
        )
    code = (
        "import sys, cli\n"
        "cli.main(['hook', 'user-prompt-submit'])\n"
        "sys.stderr.write(str('rjieba' in sys.modules))\n"
    )
    payload = {
        "session_id": "s",
        "cwd": str(make_project("app")),
        "prompt": "我们的连接池泄漏之前怎么排查的？",
    }
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert proc.stderr.decode() == "False"
    assert "连接池泄漏排查" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def test_the_served_paths_log_line_carries_its_milliseconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its lines said ",000" and sorted before the logging package's lines they followed.
    from memory.clients import hook_process

    (tmp_path / "logs").mkdir()
    monkeypatch.setattr("memory.clients.hook_process.time.time", lambda: 1_764_000_000.4567)
    hook_process.append_log(str(tmp_path), "INFO", "hook user-prompt-submit done")
    line = (tmp_path / "logs" / "hooks.log").read_text(encoding="utf-8")
    stamp = line.split(f" {os.getpid()} ")[0]
    assert stamp.endswith(",456"), line


def test_a_prompt_with_half_a_utf16_pair_is_recorded_and_answered(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    # issue #32: `\ud800` (valid JSON, no text) in a prompt failed the hook: no recall, no record
    project = make_project("app")
    raw = (
        '{"session_id": "s-sur", "cwd": ' + json.dumps(str(project)) + ", "
        '"prompt": "deploy the api \\ud800 today"}'
    )
    run = run_hook_process("user-prompt-submit", raw)
    assert run.returncode == 0 and run.stderr == ""
    assert run.output is None or "systemMessage" not in run.output, run.output
    after_answer_done(mem_home)
    state = StateDB(mem_home / "state.db")
    try:
        rows = state.read("SELECT content FROM mem_episode_messages WHERE role = 'user'")
    finally:
        state.close()
    assert [r["content"] for r in rows] == ["deploy the api \ufffd today"]
    assert "Traceback" not in (mem_home / "logs" / "hooks.log").read_text(encoding="utf-8")
