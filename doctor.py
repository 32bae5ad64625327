"""`claude-memory doctor`: checks the installation on this machine and says what is missing.

One line per check (`[ok]` or `[!!]`, with what to do under a failed one): the Claude CLI and
the model credentials, the model endpoint (probed), the encoder, the home (writable, private),
the workspace and log folders, the bind address, the shared database and pgvector, the Feishu
app's credentials, the Claude Code and Codex config folders. It reports rather than raises, so
it also runs with settings the app would refuse; it shows the details `/health` keeps for the
token (paths, endpoints) because it runs on the machine itself.
"""

from __future__ import annotations

import os
from pathlib import Path

from settings import Settings
from web.health import cli_status

Check = tuple[bool, str, str]
"""One `doctor` line: fine?, what was checked, what to do when it is not."""


def run_doctor(settings: Settings) -> int:
    """Print one line per check, a hint under each that failed; 0 if none did, else 1."""
    problems = 0

    def line(ok: bool, what: str, hint: str = "") -> None:
        nonlocal problems
        problems += 0 if ok else 1
        print(f"[{'ok' if ok else '!!'}] {what}" + (f"\n     -> {hint}" if hint and not ok else ""))

    cli = cli_status(settings)
    line(cli["found"], f"Claude CLI: {cli['path'] or 'not found'}", cli.get("hint", ""))
    line(
        cli["credentials"] or (Path.home() / ".claude").is_dir(),
        "model credentials: "
        + ("ANTHROPIC_API_KEY/AUTH_TOKEN set" if cli["credentials"] else "none in environment"),
        "set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) in the environment or .env",
    )
    for ok, what, hint in _endpoint_checks(settings):
        line(ok, what, hint)
    for ok, what, hint in _encoder_checks(settings):
        line(ok, what, hint)
    home = settings.home_dir
    try:
        home.mkdir(parents=True, exist_ok=True)
        probe = home / ".doctor-probe"
        probe.write_text("ok")
        probe.unlink()
        writable = True
    except OSError:
        writable = False
    line(
        writable, f"home directory writable: {home}", "set CLAUDE_MEMORY_HOME to a writable folder"
    )
    for ok, what, hint in _privacy_checks(settings):
        line(ok, what, hint)
    for ok, what, hint in _path_checks(settings):
        line(ok, what, hint)
    line(
        settings.is_loopback or settings.api_token is not None,
        f"bind address {settings.host}:{settings.port}",
        "binding beyond loopback needs CLAUDE_MEMORY_API_TOKEN",
    )
    if settings.database_url is None:
        line(True, "shared state: off (SQLite in the home; CLAUDE_MEMORY_DATABASE_URL shares it)")
    else:
        url = settings.database_url.get_secret_value()
        for ok, what, hint in _database_checks(url):
            line(ok, what, hint)
        for ok, what, hint in _memory_database_checks(url, settings.database_pool_max_size):
            line(ok, what, hint)
    for ok, what, hint in _feishu_checks(settings):
        line(ok, what, hint)
    from memory.clients.installer import client_checks

    for ok, what, hint in client_checks(os.environ):  # the clients' own config folders
        line(ok, what, hint)
    print("all good" if problems == 0 else f"{problems} problem(s) found")
    return 0 if problems == 0 else 1


def _url_problem(url: str) -> str | None:
    """Why `url` is not a usable http(s) base URL, or None."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        return str(exc)
    if parts.scheme not in ("http", "https"):
        return "it must start with http:// or https://"
    if not parts.hostname:
        return "it names no host"
    return None


def _endpoint_checks(settings: Settings) -> list[Check]:
    """The model endpoint: a well-formed URL, an Anthropic Messages API, reachable, and taking
    the credentials."""
    from agent.endpoint import (
        CredentialsRefused,
        EndpointTarget,
        NotMessagesAPI,
        Reachable,
        Unreachable,
        Unverified,
        next_step,
        probe_sync,
    )
    from storage.urls import safe_url

    base = settings.anthropic_base_url
    if base and (problem := _url_problem(base)) is not None:
        return [(False, f"model endpoint: {safe_url(base)}: {problem}", "fix ANTHROPIC_BASE_URL")]
    target = EndpointTarget.from_settings(settings)
    if target is None:
        return [(True, "model endpoint: the Anthropic API (not probed without credentials)", "")]
    where = f"model endpoint: {target.name}"
    state = probe_sync(target)
    hint = next_step(state) or ""
    match state:
        case Reachable():
            return [(True, f"{where} reachable, credentials accepted", "")]
        case Unverified(reason=reason):
            return [(True, f"{where} reachable; credentials not verified: {reason}", "")]
        case Unreachable(reason=reason):
            return [(False, f"{where} unreachable ({reason})", hint)]
        case CredentialsRefused(status=status):
            return [(False, f"{where} refused the credentials (HTTP {status})", hint)]
        case NotMessagesAPI(reason=reason):
            return [(False, f"{where} is not an Anthropic Messages API ({reason})", hint)]


def _encoder_checks(settings: Settings) -> list[Check]:
    """The encoder setting parses; an `openai:` encoder's URL is well-formed and answers."""
    from errors import ConfigurationError
    from storage.urls import safe_url

    try:
        spec = settings.encoder_spec()
    except ConfigurationError as exc:
        return [(False, f"encoder: {exc.message}", "fix CLAUDE_MEMORY_ENCODER")]
    if spec is None:
        return [(True, "encoder: none (keyword search only)", "")]
    label = f"{spec.kind}:{spec.model}" if spec.model else spec.kind
    if spec.kind != "openai":
        return [(True, f"encoder: {label}", "")]
    where = safe_url(spec.url)
    if (problem := _url_problem(spec.url)) is not None:
        return [(False, f"encoder URL {where}: {problem}", "fix CLAUDE_MEMORY_ENCODER_URL")]
    reason = _unreachable_reason(spec.url.rstrip("/") + "/models")
    if reason is not None:
        hint = "check CLAUDE_MEMORY_ENCODER_URL and that the embeddings server is running"
        return [(False, f"encoder {label}: {where} unreachable ({reason})", hint)]
    return [(True, f"encoder {label}: {where} reachable", "")]


def _unreachable_reason(url: str) -> str | None:
    """Why nothing answers a GET of `url` over HTTP (any HTTP answer counts), or None."""
    import httpx

    from agent.endpoint import PROBE_TIMEOUT_SECONDS, Unreachable, classify_error

    try:
        httpx.get(url, timeout=PROBE_TIMEOUT_SECONDS)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        state = classify_error(exc, PROBE_TIMEOUT_SECONDS)
        return state.reason if isinstance(state, Unreachable) else None
    return None


def _path_checks(settings: Settings) -> list[Check]:
    """The workspace and the log folder: folders the app can create and write."""
    checks: list[Check] = []
    for label, path, variable in (
        ("workspace", settings.workspace_dir, "CLAUDE_MEMORY_WORKSPACE"),
        ("log folder", settings.logs_dir, "CLAUDE_MEMORY_LOG_DIR"),
    ):
        existing = next((p for p in (path, *path.parents) if p.exists()), None)
        usable = (
            existing is not None and existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)
        )
        checks.append((usable, f"{label}: {path}", f"set {variable} to a folder you can write"))
    return checks


def _feishu_checks(settings: Settings) -> list[Check]:
    """The Feishu domain is a URL, and the app id and secret get a tenant access token."""
    import httpx

    from storage.urls import safe_url

    domain = settings.feishu_domain
    if (problem := _url_problem(domain)) is not None:
        return [(False, f"Feishu domain {safe_url(domain)}: {problem}", "fix FEISHU_DOMAIN")]
    secret = settings.feishu_app_secret
    if not settings.feishu_enabled or secret is None:
        return [(True, "Feishu bridge: off (set FEISHU_APP_ID and FEISHU_APP_SECRET)", "")]
    where = safe_url(domain)
    url = domain.rstrip("/") + "/open-apis/auth/v3/tenant_access_token/internal"
    body = {
        "app_id": settings.feishu_app_id,
        "app_secret": secret.get_secret_value(),
    }
    hint = "check FEISHU_APP_ID, FEISHU_APP_SECRET and FEISHU_DOMAIN"
    try:
        answer = httpx.post(url, json=body, timeout=10).json()
    except (httpx.HTTPError, ValueError) as exc:
        return [(False, f"Feishu: {where} did not answer ({type(exc).__name__})", hint)]
    if answer.get("code") == 0:
        return [(True, f"Feishu bridge: the app's credentials work at {where}", "")]
    why = f"code {answer.get('code')}: {answer.get('msg', '')}"
    return [(False, f"Feishu: {where} refused the app's credentials ({why})", hint)]


def _privacy_checks(settings: Settings) -> list[Check]:
    """`doctor` lines: the home (and a log folder outside it) readable by nobody else."""
    from storage.private import fix_command, too_wide

    roots = [settings.home_dir]
    if not settings.logs_dir.is_relative_to(settings.home_dir):
        roots.append(settings.logs_dir)
    checks: list[Check] = []
    for root in roots:
        wide, total = too_wide(root)
        if total == 0:
            checks.append((True, f"private: {root} (folders 0700, files 0600)", ""))
            continue
        shown = ", ".join(str(p) for p in wide[:3]) + (", ..." if total > 3 else "")
        checks.append(
            (
                False,
                f"{total} entr{'y' if total == 1 else 'ies'} under {root} readable by "
                f"group or others: {shown}",
                f"run: {fix_command(root)}",
            )
        )
    return checks


def _memory_database_checks(url: str, pool_max: int) -> list[Check]:
    """The memory in the shared database: notes, schema, indexes, vector models, the pool
    (memory/postgres/health.py). Nothing when the database cannot be read (said above)."""
    from errors import ConfigurationError

    try:
        import psycopg

        from memory.postgres.health import doctor_lines, inspect
    except (ConfigurationError, ImportError):
        return []  # the driver line above says so
    try:
        return doctor_lines(inspect(url), pool_max)
    except psycopg.Error:
        return []  # unreachable or refused: the database line above says so


def _database_checks(url: str) -> list[Check]:
    """`doctor` lines for the shared PostgreSQL database: reachable, and pgvector."""
    from errors import ConfigurationError

    try:
        import psycopg

        from storage.postgres import describe_url, probe
        from storage.urls import safe_url, safe_urls_in
    except (ConfigurationError, ImportError) as exc:
        hint = exc.message if isinstance(exc, ConfigurationError) else str(exc)
        return [(False, "database: the PostgreSQL driver is not installed", hint)]
    try:
        found = probe(url)
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return [
            (
                False,
                f"database: {safe_url(describe_url(url))} unreachable ({safe_urls_in(reason)})",
                "check CLAUDE_MEMORY_DATABASE_URL and that the server is running",
            )
        ]
    if found.vector_installed:
        vector = f"pgvector {found.vector_installed} installed"
    elif found.vector_available:
        vector = f"pgvector {found.vector_available} available"
    else:
        vector = "pgvector not available"
    return [
        (True, f"database: PostgreSQL {found.server_version} at {safe_url(found.where)}", ""),
        (
            found.vector_installed is not None or found.vector_available is not None,
            f"vector extension: {vector}",
            "install pgvector on the database server (the memory index on PostgreSQL needs it)",
        ),
    ]
