"""What the memory's front doors accept, written once (issue #19: nonsense was taken silently).

The MCP tools (`memory/clients/mcp_server.py`) and the HTTP routes (`web/memory_api.py`) both
validate their arguments with pydantic, so the rules are pydantic annotations both use: an
argument annotated `SearchText` refuses an empty or blank query at either door, and the
constraints show in the tool's JSON schema and in the OpenAPI page, so a model or a script sees
the limits before it calls. Rules that need more than one argument (an update with nothing to
change) are functions raising `InvalidInputError`; the store applies the update rule itself, so
the CLI gets it too.

Confirmations are strict booleans: `confirm="yes"` (or 1, or "true") is refused, never read as
consent to delete.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Interval
from pydantic import Field, Strict, StringConstraints, ValidationError

SearchText = Annotated[
    str,
    StringConstraints(min_length=1, max_length=2000, pattern=r"\S"),
    Field(description="Keywords or a question, any language (not blank)."),
]
"""A query: at least one non-blank character, at most 2000."""

Text = Annotated[str, StringConstraints(min_length=1, pattern=r"\S")]
"""Text that must say something: content, an id, a type name."""

Flag = Annotated[bool, Strict()]
"""An explicit JSON true or false: no strings ("yes"), no numbers."""

Confirmation = Flag
"""Consent to something that cannot be undone: a `Flag`, so only JSON true gives it."""


def between(low: int, high: int) -> Interval:
    """A whole number in [low, high] (a limit, a count): `Annotated[int, between(1, 30)]`."""
    return Interval(ge=low, le=high)


ID_MAX = 2**63 - 1
"""The largest id a database row can have (SQLite INTEGER, PostgreSQL BIGINT): a larger number
is refused here, as invalid, instead of overflowing in the driver."""


def positive() -> Interval:
    """An id or a count that starts at 1 (and fits a database integer)."""
    return Interval(ge=1, le=ID_MAX)


def describe(error: ValidationError) -> str:
    """A refusal in one line a model or a person can act on: `limit: Input should be less
    than or equal to 30; query: String should have at least 1 character`."""
    return "; ".join(
        f"{'.'.join(str(part) for part in e['loc']) or 'arguments'}: {e['msg']}"
        for e in error.errors()
    )
