"""Settings: one class, every field documented and listed in .env.example."""

from __future__ import annotations

from pathlib import Path

import pytest

from settings import Settings, render_env_example

REPO = Path(__file__).resolve().parent.parent


def test_env_example_lists_every_setting() -> None:
    expected = render_env_example()
    actual = (REPO / ".env.example").read_text(encoding="utf-8")
    assert actual == expected, "regenerate: uv run python -m settings > .env.example"


def test_every_field_is_described() -> None:
    missing = [name for name, f in Settings.model_fields.items() if not f.description]
    assert missing == []


def test_lists_accept_comma_separated_and_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_MEMORY_BASH_ALLOWLIST", "ls, cat")
    monkeypatch.setenv("FEISHU_ALLOWED_USERS", '["ou_1", "ou_2"]')
    settings = Settings()
    assert settings.bash_allowlist == ["ls", "cat"]
    assert settings.feishu_allowed_users == ["ou_1", "ou_2"]


def test_anthropic_and_feishu_keep_their_usual_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("FEISHU_APP_ID", "cli_x")
    monkeypatch.setenv("FEISHU_APP_SECRET", "s")
    settings = Settings()
    assert settings.anthropic_api_key is not None
    assert settings.anthropic_api_key.get_secret_value() == "sk-test"
    assert settings.feishu_enabled


def test_defaults_are_safe_on_a_laptop(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    assert settings.host == "127.0.0.1"
    assert settings.is_loopback
    assert settings.workspace_dir == (tmp_path / "workspace").resolve()
