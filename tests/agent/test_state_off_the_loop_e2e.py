"""The app's state calls never stop the event loop: a Claude Code hook process holding the write
lock of `<home>/state.db` makes a turn wait, not every other request."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable

import pytest

from settings import Settings
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI, text

pytestmark = pytest.mark.e2e


async def test_a_turn_waiting_for_a_locked_state_db_leaves_other_requests_answering(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on("second", text("answered once the lock was gone"))
    settings = make_settings()
    async with running_app(settings) as client:
        first = await client.post("/api/chat", json={"message": "first"})
        assert first.status_code == 200
        # What a hook process does while it writes an episode: BEGIN IMMEDIATE on state.db.
        hook = sqlite3.connect(settings.state_path, isolation_level=None)
        hook.execute("BEGIN IMMEDIATE")
        try:
            turn = asyncio.create_task(client.post("/api/chat", json={"message": "second"}))
            await asyncio.sleep(0.5)  # the turn is now waiting to record its conversation
            began = time.monotonic()
            health = await client.get("/health")
            listed = await client.get("/api/memories")
            took = time.monotonic() - began
            waiting = not turn.done()
        finally:
            hook.execute("ROLLBACK")
            hook.close()
        second = await turn
    assert health.status_code == 200 and listed.status_code == 200
    assert took < 3.0, f"other requests took {took:.1f} s behind the locked database"
    assert waiting, "the turn did not wait for the database (was it locked?)"
    assert second.json()["reply"] == "answered once the lock was gone"


async def test_many_turns_waiting_for_a_locked_state_db_leave_health_and_memories_answering(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    # Eight chats (more than the six threads one shared pool had) wait on the state database's
    # write lock: /health, the memory list and a memory search still answer at once.
    settings = make_settings()
    async with running_app(settings) as client:
        first = await client.post("/api/chat", json={"message": "first"})
        assert first.status_code == 200
        hook = sqlite3.connect(settings.state_path, isolation_level=None)
        hook.execute("BEGIN IMMEDIATE")
        try:
            turns = [
                asyncio.create_task(client.post("/api/chat", json={"message": f"waiting {i}"}))
                for i in range(8)
            ]
            await asyncio.sleep(1.0)  # every turn is now waiting for the database
            began = time.monotonic()
            async with asyncio.timeout(10):
                health = await client.get("/health")
                listed = await client.get("/api/memories")
                found = await client.post("/api/memories/search", json={"query": "anything"})
            took = time.monotonic() - began
            waiting = sum(not t.done() for t in turns)
        finally:
            hook.execute("ROLLBACK")
            hook.close()
        replies = await asyncio.gather(*turns)
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert listed.status_code == 200 and found.status_code == 200
    assert took < 2.0, f"/health and the memory routes took {took:.1f} s behind the lock"
    assert waiting == 8, "the turns did not wait for the database (was it locked?)"
    assert all(r.status_code == 200 for r in replies)
