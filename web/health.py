"""`GET /health`: what works and what is missing, with a hint for each missing piece.

Two views of one report. Anyone who reaches the app gets `public_view`: states, counts and
hints, built from an allowlist of fields, so no URL, path, key, user or error text (which may
quote a path or a URL) gets out. A request carrying the valid API bearer token gets the whole
report (paths, the model endpoint, database location), URLs still without credentials
(`storage.urls.safe_url`). Without a configured token nobody gets the detailed view over HTTP:
`claude-memory doctor` shows the same details on the machine itself.

The route reads the running app's container (`app.Container`) through `HealthSources`, the few
parts it asks; the databases answer on their own lane within `DATABASE_SECONDS`, so /health
always answers.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import TYPE_CHECKING, Any, Protocol

from fastapi import APIRouter, Request

from agent.endpoint import BLOCKING_STATES
from agent.options import find_claude_cli
from settings import Settings
from storage.public_text import clean_error
from storage.urls import safe_url
from web.auth import has_valid_token

if TYPE_CHECKING:
    from agent.sessions import SessionManager
    from memory.backend import MemoryBackend
    from memory.encoders.client import EncoderClient
    from storage.lanes import Lanes
    from storage.postgres import PostgresDatabase

logger = logging.getLogger(__name__)

router = APIRouter(tags=["status"])

DATABASE_SECONDS = 2.0
"""How long /health waits for the databases to answer before it says they did not."""


class HealthSources(Protocol):
    """What /health reads of the running app (`app.Container`)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def sessions(self) -> SessionManager: ...

    @property
    def memory(self) -> MemoryBackend: ...

    @property
    def database(self) -> PostgresDatabase | None: ...

    @property
    def encoder(self) -> EncoderClient: ...

    @property
    def lanes(self) -> Lanes: ...


@router.get("/health")
async def health(request: Request) -> dict[str, Any]:
    """States and counts for anyone; paths and endpoints only with the bearer token."""
    container: HealthSources = request.app.state.container
    cli = cli_status(container.settings)
    feishu = (
        request.app.state.feishu.status()
        if request.app.state.feishu is not None
        else {"enabled": False, "connected": False}
    )
    encoder = container.encoder.status.to_dict()
    for part in (feishu, encoder):  # error texts may quote an endpoint or a path
        error = part.get("error")
        if isinstance(error, str):
            part["error"] = clean_error(error)
    endpoint = container.sessions.endpoint.status()
    endpoint_ok = endpoint["state"] not in BLOCKING_STATES
    report = {
        "status": "ok" if cli["found"] and endpoint_ok else "degraded",
        "claude_cli": cli,
        "database": await database_status_soon(container),
        "feishu": feishu,
        "encoder": encoder,
        "model_endpoint": endpoint,
        "live_sessions": len(container.sessions.live()),
    }
    return report if has_valid_token(request) else public_view(report)


async def database_status_soon(container: HealthSources) -> dict[str, Any]:
    """`database_status` on the health lane, within a time limit: /health always answers."""
    try:
        async with asyncio.timeout(DATABASE_SECONDS):
            return await container.lanes.health.run(database_status, container)
    except TimeoutError:
        logger.warning("health: the memory index did not answer within %s s", DATABASE_SECONDS)
        return {
            "ok": False,
            "error": f"the memory index did not answer within {DATABASE_SECONDS:g} s "
            "(busy or locked); see the app log",
        }


def database_status(container: HealthSources) -> dict[str, Any]:
    try:
        stats = container.memory.stats()
        if container.database is not None:
            container.database.fetch("SELECT 1")
    except Exception as exc:  # reported, not raised: /health must answer
        logger.warning("health: the memory index did not answer", exc_info=True)
        return {"ok": False, "error": clean_error(str(exc))}
    status: dict[str, Any] = {"ok": True, "notes": stats["total"]}
    if container.database is not None:
        where = safe_url(container.database.where)
        status |= {"backend": "postgresql", "shared_state": where, "memory": f"PostgreSQL {where}"}
    else:
        status |= {"backend": "sqlite", "index": str(container.settings.index_path)}
    return status


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
