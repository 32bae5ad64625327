"""A broken model endpoint is known in seconds, and retries show while they happen.

Real app, real Claude CLI, the fake Messages API. The CLI's own retries are left at their
default here (the suite sets CLAUDE_CODE_MAX_RETRIES=0): without the endpoint check these
turns would take minutes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from settings import Settings
from tests.agent.test_endpoint import closed_port
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI, RecordedRequest, Reply, error, text
from tests.helpers import parse_sse, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture
def default_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAUDE_CODE_MAX_RETRIES")


def overloaded_then(fake: FakeMessagesAPI, failures: int, final: Reply) -> None:
    """The first `failures` model requests get 529 overloaded, then `final`."""
    count = 0

    def answer(req: RecordedRequest) -> Reply:
        nonlocal count
        count += 1
        return error(529, "overloaded_error", "Overloaded") if count <= failures else final

    fake.default = answer


async def test_a_turn_against_a_closed_port_fails_fast_naming_the_endpoint(
    make_settings: Callable[..., Settings], default_retries: None
) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    async with running_app(make_settings(anthropic_base_url=endpoint)) as client:
        started = time.monotonic()
        body = (await client.post("/api/chat", json={"message": "anyone there?"})).json()
        elapsed = time.monotonic() - started
        health = (await client.get("/health")).json()
    assert elapsed < 20, elapsed
    assert body["is_error"] is True
    assert body["status"] == "failed"
    assert body["reply"] == (
        f"Could not reach the model API at {endpoint}: connection refused. "
        "Check ANTHROPIC_BASE_URL and that the endpoint is running."
    )
    assert health["model_endpoint"] == {"state": "unreachable"}
    assert health["status"] == "degraded"
    assert endpoint not in str(health)


async def test_a_refused_key_answers_the_turn_at_once(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI, default_retries: None
) -> None:
    fake_model.accepted_keys = {"the-right-key"}
    async with running_app(make_settings(anthropic_api_key="a-wrong-key")) as client:
        started = time.monotonic()
        body = (await client.post("/api/chat", json={"message": "hello"})).json()
        elapsed = time.monotonic() - started
    assert elapsed < 20, elapsed
    assert body["is_error"] is True
    assert f"The model API at {fake_model.url} rejected the credentials (401)" in body["reply"]
    assert fake_model.message_requests() == []


async def test_health_shows_the_endpoint_state_and_the_url_only_with_the_token(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    async with running_app(make_settings(api_token="s3cret")) as client:
        checker = client.app.state.container.sessions.endpoint  # type: ignore[attr-defined]
        await wait_until(lambda: checker.last is not None)  # probed at start, in the background
        public = (await client.get("/health")).json()
        full = (await client.get("/health", headers={"Authorization": "Bearer s3cret"})).json()
    assert public["model_endpoint"] == {"state": "reachable"}
    assert full["model_endpoint"] == {"state": "reachable", "url": fake_model.url}


async def test_retries_are_streamed_as_events_then_the_answer_comes(
    make_settings: Callable[..., Settings],
    fake_model: FakeMessagesAPI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "2")
    overloaded_then(fake_model, 2, text("made it"))
    async with running_app(make_settings()) as client:
        resp = await client.post("/api/chat/stream", json={"message": "try hard"})
    events = parse_sse(resp.text)
    retries = [data for name, data in events if name == "retrying"]
    assert [(r["attempt"], r["max_retries"], r["reason"], r["status"]) for r in retries] == [
        (1, 2, "overloaded", 529),
        (2, 2, "overloaded", 529),
    ]
    assert all(0 < r["wait_seconds"] < 10 for r in retries)
    assert events[-1] == ("result", events[-1][1])
    assert events[-1][1]["reply"] == "made it"
    assert events[-1][1]["is_error"] is False
