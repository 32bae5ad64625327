"""The not-found message names what to list, in plain English."""

from __future__ import annotations

import pytest

from errors import NotFoundError


@pytest.mark.parametrize(
    ("kind", "listing"),
    [
        ("note", "list the notes"),
        ("pending entity", "list the pending entities"),
        ("note history", "list the note histories"),
        ("pending supersession", "list the pending supersessions"),
        ("day", "list the days"),
    ],
)
def test_not_found_says_what_to_list(kind: str, listing: str) -> None:
    error = NotFoundError(kind, "x1")
    assert error.message == f"{kind} 'x1' not found; {listing} to see valid ids"
    assert error.status_code == 404
