"""Background embedding sends requests of a bounded size
(`memory.clients.vector_sync.within_chunks`): every save reaches the vectors through it, long
notes too."""

from __future__ import annotations

from memory.clients.vector_sync import BULK_CHUNKS, bulk_time_limit, within_chunks
from memory.search.vectors import PendingNote


def note(note_id: str, chunks: int) -> PendingNote:
    return PendingNote(note_id, f"key-{note_id}", tuple(f"chunk {i}" for i in range(chunks)))


def test_a_request_carries_at_most_the_chunk_budget_and_always_one_note() -> None:
    long = [note(f"l{i}", 16) for i in range(16)]  # 256 chunks were one request
    assert [n.id for n in within_chunks(long, 32)] == ["l0", "l1"]
    assert [n.id for n in within_chunks(long, BULK_CHUNKS)] == ["l0"]  # a long note alone
    assert [n.id for n in within_chunks([note("huge", 40)], BULK_CHUNKS)] == ["huge"]
    short = [note(f"s{i}", 1) for i in range(16)]
    assert len(within_chunks(short, BULK_CHUNKS)) == BULK_CHUNKS
    assert within_chunks([], BULK_CHUNKS) == []


def test_a_bigger_request_may_take_longer() -> None:
    assert bulk_time_limit(32) > bulk_time_limit(1) >= 10
