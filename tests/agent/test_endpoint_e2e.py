"""A broken model endpoint is known in seconds, and retries show while they happen.

Real app, real Claude CLI, the fake Messages API. The CLI's own retries are left at their
default here (the suite sets CLAUDE_CODE_MAX_RETRIES=0): without the endpoint check these
turns would take minutes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from agent.endpoint import CHECK_URL
from settings import Settings
from tests.agent.test_endpoint import closed_port
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI, RecordedRequest, Reply, error, text
from tests.helpers import PlainWebServer, parse_sse, wait_until

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
    assert health["model_endpoint"] == {
        "state": "unreachable",
        "hint": "check ANTHROPIC_BASE_URL and that the endpoint is running",
    }
    assert health["status"] == "degraded"
    assert endpoint not in str(health)


async def test_another_web_server_as_the_endpoint_is_named_in_health_and_in_the_turn(
    make_settings: Callable[..., Settings], default_retries: None
) -> None:
    """An `ANTHROPIC_BASE_URL` that is some other HTTP server (404 on every path): /health says
    so and what to check, and a turn says to check the URL (not "try again shortly")."""
    with PlainWebServer(404) as server:
        async with running_app(make_settings(anthropic_base_url=server.url)) as client:
            checker = client.app.state.container.sessions.endpoint  # type: ignore[attr-defined]
            await wait_until(lambda: checker.last is not None)
            health = (await client.get("/health")).json()
            body = (await client.post("/api/chat", json={"message": "anyone there?"})).json()
    assert health["status"] == "degraded"
    assert health["model_endpoint"] == {"state": "not_messages_api", "hint": CHECK_URL}
    assert body["is_error"] is True
    assert body["status"] == "failed"
    assert body["reply"] == (
        f"The model endpoint at {server.url} is not an Anthropic Messages API "
        "(POST /v1/messages answered HTTP 404). Check ANTHROPIC_BASE_URL: it must be the base "
        "of an Anthropic Messages API (the CLI posts to <base>/v1/messages), not another web "
        "server or a path below it."
    )
    assert "try again" not in body["reply"].lower()


@pytest.mark.parametrize(("status", "words"), [(404, "not found"), (501, "not implemented")])
async def test_a_404_or_501_from_the_model_api_in_a_turn_says_to_check_the_url(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI, status: int, words: str
) -> None:
    """The endpoint passed the check but the CLI's own request gets 404 or 501 (a gateway that
    lists models and serves no messages): the reply names the URL to check, nothing to retry."""
    fake_model.default = lambda req: error(status, "not_found_error", "no such route")
    async with running_app(make_settings()) as client:
        body = (await client.post("/api/chat", json={"message": "hello"})).json()
    assert body["is_error"] is True
    assert body["reply"].startswith(
        f"The model API at {fake_model.url} answered HTTP {status} ({words}): it may not be an "
        "Anthropic Messages API, or not know the model. Check ANTHROPIC_BASE_URL"
    ), body["reply"]
    assert "try again" not in body["reply"].lower()


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
