"""`safe_url`: every URL the app prints or logs, without credentials or query values."""

from __future__ import annotations

import pytest

from storage.urls import UNPARSABLE, safe_url, safe_urls_in


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:pass@host/?key=abc", "https://host/?key=***"),
        ("https://user:pass@host/v1?key=abc&flag", "https://host/v1?key=***&flag"),
        ("postgresql://u:p@h:5432/db", "postgresql://h:5432/db"),
        ("postgresql://postgres@/db?host=/run/pg", "postgresql:///db?host=***"),
        ("https://token@api.example/v1#frag", "https://api.example/v1"),
        ("http://[::1]:8080/x", "http://[::1]:8080/x"),
        ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1"),
        ("user:pw@db.example:5432", "db.example:5432"),  # no scheme
        ("localhost:8000", "localhost:8000"),
        (
            "host=/run/pg dbname=app user=me password='p w'",
            "host=/run/pg dbname=app user=*** password=***",
        ),
        ("", ""),
        ("not a url at all", UNPARSABLE),
        ("https://host:99999/", UNPARSABLE),
        ("http://", UNPARSABLE),
        ("http://h/\x00", UNPARSABLE),
    ],
)
def test_printed_urls_carry_no_credentials(url: str, shown: str) -> None:
    assert safe_url(url) == shown


def test_urls_inside_an_error_message_lose_their_credentials() -> None:
    message = "unreachable: https://bob:hunter2@embed.example/v1/embeddings?api_key=k1 (timeout)"
    assert safe_urls_in(message) == (
        "unreachable: https://embed.example/v1/embeddings?api_key=*** (timeout)"
    )
