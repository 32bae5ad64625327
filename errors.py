"""One exception hierarchy for the whole product.

Every message says what to do next, because these reach users through HTTP, Feishu and the CLI.
"""

from __future__ import annotations


class ClaudeMemoryError(Exception):
    """Base class: anything the product raises on purpose."""

    status_code: int = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigurationError(ClaudeMemoryError):
    """Settings are missing or contradict each other."""

    status_code = 500


class NotFoundError(ClaudeMemoryError):
    """A conversation, note or other record with that id does not exist."""

    status_code = 404

    def __init__(self, kind: str, ident: str) -> None:
        super().__init__(f"{kind} {ident!r} not found; list the {_plural(kind)} to see valid ids")
        self.kind = kind
        self.ident = ident


class InvalidInputError(ClaudeMemoryError):
    """The caller sent something we cannot accept."""

    status_code = 422


class CredentialError(InvalidInputError):
    """A note still holds what looks like a password after redaction: memory never keeps
    credentials (docs/permissions.md, "Credentials")."""

    def __init__(self, field: str, keyword: str) -> None:
        super().__init__(
            f"not saved: the note's {field} still holds what looks like a credential after "
            f"{keyword!r}; memory never keeps passwords or tokens. Remove the value (keep it in "
            "a password manager) and save again"
        )
        self.field = field
        self.keyword = keyword


class ConflictError(ClaudeMemoryError):
    """The request contradicts the record's state (a decision already taken cannot be undone
    this way); the message says what can be done instead."""

    status_code = 409


class AgentUnavailableError(ClaudeMemoryError):
    """The Claude CLI could not be started or reached."""

    status_code = 503


class BusyError(ClaudeMemoryError):
    """Too much work is already queued; the caller should retry later."""

    status_code = 429


def _plural(noun: str) -> str:
    """`note` -> `notes`, `pending entity` -> `pending entities` (the kinds are English nouns
    written in code, never user text)."""
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u"):
        return noun[:-1] + "ies"
    return noun + "s"
