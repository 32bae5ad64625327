"""Text at the byte edges: JSON and POSIX bytes can carry what is not Unicode text.

JSON may escape half of a UTF-16 pair (`"\\ud83d"`), and Python reads undecodable bytes of
argv and stdin as lone surrogates (`\\udcff`). Such a string cannot be written as UTF-8: saved,
logged or answered, it raises. Each door decides once, here: refuse it (`require_text`), repair
it (`repaired`, for a chat platform's payloads, which the user cannot resend), or show it
(`printable`, for an error that echoes the input).
"""

from __future__ import annotations

from typing import Any

from errors import InvalidInputError


def require_text(name: str, value: object) -> None:
    """Raise `InvalidInputError` naming `name` when `value` (a string, or JSON-like data: lists,
    tuples, dicts with their keys) holds a lone surrogate; anything else passes, for its own
    checks."""
    if isinstance(value, dict):
        for key, item in value.items():
            require_text(name, key)
            require_text(name, item)
        return
    if isinstance(value, list | tuple):
        for item in value:
            require_text(name, item)
        return
    if not isinstance(value, str):
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        code = f"\\u{ord(value[error.start]):04x}"
        raise InvalidInputError(
            f"{name} is not valid text: a lone surrogate ({code}) at character {error.start}, "
            "from invalid UTF-8 or half of an escaped pair; send UTF-8"
        ) from None


def repaired(value: Any) -> Any:
    """Every string of a decoded JSON value with lone surrogates replaced by U+FFFD."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            # Pairs written as two escapes join up; what stays alone becomes U+FFFD.
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, dict):
        return {repaired(k): repaired(v) for k, v in value.items()}
    if isinstance(value, list):
        return [repaired(v) for v in value]
    return value


def printable(value: Any) -> Any:
    """JSON-like data with each lone surrogate written out as `\\udXXX`, so it encodes."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {printable(k): printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable(v) for v in value]
    return value
