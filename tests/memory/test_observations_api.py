"""`/api/observations`: what Claude Code and Codex sessions did, found by words, seen in the
timeline around a hit, then read in full (seed 004's search -> timeline -> get_observations)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from memory.loop.episodes import EpisodeStore, observation_terms
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore
from web.errors import install_error_handling
from web.memory_api import MemoryApi, observations_router


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("PoolTimeout in db.py", ["pooltimeout", "in", "db.py"]),
        ("连接池满了", ["连接", "接池", "池满", "满了"]),
        ("池", ["池"]),
        ("redis 缓存", ["redis", "缓存"]),
        ("a b c", []),  # single letters say nothing
        ("  ？！ ", []),
        ("x" * 3 + " " + "y y y", ["xxx"]),
    ],
)
def test_the_words_an_observation_search_looks_for(query: str, terms: list[str]) -> None:
    assert observation_terms(query) == terms


@pytest.fixture
def episodes(tmp_path: Path, store: MemoryStore) -> EpisodeStore:
    return EpisodeStore(StateDB(tmp_path / "state.db"), store)


@pytest.fixture
async def client(episodes: EpisodeStore) -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    install_error_handling(app)  # the app's one error mapping (web/errors.py)
    app.state.memory_api = MemoryApi(store=episodes.store, episodes=episodes)
    app.include_router(observations_router)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http


async def test_search_then_timeline_then_details(
    client: httpx.AsyncClient, episodes: EpisodeStore
) -> None:
    ep = episodes.start("claude-code:s1", title="app 开发会话", project="github.com_acme_app")
    episodes.record(ep.id, "user", "修一下连接池", turn=True)
    hit = episodes.record(
        ep.id, "observation", "连接池满了 PoolTimeout", kind="bug", title="pytest"
    )
    episodes.record(ep.id, "assistant", "Raised the pool size to 20.")

    found = (await client.get("/api/observations/search", params={"q": "连接池"})).json()
    assert [r["id"] for r in found["results"]] == [hit]
    assert found["results"][0]["episode"]["title"] == "app 开发会话"

    around = (await client.get(f"/api/observations/{hit}/timeline")).json()
    assert [m["role"] for m in around["messages"]] == ["user", "observation", "assistant"]
    assert around["anchor"] == hit

    full = (await client.get("/api/observations", params={"ids": f"{hit}, 999"})).json()
    assert [o["content"] for o in full["observations"]] == ["连接池满了 PoolTimeout"]


@pytest.mark.parametrize(
    ("path", "params", "status"),
    [
        ("/api/observations/search", {"q": ""}, 422),
        ("/api/observations/search", {"q": "   "}, 422),
        ("/api/observations/search", {"q": "a b"}, 422),  # no word to look for
        ("/api/observations/search", {"q": "pool", "limit": "0"}, 422),
        ("/api/observations/search", {"q": "pool", "limit": "101"}, 422),
        ("/api/observations/123456/timeline", {}, 404),
        ("/api/observations/1/timeline", {"before": "-1"}, 422),
        ("/api/observations/abc/timeline", {}, 422),
        ("/api/observations", {"ids": "1,x"}, 422),
        ("/api/observations", {"ids": ",".join(str(i) for i in range(51))}, 422),
        ("/api/observations", {"ids": " , "}, 422),
    ],
)
async def test_bad_requests_get_clear_errors(
    client: httpx.AsyncClient, path: str, params: dict[str, str], status: int
) -> None:
    got = await client.get(path, params=params)
    assert got.status_code == status, got.text
    assert got.json()["detail"]
