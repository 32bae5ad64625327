"""The run_agent pipeline end to end: HTTP -> session actor -> real SDK + CLI -> fake model."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from settings import Settings
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI, Reply, error, text, tool
from tests.helpers import claude_processes, parse_sse, wait_until

pytestmark = pytest.mark.e2e


async def test_text_reply_goes_to_conversation_main_by_default(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on("hello", text("Hello there, friend."))
    async with running_app(make_settings()) as client:
        resp = await client.post("/api/chat", json={"message": "hello"})
    assert resp.status_code == 200
    body = resp.json()
    assert body["reply"] == "Hello there, friend."  # exactly once, not duplicated
    assert body["conversation_id"] == "main"
    assert body["is_error"] is False
    assert body["session_id"]
    assert Path(body["log_file"]).is_file()
    assert isinstance(body["cost_usd"], float)


async def test_second_turn_sees_first_and_new_conversation_does_not(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    async with running_app(make_settings()) as client:
        first = (await client.post("/api/chat", json={"message": "my cat is Tom"})).json()
        second = (await client.post("/api/chat", json={"message": "what is my cat?"})).json()
        fresh = (
            await client.post("/api/chat", json={"message": "who am I?", "new_conversation": True})
        ).json()
    assert second["conversation_id"] == first["conversation_id"] == "main"
    assert second["session_id"] == first["session_id"]
    turn2 = fake_model.requests_for("what is my cat?")[0]
    assert "my cat is Tom" in turn2.all_text()
    assert fresh["conversation_id"] not in ("main", first["conversation_id"])
    assert fresh["session_id"] != first["session_id"]
    turn3 = fake_model.requests_for("who am I?")[0]
    assert "my cat is Tom" not in turn3.all_text()


async def test_restart_resumes_the_conversation_with_its_history(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    settings = make_settings()
    async with running_app(settings) as client:
        first = (
            await client.post(
                "/api/chat", json={"message": "remember code 4711", "conversation_id": "c1"}
            )
        ).json()
    assert claude_processes() == []
    async with running_app(settings) as client:
        again = (
            await client.post("/api/chat", json={"message": "which code?", "conversation_id": "c1"})
        ).json()
    assert again["session_id"] == first["session_id"]
    assert again["is_error"] is False
    assert "remember code 4711" in fake_model.requests_for("which code?")[0].all_text()


async def test_lost_session_starts_fresh_and_says_so(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI, isolated_env: Path
) -> None:
    settings = make_settings()
    async with running_app(settings) as client:
        await client.post("/api/chat", json={"message": "first words", "conversation_id": "c2"})
    for transcript in (isolated_env / ".claude" / "projects").rglob("*.jsonl"):
        transcript.unlink()
    async with running_app(settings) as client:
        resp = (
            await client.post(
                "/api/chat", json={"message": "still there?", "conversation_id": "c2"}
            )
        ).json()
    assert resp["is_error"] is False
    assert "could not be resumed" in resp["reply"]
    assert "echo: still there?" in resp["reply"]


async def test_denied_tool_call_reads_as_failure(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    # After the refusal the model says nothing (twice: the CLI nudges it once).
    fake_model.on(
        "fetch it", tool("Bash", {"command": "curl http://example.com"}), Reply(), Reply()
    )
    async with running_app(make_settings()) as client:
        body = (await client.post("/api/chat", json={"message": "fetch it"})).json()
    assert body["is_error"] is True
    assert body["reply"].startswith("Execution failed: a step was refused.")
    assert "curl" in body["reply"]
    records = [json.loads(line) for line in Path(body["log_file"]).read_text().splitlines()]
    permissions = [r["data"] for r in records if r["type"] == "permission"]
    assert permissions and permissions[0]["allowed"] is False


async def test_denied_tool_then_interrupted_turn_is_not_success(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on(
        "slow after deny",
        tool("Bash", {"command": "curl http://example.com"}),
        text("never seen", delay=20),
    )
    async with running_app(make_settings()) as client:
        pending = asyncio.create_task(client.post("/api/chat", json={"message": "slow after deny"}))
        await wait_until(lambda: len(fake_model.message_requests()) >= 2)
        stop = await client.post("/api/conversations/main/interrupt")
        body = (await pending).json()
        after = (await client.post("/api/chat", json={"message": "are you ok?"})).json()
    assert stop.json() == {"interrupted": True}
    assert body["is_error"] is True
    assert "never seen" not in body["reply"]
    # Stopped on request (not a crash), and the refused step is still named.
    assert (body["status"], body["is_error"]) == ("stopped", True)
    assert body["reply"].startswith("Stopped.")
    assert "Refused (not run):\n- Bash `curl http://example.com`" in body["reply"]
    assert [r["tool"] for r in body["refused"]] == ["Bash"]
    assert after["reply"] == "echo: are you ok?"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (error(401, "authentication_error", "invalid x-api-key"), "rejected the credentials (401)"),
        (error(529, "overloaded_error", "Overloaded"), "overloaded (529)"),
    ],
)
async def test_api_errors_become_clear_replies(
    make_settings: Callable[..., Settings],
    fake_model: FakeMessagesAPI,
    reply: Reply,
    expected: str,
) -> None:
    fake_model.on("break", *([reply] * 8))
    async with running_app(make_settings()) as client:
        body = (await client.post("/api/chat", json={"message": "break"})).json()
    assert body["is_error"] is True
    assert expected in body["reply"]
    assert "API Error" not in body["reply"]


async def test_unreachable_model_api_is_explained(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(anthropic_base_url="http://127.0.0.1:9")
    async with running_app(settings) as client:
        body = (await client.post("/api/chat", json={"message": "anyone?"})).json()
    assert body["is_error"] is True
    assert "http://127.0.0.1:9" in body["reply"]


async def test_missing_credentials_are_explained(make_settings: Callable[..., Settings]) -> None:
    async with running_app(make_settings(anthropic_api_key=None)) as client:
        body = (await client.post("/api/chat", json={"message": "hi"})).json()
    assert body["is_error"] is True
    assert "ANTHROPIC_API_KEY" in body["reply"]


async def test_stream_sends_deltas_before_the_result(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on("stream me", text("one two three four five six", chunks=4))
    async with running_app(make_settings()) as client:
        resp = await client.post("/api/chat/stream", json={"message": "stream me"})
    assert resp.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(resp.text)
    kinds = [name for name, _ in events]
    assert kinds[0] == "start"
    assert kinds[-1] == "result"
    deltas = [data["text"] for name, data in events if name == "text_delta"]
    assert len(deltas) >= 2
    result = events[-1][1]
    assert "".join(deltas) == result["reply"] == "one two three four five six"
    assert set(result) >= {
        "reply",
        "conversation_id",
        "session_id",
        "is_error",
        "log_file",
        "cost_usd",
    }


async def test_stream_reports_tool_steps(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on("make a dir", tool("Bash", {"command": "mkdir newdir"}), text("made it"))
    settings = make_settings()
    async with running_app(settings) as client:
        resp = await client.post("/api/chat/stream", json={"message": "make a dir"})
    events = parse_sse(resp.text)
    steps = [data for name, data in events if name == "tool"]
    assert [s["status"] for s in steps] == ["started", "ok"]
    assert steps[0]["summary"] == "mkdir newdir"
    assert (settings.workspace_dir / "newdir").is_dir()


async def test_two_conversations_run_in_parallel_one_conversation_in_order(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on("slow", text("slow done", delay=3))
    async with running_app(make_settings()) as client:
        # Warm both clients so only the model delay is measured.
        await asyncio.gather(
            client.post("/api/chat", json={"message": "warm", "conversation_id": "a"}),
            client.post("/api/chat", json={"message": "warm", "conversation_id": "b"}),
        )
        t0 = time.monotonic()
        await asyncio.gather(
            client.post("/api/chat", json={"message": "slow a", "conversation_id": "a"}),
            client.post("/api/chat", json={"message": "slow b", "conversation_id": "b"}),
        )
        parallel = time.monotonic() - t0
        t0 = time.monotonic()
        first_task = asyncio.create_task(
            client.post("/api/chat", json={"message": "slow 1", "conversation_id": "a"})
        )
        # The second message is sent while the first is with the model: it must wait its turn.
        await wait_until(lambda: bool(fake_model.requests_for("slow 1")))
        second = await client.post("/api/chat", json={"message": "slow 2", "conversation_id": "a"})
        first = await first_task
        serial = time.monotonic() - t0
    assert parallel < 5.5, parallel  # about one delay, not two
    assert serial >= 6.0, serial  # strictly one after the other
    prompts = [r.prompt for r in fake_model.turn_requests() if r.prompt in ("slow 1", "slow 2")]
    assert prompts == ["slow 1", "slow 2"]
    assert first.json()["reply"] == second.json()["reply"] == "slow done"


async def test_idle_and_replaced_clients_leave_no_cli_process(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    # Grace well above a cold start under load, so both clients are seen alive together.
    settings = make_settings(idle_timeout_seconds=3, replace_grace_seconds=8)
    async with running_app(settings) as client:
        await client.post("/api/chat", json={"message": "hi", "conversation_id": "idle"})
        assert len(claude_processes()) == 1
        await wait_until(lambda: claude_processes() == [], timeout=15)
        await client.post("/api/chat", json={"message": "hi", "conversation_id": "old"})
        new = (
            await client.post(
                "/api/chat",
                json={"message": "hi again", "conversation_id": "old", "new_conversation": True},
            )
        ).json()
        assert new["conversation_id"] != "old"
        # Old and new clients both alive during the grace period ...
        assert len(claude_processes()) == 2
        # ... then only the new one (which goes idle later).
        await wait_until(lambda: len(claude_processes()) <= 1, timeout=20)
    assert claude_processes() == []


async def test_live_session_limit_evicts_least_recently_used(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    async with running_app(make_settings(max_live_sessions=1)) as client:
        await client.post("/api/chat", json={"message": "one", "conversation_id": "x"})
        await client.post("/api/chat", json={"message": "two", "conversation_id": "y"})
        await wait_until(lambda: len(claude_processes()) == 1, timeout=15)
        again = (
            await client.post("/api/chat", json={"message": "back", "conversation_id": "x"})
        ).json()
    assert again["is_error"] is False
    assert "one" in fake_model.requests_for("back")[0].all_text()


async def test_live_session_limit_holds_once_conversations_started_at_once_end(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    """More conversations at once than the limit: each turn runs (none is stopped for the
    limit), and once they have all ended only `max_live_sessions` clients stay, not every
    one until later conversations or the idle timeout evict them."""
    limit, started = 2, 5
    fake_model.on("hold on", text("held", delay=2))  # the turns overlap
    async with running_app(make_settings(max_live_sessions=limit)) as client:
        replies = await asyncio.gather(
            *(
                client.post("/api/chat", json={"message": "hold on", "conversation_id": f"c{n}"})
                for n in range(started)
            )
        )
        assert [r.json()["reply"] for r in replies] == ["held"] * started
        await wait_until(lambda: len(claude_processes()) <= limit, timeout=30)
        await asyncio.sleep(1)  # nothing more goes: the limit, not fewer
        assert len(claude_processes()) == limit
        listed = (await client.get("/api/conversations")).json()["conversations"]
        assert sum(c["connected"] for c in listed) == limit
        health = (await client.get("/health")).json()
        assert health["live_sessions"] == limit


async def test_turn_timeout_interrupts_and_conversation_stays_usable(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on("too slow", text("late", delay=30))
    async with running_app(make_settings(turn_timeout_seconds=3)) as client:
        t0 = time.monotonic()
        body = (await client.post("/api/chat", json={"message": "too slow"})).json()
        elapsed = time.monotonic() - t0
        after = (await client.post("/api/chat", json={"message": "quick one"})).json()
    assert elapsed < 15
    assert body["is_error"] is True
    assert "timed out after 3 s" in body["reply"]
    assert after == after | {"reply": "echo: quick one", "is_error": False}


async def test_log_file_records_every_message_type_of_a_tool_turn(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on("list files", tool("Bash", {"command": "ls"}), text("listed"))
    async with running_app(make_settings()) as client:
        body = (await client.post("/api/chat", json={"message": "list files"})).json()
    lines = Path(body["log_file"]).read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    types = {r["type"] for r in records}
    assert {"request", "message", "permission", "response"} <= types
    message_types = {r["data"].get("__type__") for r in records if r["type"] == "message"}
    assert {
        "SystemMessage",
        "StreamEvent",
        "AssistantMessage",
        "UserMessage",
        "ResultMessage",
    } <= message_types
    assert records[0]["type"] == "request"
    assert records[-1]["type"] == "response"
    assert records[-1]["data"]["reply"] == "listed"


async def test_the_apps_skills_are_loaded_and_no_others(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    async with running_app(make_settings()) as client:
        body = (await client.post("/api/chat", json={"message": "hi"})).json()
    records = [json.loads(line) for line in Path(body["log_file"]).read_text().splitlines()]
    init = next(
        r["data"]["data"]
        for r in records
        if r["type"] == "message" and r["data"].get("subtype") == "init"
    )
    names = {"memory-capture", "memory-summarize", "memory-organize", "memory-revise"}
    # From the app's own plugin, outside the workspace; the CLI's bundled and built-in plugin
    # skills (one edits settings files) are not offered.
    # (`init.skills` lists every skill the CLI found; the model's listing is what counts.)
    assert {f"claude-memory-agent:{name}" for name in names} <= set(init["skills"])
    listing = fake_model.requests_for("hi")[0].all_text()
    assert all(f"claude-memory-agent:{name}" in listing for name in names)
    assert "plugin-authoring" not in listing and "update-config" not in listing


async def test_conversation_listing_history_and_delete(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    async with running_app(make_settings()) as client:
        await client.post(
            "/api/chat", json={"message": "first message here", "conversation_id": "k"}
        )
        listing = (await client.get("/api/conversations")).json()["conversations"]
        detail = (await client.get("/api/conversations/k")).json()
        deleted = await client.delete("/api/conversations/k")
        missing = await client.get("/api/conversations/k")
    assert [c["id"] for c in listing] == ["k"]
    assert listing[0]["title"] == "first message here"
    assert detail["turns"] == 1
    assert detail["history"][0]["message"] == "first message here"
    assert detail["history"][0]["reply"] == "echo: first message here"
    assert deleted.status_code == 200
    assert missing.status_code == 404
    assert "not found" in missing.json()["detail"]
