"""The encoder worker process: answers at once while loading, restarts after a crash, fails
requests instead of hanging, leaves no process behind."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable

import pytest

from memory.encoders.client import (
    EncoderClient,
    EncoderDisabled,
    EncoderFailed,
    EncoderLoading,
    EncoderReady,
    ThreadEncoder,
    state_name,
)
from memory.encoders.models import EncoderSpec, EncoderUnavailableError

np = pytest.importorskip("numpy")

HASHING = EncoderSpec("hashing")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _eventually(condition: Callable[[], bool], seconds: float) -> None:
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)


async def test_requests_during_loading_are_refused_at_once() -> None:
    async with EncoderClient(HASHING, load_delay=30) as client:
        assert isinstance(client.status, EncoderLoading)
        started = time.monotonic()
        with pytest.raises(EncoderUnavailableError) as caught:
            await client.encode(["hello"], "query")
        assert time.monotonic() - started < 0.1
        assert caught.value.state == "loading"
        assert client.status.to_dict()["state"] == "loading"


async def test_ready_worker_encodes_queries_and_passages() -> None:
    async with EncoderClient(HASHING) as client:
        status = await client.wait_ready(30)
        assert isinstance(status, EncoderReady)
        assert status.name == "hashing-256" and status.dim == 256
        vectors = await client.encode(["登录功能怎么实现？", "JWT + Redis"], "passage")
        assert vectors.shape == (2, 256)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        assert await client.ping()


async def test_a_killed_worker_is_restarted_and_answers_again() -> None:
    async with EncoderClient(HASHING, restart_delay=0.1) as client:
        first = await client.wait_ready(30)
        assert isinstance(first, EncoderReady)
        os.kill(first.pid, signal.SIGKILL)
        with pytest.raises(EncoderUnavailableError):  # in flight or refused, never a hang
            await client.encode(["x"], time_limit=10)
        second = await client.wait_ready(30)
        assert isinstance(second, EncoderReady)
        assert second.pid != first.pid and second.restarts == 1
        assert (await client.encode(["x"])).shape == (1, 256)


async def test_a_load_failure_is_reported_with_its_reason() -> None:
    broken = EncoderSpec("openai", model="m", url="http://127.0.0.1:9/v1", timeout=1)
    async with EncoderClient(broken, restart_delay=30) as client:
        await _eventually(lambda: isinstance(client.status, EncoderFailed), 30)
        status = client.status
        assert isinstance(status, EncoderFailed)
        assert "load failed" in status.error
        assert status.to_dict()["state"] == "failed"
        with pytest.raises(EncoderUnavailableError, match="failed"):
            await client.encode(["x"])


async def test_closing_the_client_ends_the_worker() -> None:
    client = EncoderClient(HASHING)
    async with client:
        status = await client.wait_ready(30)
        assert isinstance(status, EncoderReady)
        pid = status.pid
    await _eventually(lambda: not _alive(pid), 5)
    assert not _alive(pid)


async def test_no_spec_means_disabled_and_no_process() -> None:
    async with EncoderClient(None) as client:
        assert isinstance(client.status, EncoderDisabled)
        assert state_name(client.status) == "disabled"
        assert client.pid is None
        with pytest.raises(EncoderUnavailableError, match="disabled"):
            await client.encode(["x"])


async def test_thread_encoder_serves_worker_threads_and_refuses_the_loop_thread() -> None:
    async with EncoderClient(HASHING) as client:
        await client.wait_ready(30)
        adapter = ThreadEncoder(client)
        vectors = await asyncio.to_thread(adapter.encode, ["a", "b"], "query")
        assert vectors.shape == (2, 256)
        assert adapter.name == "hashing-256"
        with pytest.raises(EncoderUnavailableError, match="event loop"):
            adapter.encode(["a"])


async def test_worker_log_goes_to_the_log_file(tmp_path) -> None:
    log = tmp_path / "logs" / "encoder.log"
    async with EncoderClient(HASHING, log_path=log) as client:
        await client.wait_ready(30)
    assert log.exists()


async def test_a_worker_that_stops_answering_is_killed_and_restarted() -> None:
    # SIGSTOP: alive, pipes open, never answering (as a worker stuck in a native library).
    # Before, every later search waited out its timeout and fell back to keywords for good.
    async with EncoderClient(HASHING, restart_delay=1.0, hang_timeout=1.0) as client:
        first = await client.wait_ready(30)
        assert isinstance(first, EncoderReady)
        os.kill(first.pid, signal.SIGSTOP)
        with pytest.raises(EncoderUnavailableError, match="busy"):
            await client.encode(["x"], "query", time_limit=0.3)
        await _eventually(lambda: isinstance(client.status, EncoderFailed), 10)
        failed = client.status
        assert isinstance(failed, EncoderFailed)
        assert "hung" in failed.error
        await _eventually(lambda: not _alive(first.pid), 5)
        assert not _alive(first.pid)
        second = await client.wait_ready(30)
        assert isinstance(second, EncoderReady)
        assert second.pid != first.pid and second.restarts == 1
        assert (await client.encode(["x"], "query")).shape == (1, 256)


async def test_a_worker_answering_late_within_its_allowance_is_kept() -> None:
    # a long batch is not a hang: the worker is paused for less than the allowance
    async with EncoderClient(HASHING, hang_timeout=5.0) as client:
        first = await client.wait_ready(30)
        assert isinstance(first, EncoderReady)
        os.kill(first.pid, signal.SIGSTOP)
        try:
            with pytest.raises(EncoderUnavailableError, match="busy"):
                await client.encode(["x"], "query", time_limit=0.3)
            await asyncio.sleep(1.0)
        finally:
            os.kill(first.pid, signal.SIGCONT)
        assert (await client.encode(["y"], "query", time_limit=10)).shape == (1, 256)
        assert client.status == first
        assert client.pid == first.pid


async def test_a_search_with_a_vector_budget_answers_on_keywords_when_the_worker_is_frozen(
    tmp_path,
) -> None:
    from memory.config import MemoryConfig
    from memory.model import NoteDraft
    from memory.search.plan import vector_budget
    from memory.sqlite.store import MemoryStore

    async with EncoderClient(HASHING, hang_timeout=30.0) as client:
        ready = await client.wait_ready(30)
        assert isinstance(ready, EncoderReady)
        with MemoryStore.open(MemoryConfig.for_home(tmp_path, fsync=False)) as store:
            store.attach_encoder(ThreadEncoder(client))
            wanted = store.save(NoteDraft(content="The billing service listens on port 8443.")).id
            await asyncio.to_thread(store.sync_vectors)
            os.kill(ready.pid, signal.SIGSTOP)  # as busy as a worker embedding a backlog
            try:
                started = time.monotonic()
                with vector_budget(0.15):
                    outcome = await asyncio.to_thread(
                        store.search_detailed, "billing service port", floor=0.0
                    )
                took = time.monotonic() - started
            finally:
                os.kill(ready.pid, signal.SIGCONT)
            assert took < 1.0, took  # the hook's prompt does not wait out the worker
            assert outcome.mode == "keyword" and "busy" in (outcome.notice or "")
            assert [h.id for h in outcome.hits] == [wanted]
            # without a budget (a search the person asked for) the vector is waited for
            outcome = await asyncio.to_thread(store.search_detailed, "billing port", floor=0.0)
            assert outcome.mode == "hybrid"


async def test_a_query_is_answered_while_the_worker_embeds_a_long_batch_of_notes() -> None:
    # Real work, no delay knob: 120 long Chinese notes take the hashing encoder seconds. Before,
    # the worker took one request at a time and a prompt's vector waited for the whole batch
    # (a served hook then fell back to keywords, or waited seconds without a budget).
    from memory.encoders.models import HashingEncoder

    notes = [f"第{n}条笔记：" + "记忆系统的检索速度和向量索引" * 400 for n in range(120)]
    async with EncoderClient(HASHING) as client:
        await client.wait_ready(30)
        started = time.monotonic()
        batch = asyncio.create_task(client.encode(notes, "passage"))
        await asyncio.sleep(0.3)  # the batch is in the worker
        query = await client.encode(["向量索引怎么建"], "query", time_limit=30)
        query_took = time.monotonic() - started - 0.3
        assert not batch.done()  # the query did not wait for it
        vectors = await batch
        batch_took = time.monotonic() - started
    assert query_took < 1.0 and batch_took > 2 * query_took, (query_took, batch_took)
    encoder = HashingEncoder()
    assert np.allclose(query, encoder.encode(["向量索引怎么建"], "query"))
    # the pieces come back whole and in order
    assert vectors.shape == (120, 256)
    assert np.allclose(vectors, encoder.encode(notes, "passage"))


def test_long_requests_are_cut_into_pieces_in_order() -> None:
    from memory.encoders.worker import pieces

    assert pieces(["a" * 500, "b" * 500, "c" * 500, "d" * 3000, "e"], 1200) == [
        ["a" * 500, "b" * 500],
        ["c" * 500],
        ["d" * 3000],
        ["e"],
    ]
    assert pieces([], 1200) == []
