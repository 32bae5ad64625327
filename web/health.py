"""`GET /health`: what works and what is missing, with a hint for each missing piece."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from settings import Settings


def find_claude_cli(settings: Settings) -> Path | None:
    """The CLI the SDK will run: configured path, else the bundled binary, else `claude` on PATH."""
    if settings.cli_path is not None:
        path = settings.cli_path.expanduser()
        return path if path.is_file() else None
    import claude_agent_sdk

    bundled = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    if bundled.is_file():
        return bundled
    found = shutil.which("claude")
    return Path(found) if found else None


def credentials_present(settings: Settings) -> bool:
    return settings.anthropic_api_key is not None or settings.anthropic_auth_token is not None


def cli_status(settings: Settings) -> dict[str, Any]:
    cli = find_claude_cli(settings)
    creds = credentials_present(settings)
    status: dict[str, Any] = {
        "found": cli is not None,
        "path": str(cli) if cli else None,
        "credentials": creds,
        "base_url": settings.anthropic_base_url,
    }
    if cli is None:
        status["hint"] = (
            "Claude CLI not found: reinstall claude-agent-sdk or set CLAUDE_MEMORY_CLI_PATH"
        )
    elif not creds:
        status["hint"] = (
            "No API credentials in the environment: set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN "
            "(a Claude Code login in ~/.claude also works)"
        )
    return status
