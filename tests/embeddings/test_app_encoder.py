"""The app with an encoder: starts and answers at once while the model loads, searches fall
back to keywords with a notice, a killed worker is restarted, `/api/embed`."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from settings import Settings
from tests.conftest import running_app
from tests.embeddings.fake_openai import FakeEmbeddingsAPI

pytest.importorskip("numpy")


async def _until(
    probe: Callable[[], Awaitable[Any]], accept: Callable[[Any], bool], seconds: float = 30
) -> Any:
    value = None
    for _ in range(int(seconds / 0.1)):
        value = await probe()
        if accept(value):
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"condition not met within {seconds}s; last value: {value}")


async def _health(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/health")
    assert response.status_code == 200
    return dict(response.json())


async def _search(client: httpx.AsyncClient, query: str) -> dict[str, Any]:
    response = await client.post("/api/memories/search", json={"query": query})
    assert response.status_code == 200
    return dict(response.json())


async def test_the_app_answers_at_once_while_the_encoder_loads(
    make_settings: Callable[..., Settings], fake_embeddings: FakeEmbeddingsAPI
) -> None:
    fake_embeddings.hold()  # the "model" answers nothing until released
    settings = make_settings(encoder="openai:fake-embed", encoder_url=fake_embeddings.url)
    started = time.monotonic()
    async with running_app(settings) as client:
        health = await _health(client)
        assert time.monotonic() - started < 2.0
        assert health["encoder"]["state"] == "loading"
        assert health["encoder"]["model"] == "openai:fake-embed"

        saved = await client.post("/api/memories", json={"content": "修复连接池泄漏：连接没有归还"})
        assert saved.status_code == 200
        result = await _search(client, "连接池")
        assert result["mode"] == "keyword"
        assert "loading" in result["notice"]
        assert [r["id"] for r in result["results"]] == [saved.json()["id"]]
        stats = (await client.get("/api/memories/stats")).json()
        assert stats["encoder"]["state"] == "loading"
        refused = await client.post("/api/embed", json={"texts": ["x"]})
        assert refused.status_code == 503

        fake_embeddings.release()
        ready = await _until(lambda: _health(client), lambda h: h["encoder"]["state"] == "ready")
        assert ready["encoder"]["model"] == "openai/fake-embed+lc1"
        assert ready["encoder"]["dim"] == 64
        stats = await _until(
            lambda: _stats(client),
            lambda s: s["encoder"]["vectors"]["missing"] == 0,
        )
        assert stats["encoder"]["vectors"]["embedded"] == stats["total"]
        result = await _search(client, "连接池")
        assert result["mode"] == "hybrid" and result["notice"] is None
        assert result["results"][0]["id"] == saved.json()["id"]


async def _stats(client: httpx.AsyncClient) -> dict[str, Any]:
    return dict((await client.get("/api/memories/stats")).json())


async def test_a_killed_encoder_worker_is_restarted_and_the_app_stays_up(
    make_settings: Callable[..., Settings],
) -> None:
    async with running_app(make_settings(encoder="hashing")) as client:
        first = await _until(lambda: _health(client), lambda h: h["encoder"]["state"] == "ready")
        pid = first["encoder"]["pid"]
        os.kill(pid, signal.SIGKILL)
        await client.post("/api/memories", json={"content": "a note saved meanwhile"})
        assert (await _search(client, "note"))["results"]  # keyword or hybrid: never an error
        again = await _until(
            lambda: _health(client),
            lambda h: h["encoder"]["state"] == "ready" and h["encoder"]["pid"] != pid,
        )
        assert again["encoder"]["restarts"] == 1
    with pytest.raises(ProcessLookupError):
        os.kill(again["encoder"]["pid"], 0)  # the app's shutdown ended the worker


async def test_embed_returns_vectors_of_the_memory_encoder(
    make_settings: Callable[..., Settings],
) -> None:
    async with running_app(make_settings(encoder="hashing")) as client:
        await _until(lambda: _health(client), lambda h: h["encoder"]["state"] == "ready")
        response = await client.post(
            "/api/embed", json={"texts": ["登录功能怎么实现？", "JWT + Redis"], "kind": "query"}
        )
        assert response.status_code == 200
        body = response.json()
        assert body["model"] == "hashing-256" and body["dim"] == 256
        assert len(body["vectors"]) == 2 and len(body["vectors"][0]) == 256
        bad = await client.post("/api/embed", json={"texts": []})
        assert bad.status_code == 422


async def test_without_an_encoder_health_says_disabled_and_embed_is_unavailable(
    make_settings: Callable[..., Settings],
) -> None:
    async with running_app(make_settings()) as client:
        health = await _health(client)
        assert health["encoder"]["state"] == "disabled"
        assert (await client.post("/api/embed", json={"texts": ["x"]})).status_code == 503
        result = await _search(client, "anything")
        assert result["mode"] == "keyword" and result["notice"] is None


async def test_rebuild_with_vectors_re_embeds_every_note_in_the_background(
    make_settings: Callable[..., Settings],
) -> None:
    async with running_app(make_settings(encoder="hashing")) as client:
        await client.post("/api/memories", json={"content": "first note"})
        await client.post("/api/memories", json={"content": "second note"})
        await _until(lambda: _stats(client), lambda s: s["encoder"]["vectors"]["missing"] == 0)
        rebuilt = await client.post("/api/memories/rebuild", params={"vectors": "true"})
        assert rebuilt.status_code == 200
        assert rebuilt.json()["vectors"] == {"cleared": True, "pending": 3}
        stats = await _until(
            lambda: _stats(client), lambda s: s["encoder"]["vectors"]["missing"] == 0
        )
        assert stats["encoder"]["vectors"]["embedded"] == 3
