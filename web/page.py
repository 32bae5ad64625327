"""The chat page: `GET /` serves `web/static/index.html`, `/static/...` serves its files.

The page is plain HTML, CSS and JavaScript modules (no build step). It needs no token to
load; its API calls carry the bearer token the user typed in. A strict Content-Security-Policy
goes on every page response as defense in depth: even if model text ever reached the DOM as
markup, inline script and foreign origins would still be refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from fastapi import FastAPI
from fastapi.responses import FileResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC_DIR: Final = Path(__file__).resolve().parent / "static"

CONTENT_SECURITY_POLICY: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)

SECURITY_HEADERS: Final[dict[str, str]] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # The files change with the code, not per request: revalidate so an update shows at once.
    "Cache-Control": "no-cache",
}


class _PageFiles(StaticFiles):
    """Static files with the page's security headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(SECURITY_HEADERS)
        return response


def mount_page(app: FastAPI, static_dir: Path = STATIC_DIR) -> None:
    """Add `GET /` (the page) and `/static` (its files) to `app`."""
    index = static_dir / "index.html"

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(index, media_type="text/html", headers=SECURITY_HEADERS)

    app.mount("/static", _PageFiles(directory=static_dir), name="static")
