"""HTTP API: /api/memories..."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from memory.search.relevance import DEFAULT_FLOOR, DEFAULT_INJECT_FLOOR
from memory.sqlite.store import MemoryStore
from web.errors import install_error_handling
from web.memory_api import MemoryApi, memory_router


@pytest.fixture
async def client(store: MemoryStore) -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    install_error_handling(app)  # the app's one error mapping (web/errors.py)
    app.state.memory_api = MemoryApi(store=store)
    app.include_router(memory_router)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http


async def save(client: httpx.AsyncClient, **body: object) -> dict[str, object]:
    response = await client.post("/api/memories", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_save_then_get_full_text(client: httpx.AsyncClient) -> None:
    saved = await save(
        client,
        content="修复连接池泄漏：finally 里归还连接。",
        title="连接池",
        type="Decision",
        scope="project:api",
        tags=["db"],
        importance=0.7,
        source="web",
    )
    assert saved["deduplicated"] is False and str(saved["id"]).startswith("mem_")
    response = await client.get(f"/api/memories/{saved['id']}")
    assert response.status_code == 200
    note = response.json()
    assert note["type"] == "decision" and note["scope"] == "project:api"
    assert note["tags"] == ["db"] and note["importance"] == 0.7
    assert note["body"].startswith("修复连接池泄漏")


async def test_duplicate_save_reports_deduplicated(client: httpx.AsyncClient) -> None:
    first = await save(client, content="Prefers dark mode in every editor.")
    again = await save(client, content="prefers dark mode in every editor.")
    assert again == {**first, "deduplicated": True}


async def test_search_returns_ranked_results_with_score_parts(client: httpx.AsyncClient) -> None:
    saved = await save(client, content="JWT auth_timeout 设为 30 分钟", type="code")
    await save(client, content="Unrelated gardening note")
    response = await client.post("/api/memories/search", json={"query": "auth_timeout 分钟"})
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["id"] for r in results] == [saved["id"]]
    parts = results[0]["score_parts"]
    assert set(parts) == {"relevance", "type_weight", "recency", "importance", "usage"}
    assert results[0]["score"] > 0


async def test_search_leaves_out_weak_hits_unless_all_is_asked(client: httpx.AsyncClient) -> None:
    jwt = await save(client, content="JWT auth_timeout 设为 30 分钟", type="code")
    await save(client, content="Unrelated gardening note about tomatoes")
    query = {
        "query": "auth_timeout tomatoes watering schedule forecast humidity fertilizer greenhouse"
    }

    async def found(path: str, **extra: object) -> list[dict[str, Any]]:
        response = await client.post(path, json={**query, **extra})
        assert response.status_code == 200, response.text
        return list(response.json()["results"])

    # each note holds one word of eight: coincidence, not returned by default
    assert await found("/api/memories/search") == []
    for everything in (
        await found("/api/memories/search?all=true"),
        await found("/api/memories/search", all=True),
    ):
        assert {r["id"] for r in everything} >= {jwt["id"]}
        assert all(0 <= r["relevance"] < DEFAULT_FLOOR for r in everything)
    # a good match carries a relevance that says so, returned by default
    (best, *_) = await found("/api/memories/search", query="auth_timeout 分钟")
    assert best["id"] == jwt["id"] and best["relevance"] >= DEFAULT_INJECT_FLOOR
    # the flag in the body is an explicit JSON boolean, like every flag of the API
    response = await client.post("/api/memories/search", json={**query, "all": "yes"})
    assert response.status_code == 422


async def test_search_with_fts_syntax_is_fine(client: httpx.AsyncClient) -> None:
    for query in ['"', "a OR", "(x", "-", "NEAR(", "*"]:
        response = await client.post("/api/memories/search", json={"query": query})
        assert response.status_code == 200
        assert response.json()["results"] == []


async def test_list_with_filters_sort_and_paging(client: httpx.AsyncClient) -> None:
    a = await save(client, content="note a", type="bug", importance=0.1, tags=["t"])
    b = await save(client, content="note b", type="bug", importance=0.9)
    response = await client.get(
        "/api/memories", params={"type": "bug", "sort": "importance", "limit": 1}
    )
    body = response.json()
    assert response.status_code == 200
    assert [n["id"] for n in body["items"]] == [b["id"]]
    assert body["total"] == 2 and body["limit"] == 1 and body["offset"] == 0
    assert "body" not in body["items"][0]
    tagged = (await client.get("/api/memories", params={"tag": "t"})).json()
    assert [n["id"] for n in tagged["items"]] == [a["id"]]


async def test_partial_update_reindexes(client: httpx.AsyncClient) -> None:
    saved = await save(client, content="The mascot is a heron.")
    response = await client.put(
        f"/api/memories/{saved['id']}", json={"content": "The mascot is a crane.", "tags": ["x"]}
    )
    assert response.status_code == 200
    assert response.json()["tags"] == ["x"]
    found = (await client.post("/api/memories/search", json={"query": "crane"})).json()
    assert [r["id"] for r in found["results"]] == [saved["id"]]
    gone = (await client.post("/api/memories/search", json={"query": "heron"})).json()
    assert gone["results"] == []


async def test_delete_then_404(client: httpx.AsyncClient) -> None:
    saved = await save(client, content="delete me soon")
    response = await client.delete(f"/api/memories/{saved['id']}")
    assert response.status_code == 200 and response.json() == {"id": saved["id"], "deleted": True}
    for method in ("GET", "DELETE"):
        missing = await client.request(method, f"/api/memories/{saved['id']}")
        assert missing.status_code == 404
        assert saved["id"] in missing.json()["detail"]


async def test_unknown_id_is_404_with_a_clear_message(client: httpx.AsyncClient) -> None:
    response = await client.put("/api/memories/mem_nope", json={"title": "x"})
    assert response.status_code == 404
    assert "mem_nope" in response.json()["detail"] and "not found" in response.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"content": ""},
        {"content": "x", "type": "wizard"},
        {"content": "x", "scope": "galaxy"},
        {"content": "x", "importance": 3},
        {"content": "x", "expires_at": "soon"},
        {"content": "x", "unknown": 1},
    ],
)
async def test_bad_input_is_422(client: httpx.AsyncClient, body: dict[str, object]) -> None:
    response = await client.post("/api/memories", json=body)
    assert response.status_code == 422, response.text


async def test_bad_update_and_list_parameters_are_422(client: httpx.AsyncClient) -> None:
    saved = await save(client, content="something to update")
    assert (await client.put(f"/api/memories/{saved['id']}", json={})).status_code == 422
    bad = await client.put(f"/api/memories/{saved['id']}", json={"type": "nope"})
    assert bad.status_code == 422 and "unknown type" in bad.json()["detail"]
    assert (await client.get("/api/memories", params={"sort": "colour"})).status_code == 422
    assert (await client.get("/api/memories", params={"limit": 0})).status_code == 422
    assert (await client.post("/api/memories/search", json={"limit": 5})).status_code == 422


async def test_stats_and_rebuild_are_not_captured_by_the_id_route(
    client: httpx.AsyncClient,
) -> None:
    await save(client, content="a research note", type="research", scope="project:x")
    stats = (await client.get("/api/memories/stats")).json()
    assert stats["total"] == 2 and stats["by_type"]["research"] == 1
    assert stats["by_scope"] == {"project:x": 1, "user": 1}
    assert stats["encoder"]["enabled"] is False and stats["encoder"]["state"] == "disabled"
    rebuilt = await client.post("/api/memories/rebuild")
    assert rebuilt.status_code == 200 and rebuilt.json()["added"] == 2
