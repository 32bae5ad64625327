"""Whether a failed write was refused by the storage itself, and why: a read-only or full
filesystem or database, or no permission. A reader that meets one goes on with what is there
(`memory/clients/degraded.py` tells the person); any other failure is not hidden.

Classified by code, never by message text: SQLite's primary result codes
(https://www.sqlite.org/rescode.html), PostgreSQL's SQLSTATE (Appendix A, "PostgreSQL Error
Codes"), and `errno`. Standard library only: the hook process imports this.
"""

from __future__ import annotations

import errno
from typing import Final, Literal

Refusal = Literal["read-only", "full", "unwritable"]

_SQLITE: Final[dict[int, Refusal]] = {8: "read-only", 13: "full", 3: "unwritable"}
"""SQLITE_READONLY, SQLITE_FULL, SQLITE_PERM (extended codes keep these in their low byte)."""
_SQLSTATE: Final[dict[str, Refusal]] = {"53100": "full", "25006": "read-only"}
"""disk_full, read_only_sql_transaction."""
_ERRNO: Final[dict[int, Refusal]] = {
    errno.EROFS: "read-only",
    errno.ENOSPC: "full",
    errno.EDQUOT: "full",
    errno.EACCES: "unwritable",
    errno.EPERM: "unwritable",
}


def refusal(exc: BaseException) -> Refusal | None:
    """Why the storage refused the write that raised `exc` (looked for in `exc` and what
    caused it), or None for any other failure."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = getattr(current, "sqlite_errorcode", None)
        if isinstance(code, int) and (code & 0xFF) in _SQLITE:
            return _SQLITE[code & 0xFF]
        state = getattr(current, "sqlstate", None)
        if isinstance(state, str) and state in _SQLSTATE:
            return _SQLSTATE[state]
        if isinstance(current, OSError) and current.errno in _ERRNO:
            return _ERRNO[current.errno]
        current = current.__cause__ or current.__context__
    return None
