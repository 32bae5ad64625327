"""The hook process: `claude-memory hook <event>`, as Claude Code and Codex run it.

Contract with the CLI (see docs/claude-code.md):

* the hook's JSON payload arrives on stdin;
* stdout carries exactly one JSON object, `{"hookSpecificOutput": {"hookEventName": ...,
  "additionalContext": ...}}` (the form the model actually sees), or nothing at all;
* the exit code is always 0: bad input, a missing or locked home, any error and an overrun of
  the time budget all end with no output (fail open). Logs go to `<home>/logs/hooks.log`.

Two ways to do the work, both ending in `memory.clients.hooks.HookService.handle`:

* **served**: `claude-memory serve` wrote its address and a per-instance secret into
  `<home>/run/serve` (`write_run_file`). The secret never leaves the hook: every request is
  signed with it (`request_signature`: method, path, time, a fresh nonce, the folder and the
  body's hash), and an answer counts only with the proof `answer_proof(secret, nonce, status,
  body)`, which nobody without the secret can make. The hook first asks `hello` (no body) and
  sends its stdin, on the same connection, only once that answer is proven: a program that
  took the port (a stale file after a crash, the recorded pid reused) learns neither the
  secret nor the prompt, and what it answers is never printed. Its run file is then marked
  refused (`<home>/run/refused`) and not tried again; the hook works directly.
* **direct**: no app (or no proof): the hook opens the home itself; search is keywords only.

Import weight matters: every prompt and tool call starts a hook process, so the served path
imports nothing but `os`, `sys`, `time`, `_socket`, `_sha256`, `_thread` and the light settings
reader. No `json`, `socket`, `pathlib`, `logging`, `typing` or `dataclasses` at the top: each
costs milliseconds on a path that should take ~20. The direct path imports what its event
needs (`memory.clients.hooks` and, for some events, the store).
"""

from __future__ import annotations

import os
import sys
import time

from memory.settings_fields import hook_budget, hook_home, hook_server_enabled

TYPE_CHECKING = False  # typing's own flag costs an import on the served path
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from pathlib import Path
    from typing import Any, Final, NoReturn

    from memory.clients.hooks import HookRequest

CLIENTS: Final = ("claude-code", "codex")
MAX_STDIN: Final = 8_000_000
LOG_BYTES: Final = 2_000_000
MAX_ANSWER: Final = 4_000_000

RUN_FILE: Final = ("run", "serve")
"""`<home>/run/serve`: where a running app says where it listens and what its secret is."""
REFUSED_FILE: Final = ("run", "refused")
"""`<home>/run/refused`: the instance id of a run file whose listener failed the proof."""
NONCE_HEADER: Final = "X-Claude-Memory-Nonce"
TIME_HEADER: Final = "X-Claude-Memory-Time"
SIGNATURE_HEADER: Final = "X-Claude-Memory-Signature"
PROOF_HEADER: Final = "X-Claude-Memory-Proof"
CWD_HEADER: Final = "X-Claude-Memory-Cwd"
"""The hook's own folder (hex of its UTF-8 bytes), for a payload without `cwd`."""
HELLO: Final = "hello"
"""`POST /api/hooks/hello`: no body, does nothing; its proven answer says who listens."""
HELLO_SECONDS: Final = 0.5
"""How long a hook waits for the app's `hello`: the app answers it on its event loop alone (a few
ms when quiet), so a longer silence is an app frozen or swamped, and working directly (~0.1 s)
beats waiting for it (1 s before issue #32). Not less: on a loaded machine (load 8-10 on two
cores) a just-started app, busy with its first rescan and embedding, missed 0.2 s, and its
hooks worked directly (keywords only, ~100 ms more CPU)."""
SIGNATURE_WINDOW: Final = 60
"""Seconds a signed request's time may be off from the app's clock; its nonce is refused
again for twice as long (`memory.clients.hooks.SeenNonces`)."""
_PROOF_LABEL: Final = b"claude-memory hook answer v1\n"
_REQUEST_LABEL: Final = b"claude-memory hook request v1\n"


# --- the run file: written by `serve`, read by every hook ---------------------------------------


class AppAddress:
    """What `<home>/run/serve` says: where the app listens, its process, and its secret."""

    __slots__ = ("host", "instance", "pid", "port", "secret")

    def __init__(self, host: str, port: int, pid: int, instance: str, secret: str) -> None:
        self.host = host
        self.port = port
        self.pid = pid
        self.instance = instance
        self.secret = secret

    def render(self) -> str:
        # key=value lines, not JSON: the hook reads this on every call, and `json` costs an
        # import of `re` there.
        return (
            f"host={self.host}\nport={self.port}\npid={self.pid}\n"
            f"instance={self.instance}\nsecret={self.secret}\n"
        )

    @classmethod
    def parse(cls, text: str) -> AppAddress | None:
        values = dict(line.partition("=")[::2] for line in text.splitlines() if "=" in line)
        try:
            address = cls(
                values["host"],
                int(values["port"]),
                int(values["pid"]),
                values["instance"],
                values["secret"],
            )
        except (KeyError, ValueError):
            return None
        if not (address.host and address.secret and 0 < address.port < 65536):
            return None
        return address


def run_file(home: str | os.PathLike[str]) -> str:
    return os.path.join(os.fspath(home), *RUN_FILE)


def read_run_file(home: str | os.PathLike[str]) -> AppAddress | None:
    """The running app's address, or None (no file, unreadable, malformed)."""
    try:
        with open(run_file(home), encoding="utf-8") as handle:
            return AppAddress.parse(handle.read(4096))
    except (OSError, UnicodeDecodeError):
        return None


def connect_host(bind_host: str) -> str:
    """Where a hook on this machine reaches an app bound to `bind_host`."""
    if bind_host in ("", "0.0.0.0", "localhost"):
        return "127.0.0.1"
    if bind_host == "::":
        return "::1"
    return bind_host


def write_run_file(home: Path, bind_host: str, port: int) -> AppAddress:
    """Announce this app to the hooks of `home`: a fresh instance id and secret, written
    atomically and readable by the user only (0600 in a 0700 folder)."""
    import secrets

    from memory.notes.files import atomic_write

    folder = home / RUN_FILE[0]
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    address = AppAddress(
        connect_host(bind_host), port, os.getpid(), secrets.token_hex(8), secrets.token_hex(32)
    )
    path = folder / RUN_FILE[1]
    old_umask = os.umask(0o077)  # the temp file is born private, not narrowed after
    try:
        atomic_write(path, address.render())
    finally:
        os.umask(old_umask)
    path.chmod(0o600)
    return address


def remove_run_file(home: Path, instance: str) -> None:
    """At a clean shutdown: remove the run file if it still names this instance (another
    `serve` on the same home may have replaced it since)."""
    import contextlib

    current = read_run_file(home)
    if current is not None and current.instance == instance:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(run_file(home))


def refused_file(home: str | os.PathLike[str]) -> str:
    return os.path.join(os.fspath(home), *REFUSED_FILE)


def refused_instance(home: str | os.PathLike[str]) -> str | None:
    """The instance of a run file whose listener failed the proof (None: none)."""
    try:
        with open(refused_file(home), encoding="ascii") as handle:
            return handle.read(200).strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def mark_refused(home: str | os.PathLike[str], instance: str) -> None:
    """Remember that the run file of `instance` is stale: whatever listens on its port failed
    the proof, so no later hook asks it. A new `serve` writes a new instance id."""
    try:
        fd = os.open(refused_file(home), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError:
        return
    try:
        os.write(fd, instance.encode("ascii", "replace") + b"\n")
    finally:
        os.close(fd)


def request_signature(
    secret: str, method: str, target: str, stamp: str, nonce: str, cwd: str, body: bytes
) -> str:
    """What only the holder of `secret` can attach to a request: the method, the target (path
    and query), the time, the nonce, the folder header and the body's hash. The secret itself
    is never sent; the signature does not reveal it and fits no other request."""
    message = (
        _REQUEST_LABEL
        + f"{method}\n{target}\n{stamp}\n{nonce}\n{cwd}\n".encode("ascii", "replace")
        + _sha256()(body).hexdigest().encode("ascii")
    )
    return hmac_sha256(secret.encode("ascii", "replace"), message)


def signed_headers(
    secret: str,
    method: str,
    target: str,
    body: bytes,
    cwd: str = "",
    *,
    nonce: str | None = None,
    now: float | None = None,
) -> dict[str, str]:
    """The headers of a signed request (`cwd`: the folder header's value, hex, or "")."""
    nonce = nonce or os.urandom(16).hex()
    stamp = str(int(time.time() if now is None else now))
    headers = {
        TIME_HEADER: stamp,
        NONCE_HEADER: nonce,
        SIGNATURE_HEADER: request_signature(secret, method, target, stamp, nonce, cwd, body),
    }
    if cwd:
        headers[CWD_HEADER] = cwd
    return headers


def answer_proof(secret: str, nonce: str, status: int, body: bytes) -> str:
    """What only the holder of `secret` can attach to its answer to the request `nonce`: a
    recorded answer does not fit a new nonce, and a changed status or body does not fit."""
    message = _PROOF_LABEL + f"{status}\n{nonce}\n".encode("ascii", "replace") + body
    return hmac_sha256(secret.encode("ascii", "replace"), message)


def hmac_sha256(key: bytes, message: bytes) -> str:
    """HMAC-SHA256 (RFC 2104) in hex, the same as `hmac.new(key, message, "sha256")`; on the
    built-in SHA-256 because `hmac` loads OpenSSL (`_hashlib`), 3-15 ms of the served path."""
    sha256 = _sha256()
    if len(key) > 64:
        key = sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = sha256(bytes(b ^ 0x36 for b in key) + message).digest()
    return str(sha256(bytes(b ^ 0x5C for b in key) + inner).hexdigest())


def _sha256() -> Any:
    """The built-in SHA-256 constructor (hashlib's only where there is none)."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # Python 3.12+: `_sha2`; elsewhere hashlib's
        try:
            from _sha2 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:
            from hashlib import sha256
    return sha256


def same_text(a: str, b: str) -> bool:
    """Equal, in time that does not depend on where they differ."""
    from _operator import _compare_digest  # what `hmac.compare_digest` is

    return bool(_compare_digest(a.encode("utf-8", "replace"), b.encode("utf-8", "replace")))


# --- asking the app ---------------------------------------------------------------------------


class Served:
    """The app did the work; `body` is what goes to stdout (`{}`: nothing)."""

    __slots__ = ("body",)

    def __init__(self, body: bytes) -> None:
        self.body = body


class NoApp:
    """Nobody answered (no process, no listener, no answer in time): the hook works directly."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class NotOurApp:
    """Something answered without the proof: the run file is stale (another program took the
    port); the hook works directly and marks the run file refused (`mark_refused`)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class AppFailed:
    """Our app took the request and failed (it may have applied it): nothing is redone, so an
    event is never recorded twice."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


AppOutcome = Served | NoApp | NotOurApp | AppFailed


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process holds that pid now
        return False
    except OSError:
        return False
    return True


def ask_app(
    address: AppAddress,
    event: str,
    client: str,
    raw: bytes,
    cwd: str,
    timeout: float,
) -> AppOutcome:
    """Post the hook's stdin to the app of `address`; plain HTTP/1.1 over `_socket` (the
    `socket`, `http.client` and `urllib` modules cost 5-20 ms of imports here).

    Two requests on one connection, both signed (`signed_headers`), neither carrying the
    secret: `hello` with no body, whose answer must carry the proof; only then the event with
    stdin. A listener that cannot prove it holds the secret never sees stdin."""
    import _socket

    if not pid_alive(address.pid):
        return NoApp(f"stale run file (process {address.pid} is gone)")
    # The host as bytes: a str host makes `_socket` import the IDNA codec (and `re`), ~8 ms.
    host = address.host.encode("ascii", "replace")
    family = _socket.AF_INET6 if b":" in host else _socket.AF_INET
    try:
        sock = _socket.socket(family, _socket.SOCK_STREAM)
    except OSError as exc:
        return NoApp(f"address {address.host}: {exc}")
    try:
        sock.settimeout(min(timeout, 0.5))
        try:
            sock.connect((host, address.port))
        except OSError as exc:
            return NoApp(f"connect: {exc}")
        # --- hello: who listens? Nothing of the user's goes out before the proof.
        sock.settimeout(min(timeout, HELLO_SECONDS))
        hello = f"/api/hooks/{HELLO}?client={client}"
        nonce = os.urandom(16).hex()
        try:
            sock.sendall(_request_head(address, hello, b"", "", nonce, keep_alive=True))
            greeting = _read_framed(sock)
        except OSError as exc:  # nothing was applied: working directly is safe
            return NoApp(f"hello: {exc}")
        greeted = read_answer(greeting, address.secret, nonce)
        if isinstance(greeted, NotOurApp):
            return greeted
        if not isinstance(greeted, Served):
            return NoApp(f"hello: {greeted.reason}")
        # --- the event, to the listener that proved it is our app
        sock.settimeout(max(timeout, 0.1))
        target = f"/api/hooks/{event}?client={client}"
        folder = cwd.encode("utf-8", "surrogateescape").hex()
        nonce = os.urandom(16).hex()
        chunks: list[bytes] = []
        try:
            sock.sendall(_request_head(address, target, raw, folder, nonce) + raw)
            size = 0
            while size <= MAX_ANSWER:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except OSError as exc:
            # Our app took the request and did not answer in time: it may have applied it.
            return AppFailed(f"request: {exc}")
    finally:
        sock.close()
    answer = b"".join(chunks)
    if not answer:
        return AppFailed("the app closed the connection without an answer")
    outcome = read_answer(answer, address.secret, nonce)
    if isinstance(outcome, NotOurApp):  # the listener proved itself: our app refused this one
        return NoApp(f"the app refused the request ({outcome.reason.partition(':')[0]})")
    return outcome


def _request_head(
    address: AppAddress, target: str, body: bytes, cwd: str, nonce: str, *, keep_alive: bool = False
) -> bytes:
    signed = signed_headers(address.secret, "POST", target, body, cwd, nonce=nonce)
    lines = [
        f"POST {target} HTTP/1.1",
        f"Host: {address.host}:{address.port}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        *(f"{name}: {value}" for name, value in signed.items()),
        "Connection: keep-alive" if keep_alive else "Connection: close",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _read_framed(sock: Any) -> bytes:
    """One answer on a connection that stays open: its head, then `Content-Length` bytes."""
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            length = min(int(value.strip()), 65536)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return data if length == 0 else head + b"\r\n\r\n" + body


def read_answer(raw: bytes, secret: str, nonce: str) -> AppOutcome:
    """Our app's answer carries the proof for this nonce; anything else is not our app."""
    header, sep, body = raw.partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2) if sep else []
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        return NotOurApp("not an HTTP answer") if raw else NoApp("no answer")
    status = int(parts[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _dechunk(body)
    length = headers.get("content-length", "")
    if length.isdigit() and len(body) > int(length):
        body = body[: int(length)]
    proof = headers.get(PROOF_HEADER.lower(), "")
    if not same_text(proof, answer_proof(secret, nonce, status, body)):
        return NotOurApp(f"HTTP {status} without our app's proof: another program answers there")
    if status != 200:
        return AppFailed(f"HTTP {status}")
    return Served(body)


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0] or b"0", 16)
        except ValueError:
            break
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return bytes(out)


# --- direct mode --------------------------------------------------------------------------------


class HookSettings:
    """What the direct path reads from the environment (memory/settings_fields.py)."""

    __slots__ = (
        "budget",
        "client",
        "context_tokens",
        "database_url",
        "dedup_threshold",
        "home",
        "inject_floor",
        "native_memory",
        "relevance_floor",
    )

    def __init__(
        self,
        home: Path,
        *,
        budget: float = 5.0,
        context_tokens: int = 1500,
        dedup_threshold: float | None = None,
        database_url: str | None = None,
        client: str = "claude-code",
        native_memory: str = "off",
        relevance_floor: float | None = None,
        inject_floor: float | None = None,
    ) -> None:
        self.home = home
        self.budget = budget
        self.context_tokens = context_tokens
        self.dedup_threshold = dedup_threshold
        self.database_url = database_url
        self.client = client
        self.native_memory = native_memory
        self.relevance_floor = relevance_floor
        self.inject_floor = inject_floor

    @classmethod
    def from_env(
        cls,
        event: str,
        environ: Mapping[str, str],
        *,
        home: str | None = None,
        client: str = "claude-code",
    ) -> HookSettings:
        from memory.settings_fields import hook_values

        values = hook_values(event, environ, home=home)
        return cls(
            values["home"],
            budget=values["budget"],
            context_tokens=values["context_tokens"],
            dedup_threshold=values["dedup_threshold"],
            database_url=values["database_url"],
            client=client,
            native_memory=values["native_memory"],
            relevance_floor=values["relevance_floor"],
            inject_floor=values["inject_floor"],
        )


_ANSWERED: list[bool] = []
"""Not empty once the app answered this process's event (served): its only imports are the
standard library's lightest, none with work to do at exit."""
_LEFT_OPEN: list[object] = []
"""SQLite handles a hook process keeps until it ends (`exit_process`). Closing the last
connection to a WAL database checkpoints it (its pages written back into the database file and
synced): 2-25 ms of a prompt hook at 10k notes, more on a busy disk, and every hook process was
the last connection. Left open, the process ends like one that crashed after its commits, which
SQLite is made for: the next opener reads the WAL, and the commit that takes it past 1000 pages
checkpoints it (SQLite's automatic checkpoint)."""
_AFTER_ANSWER: list[Callable[[], None]] = []
"""What a prompt's answer does not need (its message in the episode, capture, the injected
notes' use counts), left by `run_direct` for `main` to do once the answer is out: in a forked
child that holds none of Claude Code's pipes (`_finish_in_background`). Capturing a decision
cost a prompt ~70 ms more before its answer, and set the direct p95 (issue #32)."""


def run_direct(settings: HookSettings, request: HookRequest, *, leave_open: bool = False) -> str:
    """Do the work in this process: on the files and the index in the home, or on the
    shared database when CLAUDE_MEMORY_DATABASE_URL is set (one small pool for both).
    Returns what the hook prints. `leave_open`: SQLite handles go to `_LEFT_OPEN` instead of
    being closed (only a process that ends with `exit_process`)."""
    from memory.clients.hooks import HookService, answer
    from memory.clients.opening import open_database, open_state

    database = open_database(settings.database_url) if settings.database_url else None
    state = open_state(settings.home / "state.db", database=database)
    opened: list[Any] = []

    def open_store() -> Any:
        from memory.clients.opening import open_memory
        from memory.config import MemoryConfig
        from memory.search.keyword import segment_without_dictionary

        segment_without_dictionary()  # any event that writes a summary indexes it: no rjieba
        overrides: dict[str, object] = {}
        if settings.dedup_threshold is not None:
            overrides["dedup_threshold"] = settings.dedup_threshold
        if settings.relevance_floor is not None:
            overrides["relevance_floor"] = settings.relevance_floor
        if settings.inject_floor is not None:
            overrides["inject_floor"] = settings.inject_floor
        # Prompts use the index as it is (the files of returned notes are still checked): a
        # full scan costs ~0.15 s at 10k notes. Session start and end pick up hand edits.
        config = MemoryConfig.for_home(settings.home, **overrides)
        sync = request.event != "user-prompt-submit"
        try:
            store = open_memory(config, database=database, sync=sync)
        except Exception as exc:
            from memory.clients.degraded import write_problem

            if not sync or write_problem(exc) is None:
                raise
            # a home that takes no writes (read-only, full) is still read: as it was indexed
            import logging

            logging.getLogger(__name__).warning("index not brought up to date: %s", exc)
            store = open_memory(config, database=database, sync=False)
        opened.append(store)
        from memory.history.store import HistoryStore

        # what this hook saves (captured decisions, session summaries) keeps its history, as
        # in the app; who saved it comes from the note's source (`claude-code:<session>`)
        store.attach_history(HistoryStore(state))
        return store

    # a process that ends with `exit_process` (its handles left open) does a prompt's work
    # after the answer in a child once the answer is out; any other does it now
    later = leave_open and request.event == "user-prompt-submit"
    try:
        service = HookService(
            state,
            open_store,
            budget_tokens=settings.context_tokens,
            native_memory=settings.native_memory,
            home=settings.home,
            after_answer=later,
        )
        printed = answer(service, request)
        if service.has_later:
            _AFTER_ANSWER.append(service.finish)
        return printed
    finally:
        for store in opened:
            from memory.sqlite.store import MemoryStore  # only once a store was opened

            if isinstance(store, MemoryStore):
                # `MemoryStore.close` rewrites `_index.json` in any new process (0.4 s at
                # 10k notes) even when nothing changed; the store rewrote it after our saves.
                if request.event != "user-prompt-submit":
                    # A prompt's injected notes count as used: the counts stay in the index
                    # (pending) until the session's start or end writes them into the notes'
                    # files; rewriting those files (YAML, fsync) on every prompt cost ~65 ms.
                    _flush_access_counts(store)
                if leave_open:
                    _LEFT_OPEN.append(store)
                else:
                    store.index.close()
            else:
                store.close()
        if leave_open and database is None:
            _LEFT_OPEN.append(state)  # SQLite (`<home>/state.db`)
        else:
            state.close()
        if database is not None:
            database.close()


def _flush_access_counts(store: Any) -> None:
    """Write pending use counts into the notes' files; a home that takes no writes keeps
    them pending (the answer was given; `degraded.py`)."""
    try:
        store.flush_access_counts()
    except Exception as exc:
        from memory.clients.degraded import write_problem

        if write_problem(exc) is None:
            raise
        import logging

        logging.getLogger(__name__).warning("use counts not written: %s", exc)


def hook_direct(
    event: str,
    raw: bytes,
    settings: HookSettings,
    environ: Mapping[str, str],
    *,
    leave_open: bool = False,
) -> str:
    """Direct mode from stdin to stdout text. Raises on bad input."""
    from memory.clients.hooks import build_request, parse_payload

    request = build_request(event, parse_payload(raw), settings.client, os.getcwd(), environ)
    return run_direct(settings, request, leave_open=leave_open)


# --- the process --------------------------------------------------------------------------------


class HookArgs:
    __slots__ = ("client", "event", "home")

    def __init__(self, event: str, home: str | None = None, client: str = "claude-code") -> None:
        self.event = event
        self.home = home
        self.client = client


def parse_args(argv: Sequence[str]) -> HookArgs | None:
    """`[--home DIR] [hook] <event> [--client claude-code|codex]` (no argparse: it prints
    usage to stderr and exits on errors; a hook must do neither, and it costs an import)."""
    event: str | None = None
    home: str | None = None
    client = "claude-code"
    items = list(argv)
    i = 0
    while i < len(items):
        item = items[i]
        if item in ("--home", "--client") and i + 1 < len(items):
            if item == "--home":
                home = items[i + 1]
            else:
                client = items[i + 1]
            i += 2
            continue
        if item.startswith("--home="):
            home = item.split("=", 1)[1]
        elif item.startswith("--client="):
            client = item.split("=", 1)[1]
        elif item == "hook" and event is None:
            pass
        elif not item.startswith("-") and event is None:
            event = item
        i += 1
    if event is None or client not in CLIENTS:
        return None
    return HookArgs(event, home, client)


def append_log(home: str, level: str, message: str) -> None:
    """One line in `<home>/logs/hooks.log` without the logging package (the served path's
    only line; it carries no user text, so it needs no redaction)."""
    now = time.time()
    # the logging package's format to the millisecond, so the lines sort with its own
    stamp = f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))},{int(now % 1 * 1000):03d}"
    line = f"{stamp} {os.getpid()} {level} memory.clients.hook_process: {message}\n"
    try:
        fd = os.open(
            os.path.join(home, "logs", "hooks.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600
        )
    except OSError:
        return
    try:
        os.write(fd, line.encode("utf-8", "replace"))
    finally:
        os.close(fd)


def setup_logging(home: Path) -> None:
    """Everything to `<home>/logs/hooks.log` (one old generation kept at 2 MB); nothing ever
    to stdout or stderr. A plain FileHandler: `logging.handlers` costs ~10 ms of imports."""
    import contextlib
    import logging

    root = logging.getLogger()
    for previous in list(root.handlers):
        root.removeHandler(previous)
    logging.raiseExceptions = False
    logging.lastResort = None
    handler: logging.Handler = logging.NullHandler()
    for path in (home / "logs" / "hooks.log", None):
        if path is None:  # the home is unusable (`tempfile` costs ~5 ms: only then)
            import tempfile
            from pathlib import Path

            path = Path(tempfile.gettempdir()) / "claude-memory-hooks.log"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_size > LOG_BYTES:
                    os.replace(path, path.with_name(path.name + ".1"))
            handler = logging.FileHandler(path, encoding="utf-8")
            break
        except OSError:
            continue
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    )
    from memory.notes.capture import RedactingFilter  # every direct event but the lightest

    handler.addFilter(RedactingFilter())  # messages and tracebacks sanitized before writing
    root.addHandler(handler)
    root.setLevel(logging.INFO)


SEARCH_EVENTS: Final = frozenset({"session-start", "user-prompt-submit", "session-end"})
"""The events that open the store (and may search it)."""


def run_hook(
    args: HookArgs,
    raw: bytes,
    environ: Mapping[str, str],
    *,
    deadline: float,
    use_app: bool = True,
    leave_open: bool = False,
) -> bytes:
    """Everything one hook call does; returns what goes to stdout. Raises on bad input."""
    home = hook_home(args.home, environ)
    reason = "CLAUDE_MEMORY_HOOK_SERVER is off"
    if use_app:
        address = read_run_file(home)
        if address is None:
            reason = "no app running (no run file)"
        elif refused_instance(home) == address.instance:
            reason = "stale run file (its listener failed the proof before)"
        else:
            remaining = max(min(deadline - time.monotonic() - 0.3, 3.0), 0.2)
            outcome = ask_app(address, args.event, args.client, raw, os.getcwd(), remaining)
            if isinstance(outcome, Served):
                _ANSWERED.append(True)
                append_log(home, "INFO", f"{args.event} handled by the app")
                return b"" if outcome.body.strip() in (b"", b"{}") else outcome.body
            if isinstance(outcome, AppFailed):
                append_log(home, "WARNING", f"{args.event}: the app failed ({outcome.reason})")
                return unavailable_answer(args, raw, home)
            if isinstance(outcome, NotOurApp):
                mark_refused(home, address.instance)
            reason = outcome.reason
    import contextlib
    import logging
    from pathlib import Path

    from storage.private import private_process, tighten_home

    private_process()  # what this process creates in the home is the user's only
    tighten_home(Path(home))
    if args.event in SEARCH_EVENTS:
        from memory.search.keyword import segment_without_dictionary

        segment_without_dictionary()  # rjieba's start alone is more than this hook's budget
    settings = HookSettings.from_env(args.event, environ, home=args.home, client=args.client)
    with contextlib.suppress(Exception):  # logging is a nicety; the hook must not fail
        setup_logging(Path(home))
    log = logging.getLogger("memory.clients.hook_process")
    if args.event in ("session-start", "user-prompt-submit"):
        log.info("%s: working directly, search: keywords only (%s)", args.event, reason)
    else:
        log.info("%s: working directly (%s)", args.event, reason)
    return hook_direct(args.event, raw, settings, environ, leave_open=leave_open).encode("ascii")


def unavailable_answer(args: HookArgs, raw: bytes, home: str) -> bytes:
    """What a session start or prompt prints when memory could not serve it at all (the app
    failed, or it was unreachable and working directly failed): once per session, a line the
    person sees (`memory.clients.degraded`); b"" otherwise."""
    if args.event not in SEARCH_EVENTS or args.event == "session-end":
        return b""
    import json

    from memory.clients.conventions import EVENT_NAMES
    from memory.clients.degraded import NOTICES, first_telling

    try:
        payload = json.loads(raw)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        return b""  # not a hook's input: nothing is degraded
    session = payload.get("session_id")
    if not first_telling(home, f"{args.client}:{session or ''}"):
        return b""
    output = {
        "systemMessage": NOTICES["unavailable"],
        "hookSpecificOutput": {"hookEventName": EVENT_NAMES[args.event]},
    }
    return json.dumps(output).encode("ascii")


def main(argv: Sequence[str] | None = None, *, leave_open: bool = False) -> int:
    """`claude-memory [--home DIR] hook <event> [--client codex]`: always exits 0.
    `leave_open`: the caller ends the process with `exit_process` (see `_LEFT_OPEN`)."""
    started = time.monotonic()
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    if args is None:
        return 0
    environ = os.environ
    home = hook_home(args.home, environ)
    budget = hook_budget(args.event, environ)
    deadline = started + budget
    # Only this process's final write reaches the real stdout: anything a library prints
    # (Python or C) while we work goes to /dev/null.
    try:
        real_stdout = os.dup(1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        return 0
    # `_thread`, not `threading`: its import (functools, collections, ...) was ~2-4 ms of CPU
    # of a served hook whose whole own work is ~10 (docs/claude-code.md, "Where a served
    # hook's time goes"). The worker is never joined: a stuck one is left to `os._exit`.
    import _thread

    result: list[bytes] = []
    done = _thread.allocate_lock()
    done.acquire()

    def work() -> None:
        raw = b""
        try:
            raw = sys.stdin.buffer.read(MAX_STDIN)
            use_app = hook_server_enabled(environ)
            result.append(
                run_hook(
                    args, raw, environ, deadline=deadline, use_app=use_app, leave_open=leave_open
                )
            )
        except BaseException:
            import logging

            logging.getLogger("memory.clients.hook_process").exception(
                "hook %s failed; no context (fail open)", args.event
            )
            try:
                result.append(unavailable_answer(args, raw, home))
            except Exception:  # the notice is a courtesy: the hook still exits 0
                logging.getLogger("memory.clients.hook_process").exception("no notice either")
        finally:
            done.release()

    _thread.start_new_thread(work, ())
    if not done.acquire(timeout=max(deadline - time.monotonic(), 0.001)):
        append_log(
            home,
            "WARNING",
            f"hook {args.event} overran its {budget:.1f} s budget; exiting with no output",
        )
        _flush_logging()
        os._exit(0)  # the worker may be stuck on a lock; SQLite and atomic writes stay intact
    output = result[0] if result else b""
    data = output
    while data:
        written = os.write(real_stdout, data)
        data = data[written:]
    append_log(
        home,
        "INFO",
        f"hook {args.event} done in {(time.monotonic() - started) * 1000:.0f} ms"
        + (" (context injected)" if output else ""),
    )
    _flush_logging()
    if _AFTER_ANSWER:
        _finish_in_background(real_stdout, home)
    return 0


AFTER_ANSWER_SECONDS: Final = 30
"""At most this long for the work after a prompt's answer (a lock held elsewhere)."""


def _finish_in_background(real_stdout: int, home: str) -> None:
    """Run `_AFTER_ANSWER` in a forked child, so that this process exits with its answer out:
    Claude Code waits until the hook's process has exited and its stdout and stderr are closed,
    and the child holds neither (its own session, every standard stream on /dev/null). The
    child goes on with this process's open handles, which this process never touches again
    (`exit_process` ends it with `os._exit`). Without fork the work is done here and now."""
    try:
        child = os.fork()
    except (OSError, AttributeError):  # no fork here (Windows) or no process to spare
        child = -1
    if child > 0:
        return
    if child == 0:
        try:
            os.setsid()
            devnull = os.open(os.devnull, os.O_RDWR)
            for stream in (0, 1, 2):
                os.dup2(devnull, stream)
            os.close(devnull)
            os.close(real_stdout)
            import signal

            signal.alarm(AFTER_ANSWER_SECONDS)
        except OSError:
            os._exit(0)
    started = time.monotonic()
    for work in _AFTER_ANSWER:
        try:
            work()
        except Exception:
            append_log(home, "WARNING", "hook work after the answer failed")
    _AFTER_ANSWER.clear()
    append_log(
        home,
        "INFO",
        f"hook work after the answer done in {(time.monotonic() - started) * 1000:.0f} ms"
        + (" (in the background)" if child == 0 else ""),
    )
    if child == 0:
        _flush_logging()
        os._exit(0)


def exit_process(code: int) -> NoReturn:
    """End a hook process: `sys.exit`, or `os._exit` once SQLite handles were left open
    (`_LEFT_OPEN`), so that the interpreter's teardown does not close them after all, or once
    the app answered (`_ANSWERED`: nothing of this process needs a teardown, which cost ~1.5 ms
    of CPU). Output and logs are written by then (`main` wrote stdout with `os.write` and shut
    logging down)."""
    if _LEFT_OPEN or _ANSWERED:
        try:  # noqa: SIM105 - `contextlib` would be 3 ms of imports on the served path
            sys.stderr.flush()
        except (OSError, ValueError):  # closed or gone: nothing of ours lost
            pass
        os._exit(code)
    sys.exit(code)


def _flush_logging() -> None:
    if "logging" in sys.modules:
        import logging

        logging.shutdown()


def _announce(home: Path, bind_host: str, port: int) -> Iterator[AppAddress]:
    address = write_run_file(home, bind_host, port)
    try:
        yield address
    finally:
        remove_run_file(home, address.instance)


def announce_app(home: Path, bind_host: str, port: int) -> Any:
    """`with announce_app(home, host, port) as address:` the app's run file exists while it
    serves, and is removed at a clean shutdown."""
    import contextlib

    return contextlib.contextmanager(_announce)(home, bind_host, port)
