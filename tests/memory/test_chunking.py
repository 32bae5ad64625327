"""What a note's vectors are made from (`memory.search.vectors.chunk_note`): table rows, and
the text one that held the encoder for seconds (found by a new user on 26 Nov: a 2 MB note of
one "word" went to the encoder as one piece, and every search waited behind it)."""

from __future__ import annotations

import pytest

from memory.search.vectors import CHUNK_TOKENS, MAX_CHUNKS, chunk_note

WIDTH = CHUNK_TOKENS * 4  # characters of a full chunk without CJK


@pytest.mark.parametrize(
    ("title", "body", "expected"),
    [
        ("Deploys", "Deploys go out on Fridays.", ["Deploys go out on Fridays."]),
        ("发布", "每周五发布。周四冻结代码。", ["每周五发布。\n周四冻结代码。"]),
        ("Cache", "We use Redis.", ["Cache\nWe use Redis."]),  # a title the body lacks leads
    ],
)
def test_short_notes(title: str, body: str, expected: list[str]) -> None:
    assert chunk_note(title, "", body) == expected


@pytest.mark.parametrize(
    "body",
    [
        "y" * 2_000_000,  # one "word": cut by characters
        "https://example.invalid/" + "a1" * 300_000 + " and then some words.",
        "数据库连接池" * 200_000,  # CJK: one character a word already
        "word " * 400_000,  # many short sentences-less words
    ],
)
def test_a_huge_note_gives_at_most_max_chunks_of_chunk_size(body: str) -> None:
    chunks = chunk_note("Huge", "", body)
    assert 1 <= len(chunks) <= MAX_CHUNKS
    assert max(len(c) for c in chunks) <= WIDTH + len("Huge\n"), [len(c) for c in chunks]
