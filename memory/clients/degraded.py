"""Memory that works only in part, and the one line per session that tells the person so.

A read-only or full home still answers (issue #32): the brief and a prompt's recall are reads,
and the writes beside them (the session's episode and window, the prompt on record, use counts,
what a prompt asks to keep) are given up one by one (`memory.clients.hooks.HookService`). What
was given up, or a home that cannot take writes, or an encoder that failed, is said once per
session in the hook output's `systemMessage`: the field Claude Code shows the person and not
the model (Claude Code, "Hooks reference", JSON output, common fields; Codex accepts it too, in
`codex-rs/hooks/schema/generated/*.command.output.schema.json`). When the hook cannot work at
all (the app is unreachable and working directly fails), `hook_process` says so the same way.

Which sessions were told is kept in marker files outside the home (it may be the thing that
cannot be written): `<temp>/claude-memory-<uid>/told/<hash of home and session>`.
"""

from __future__ import annotations

import os
from typing import Final, Literal

from storage.refused import refusal

Problem = Literal["read-only", "full", "unwritable", "encoder", "unavailable"]
"""Why memory is degraded: the home's filesystem is read-only, it is full, a write was refused
otherwise (permissions), the text encoder failed (keyword search only), or the hook could not
reach memory at all."""

NOTICES: Final[dict[Problem, str]] = {
    "read-only": "claude-memory: the memory home is read-only, so memory is read but nothing "
    "from this session is saved.",
    "full": "claude-memory: the disk of the memory home is full, so memory is read but nothing "
    "from this session is saved. Free some space to resume saving.",
    "unwritable": "claude-memory: the memory home cannot be written (permissions), so memory is "
    "read but nothing from this session is saved.",
    "encoder": "claude-memory: the text encoder failed, so memory is searched by keywords only "
    "(see `claude-memory doctor`).",
    "unavailable": "claude-memory: memory could not answer, so this session goes on without "
    "it for now (see logs/hooks.log in the memory home).",
}
_ORDER: Final[tuple[Problem, ...]] = ("unavailable", "read-only", "full", "unwritable", "encoder")


def write_problem(exc: BaseException) -> Problem | None:
    """Whether `exc` (or what caused it) is a write the storage refused, and why
    (`storage.refused`). None: any other failure (a bug, a lock), which is not hidden."""
    return refusal(exc)


def home_problem(home: str | os.PathLike[str]) -> Problem | None:
    """What the home's filesystem says before anything is written: mounted read-only, or no
    free block left (what this user may use; root may use the reserved ones)."""
    try:
        info = os.statvfs(home)
    except OSError:
        return None
    if info.f_flag & os.ST_RDONLY:
        return "read-only"
    free = info.f_bfree if os.geteuid() == 0 else info.f_bavail
    if info.f_blocks and free == 0:
        return "full"
    return None


def notice(problems: set[Problem]) -> str:
    """The one line for the person: the gravest problem's."""
    for problem in _ORDER:
        if problem in problems:
            return NOTICES[problem]
    return ""


def _told_folder() -> str:
    import tempfile

    return os.path.join(tempfile.gettempdir(), f"claude-memory-{os.getuid()}", "told")


def first_telling(home: str | os.PathLike[str], session: str) -> bool:
    """True the first time it is asked for this home and session (a marker file is made);
    False after. When no marker can be made (the temp folder is full too) it says True:
    better a line too often than a session that never hears of it."""
    from hashlib import sha256

    name = sha256(f"{os.fspath(home)}\0{session}".encode("utf-8", "replace")).hexdigest()[:32]
    folder = _told_folder()
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    except OSError:
        return True
    os.close(fd)
    return True
