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
