"""Fixtures for the memory tests: a temp home, a config and an open store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory.config import MemoryConfig
from memory.sqlite.store import MemoryStore


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No CLAUDE_MEMORY_* variable from the developer's shell leaks into a test."""
    import os

    for name in list(os.environ):
        if name.startswith("CLAUDE_MEMORY_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CLAUDE_MEMORY_HOME", str(tmp_path / "env-home"))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def config(home: Path) -> MemoryConfig:
    # fsync off: tests do not need durability and run faster without it
    return MemoryConfig.for_home(home, fsync=False)


@pytest.fixture
def store(config: MemoryConfig) -> Iterator[MemoryStore]:
    with MemoryStore.open(config) as opened:
        yield opened
