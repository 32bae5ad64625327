"""One mapping from errors to HTTP answers, for every route of the app.

`ClaudeMemoryError` (errors.py, the one exception base) answers its `status_code` with its
message; a request FastAPI could not validate answers 422; anything else is unexpected and
answers a JSON 500 instead of Starlette's `text/plain` "Internal Server Error": what failed, a
next step, and the log file to read with an error id to search it for. The full traceback goes
to that log only (through `RedactingFilter`), never to the caller. Every text is cleaned as at
every other door (`storage.public_text.clean_error`: no URL credential, no server path).

Routers raise and never map (web/memory_api.py, web/chat_api.py, the hooks router): the handlers
installed here are the only place an error becomes an answer.
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from errors import ClaudeMemoryError
from storage.public_text import clean_error, exception_text, next_step
from storage.text import printable
from web.auth import has_valid_token

logger = logging.getLogger(__name__)

SERVER_LOG = "server.log"
"""The app's log file in the logs folder (`claude-memory serve` writes it)."""


def install_error_handling(app: FastAPI) -> None:
    """The app's one error mapping: domain errors, invalid requests, then anything else."""
    app.add_exception_handler(ClaudeMemoryError, _domain_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid_request)  # type: ignore[arg-type]
    app.add_middleware(UnexpectedErrors)


async def _domain_error(request: Request, exc: ClaudeMemoryError) -> JSONResponse:
    return JSONResponse({"detail": clean_error(exc.message)}, status_code=exc.status_code)


async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    # FastAPI's own answer, but printable: the errors echo the input, and JSON can carry a lone
    # surrogate (`"\ud800"`) that no UTF-8 response can (it raised, a 500).
    return JSONResponse({"detail": printable(jsonable_encoder(exc.errors()))}, 422)


def log_file(request: Request) -> str:
    """The app log's path for a caller on this machine or holding the token; for anyone else
    the same file named from the home, as `/health` keeps paths from them."""
    settings = getattr(request.app.state, "settings", None)
    if settings is not None and (settings.api_token is None or has_valid_token(request)):
        return str(Path(settings.logs_dir) / SERVER_LOG)
    return f"logs/{SERVER_LOG} in the memory home"


def unexpected_answer(request: Request, exc: BaseException) -> JSONResponse:
    """The JSON 500 of an unexpected error, logged once with its traceback and an id."""
    error_id = secrets.token_hex(4)
    logger.error(
        "unexpected error %s in %s %s",
        error_id,
        request.method,
        request.url.path,
        exc_info=(type(exc), exc, exc.__traceback__),
    )
    where = log_file(request)
    step = next_step(exc)  # the same words as the CLI and the Feishu card
    error = exception_text(exc)
    body: dict[str, Any] = {
        "detail": f"Unexpected error ({error}). Next: {step}. The log has the details: "
        f"search {where} for {error_id}.",
        "error": error,
        "error_id": error_id,
        "next_step": step,
        "log_file": where,
    }
    return JSONResponse(body, status_code=500)


class UnexpectedErrors:
    """ASGI middleware: an exception no handler took becomes `unexpected_answer` (when the answer
    has not started; a stream already under way is cut as before). Inside Starlette's
    ServerErrorMiddleware, so the error is answered and logged once, not raised on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            if started:
                raise
            request = Request(scope, receive)
            await unexpected_answer(request, exc)(scope, receive, send)
