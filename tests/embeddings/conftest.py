"""Fixtures for the retrieval tests. numpy comes with the `embeddings` extra; without it
only the pure tests (fusion, chunking) run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.embeddings.fake_openai import FakeEmbeddingsAPI


@pytest.fixture
def fake_embeddings() -> Iterator[FakeEmbeddingsAPI]:
    fake = FakeEmbeddingsAPI().start()
    try:
        yield fake
    finally:
        fake.stop()
