"""The PostgreSQL `SessionStore`: the SDK's own conformance suite, plus what the app relies on."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from claude_agent_sdk import SessionKey, SessionStoreEntry
from claude_agent_sdk.testing import run_session_store_conformance

from agent.pg_session_store import PostgresSessionStore
from storage.postgres import PostgresDatabase


def lines(*entries: dict[str, Any]) -> list[SessionStoreEntry]:
    """Transcript lines as the store takes them. `SessionStoreEntry` names only `type`, `uuid`
    and `timestamp`; every other field is opaque JSON the store passes through, which a TypedDict
    cannot say."""
    return [cast("SessionStoreEntry", entry) for entry in entries]


def fields(entry: SessionStoreEntry) -> dict[str, Any]:
    """A loaded line with its opaque fields readable."""
    return cast("dict[str, Any]", entry)


async def test_postgres_session_store_passes_the_sdk_conformance_suite(
    pg_db: PostgresDatabase,
) -> None:
    store = PostgresSessionStore(pg_db)

    async def fresh() -> PostgresSessionStore:
        await store.clear()
        return store

    await run_session_store_conformance(fresh)


async def test_a_retried_batch_lands_once_and_entries_without_uuid_always_land(
    pg_db: PostgresDatabase,
) -> None:
    store = PostgresSessionStore(pg_db)
    key: SessionKey = {"project_key": "p", "session_id": "s"}
    batch = lines({"type": "user", "uuid": "u1", "n": 1}, {"type": "title", "title": "t"})
    await store.append(key, batch)
    await store.append(key, batch)
    loaded = await store.load(key)
    assert loaded == [batch[0], batch[1], batch[1]]


async def test_entries_round_trip_exactly_including_key_order_and_unicode(
    pg_db: PostgresDatabase,
) -> None:
    store = PostgresSessionStore(pg_db)
    key: SessionKey = {"project_key": "p", "session_id": "s"}
    entry = {"uuid": "u", "type": "assistant", "z": 1, "a": {"y": "中文 ✓", "b": [1, 2.5, None]}}
    entry["nul"] = "tool output with \x00 inside"
    await store.append(key, lines(entry))
    loaded = await store.load(key)
    assert loaded == [entry]
    assert list(loaded[0]) == list(entry)  # the CLI reads what it wrote, in its order


async def test_a_shared_project_key_lets_different_workspaces_find_one_transcript(
    pg_db: PostgresDatabase,
) -> None:
    store = PostgresSessionStore(pg_db, project_key="shared")
    entries = lines({"type": "user", "uuid": "u1"})
    await store.append({"project_key": "-home-a-workspace", "session_id": "s"}, entries)
    loaded = await store.load({"project_key": "-srv-b-workspace", "session_id": "s"})
    assert loaded == entries
    assert [s["session_id"] for s in await store.list_sessions("anything")] == ["s"]


async def test_concurrent_appends_to_one_session_lose_nothing_and_keep_each_batch_in_order(
    pg_db: PostgresDatabase,
) -> None:
    store = PostgresSessionStore(pg_db)
    key: SessionKey = {"project_key": "p", "session_id": "s"}

    async def writer(w: int) -> None:
        for b in range(5):
            await store.append(
                key,
                lines(
                    *(
                        {"type": "x", "uuid": f"{w}-{b}-{i}", "w": w, "b": b, "i": i}
                        for i in range(3)
                    )
                ),
            )

    await asyncio.gather(*(writer(w) for w in range(3)))
    loaded = await store.load(key)
    assert loaded is not None and len(loaded) == 3 * 5 * 3
    for w in range(3):
        mine = [(e["b"], e["i"]) for e in map(fields, loaded) if e["w"] == w]
        assert mine == sorted(mine)
    summaries = await store.list_session_summaries("p")
    assert [s["session_id"] for s in summaries] == ["s"]
