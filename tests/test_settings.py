"""Settings: one class, every field documented and listed in .env.example."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from errors import ConfigurationError
from memory.settings_fields import (
    CONTEXT_BUDGET_TOKENS,
    DEDUP_THRESHOLD,
    HOOK_BUDGETS,
    INJECT_FLOOR,
    RELEVANCE_FLOOR,
    SHARED_FIELDS,
    HookValues,
    hook_values,
)
from settings import Settings, env_name, load_settings, render_env_example

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


# --- one table for Settings and the hook's light reader (memory/settings_fields.py) ---------

HOOK_KEY_FIELD = {
    "home": "home",
    "budget": "hook_budget",
    "context_tokens": "context_budget_tokens",
    "use_server": "hook_server",
    "dedup_threshold": "dedup_threshold",
    "database_url": "database_url",
    "native_memory": "native_memory",
    "relevance_floor": "relevance_floor",
    "inject_floor": "inject_floor",
}
"""Each value the hook reads -> the Settings field it is."""


def _plain(value: object) -> object:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, Path):
        return str(value)
    return value


def test_every_shared_field_is_a_setting_with_the_same_name_default_and_description() -> None:
    for field in SHARED_FIELDS:
        info = Settings.model_fields.get(field.name)
        assert info is not None, f"{field.name} is in the hook's table but not in Settings"
        assert env_name(field.name) == field.env
        assert _plain(info.get_default(call_default_factory=True)) == field.default
        assert info.description == field.description


def test_every_value_the_hook_reads_comes_from_the_table() -> None:
    assert set(HookValues.__annotations__) == set(HOOK_KEY_FIELD)
    assert set(HOOK_KEY_FIELD.values()) == {f.name for f in SHARED_FIELDS}


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {
            "CLAUDE_MEMORY_HOOK_BUDGET": "1.5",
            "CLAUDE_MEMORY_CONTEXT_BUDGET_TOKENS": "900",
            "CLAUDE_MEMORY_HOOK_SERVER": "false",
            "CLAUDE_MEMORY_DEDUP_THRESHOLD": "0.8",
            "CLAUDE_MEMORY_DATABASE_URL": "postgresql://u@db/x",
            "CLAUDE_MEMORY_RELEVANCE_FLOOR": "0.25",
            "CLAUDE_MEMORY_INJECT_FLOOR": "0.6",
        },
        {"CLAUDE_MEMORY_HOOK_SERVER": "off"},
        {"CLAUDE_MEMORY_HOOK_SERVER": "yes"},
        {"CLAUDE_MEMORY_HOOK_SERVER": "0"},
    ],
)
@pytest.mark.parametrize("event", ["session-start", "post-tool-use", "session-end"])
def test_the_hook_reads_what_settings_reads(
    environ: dict[str, str], event: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environ = {"CLAUDE_MEMORY_HOME": str(tmp_path / "h"), **environ}
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]  # pydantic-settings' init arg
    hook = hook_values(event, environ)
    assert hook["home"] == settings.home_dir
    assert hook["budget"] == (settings.hook_budget or HOOK_BUDGETS[event])
    assert hook["context_tokens"] == settings.context_budget_tokens
    assert hook["use_server"] is settings.hook_server
    assert (hook["dedup_threshold"] or DEDUP_THRESHOLD.default) == settings.dedup_threshold
    assert hook["database_url"] == _plain(settings.database_url)
    assert (hook["relevance_floor"] or RELEVANCE_FLOOR.default) == settings.relevance_floor
    assert (hook["inject_floor"] or INJECT_FLOOR.default) == settings.inject_floor


def test_the_hook_falls_back_to_defaults_where_settings_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the app stops with one line naming the variable; a hook must never fail
    bad = {
        "CLAUDE_MEMORY_CONTEXT_BUDGET_TOKENS": "lots",
        "CLAUDE_MEMORY_HOOK_BUDGET": "-1",
        "CLAUDE_MEMORY_RELEVANCE_FLOOR": "2",
        "CLAUDE_MEMORY_INJECT_FLOOR": "-0.5",
    }
    for name, value in bad.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match="CLAUDE_MEMORY_CONTEXT_BUDGET_TOKENS"):
        load_settings(_env_file=None)
    hook = hook_values("stop", bad)
    assert hook["context_tokens"] == CONTEXT_BUDGET_TOKENS.default
    assert hook["budget"] == HOOK_BUDGETS["stop"]
    assert hook["relevance_floor"] is None  # the memory's default floor
    assert hook["inject_floor"] is None


def test_every_variable_named_in_the_code_is_a_setting() -> None:
    known = {env_name(name) for name in Settings.model_fields}
    named: set[str] = set()
    for package in ("agent", "bridge", "memory", "storage", "web"):
        for path in (REPO / package).rglob("*.py"):
            named |= set(re.findall(r"CLAUDE_MEMORY_[A-Z_]+[A-Z]", path.read_text("utf-8")))
    for module in ("app.py", "cli.py", "migration.py", "settings.py"):
        named |= set(re.findall(r"CLAUDE_MEMORY_[A-Z_]+[A-Z]", (REPO / module).read_text("utf-8")))
    assert named - known == set()


def test_log_level_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_MEMORY_LOG_LEVEL", "debug")
    assert Settings(_env_file=None).log_level == "DEBUG"  # type: ignore[call-arg]
    monkeypatch.setenv("CLAUDE_MEMORY_LOG_LEVEL", "chatty")
    with pytest.raises(ConfigurationError, match="CLAUDE_MEMORY_LOG_LEVEL"):
        load_settings(_env_file=None)


def test_the_hooks_table_imports_no_pydantic() -> None:
    code = "import sys, memory.settings_fields; print('pydantic' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"
