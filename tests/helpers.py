"""Small test helpers: waiting on conditions, reading SSE, finding our CLI processes."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


async def wait_until(
    condition: Callable[[], bool], timeout: float = 10.0, step: float = 0.05
) -> None:
    """Poll `condition` until true; fail the test with a clear message after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(step)


def parse_sse(body: str) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    for block in body.split("\n\n"):
        name, data = "message", []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            events.append((name, json.loads("\n".join(data))))
    return events


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name may contain spaces and parentheses: split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] == "Z":
            continue  # zombies are exited processes waiting to be reaped
        tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def claude_processes() -> list[int]:
    """Live Claude CLI processes started (directly or not) by this test process."""
    tree = _children()
    found: list[int] = []
    stack = list(tree.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        stack.extend(tree.get(pid, []))
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if cmd.endswith(b"/claude") or cmd == b"claude":
            found.append(pid)
    return sorted(found)


def assert_private_tree(root: Path) -> None:
    """`root` and every folder under it are 0700; no file under it grants group or others
    anything (0600, or 0700 for a script something made executable).

    Symbolic links are not followed (their own mode means nothing on Linux).
    """
    import stat

    wrong: list[str] = []
    for folder, dirs, files in os.walk(root):
        base = Path(folder)
        entries = [(base, True), *((base / name, False) for name in files)]
        for path, is_dir in entries:
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                continue
            mode = stat.S_IMODE(st.st_mode)
            if (mode != 0o700) if is_dir else bool(mode & 0o077):
                wrong.append(f"{oct(mode)} {path}")
        dirs[:] = [d for d in dirs if not (base / d).is_symlink()]
    assert not wrong, f"{len(wrong)} entries are not private:\n" + "\n".join(wrong[:20])


def home_fingerprint(home: Path) -> dict[str, Any]:
    """What a user could notice changing in a home: every note file and every row of every
    state table (a refused request must leave both as they were)."""
    import hashlib

    from memory.sqlite.state import StateDB

    notes = {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((home / "memory").rglob("*.md"))
    }
    state = StateDB(home / "state.db")
    try:
        tables = [
            r["name"]
            for r in state.read("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not r["name"].startswith("sqlite_")
        ]
        rows = {t: [tuple(r) for r in state.read(f"SELECT * FROM {t} ORDER BY 1")] for t in tables}
    finally:
        state.close()
    return {"notes": notes, "state": rows}


class PlainWebServer:
    """Some other HTTP server on a loopback port: every method on every path gets `status`
    with an HTML body (a web site, a wrong port, a base URL with the wrong path), and each
    request is recorded as `METHOD /path`. `routes` answers some requests otherwise:
    `{"POST /v1/messages": (400, {"type": "error"})}` (a dict body is sent as JSON). Use as a
    context manager; `url` is its base."""

    def __init__(
        self, status: int = 404, routes: dict[str, tuple[int, dict[str, Any]]] | None = None
    ) -> None:
        import http.server
        import threading

        self.status = status
        self.routes = routes or {}
        self.requests: list[str] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                request = f"{self.command} {self.path.split('?')[0]}"
                owner.requests.append(request)
                status, kind = owner.status, "text/html"
                body = f"<html><body><h1>{status}</h1></body></html>".encode()
                if request in owner.routes:
                    status, data = owner.routes[request]
                    kind, body = "application/json", json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, format: str, *args: Any) -> None:  # quiet in tests
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> PlainWebServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
