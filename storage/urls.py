"""URLs made safe to print: `safe_url` drops credentials and query values.

Every URL the app shows or logs (`doctor`, `/health`, log lines) goes through `safe_url` first.
It lives in `storage/` because that package imports nothing of the app's own, so every layer
may import it: `memory/` (which may not import `web/`, `settings` or `app`), `agent/`,
`bridge/`, `web/`, `cli.py`. Standard library only, and cheap to import (the hook path stays
light).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

HIDDEN = "***"
"""What a removed query or connection value is replaced with."""

# libpq's `key=value` connection strings: the keys whose values say where, never who or how.
_CONNINFO_SHOWN = frozenset({"host", "hostaddr", "port", "dbname"})
_CONNINFO_START = re.compile(r"\w+\s*=")
_CONNINFO_PAIR = re.compile(r"""(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)""")
# A URL inside free text: a scheme, `://`, then everything up to a space or a quote.
_URL_IN_TEXT = re.compile(r"""[A-Za-z][A-Za-z0-9+.-]*://[^\s'"<>`]+""")
UNPARSABLE = "<unparsable URL>"


def safe_url(url: str) -> str:
    """`url` without `user:password@`, query values and fragment; safe for logs and pages.

    `https://user:pass@host/v1?key=abc` -> `https://host/v1?key=***`. A string without a
    scheme is treated the same way (`user:pw@host:5432` -> `host:5432`); a libpq connection
    string (`host=h password=p`) keeps only `host`, `hostaddr`, `port` and `dbname` values.
    Something that cannot be parsed as either comes back as `<unparsable URL>`, never as is.
    """
    text = url.strip()
    if not text:
        return ""
    if "://" not in text and _CONNINFO_START.match(text):
        return _safe_conninfo(text)
    try:
        parts = urlsplit(text if "://" in text else f"//{text}")
        host = parts.hostname  # also validates the port and brackets
        port = parts.port
    except ValueError:
        return UNPARSABLE
    if not text.isprintable() or " " in text or (not host and not parts.path):
        return UNPARSABLE
    netloc = host or ""
    if ":" in netloc:  # an IPv6 address goes back into brackets
        netloc = f"[{netloc}]"
    if port is not None:
        netloc += f":{port}"
    query = "&".join(_hide_value(pair) for pair in parts.query.split("&") if pair)
    clean = netloc + parts.path + (f"?{query}" if query else "")
    return f"{parts.scheme}://{clean}" if "://" in text else clean


def safe_urls_in(text: str) -> str:
    """`text` (an error message, a log line) with every `scheme://...` in it made safe."""
    return _URL_IN_TEXT.sub(lambda m: safe_url(m.group(0)), text)


def _hide_value(pair: str) -> str:
    key, sep, _ = pair.partition("=")
    return f"{key}={HIDDEN}" if sep else key


def _safe_conninfo(text: str) -> str:
    pairs = _CONNINFO_PAIR.findall(text)
    if not pairs:
        return UNPARSABLE
    return " ".join(
        f"{key}={value if key.lower() in _CONNINFO_SHOWN else HIDDEN}" for key, value in pairs
    )
