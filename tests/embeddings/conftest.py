"""Fixtures for the retrieval tests. numpy comes with the `embeddings` extra; without it
only the pure tests (fusion, chunking) run."""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from tests.embeddings.fake_openai import FakeEmbeddingsAPI

if TYPE_CHECKING:
    from memory.encoders.models import Encoder, TextKind


class MemoEncoder:
    """An encoder that encodes each (kind, text) once per test session and remembers the
    vector in memory (never on disk: each run encodes afresh with the encoder it has). The
    acceptance runs search every question in five modes and every unrelated prompt twice:
    the encoder would otherwise see the same texts again and again."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self._vectors: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()  # stores encode queries on a worker thread

    @property
    def name(self) -> str:
        return self.encoder.name

    @property
    def dim(self) -> int:
        return self.encoder.dim

    def encode(self, texts: Sequence[str], kind: TextKind = "passage") -> Any:
        import numpy as np

        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if (kind, t) not in self._vectors))
            if missing:
                for text, vector in zip(missing, self.encoder.encode(missing, kind), strict=True):
                    self._vectors[(kind, text)] = vector
            if not texts:
                return np.zeros((0, self.dim), dtype=np.float32)
            return np.stack([self._vectors[(kind, t)] for t in texts])


@pytest.fixture
def fake_embeddings() -> Iterator[FakeEmbeddingsAPI]:
    fake = FakeEmbeddingsAPI().start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture(scope="session")
def default_encoder() -> Encoder:
    """The packaged default encoder (E5 + USE, `CLAUDE_MEMORY_ENCODER=auto`), loaded once per
    session (per xdist worker) and remembering what it encoded (`MemoEncoder`)."""
    from memory.encoders.models import load_encoder, parse_encoder_setting

    spec = parse_encoder_setting("auto")
    assert spec is not None
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # beside other workers on the same cores: one thread, not one per core (a thread
        # waiting for a core another worker holds only spins)
        spec = dataclasses.replace(spec, threads=1)
    return MemoEncoder(load_encoder(spec))
