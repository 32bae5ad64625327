"""Bearer-token check for the HTTP API (only when CLAUDE_MEMORY_API_TOKEN is set).

Without a token the app answers loopback clients only (`web.access.LoopbackOnly`).
"""

from __future__ import annotations

import secrets

from fastapi import HTTPException, Request, status


def has_valid_token(request: Request) -> bool:
    """True when a token is configured and the request carries it as `Authorization: Bearer`."""
    token = request.app.state.settings.api_token
    if token is None:
        return False
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    expected = token.get_secret_value()
    return scheme.lower() == "bearer" and secrets.compare_digest(
        given.strip().encode(), expected.encode()
    )


def require_token(request: Request) -> None:
    """FastAPI dependency: 401 unless the request carries the configured bearer token."""
    if request.app.state.settings.api_token is None or has_valid_token(request):
        return
    raise HTTPException(
        status_code=status.HTTP_401_UNAUTHORIZED,
        detail="missing or wrong bearer token: "
        "send 'Authorization: Bearer <CLAUDE_MEMORY_API_TOKEN>'",
        headers={"WWW-Authenticate": "Bearer"},
    )
