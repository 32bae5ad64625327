"""Honest turns through the real CLI: refusals are never hidden, costs add up, stopping is not a
crash, and no server path reaches the user."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

import pytest

from settings import Settings
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI, text, tool
from tests.helpers import wait_until

pytestmark = pytest.mark.e2e

ABSOLUTE_PATH = re.compile(r"(?<![\w:/.])/(?:[\w.@+-]+/)+")


@pytest.mark.parametrize(
    ("command", "claim"),
    [
        ("rm -rf /", "All clean! I removed everything as requested."),
        ("curl -fsSL http://example.com/install.sh", "Installed the tool successfully."),
    ],
)
async def test_a_claim_of_success_after_a_refusal_names_the_refused_command(
    make_settings: Callable[..., Settings],
    fake_model: FakeMessagesAPI,
    command: str,
    claim: str,
) -> None:
    fake_model.on("do the thing", tool("Bash", {"command": command}), text(claim))
    async with running_app(make_settings()) as client:
        body = (await client.post("/api/chat", json={"message": "do the thing"})).json()
        history = (await client.get("/api/conversations/main")).json()["history"]
    assert body["reply"].startswith(claim)
    assert f"Refused (not run):\n- Bash `{command}`:" in body["reply"]
    (refused,) = body["refused"]
    assert refused["tool"] == "Bash" and refused["input"] == command and refused["reason"]
    assert body["failed"] == []
    # The model finished: the turn completed, and still says what did not happen.
    assert (body["is_error"], body["status"]) == (False, "completed")
    # Kept with the conversation for a reload.
    (turn,) = history
    assert [(s["name"], s["summary"], s["status"]) for s in turn["tools"]] == [
        ("Bash", command, "denied")
    ]


async def test_three_identical_turns_cost_the_same_and_the_total_is_their_sum(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    settings = make_settings()
    costs = []
    async with running_app(settings) as client:
        for _ in range(3):
            body = (await client.post("/api/chat", json={"message": "same question"})).json()
            costs.append(body["cost_usd"])
    async with running_app(settings) as client:  # a resumed session counts the same way
        body = (await client.post("/api/chat", json={"message": "same question"})).json()
        costs.append(body["cost_usd"])
        conversation = (await client.get("/api/conversations/main")).json()
    assert all(c and c > 0 for c in costs), costs
    # The CLI reports the session's running total; each turn must be its own cost.
    assert max(costs) <= min(costs) * 1.01, costs
    assert conversation["cost_usd"] == pytest.approx(sum(costs))
    assert [t["cost_usd"] for t in conversation["history"]] == pytest.approx(costs)


async def test_an_interrupted_turn_reads_as_stopped_without_server_paths(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on("tell a long story", text("once upon a time " * 40, chunks=40, chunk_delay=0.3))
    async with running_app(make_settings()) as client:
        pending = asyncio.create_task(
            client.post("/api/chat", json={"message": "tell a long story"})
        )
        await wait_until(lambda: len(fake_model.message_requests()) >= 1)
        await asyncio.sleep(1.0)  # some text has streamed
        stop = await client.post("/api/conversations/main/interrupt")
        body = (await pending).json()
        history = (await client.get("/api/conversations/main")).json()["history"]
    assert stop.json() == {"interrupted": True}
    assert (body["status"], body["is_error"]) == ("stopped", True)
    assert body["reply"].endswith("Stopped.")
    assert "Error" not in body["reply"] and "failed" not in body["reply"]
    assert not ABSOLUTE_PATH.search(body["reply"]), body["reply"]
    assert body["log_file"].startswith("/")  # the path stays in its own field
    assert history[-1]["status"] == "stopped"
