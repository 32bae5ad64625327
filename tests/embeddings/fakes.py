"""A scripted encoder for store tests: vectors chosen by the test, calls recorded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory.encoders.models import EncoderUnavailableError, HashingEncoder, TextKind, normalize_rows


class ScriptedEncoder:
    """A text containing one of `directions`' keys gets that key's vector; any other text a
    lexical hashing vector. `state` other than "ready" makes every call unavailable."""

    def __init__(self, name: str = "scripted-v1", dim: int = 16) -> None:
        self._name = name
        self._dim = dim
        self.directions: dict[str, list[float]] = {}
        self.calls: list[tuple[TextKind, list[str]]] = []
        self.state = "ready"
        self._hashing = HashingEncoder(dim)

    @property
    def name(self) -> str:
        if self.state != "ready":
            raise EncoderUnavailableError(self.state)
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: Sequence[str], kind: TextKind = "passage") -> Any:
        if self.state != "ready":
            raise EncoderUnavailableError(self.state)
        self.calls.append((kind, list(texts)))
        rows = self._hashing.encode(texts, kind) * 0.05  # background: near orthogonal noise
        for i, text in enumerate(texts):
            for key, direction in self.directions.items():
                if key in text:
                    rows[i] += direction
        return normalize_rows(rows)

    def unit(self, axis: int, *, tilt: float = 0.0, towards: int = 0) -> list[float]:
        """A unit direction along `axis`, optionally tilted towards another axis."""
        vector = [0.0] * self._dim
        vector[axis] = 1.0
        vector[towards] += tilt
        return vector
