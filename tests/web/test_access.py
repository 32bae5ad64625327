"""Who can reach the app: loopback only without a token, however it is started; what /health
tells a caller without the token."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.types import Message

from settings import Settings
from tests.fakes.anthropic_api import FakeMessagesAPI
from tests.hooks.conftest import free_port
from web.access import Local, LoopbackOnly, Remote, origin
from web.health import INDEX_ERROR, public_view

REPO = Path(__file__).resolve().parents[2]
STRANGER = ("203.0.113.7", 4321)
LOCAL = ("127.0.0.1", 50000)
EVERY_KIND_OF_PATH = ["/", "/health", "/api/conversations", "/api/memories", "/docs"]
# A URL (with credentials) and absolute paths: what /health must not show without the token.
URL_OR_ABSOLUTE_PATH = re.compile(r"[A-Za-z][\w+.-]*://|(?:^|[\s\"'=(:])/[\w.~-]+/")


@contextlib.asynccontextmanager
async def lifespan_app(settings: Settings) -> AsyncIterator[FastAPI]:
    from app import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        yield app


def client_at(app: FastAPI, address: tuple[str, int], **headers: str) -> httpx.AsyncClient:
    """A client whose requests reach the app from `address`, as a server would report it."""
    transport = httpx.ASGITransport(app=app, client=address)
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers)


def leaky_base_url(fake_model: FakeMessagesAPI) -> str:
    host = fake_model.url.split("://", 1)[1]
    return f"http://alice:hunter2@{host}/?key=sk-leak-me"


# --- without a token ---------------------------------------------------------------------------


async def test_a_remote_client_without_a_token_is_refused_on_every_path(
    make_settings: Callable[..., Settings],
) -> None:
    async with lifespan_app(make_settings()) as app, client_at(app, STRANGER) as stranger:
        answers = {path: await stranger.get(path) for path in EVERY_KIND_OF_PATH}
        posted = await stranger.post("/api/chat", json={"message": "hi"})
    for response in [*answers.values(), posted]:
        assert response.status_code == 403
        assert response.headers["content-type"] == "application/json"
        detail = response.json()["detail"]
        assert "CLAUDE_MEMORY_API_TOKEN" in detail and "Authorization: Bearer" in detail


async def test_a_local_client_without_a_token_is_served(
    make_settings: Callable[..., Settings],
) -> None:
    async with lifespan_app(make_settings()) as app:
        for address in [("127.0.0.1", 50000), ("127.3.4.5", 1), ("::1", 2)]:
            async with client_at(app, address) as local:
                assert (await local.get("/health")).status_code == 200
                assert (await local.get("/api/conversations")).status_code == 200
                assert (await local.get("/")).status_code == 200


@pytest.mark.parametrize(
    "header",
    [
        {"X-Forwarded-For": "203.0.113.7"},
        {"X-Forwarded-For": "127.0.0.1, 203.0.113.7"},
        {"X-Real-IP": "203.0.113.7"},
        {"Forwarded": 'for="[2001:db8::7]:4711";proto=https'},
        {"Forwarded": "for=unknown"},
    ],
    ids=["xff", "xff-chain", "x-real-ip", "forwarded-v6", "forwarded-unknown"],
)
async def test_a_request_a_local_proxy_forwards_for_someone_else_is_refused(
    make_settings: Callable[..., Settings], header: dict[str, str]
) -> None:
    async with (
        lifespan_app(make_settings()) as app,
        client_at(app, ("127.0.0.1", 50000), **header) as proxied,
    ):
        response = await proxied.get("/api/conversations")
    assert response.status_code == 403


@pytest.mark.parametrize(
    ("host", "served"),
    [
        ("127.0.0.1:8000", True),
        ("localhost:8000", True),
        ("LOCALHOST", True),
        ("app.localhost:8000", True),
        ("[::1]:8000", True),
        ("127.0.0.2", True),
        ("evil.example:8000", False),  # a rebound name: the browser's page is on another site
        ("127.0.0.1.evil.example", False),
        ("192.168.1.5:8000", False),
        ("", False),
    ],
)
async def test_without_a_token_only_a_local_host_name_is_served(
    make_settings: Callable[..., Settings], host: str, served: bool
) -> None:
    # DNS rebinding: a page on evil.example whose name now points at 127.0.0.1 reaches the app
    # from a loopback address, but its requests still carry its own host name.
    async with lifespan_app(make_settings()) as app, client_at(app, LOCAL) as local:
        response = await local.get("/api/conversations", headers={"host": host})
    assert (response.status_code == 200) is served, response.text
    if not served:
        assert "local host name" in response.json()["detail"]


async def test_a_local_proxy_forwarding_for_localhost_is_served(
    make_settings: Callable[..., Settings],
) -> None:
    async with (
        lifespan_app(make_settings()) as app,
        client_at(app, ("127.0.0.1", 50000), **{"X-Forwarded-For": "127.0.0.1"}) as proxied,
    ):
        assert (await proxied.get("/api/conversations")).status_code == 200


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ({"client": ("127.0.0.1", 1), "headers": []}, Local()),
        ({"client": ("::ffff:127.0.0.1", 1), "headers": []}, Local()),
        ({"client": None, "headers": []}, Local()),  # a unix socket (`uvicorn --uds`)
        ({"client": ("10.0.0.2", 1), "headers": []}, Remote("10.0.0.2")),
        ({"client": ("localhost", 1), "headers": []}, Remote("localhost")),  # not an address
        ({"client": ("::1", 1), "headers": [(b"x-real-ip", b"[::1]:80")]}, Local()),
        ({"client": ("::1", 1), "headers": [(b"x-forwarded-for", b"")]}, Remote("<empty>")),
        (
            {
                "client": ("127.0.0.1", 1),
                "headers": [(b"forwarded", b"for=127.0.0.1:99, For=1.2.3.4")],
            },
            Remote("1.2.3.4"),
        ),
    ],
)
def test_where_a_request_comes_from(scope: dict[str, Any], expected: object) -> None:
    assert origin({"type": "http", **scope}) == expected


async def test_a_remote_websocket_is_closed_before_it_is_accepted() -> None:
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])

    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "websocket.connect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "websocket", "client": STRANGER, "headers": [], "path": "/ws"}
    await LoopbackOnly(app)(scope, receive, send)
    assert reached == []
    assert [m["type"] for m in sent] == ["websocket.close"]


# --- with a token ------------------------------------------------------------------------------


async def test_with_a_token_a_remote_client_needs_it(
    make_settings: Callable[..., Settings],
) -> None:
    async with lifespan_app(make_settings(api_token="s3cret")) as app:
        async with client_at(app, STRANGER) as without:
            refused = await without.get("/api/conversations")
        async with client_at(app, STRANGER, Authorization="Bearer s3cret") as with_token:
            served = await with_token.get("/api/conversations")
        async with client_at(app, STRANGER, **{"X-Forwarded-For": "198.51.100.1"}) as page:
            page_answer = await page.get("/")  # the page itself asks for the token
    assert refused.status_code == 401
    assert served.status_code == 200
    assert page_answer.status_code == 200


# --- /health -----------------------------------------------------------------------------------


def assert_no_location(body: str, *secrets: str) -> None:
    assert not URL_OR_ABSOLUTE_PATH.search(body), body
    for secret in secrets:
        assert secret not in body, body


async def test_health_without_the_token_shows_no_url_path_or_credential(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    settings = make_settings(anthropic_base_url=leaky_base_url(fake_model))
    async with lifespan_app(settings) as app, client_at(app, ("127.0.0.1", 9)) as local:
        response = await local.get("/health")
    assert response.status_code == 200
    body = response.text
    assert_no_location(body, "alice", "hunter2", "sk-leak-me", "dummy-key", str(tmp_path))
    health = response.json()
    # ... and still everything the page's status panel reads (web/static/js/status.js).
    assert health["status"] == "ok"
    assert health["claude_cli"] == {"found": True, "credentials": True}
    assert health["database"] == {
        "ok": True,
        "notes": health["database"]["notes"],
        "backend": "sqlite",
    }
    assert isinstance(health["database"]["notes"], int)
    assert health["feishu"] == {"enabled": False, "connected": False}
    assert health["encoder"]["state"] == "disabled"


async def test_health_with_a_token_but_without_it_in_the_request_is_status_only(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    settings = make_settings(api_token="s3cret", anthropic_base_url=leaky_base_url(fake_model))
    async with lifespan_app(settings) as app:
        async with client_at(app, STRANGER) as anonymous:
            public = await anonymous.get("/health")
        async with client_at(app, STRANGER, Authorization="Bearer wrong") as guessing:
            guessed = await guessing.get("/health")
    for response in (public, guessed):
        assert response.status_code == 200
        assert_no_location(response.text, "alice", "hunter2", "sk-leak-me", str(tmp_path))


async def test_health_with_the_token_shows_details_without_credentials(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI, tmp_path: Path
) -> None:
    settings = make_settings(api_token="s3cret", anthropic_base_url=leaky_base_url(fake_model))
    async with (
        lifespan_app(settings) as app,
        client_at(app, STRANGER, Authorization="Bearer s3cret") as owner,
    ):
        health = (await owner.get("/health")).json()
    host = fake_model.url.split("://", 1)[1]
    assert health["claude_cli"]["base_url"] == f"http://{host}/?key=***"
    assert Path(health["claude_cli"]["path"]).is_absolute()
    assert health["database"]["index"] == str(settings.index_path)
    for secret in ("alice", "hunter2", "sk-leak-me", "dummy-key"):
        assert secret not in json.dumps(health)


# --- a real uvicorn process --------------------------------------------------------------------


@pytest.mark.e2e
def test_uvicorn_app_refuses_a_request_forwarded_for_a_remote_client(
    tmp_path: Path, fake_model: FakeMessagesAPI
) -> None:
    """`uvicorn app:app` (trusting X-Forwarded-For from 127.0.0.1, its default) behind a proxy
    on the same host: the proxy's own requests are served, the ones it forwards are not."""
    port = free_port()
    env = {
        **os.environ,
        "CLAUDE_MEMORY_HOME": str(tmp_path / "home"),
        "ANTHROPIC_BASE_URL": leaky_base_url(fake_model),
        "ANTHROPIC_API_KEY": "dummy",
    }
    command = [sys.executable, "-m", "uvicorn", "app:app", "--app-dir", str(REPO)]
    proc = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=tmp_path,  # no .env of the developer's
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"{base}/health", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        forwarded = {"X-Forwarded-For": "203.0.113.7"}
        refused = httpx.get(f"{base}/api/conversations", headers=forwarded, timeout=10)
        refused_health = httpx.get(f"{base}/health", headers=forwarded, timeout=10)
        local = httpx.get(f"{base}/api/conversations", timeout=10)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert health.status_code == 200, out.decode(errors="replace")[-2000:]
    assert_no_location(health.text, "alice", "hunter2", "sk-leak-me", str(tmp_path))
    assert refused.status_code == refused_health.status_code == 403
    assert "CLAUDE_MEMORY_API_TOKEN" in refused.json()["detail"]
    assert local.status_code == 200


def test_health_without_the_token_hides_model_folders_error_texts_and_the_bot_id() -> None:
    report = {
        "status": "ok",
        "claude_cli": {"found": True, "path": "/usr/bin/claude", "credentials": True},
        "database": {"ok": False, "error": "unable to open /home/alice/.claude-memory/index.db"},
        "feishu": {"enabled": True, "connected": False, "bot_open_id": "ou_1", "error": "x"},
        "encoder": {"state": "failed", "model": "st:/home/alice/m", "error": "y"},
        "live_sessions": 2,
    }
    view = public_view(report)
    assert_no_location(json.dumps(view), "alice", "ou_1")
    assert view["database"] == {"ok": False, "error": INDEX_ERROR}
    assert view["feishu"] == {"enabled": True, "connected": False}
    assert view["encoder"] == {"state": "failed", "model": None}
    for model in ("openai:text-embedding-3-small", "BAAI/bge-m3", "hashing-256"):
        encoder = {"state": "ready", "model": model}
        assert public_view({**report, "encoder": encoder})["encoder"]["model"] == model
