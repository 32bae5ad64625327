"""Shared fixtures: an isolated environment for every test, the fake model, app factories."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from settings import Settings
from tests.fakes.anthropic_api import FakeMessagesAPI

if TYPE_CHECKING:  # lark-oapi takes 2-5 s to import: only the tests that use the fake pay it
    from tests.fakes.feishu_platform import FakeFeishu


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tiers follow from the fixtures a test uses: `postgres` (the embedded PostgreSQL,
    tests/storage/conftest.py) and `encoder` (the packaged default encoder,
    tests/embeddings/conftest.py), so `-m "not postgres"` needs no list of files."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        callspec = getattr(item, "callspec", None)
        backends = callspec.params.values() if callspec is not None else ()
        # the contract suites take the backend as a parameter and the database with
        # request.getfixturevalue: "postgresql" among the parameters says it
        if "postgres_server" in names or any(p == "postgresql" for p in backends):
            item.add_marker(pytest.mark.postgres)
        if "default_encoder" in names:
            item.add_marker(pytest.mark.encoder)


_LEAKY_PREFIXES = ("CLAUDE_MEMORY_", "ANTHROPIC_", "FEISHU_", "CLAUDE_CODE_", "CLAUDECODE")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test sees the developer's home, Claude config, .env or network settings."""
    for name in list(os.environ):
        if name.startswith(_LEAKY_PREFIXES):
            monkeypatch.delenv(name, raising=False)
    home = tmp_path / "user-home"
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    monkeypatch.setenv("DISABLE_AUTOUPDATER", "1")
    monkeypatch.setenv("DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("CLAUDE_MEMORY_ENCODER", "none")  # servers started by tests: keywords
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    monkeypatch.chdir(tmp_path)  # Settings reads ./.env: make sure it is ours (none)
    return home


@pytest.fixture(autouse=True)
def _dictionary_segmentation() -> Iterator[None]:
    """A hook run in this process (tests/hooks' `hook` fixture) switches the whole process to
    CJK segmentation without rjieba's dictionary (`segment_without_dictionary`: what a hook
    process wants, for the rest of its short life). Tests share a process, and under xdist
    each worker runs its own mix of files, so every test starts with the dictionary again:
    otherwise a Chinese search test that follows a hook test on the same worker finds "连接"
    in "连接池"."""
    yield
    keyword = sys.modules.get("memory.search.keyword")
    if keyword is not None:
        keyword._without_dictionary = False  # type: ignore[attr-defined]


@pytest.fixture
def fake_model() -> Iterator[FakeMessagesAPI]:
    fake = FakeMessagesAPI().start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def fake_feishu() -> Iterator[FakeFeishu]:
    """The fake Feishu open platform (tests/fakes/feishu_platform.py), on a free loopback port."""
    from tests.fakes.feishu_platform import FakeFeishu

    fake = FakeFeishu().start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def make_settings(tmp_path: Path, fake_model: FakeMessagesAPI) -> Callable[..., Settings]:
    """Settings for an app whose model is the fake; keyword arguments override fields."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "home": tmp_path / "cm-home",
            "anthropic_base_url": fake_model.url,
            "anthropic_api_key": "dummy-key",
            "connect_timeout_seconds": 45,
            "turn_timeout_seconds": 60,
            "shutdown_timeout_seconds": 10,
            # keyword search unless a test opts in (tests/embeddings): no encoder process
            "encoder": "none",
        }
        values.update(overrides)
        return Settings(**values)

    return make


@contextlib.asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The real app with its lifespan, reached through httpx's ASGI transport."""
    from app import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", timeout=120
        ) as client:
            client.app = app  # type: ignore[attr-defined]
            yield client
