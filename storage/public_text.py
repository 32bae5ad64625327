"""Error text made fit to show at every door: the page and the HTTP API, a Feishu card, the CLI,
`/health`.

An exception's text can quote a URL with its credentials or query key (a database or encoder
endpoint) and a server path (the home, a note file). `clean_error` is the one cleaning every door
applies before showing such text: each `scheme://...` made safe (`storage.urls.safe_url`: no
`user:password@`, no query values) and each absolute server path cut to its last piece
(`…/index.db`). The CLI runs on the machine itself and keeps paths (`local=True`), as `doctor`
shows them; the URLs are cleaned there too. The full text goes to the app's log only, which
`RedactingFilter` (memory/notes/capture.py) sanitizes on its way.

In `storage/` because it imports nothing of ours: every layer may use it. Standard library only.
"""

from __future__ import annotations

import re
import sqlite3

from storage.urls import safe_urls_in

# An absolute POSIX path (two pieces or more) not inside a URL: `/home/u/.x/logs/a.jsonl`.
_ABSOLUTE_PATH = re.compile(r"(?<![\w:/.~-])/(?:[^\s/'\"`()<>]+/)+([^\s/'\"`()<>]*)")


def without_paths(text: str) -> str:
    """`text` with server paths cut to their last piece (`…/a.jsonl`; a folder: `…/`)."""
    return _ABSOLUTE_PATH.sub(lambda m: f"…/{m.group(1)}" if m.group(1) else "…/", text)


def clean_error(text: str, *, local: bool = False) -> str:
    """`text` (an error message, a reply that failed) as any door may show it: URLs made safe,
    and, unless `local` (the CLI on the machine itself), server paths cut."""
    safe = safe_urls_in(text)
    return safe if local else without_paths(safe)


def exception_text(exc: BaseException, *, local: bool = False) -> str:
    """`Type: message` of an exception we did not raise on purpose, cleaned (`clean_error`);
    the type alone when it says nothing more."""
    message = str(exc).strip()
    raw = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return clean_error(raw, local=local)


def next_step(exc: BaseException) -> str:
    """What the person can do about an unexpected error, by its kind (never by its text): the
    same words at every door."""
    if isinstance(exc, sqlite3.DatabaseError):
        return (
            "the memory index or the state database may be damaged: `claude-memory memory "
            "reindex` rebuilds the index from the note files; `claude-memory doctor` checks the "
            "rest"
        )
    if isinstance(exc, OSError):
        return (
            "check that the memory home (CLAUDE_MEMORY_HOME) and its files can be read and "
            "written, and that the disk is not full; `claude-memory doctor` checks them"
        )
    return "run `claude-memory doctor`; if it finds nothing, report the error with the log lines"
