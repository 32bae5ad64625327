"""`/api/memories/pending`: a captured memory is confirmed or rejected once, and that decision
is final (issue #19: a confirmed candidate could later be rejected, a rejected one confirmed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from memory.loop.entities import EntityCandidate, PendingStore
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore
from web.errors import install_error_handling
from web.memory_api import MemoryApi, memory_router, pending_router


@pytest.fixture
def pending(tmp_path: Path) -> PendingStore:
    return PendingStore(StateDB(tmp_path / "state.db"))


@pytest.fixture
async def client(store: MemoryStore, pending: PendingStore) -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    install_error_handling(app)  # the app's one error mapping (web/errors.py)
    app.state.memory_api = MemoryApi(store=store, pending=pending)
    app.include_router(pending_router)
    app.include_router(memory_router)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http


def _candidate(pending: PendingStore, content: str) -> str:
    candidate = EntityCandidate("preference", content, 0.6, content[:20])
    return pending.add(candidate, scope="user", source="test").id


@pytest.mark.parametrize(
    ("first", "second", "second_status"),
    [
        ("confirm", "confirm", 200),  # the same decision again: idempotent
        ("reject", "reject", 200),
        ("confirm", "reject", 409),
        ("reject", "confirm", 409),
    ],
)
async def test_a_decision_on_a_candidate_is_final(
    client: httpx.AsyncClient,
    pending: PendingStore,
    store: MemoryStore,
    first: str,
    second: str,
    second_status: int,
) -> None:
    pid = _candidate(pending, "I prefer pytest over unittest for new projects")
    notes_before = store.count()
    done = await client.post(f"/api/memories/pending/{pid}/{first}")
    assert done.status_code == 200, done.text
    again = await client.post(f"/api/memories/pending/{pid}/{second}")
    assert again.status_code == second_status, again.text
    final = pending.get(pid).status
    assert final == ("confirmed" if first == "confirm" else "rejected")
    if second_status == 409:
        assert "final" in again.json()["detail"]
    # A rejected candidate never became a note, a confirmed one exactly one.
    assert store.count() - notes_before == (1 if first == "confirm" else 0)


async def test_unknown_candidate_is_404_and_bad_limits_are_422(
    client: httpx.AsyncClient,
) -> None:
    assert (await client.post("/api/memories/pending/pend_nope/confirm")).status_code == 404
    assert (await client.post("/api/memories/pending/pend_nope/reject")).status_code == 404
    for limit in ("0", "-1", "501", "many"):
        got = await client.get("/api/memories/pending", params={"limit": limit})
        assert got.status_code == 422, (limit, got.text)
    assert (
        await client.get("/api/memories/pending", params={"status": "maybe"})
    ).status_code == 422


@pytest.mark.parametrize("query", ["", " ", "\t\n", "　"])
async def test_a_blank_search_is_refused(client: httpx.AsyncClient, query: str) -> None:
    got = await client.post("/api/memories/search", json={"query": query})
    assert got.status_code == 422, got.text
