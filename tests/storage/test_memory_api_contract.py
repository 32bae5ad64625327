"""The memory HTTP routes over both backends (SQLite and PostgreSQL): the list puts current
notes first under "any status", a replaced note names the note that replaced it, and a note
is marked replaced (and made current again) with a PUT (issue #29)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from memory.backend import MemoryBackend
from memory.config import MemoryConfig
from memory.model import NoteDraft
from memory.postgres.store import PostgresMemoryStore
from memory.sqlite.store import MemoryStore
from storage.postgres import PostgresDatabase
from web.errors import install_error_handling
from web.memory_api import MemoryApi, memory_router


class Clock:
    """A clock the test moves, so that every change has its own `updated`."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def tick(self) -> None:
        self.now += timedelta(minutes=1)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Iterator[MemoryBackend]:
    config = MemoryConfig.for_home(tmp_path / "home", fsync=False)
    if request.param == "sqlite":
        with MemoryStore.open(config, clock=clock) as sqlite_store:
            yield sqlite_store
        return
    db = PostgresDatabase(request.getfixturevalue("database_url"), min_size=1, max_size=4)
    db.open()
    try:
        with PostgresMemoryStore.open(db, config, clock=clock) as postgres_store:
            yield postgres_store
    finally:
        db.close()


@pytest.fixture
async def client(store: MemoryBackend) -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    install_error_handling(app)  # the app's one error mapping (web/errors.py)
    app.state.memory_api = MemoryApi(store=store)
    app.include_router(memory_router)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http


def save(store: MemoryBackend, clock: Clock, content: str) -> str:
    clock.tick()
    return store.save(NoteDraft(content=content, title=content)).id


async def listed(client: httpx.AsyncClient, **params: str | int) -> list[str]:
    response = await client.get("/api/memories", params=params)
    assert response.status_code == 200, response.text
    return [n["id"] for n in response.json()["items"]]


async def test_the_list_under_any_status_puts_current_notes_first(
    client: httpx.AsyncClient, store: MemoryBackend, clock: Clock
) -> None:
    old = save(store, clock, "The deploy goes through staging")
    dropped = save(store, clock, "We use Jenkins for builds")
    first = save(store, clock, "The weekly sync is on Monday")
    new = save(store, clock, "The deploy goes through the canary")
    clock.tick()
    store.deprecate(dropped)
    clock.tick()
    store.supersede(old, new)  # changed last: by `updated` alone it would come first
    everything = [n.id for n in store.list(limit=50)]
    active = [i for i in everything if i not in (old, dropped)]

    assert await listed(client) == [*active, dropped, old]
    assert (await client.get("/api/memories")).json()["total"] == len(everything)
    # paging walks the same sequence, across the status groups
    pages = [await listed(client, limit=2, offset=offset) for offset in range(0, 8, 2)]
    assert [i for page in pages for i in page] == [*active, dropped, old]
    assert await listed(client, limit=1, offset=len(everything)) == []
    # the sort asked for holds inside each group; a status asked for lists that status only
    assert await listed(client, sort="created") == [*active, dropped, old]
    assert await listed(client, status="superseded") == [old]
    assert first in active and new in active


async def test_a_note_is_marked_replaced_with_a_put_and_named_by_its_successor(
    client: httpx.AsyncClient, store: MemoryBackend, clock: Clock
) -> None:
    old = save(store, clock, "周会在周一上午十点")
    new = save(store, clock, "周会改到周二下午三点")

    response = await client.put(
        f"/api/memories/{old}", json={"status": "superseded", "superseded_by": new}
    )
    assert response.status_code == 200, response.text
    marked = response.json()
    assert (marked["status"], marked["superseded_by"]) == ("superseded", new)
    assert marked["superseded_by_title"] == "周会改到周二下午三点"

    got = (await client.get(f"/api/memories/{old}")).json()
    assert got["superseded_by_title"] == "周会改到周二下午三点"
    [item] = (await client.get("/api/memories", params={"status": "superseded"})).json()["items"]
    assert (item["superseded_by"], item["superseded_by_title"]) == (new, "周会改到周二下午三点")
    found = await client.post(
        "/api/memories/search", json={"query": "周会", "include_inactive": True}
    )
    hits = {h["id"]: h for h in found.json()["results"]}
    assert (hits[old]["superseded_by"], hits[old]["superseded_by_title"]) == (
        new,
        "周会改到周二下午三点",
    )
    assert (hits[new]["superseded_by"], hits[new]["superseded_by_title"]) == (None, None)

    # made current again: it names no successor any more
    back = await client.put(
        f"/api/memories/{old}", json={"status": "active", "superseded_by": None}
    )
    assert back.status_code == 200, back.text
    assert (back.json()["status"], back.json()["superseded_by"]) == ("active", None)
    assert back.json()["superseded_by_title"] is None


async def test_replacing_refuses_itself_and_unknown_notes(
    client: httpx.AsyncClient, store: MemoryBackend, clock: Clock
) -> None:
    note = save(store, clock, "A note that stays current")

    async def replace(old: str, new: str) -> httpx.Response:
        body = {"status": "superseded", "superseded_by": new}
        return await client.put(f"/api/memories/{old}", json=body)

    itself = await replace(note, note)
    assert itself.status_code == 422 and "itself" in itself.json()["detail"]
    unknown_new = await replace(note, "mem_nope")
    assert unknown_new.status_code == 404 and "mem_nope" in unknown_new.json()["detail"]
    unknown_old = await replace("mem_gone", note)
    assert unknown_old.status_code == 404 and "mem_gone" in unknown_old.json()["detail"]
    assert store.get(note).status == "active"


async def test_a_successor_deleted_since_leaves_its_id(
    client: httpx.AsyncClient, store: MemoryBackend, clock: Clock
) -> None:
    old = save(store, clock, "The office is on floor three")
    new = save(store, clock, "The office moved to floor five")
    store.supersede(old, new)
    store.delete(new)
    got = (await client.get(f"/api/memories/{old}")).json()
    assert (got["superseded_by"], got["superseded_by_title"]) == (new, None)
