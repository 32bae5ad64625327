"""Bearer-token check for the HTTP API (only when CLAUDE_MEMORY_API_TOKEN is set)."""

from __future__ import annotations

import secrets

from fastapi import HTTPException, Request, status


def require_token(request: Request) -> None:
    """FastAPI dependency: 401 unless the request carries the configured bearer token."""
    token = request.app.state.settings.api_token
    if token is None:
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    expected = token.get_secret_value()
    if scheme.lower() != "bearer" or not secrets.compare_digest(given.strip(), expected):
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="missing or wrong bearer token: "
            "send 'Authorization: Bearer <CLAUDE_MEMORY_API_TOKEN>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
