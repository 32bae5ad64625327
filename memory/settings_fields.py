"""The settings a hook process reads: one table of names, defaults and descriptions.

`settings.Settings` (pydantic-settings, for the app, the CLI and the MCP server) takes these
fields' defaults and descriptions from this table, and `hook_values` reads the same variables
for the hook process, which cannot afford pydantic (~0.5 s of imports on every prompt and tool
call). tests/test_settings.py checks that the two agree. Standard library only.

The two readers differ in one way, on purpose: a value Settings refuses (a port that is not a
number) stops the app with one line naming the variable, while a hook falls back to the
default, because a hook must never fail (docs/claude-code.md). Neither reads a `.env` file
for the hook: a hook runs in the user's project folder, whose `.env` is not ours.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # the served hook path imports this module and never `typing` (~5 ms)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Final, TypedDict
else:
    TypedDict = dict  # what a TypedDict is at run time

ENV_PREFIX: Final = "CLAUDE_MEMORY_"
FALSE_WORDS: Final = frozenset({"0", "false", "no", "off"})
"""How `CLAUDE_MEMORY_HOOK_SERVER` is switched off (pydantic reads booleans the same way)."""


class SharedField:
    """One setting both readers know: its `Settings` field name, default and description.
    (A plain class: `dataclasses` costs the hook process milliseconds of imports.)"""

    __slots__ = ("default", "description", "name")

    def __init__(self, name: str, default: str | int | float | bool | None, description: str):
        self.name = name
        self.default = default
        self.description = description

    def __repr__(self) -> str:
        return f"SharedField({self.name!r})"

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()


HOME: Final = SharedField(
    "home", "~/.claude-memory", "Data root: notes (memory/), index.db, workspace, state and logs."
)
CONTEXT_BUDGET_TOKENS: Final = SharedField(
    "context_budget_tokens", 1500, "Token budget of the memory listing injected every turn."
)
DEDUP_THRESHOLD: Final = SharedField(
    "dedup_threshold", 0.92, "Similarity above which a new memory counts as a duplicate."
)
DATABASE_URL: Final = SharedField(
    "database_url",
    None,
    "PostgreSQL URL (postgresql://user:password@host:5432/db) that several app "
    "instances share: conversations, SDK transcripts and Feishu state live there "
    "(docs/postgres.md). Unset: SQLite files in the home.",
)
HOOK_BUDGETS: Final[Mapping[str, float]] = {
    "session-start": 6.0,
    "user-prompt-submit": 6.0,
    "post-tool-use": 4.0,
    "stop": 4.0,
    "session-end": 20.0,
    "pre-compact": 4.0,
    "post-compact": 4.0,
    "file-changed": 4.0,
}
"""Seconds of internal budget per hook event; the installed CLI timeouts are longer (10 s,
30 s)."""
RELEVANCE_FLOOR: Final = SharedField(
    "relevance_floor",
    0.10,
    "Search hits whose calibrated relevance (0..1) is below this are not returned unless asked "
    "for (all=true) (docs/retrieval.md).",
)
INJECT_FLOOR: Final = SharedField(
    "inject_floor",
    0.50,
    "Calibrated relevance (0..1) a note needs to be injected into a prompt unasked: stricter "
    "than a search the user asks for (docs/retrieval.md).",
)
HOOK_BUDGET: Final = SharedField(
    "hook_budget",
    None,
    "Seconds a Claude Code / Codex hook may work before it gives up with no output; "
    "unset: 6 for session-start and user-prompt-submit, 20 for session-end, 4 for the rest.",
)
HOOK_SERVER: Final = SharedField(
    "hook_server",
    True,
    "Hooks ask the running app (the address and secret it writes to <home>/run/serve) to do "
    "their work when it answers with its proof; false: they always work directly on the home.",
)

NATIVE_MEMORY: Final = SharedField(
    "native_memory",
    "import",
    "Claude Code's auto memory and Codex's memories at session start: import (copy what "
    "changed since the last start into the notes; a stat of their files decides) or off.",
)
NATIVE_MODES: Final = ("import", "off")

SHARED_FIELDS: Final[tuple[SharedField, ...]] = (
    HOME,
    CONTEXT_BUDGET_TOKENS,
    DEDUP_THRESHOLD,
    DATABASE_URL,
    RELEVANCE_FLOOR,
    INJECT_FLOOR,
    HOOK_BUDGET,
    HOOK_SERVER,
    NATIVE_MEMORY,
)


class HookValues(TypedDict):
    """What a hook process takes from its environment (the fields of `HookSettings`)."""

    home: Path
    budget: float
    context_tokens: int
    use_server: bool
    dedup_threshold: float | None
    """None when unset: the memory's own default applies."""
    database_url: str | None
    relevance_floor: float | None
    """None when unset or unusable: the memory's own default applies."""
    inject_floor: float | None
    """The same, for what is injected into a prompt."""
    native_memory: str
    """`import` or `off` (an unknown value: the default)."""


def memory_home(explicit: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> Path:
    """`--home`, else `CLAUDE_MEMORY_HOME`, else `~/.claude-memory`, absolute."""
    from pathlib import Path

    return Path(hook_home(explicit, environ))


def hook_home(explicit: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> str:
    """`memory_home` as a string, without `pathlib` (the served hook path)."""
    raw = os.fspath(explicit) if explicit else environ.get(HOME.env) or ""
    return os.path.abspath(os.path.expanduser(raw or str(HOME.default)))


def hook_budget(event: str, environ: Mapping[str, str]) -> float:
    """Seconds this hook event may work (`CLAUDE_MEMORY_HOOK_BUDGET`, else per event)."""
    return _positive(environ, HOOK_BUDGET.env, HOOK_BUDGETS.get(event, 5.0))


def hook_server_enabled(environ: Mapping[str, str]) -> bool:
    """Whether hooks ask the running app first (`CLAUDE_MEMORY_HOOK_SERVER`)."""
    return environ.get(HOOK_SERVER.env, "1").lower() not in FALSE_WORDS


def native_mode(environ: Mapping[str, str]) -> str:
    """`CLAUDE_MEMORY_NATIVE_MEMORY`: `import` or `off`."""
    value = (environ.get(NATIVE_MEMORY.env) or "").strip().lower()
    return value if value in NATIVE_MODES else str(NATIVE_MEMORY.default)


def hook_values(
    event: str, environ: Mapping[str, str], *, home: str | os.PathLike[str] | None = None
) -> HookValues:
    """The hook's settings from `environ` (an unusable value gives the default: a hook never
    fails on its configuration)."""
    dedup = environ.get(DEDUP_THRESHOLD.env)
    return HookValues(
        home=memory_home(home, environ),
        budget=hook_budget(event, environ),
        context_tokens=int(
            _positive(environ, CONTEXT_BUDGET_TOKENS.env, _number(CONTEXT_BUDGET_TOKENS))
        ),
        use_server=hook_server_enabled(environ),
        dedup_threshold=_positive(environ, DEDUP_THRESHOLD.env, _number(DEDUP_THRESHOLD))
        if dedup
        else None,
        database_url=(environ.get(DATABASE_URL.env) or "").strip() or None,
        relevance_floor=_fraction(environ, RELEVANCE_FLOOR.env),
        inject_floor=_fraction(environ, INJECT_FLOOR.env),
        native_memory=native_mode(environ),
    )


def _fraction(environ: Mapping[str, str], name: str) -> float | None:
    """A value in 0..1 from `environ`, or None (unset or unusable)."""
    try:
        value = float(environ.get(name, ""))
    except ValueError:
        return None
    return value if 0 <= value <= 1 else None


def _number(field: SharedField) -> float:
    assert isinstance(field.default, int | float)
    return float(field.default)


def _positive(environ: Mapping[str, str], name: str, default: float) -> float:
    try:
        value = float(environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default
