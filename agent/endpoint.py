"""Is the model endpoint reachable, and does it accept our credentials? One probe, one answer.

The probe is the cheapest request the Claude CLI's endpoint can answer: `GET <base>/v1/models`
with the headers the CLI sends (`x-api-key` or `Authorization: Bearer`, `anthropic-version`),
a few seconds' timeout. When that does not answer as the API does (no JSON, or a status other
than 2xx/401/403), one more look tells a gateway without `/v1/models` from some other web server:
`POST <base>/v1/messages` with an empty JSON object, which the Messages API refuses (400) before
any model runs, so it costs nothing; 404, 405 or 501 there, or an answer that is not JSON, is not
the Messages API. The answer is a closed union: `Reachable`, `Unreachable(reason)` (refused
connection, unknown host, no answer), `CredentialsRefused(status)` (401/403),
`NotMessagesAPI(reason)` (it answers HTTP, but not as an Anthropic Messages API: the Claude CLI's
requests would fail there) or `Unverified(reason)` (it answers as the API, but cannot tell us
whether the key is good: no `/v1/models`, another status, or no key of ours to check).

What is probed: a configured `ANTHROPIC_BASE_URL` always; the default Anthropic API only when
credentials are in the settings (without them there is nothing to verify, and the CLI may use a
Claude Code login we cannot see). Tests always point `ANTHROPIC_BASE_URL` at the fake model, so
no test reaches the internet.

Used by the app at start (`/health` shows the result), before every turn (`EndpointChecker`:
cached while it was fine, probed again when it failed or went stale, so a dead endpoint answers
a turn in seconds instead of after minutes of the CLI's retries) and by `claude-memory doctor`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit, urlunsplit

import httpx

from storage.urls import safe_url

if TYPE_CHECKING:
    from settings import Settings

logger = logging.getLogger(__name__)

DEFAULT_API = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
PROBE_TIMEOUT_SECONDS = 4.0
FRESH_SECONDS = 60.0
"""How long a good answer is trusted before a turn probes again."""


@dataclass(frozen=True, slots=True)
class Reachable:
    """It answered `/v1/models` and took the credentials."""

    state: Literal["reachable"] = "reachable"


@dataclass(frozen=True, slots=True)
class Unreachable:
    """No HTTP answer at all: `reason` is e.g. "connection refused", "host not found"."""

    reason: str
    state: Literal["unreachable"] = "unreachable"


@dataclass(frozen=True, slots=True)
class CredentialsRefused:
    """It answered 401 or 403 to our key."""

    status: int
    state: Literal["credentials_refused"] = "credentials_refused"


@dataclass(frozen=True, slots=True)
class Unverified:
    """It answers, but whether our credentials work is unknown (`reason` says why)."""

    reason: str
    state: Literal["unverified"] = "unverified"


@dataclass(frozen=True, slots=True)
class NotMessagesAPI:
    """It answers HTTP, but not as an Anthropic Messages API (`reason` says what it answered):
    another web server, or a base URL with a wrong path."""

    reason: str
    state: Literal["not_messages_api"] = "not_messages_api"


EndpointState = Reachable | Unreachable | CredentialsRefused | NotMessagesAPI | Unverified
BLOCKING_STATES = frozenset({"unreachable", "credentials_refused", "not_messages_api"})
"""The states in which no turn starts (agent/_turn.py): `/health` says degraded."""


@dataclass(frozen=True, slots=True)
class EndpointTarget:
    """Where the CLI will send its requests, and the credentials it will send."""

    url: str
    api_key: str | None = None
    auth_token: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> EndpointTarget | None:
        """The endpoint to probe, or None when it is not probed (see the module docstring)."""
        key = settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None
        token = (
            settings.anthropic_auth_token.get_secret_value()
            if settings.anthropic_auth_token
            else None
        )
        if settings.anthropic_base_url:
            return cls(settings.anthropic_base_url, key, token)
        if key or token:
            return cls(DEFAULT_API, key, token)
        return None

    @property
    def name(self) -> str:
        """The URL as users may see it: no credentials, no query values."""
        return safe_url(self.url)

    @property
    def models_url(self) -> str:
        """`<base>/v1/models`, the base's own path and query kept (as the SDK joins paths)."""
        return self._joined("/v1/models")

    @property
    def messages_url(self) -> str:
        """`<base>/v1/messages`, where the Claude CLI sends its requests."""
        return self._joined("/v1/messages")

    def _joined(self, path: str) -> str:
        parts = urlsplit(self.url.strip())
        return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))

    def headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION, "accept": "application/json"}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        elif self.auth_token:
            headers["authorization"] = f"Bearer {self.auth_token}"
        return headers

    @property
    def has_credentials(self) -> bool:
        return bool(self.api_key or self.auth_token)


# --- pure classification ----------------------------------------------------------------------


def classify_status(status: int, *, has_credentials: bool = True) -> EndpointState:
    """The state an HTTP answer to `GET /v1/models` means."""
    if 200 <= status < 300:
        return Reachable() if has_credentials else Unverified("no credentials of ours to check")
    if status in (401, 403):
        if not has_credentials:
            return Unverified(f"it asks for credentials (HTTP {status}) and none are set")
        return CredentialsRefused(status)
    if status in (404, 405):
        return Unverified(f"no /v1/models here (HTTP {status}) to check the credentials with")
    return Unverified(f"/v1/models answered HTTP {status}")


def answers_as_the_api(status: int, is_json: bool) -> bool:
    """Whether `GET /v1/models` answered as an Anthropic API does: a JSON 2xx, or 401/403 (our
    credentials, whatever the body). Anything else asks `POST /v1/messages`."""
    return status in (401, 403) or (200 <= status < 300 and is_json)


def classify_messages(
    status: int, is_json: bool, *, models_state: EndpointState, has_credentials: bool = True
) -> EndpointState:
    """The state after `POST /v1/messages` with an empty JSON object answered `status`: the
    Messages API refuses it with a JSON 400 (401/403 for a bad key); 404, 405 or 501, or an
    answer that is not JSON, is some other server. `models_state`: what `/v1/models` said."""
    if status in (404, 405, 501):
        return NotMessagesAPI(f"POST /v1/messages answered HTTP {status}")
    if not is_json:
        return NotMessagesAPI(f"POST /v1/messages answered HTTP {status}, not JSON")
    if status in (401, 403) and has_credentials:
        return CredentialsRefused(status)
    if isinstance(models_state, Unverified):
        return models_state
    return Unverified("/v1/models gave no list to check the credentials with")


def classify_error(exc: BaseException, timeout: float) -> EndpointState:
    """The state a failed request means: no connection at all is `Unreachable`."""
    if isinstance(exc, httpx.ConnectTimeout):
        return Unreachable(f"no answer within {timeout:g} s")
    if isinstance(exc, httpx.TimeoutException):
        return Unverified(f"connected, but no answer within {timeout:g} s")
    if isinstance(exc, httpx.ConnectError):
        return Unreachable(_connect_reason(exc))
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return Unreachable("not a valid http(s) URL")
    return Unverified(f"the answer could not be read ({type(exc).__name__})")


def _connect_reason(exc: BaseException) -> str:
    """What kept the connection from opening, from the exception's causes (not its text)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, socket.gaierror):
            return "host not found"
        if isinstance(seen, ssl.SSLError):
            return "TLS handshake failed"
        seen = seen.__cause__ or seen.__context__
    return "connection failed"


# --- the probe (the edge) ---------------------------------------------------------------------


async def probe(
    target: EndpointTarget,
    *,
    seconds: float = PROBE_TIMEOUT_SECONDS,
) -> EndpointState:
    """`GET /v1/models` against `target`, then `POST /v1/messages` when that did not answer as
    the API does (the module docstring); proxies from the environment apply, as for the CLI."""
    creds = target.has_credentials
    try:
        async with httpx.AsyncClient(timeout=seconds) as client:
            models = await client.get(target.models_url, headers=target.headers())
            state = classify_status(models.status_code, has_credentials=creds)
            if not answers_as_the_api(models.status_code, _is_json(models)):
                messages = await client.post(target.messages_url, headers=target.headers(), json={})
                state = classify_messages(
                    messages.status_code,
                    _is_json(messages),
                    models_state=state,
                    has_credentials=creds,
                )
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        state = classify_error(exc, seconds)
    logger.info("model endpoint %s: %s", target.name, describe(state))
    return state


def _is_json(response: httpx.Response) -> bool:
    """Whether the body is a JSON object (what every answer of the Anthropic API is)."""
    try:
        return isinstance(response.json(), dict)
    except ValueError:  # not JSON, or not text
        return False


def probe_sync(target: EndpointTarget, *, seconds: float = PROBE_TIMEOUT_SECONDS) -> EndpointState:
    """`probe` for synchronous callers (`claude-memory doctor`)."""
    return asyncio.run(probe(target, seconds=seconds))


def describe(state: EndpointState) -> str:
    """A few words for logs and `doctor`."""
    match state:
        case Reachable():
            return "reachable, credentials accepted"
        case Unreachable(reason=reason):
            return f"unreachable ({reason})"
        case CredentialsRefused(status=status):
            return f"credentials refused (HTTP {status})"
        case NotMessagesAPI(reason=reason):
            return f"not an Anthropic Messages API ({reason})"
        case Unverified(reason=reason):
            return f"reachable, credentials not verified: {reason}"


CHECK_URL = (
    "check ANTHROPIC_BASE_URL: it must be the base of an Anthropic Messages API (the CLI posts "
    "to <base>/v1/messages), not another web server or a path below it"
)


def next_step(state: EndpointState | None) -> str | None:
    """What to check when `state` keeps turns from running (None when nothing is to do); the
    same words in `doctor`, `/health` and the page."""
    match state:
        case Unreachable():
            return "check ANTHROPIC_BASE_URL and that the endpoint is running"
        case CredentialsRefused():
            return "check ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) for this endpoint"
        case NotMessagesAPI():
            return CHECK_URL
        case _:
            return None


# --- the app's checker ------------------------------------------------------------------------


class EndpointChecker:
    """The endpoint's last known state, probed at start and again before turns when needed.

    `check()` answers from the cache while a good answer is younger than `fresh_seconds`; a
    failed answer (unreachable, credentials refused) is never cached, so a fixed endpoint is
    seen at the next turn. Concurrent callers share one probe. As an async context manager it
    runs the first probe in the background (start-up never waits for it) and cancels it on exit.
    """

    def __init__(
        self,
        target: EndpointTarget | None,
        *,
        fresh_seconds: float = FRESH_SECONDS,
        timeout: float = PROBE_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target = target
        self.fresh_seconds = fresh_seconds
        self.timeout = timeout
        self._clock = clock
        self._last: EndpointState | None = None
        self._at = 0.0
        self._lock = asyncio.Lock()
        self._start: asyncio.Task[EndpointState | None] | None = None

    @classmethod
    def for_settings(cls, settings: Settings) -> EndpointChecker:
        return cls(EndpointTarget.from_settings(settings))

    @property
    def last(self) -> EndpointState | None:
        """The latest answer; None before the first probe finished (or when not probed)."""
        return self._last

    async def check(self) -> EndpointState | None:
        """The endpoint's state, probing when the cached one is failed or stale; None when the
        endpoint is not probed."""
        if self.target is None:
            return None
        async with self._lock:
            if self._usable():
                return self._last
            state = await probe(self.target, seconds=self.timeout)
            self._last, self._at = state, self._clock()
            return state

    def _usable(self) -> bool:
        fine = isinstance(self._last, Reachable | Unverified)
        return fine and self._clock() - self._at < self.fresh_seconds

    def status(self) -> dict[str, Any]:
        """`/health`'s `model_endpoint` section (the full view; `public_view` keeps `state`)."""
        if self.target is None:
            return {
                "state": "unverified",
                "url": DEFAULT_API,
                "reason": "the default API is not probed without credentials in the environment",
            }
        report: dict[str, Any] = {"url": self.target.name}
        match self._last:
            case None:
                report["state"] = "checking"
            case Reachable():
                report["state"] = "reachable"
            case (
                Unreachable(reason=reason)
                | NotMessagesAPI(reason=reason)
                | Unverified(reason=reason)
            ):
                report |= {"state": self._last.state, "reason": reason}
            case CredentialsRefused(status=status):
                report |= {"state": "credentials_refused", "http_status": status}
        if (hint := next_step(self._last)) is not None:
            report["hint"] = hint
        return report

    async def __aenter__(self) -> EndpointChecker:
        if self.target is not None:
            self._start = asyncio.get_running_loop().create_task(
                self.check(), name="model-endpoint-check"
            )
        return self

    async def __aexit__(self, *exc: object) -> None:
        task, self._start = self._start, None
        if task is not None and not task.done():
            task.cancel()
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task
