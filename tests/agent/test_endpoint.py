"""The model endpoint check: the classification, the probe against the fake API, the cache."""

from __future__ import annotations

import socket
from collections.abc import Callable

import httpx
import pytest
from pydantic import SecretStr

from agent.endpoint import (
    DEFAULT_API,
    CredentialsRefused,
    EndpointChecker,
    EndpointTarget,
    NotMessagesAPI,
    Reachable,
    Unreachable,
    Unverified,
    classify_error,
    classify_status,
    probe,
)
from settings import Settings
from tests.fakes.anthropic_api import FakeMessagesAPI
from tests.helpers import PlainWebServer


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (200, Reachable()),
        (401, CredentialsRefused(401)),
        (403, CredentialsRefused(403)),
        (404, Unverified("no /v1/models here (HTTP 404) to check the credentials with")),
        (405, Unverified("no /v1/models here (HTTP 405) to check the credentials with")),
        (500, Unverified("/v1/models answered HTTP 500")),
    ],
)
def test_an_answer_is_classified_by_its_status(status: int, expected: object) -> None:
    assert classify_status(status) == expected


def test_without_credentials_a_401_is_not_a_refusal() -> None:
    assert isinstance(classify_status(401, has_credentials=False), Unverified)
    assert isinstance(classify_status(200, has_credentials=False), Unverified)


def test_a_connect_timeout_is_unreachable_and_a_read_timeout_is_not() -> None:
    assert classify_error(httpx.ConnectTimeout("x"), 4) == Unreachable("no answer within 4 s")
    assert isinstance(classify_error(httpx.ReadTimeout("x"), 4), Unverified)


def test_the_models_url_keeps_the_base_path_and_query() -> None:
    target = EndpointTarget("https://gw.example/anthropic/?team=a")
    assert target.models_url == "https://gw.example/anthropic/v1/models?team=a"


def test_the_default_api_is_probed_only_with_credentials() -> None:
    assert EndpointTarget.from_settings(Settings()) is None
    target = EndpointTarget.from_settings(Settings(anthropic_api_key=SecretStr("k")))
    assert target is not None and target.url == DEFAULT_API
    checker = EndpointChecker.for_settings(Settings())
    assert checker.status()["state"] == "unverified"


async def test_the_fake_api_is_reachable_and_takes_the_key(fake_model: FakeMessagesAPI) -> None:
    assert await probe(EndpointTarget(fake_model.url, api_key="k")) == Reachable()
    request = fake_model.model_list_requests[-1]
    assert request.headers["x-api-key"] == "k"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert fake_model.requests == []  # a probe is not a model call


async def test_a_wrong_key_or_token_is_refused(fake_model: FakeMessagesAPI) -> None:
    fake_model.accepted_keys = {"good"}
    assert await probe(EndpointTarget(fake_model.url, api_key="bad")) == CredentialsRefused(401)
    assert await probe(EndpointTarget(fake_model.url, auth_token="bad")) == CredentialsRefused(401)
    assert await probe(EndpointTarget(fake_model.url, auth_token="good")) == Reachable()
    assert fake_model.model_list_requests[-1].headers["authorization"] == "Bearer good"


async def test_a_closed_port_and_an_unknown_host_are_unreachable() -> None:
    closed = EndpointTarget(f"http://127.0.0.1:{closed_port()}", api_key="k")
    assert await probe(closed) == Unreachable("connection refused")
    unknown = EndpointTarget("http://no-such-host.invalid", api_key="k")
    assert await probe(unknown) == Unreachable("host not found")
    assert await probe(EndpointTarget("not a url", api_key="k")) == Unreachable(
        "not a valid http(s) URL"
    )


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (404, "POST /v1/messages answered HTTP 404"),
        (405, "POST /v1/messages answered HTTP 405"),
        (501, "POST /v1/messages answered HTTP 501"),
        (200, "POST /v1/messages answered HTTP 200, not JSON"),
        (400, "POST /v1/messages answered HTTP 400, not JSON"),
    ],
)
async def test_another_web_server_is_not_a_messages_api(status: int, reason: str) -> None:
    with PlainWebServer(status) as server:
        state = await probe(EndpointTarget(server.url, api_key="k"))
    assert state == NotMessagesAPI(reason)
    assert server.requests == ["GET /v1/models", "POST /v1/messages"]


API_400 = {"type": "error", "error": {"type": "invalid_request_error", "message": "model: Field"}}
API_401 = {"type": "error", "error": {"type": "authentication_error", "message": "invalid key"}}


async def test_a_gateway_without_the_models_list_is_asked_for_messages() -> None:
    """A base whose `/v1/models` is missing but whose `/v1/messages` refuses the empty request
    with the API's JSON is the Messages API: unverified, not a failure; its 401 is a refusal."""
    with PlainWebServer(404, {"POST /v1/messages": (400, API_400)}) as gateway:
        assert await probe(EndpointTarget(gateway.url, api_key="k")) == Unverified(
            "no /v1/models here (HTTP 404) to check the credentials with"
        )
    with PlainWebServer(404, {"POST /v1/messages": (401, API_401)}) as gateway:
        assert await probe(EndpointTarget(gateway.url, api_key="k")) == CredentialsRefused(401)


async def test_a_wrong_path_below_the_api_is_not_a_messages_api(
    fake_model: FakeMessagesAPI,
) -> None:
    """The fake answers unknown paths with the API's JSON 404, as the API does."""
    target = EndpointTarget(fake_model.url + "/anthropic", api_key="k")
    assert await probe(target) == NotMessagesAPI("POST /v1/messages answered HTTP 404")
    assert fake_model.message_requests() == []  # no model call was made


async def test_a_good_answer_is_cached_until_stale_and_a_failure_never(
    fake_model: FakeMessagesAPI,
) -> None:
    now = [1000.0]
    clock: Callable[[], float] = lambda: now[0]  # noqa: E731
    checker = EndpointChecker(
        EndpointTarget(fake_model.url, api_key="k"), fresh_seconds=30, clock=clock
    )
    assert checker.status()["state"] == "checking"
    assert await checker.check() == Reachable()
    assert await checker.check() == Reachable()
    assert len(fake_model.model_list_requests) == 1
    now[0] += 31
    assert await checker.check() == Reachable()
    assert len(fake_model.model_list_requests) == 2

    fake_model.accepted_keys = {"other"}
    now[0] += 31
    assert await checker.check() == CredentialsRefused(401)
    assert await checker.check() == CredentialsRefused(401)  # not cached: asked again
    assert len(fake_model.model_list_requests) == 4
    assert checker.status() == {
        "url": fake_model.url,
        "state": "credentials_refused",
        "http_status": 401,
        "hint": "check ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) for this endpoint",
    }
