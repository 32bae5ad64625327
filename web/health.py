"""`GET /health`: what works and what is missing, with a hint for each missing piece.

Two views of one report. Anyone who reaches the app gets `public_view`: states, counts and
hints, built from an allowlist of fields, so no URL, path, key, user or error text (which may
quote a path or a URL) gets out. A request carrying the valid API bearer token gets the whole
report (paths, the model endpoint, database location), URLs still without credentials
(`storage.urls.safe_url`). Without a configured token nobody gets the detailed view over HTTP:
`claude-memory doctor` shows the same details on the machine itself.
"""

from __future__ import annotations

import re
from typing import Any

from agent.options import find_claude_cli
from settings import Settings
from storage.urls import safe_url


def credentials_present(settings: Settings) -> bool:
    return settings.anthropic_api_key is not None or settings.anthropic_auth_token is not None


def cli_status(settings: Settings) -> dict[str, Any]:
    cli = find_claude_cli(settings)
    creds = credentials_present(settings)
    status: dict[str, Any] = {
        "found": cli is not None,
        "path": str(cli) if cli else None,
        "credentials": creds,
        "base_url": safe_url(settings.anthropic_base_url) if settings.anthropic_base_url else None,
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


INDEX_ERROR = (
    "the memory index did not answer (details: claude-memory doctor, or /health with the token)"
)
# Fields safe for anyone, per section: states, counts, fixed hint texts.
_PUBLIC_FIELDS: dict[str, tuple[str, ...]] = {
    "claude_cli": ("found", "credentials", "hint"),
    "database": ("ok", "notes", "backend"),
    "feishu": ("enabled", "connected", "reconnects", "last_event_at", "paired", "active_chats"),
    "encoder": (
        *("state", "model", "dim", "pid", "load_seconds", "loading_seconds"),
        *("restarts", "retry_in_seconds"),
    ),
    # reachable | unreachable | credentials_refused | not_messages_api | unverified | checking,
    # and for a state that keeps turns from running the fixed words of what to check; the URL
    # and the reason only in the token view (agent/endpoint.py).
    "model_endpoint": ("state", "hint"),
}
# A label that names a location rather than a model: `scheme://...`, `/abs`, `~/x`, `C:\x`.
_LOCATION = re.compile(r"://|(?:^|:)\s*(?:[/~\\]|[A-Za-z]:[/\\])")


def public_view(report: dict[str, Any]) -> dict[str, Any]:
    """What `/health` tells a caller without the token: an allowlist of `report`'s fields."""
    view: dict[str, Any] = {"status": report["status"]}
    for section, fields in _PUBLIC_FIELDS.items():
        full = report.get(section) or {}
        view[section] = {name: full[name] for name in fields if name in full}
    database = view["database"]
    if database.get("ok") is False:
        database["error"] = INDEX_ERROR
    model = view["encoder"].get("model")
    if isinstance(model, str) and _LOCATION.search(model):
        view["encoder"]["model"] = None  # a local model folder or an endpoint: not for anyone
    view["live_sessions"] = report.get("live_sessions", 0)
    return view
