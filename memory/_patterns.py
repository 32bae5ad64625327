"""Regular expressions compiled on first use.

`re.compile` at import time is work at import time: a hook process pays for every pattern of
every module it loads (the redaction rules alone were ~8 ms of a direct prompt hook), most of
which a given call never uses. `lazy_pattern` keeps the pattern's text at import and compiles
it the first time it is asked for; `re`'s own cache is not relied on, because the app compiles
enough patterns of its own to evict from it.
"""

from __future__ import annotations

import re
from collections.abc import Callable


def lazy_pattern(source: str, flags: int = 0) -> Callable[[], re.Pattern[str]]:
    """`PATTERN = lazy_pattern(r"...")`, then `PATTERN().search(text)`."""
    compiled: list[re.Pattern[str]] = []

    def pattern() -> re.Pattern[str]:
        if not compiled:
            compiled.append(re.compile(source, flags))
        return compiled[0]

    return pattern
