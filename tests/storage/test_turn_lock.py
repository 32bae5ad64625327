"""The cross-instance turn lock: one turn per conversation at a time, never a lock left behind."""

from __future__ import annotations

import asyncio
import contextlib

from agent.turn_lock_pg import PostgresTurnLock
from storage.postgres import PostgresDatabase


async def _hold(lock: PostgresTurnLock, conversation_id: str, seconds: float) -> None:
    async with lock.hold(conversation_id):
        await asyncio.sleep(seconds)


async def test_two_instances_take_turns_on_one_conversation(pg_db: PostgresDatabase) -> None:
    a, b = PostgresTurnLock(pg_db), PostgresTurnLock(pg_db)
    order: list[str] = []

    async def turn(lock: PostgresTurnLock, name: str, seconds: float) -> None:
        async with lock.hold("c1"):
            order.append(f"{name} in")
            await asyncio.sleep(seconds)
            order.append(f"{name} out")

    first = asyncio.create_task(turn(a, "a", 0.3))
    await asyncio.sleep(0.05)
    await asyncio.gather(first, turn(b, "b", 0.0))
    assert order == ["a in", "a out", "b in", "b out"]


async def test_different_conversations_do_not_wait_for_each_other(pg_db: PostgresDatabase) -> None:
    a, b = PostgresTurnLock(pg_db), PostgresTurnLock(pg_db)
    async with a.hold("c1"), asyncio.timeout(2):
        await _hold(b, "c2", 0.0)


async def test_a_cancelled_waiter_or_holder_leaves_no_lock_behind(pg_db: PostgresDatabase) -> None:
    a, b = PostgresTurnLock(pg_db), PostgresTurnLock(pg_db)
    async with a.hold("c1"):
        waiter = asyncio.create_task(_hold(b, "c1", 0.0))
        await asyncio.sleep(0.2)
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiter
    holder = asyncio.create_task(_hold(a, "c1", 30))
    await asyncio.sleep(0.2)
    holder.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await holder
    async with asyncio.timeout(2):
        await _hold(b, "c1", 0.0)


async def test_a_free_lock_is_taken_at_once_and_a_held_one_is_reported(
    pg_db: PostgresDatabase,
) -> None:
    a, b = PostgresTurnLock(pg_db), PostgresTurnLock(pg_db)
    async with asyncio.timeout(2):
        async with a.hold("c1"), b.hold_if_free("c1") as free:
            assert free is False
        async with b.hold_if_free("c1") as free:
            assert free is True
            async with a.hold_if_free("c1") as other:
                assert other is False
        async with a.hold_if_free("c1") as free:  # released again
            assert free is True
