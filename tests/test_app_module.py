"""`uvicorn app:app`: the module builds its app on first access, not at import, and once."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest


def test_the_module_level_app_is_built_on_first_access_and_then_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_MEMORY_HOME", str(tmp_path / "home"))
    module = importlib.import_module("app")
    module._default_app.cache_clear()
    assert module._default_app.cache_info().currsize == 0  # importing built nothing
    first = module.app
    assert module.app is first  # an ASGI server that looks it up again gets the same app
    assert first.state.settings.home_dir == tmp_path / "home"
    module._default_app.cache_clear()
