"""Whether a web address the agent asks to fetch leads off this machine's network (pure).

The app answers loopback clients without a token (docs/permissions.md, "Who can reach the
app"), and a chat member's turn reads only that member's memory (docs/memory-format.md, "Whose
a note is"). A `WebFetch` of `http://127.0.0.1:8000/api/memories` would walk around both, and
one of `http://169.254.169.254/` would read a cloud machine's credentials: the model's tool
input is untrusted (a web page or a note can ask for it). So an address whose host is this
machine, a private or link-local network, or written to look like neither is refused:

* names: `localhost`, `*.localhost`, `*.local`, `*.internal`, names without a dot, and names
  that carry a private address inside them (`127.0.0.1.nip.io`, `10-0-0-1.sslip.io`);
* addresses in any spelling a resolver accepts: dotted, short (`127.1`), whole numbers
  (`2130706433`), hex and octal parts (`0x7f.0.0.1`, `0177.0.0.1`), IPv6 (`[::1]`) and IPv4
  inside IPv6 (`[::ffff:127.0.0.1]`), percent-encoded;
* anything that does not parse as an http(s) address with a host.

A public name that resolves to a private address (DNS rebinding) is not caught here: that
needs the lookup the fetch itself makes. The API token (`CLAUDE_MEMORY_API_TOKEN`) closes the
app to such a request whatever its address.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import urllib.parse
from typing import Final

_BLOCKED_SUFFIXES: Final = (".localhost", ".local", ".internal", ".localdomain", ".home.arpa")
_EMBEDDED_ADDRESS_RE: Final = re.compile(
    r"(?<![0-9])(\d{1,3})[.-](\d{1,3})[.-](\d{1,3})[.-](\d{1,3})"
)
_NUMBER_PART_RE: Final = re.compile(r"^(?:0x[0-9a-f]*|0[0-7]*|[1-9][0-9]*)$")


def refusal(url: object) -> str | None:
    """Why `url` may not be fetched, or None when it leads to a public host."""
    if not isinstance(url, str) or not url.strip():
        return "a web address is needed"
    try:
        parts = urllib.parse.urlsplit(url.strip())
        host = parts.hostname
    except ValueError:
        return "the web address does not parse"
    if parts.scheme.lower() not in ("http", "https") or not host:
        return "only http and https addresses with a host name can be fetched"
    host = urllib.parse.unquote(host).rstrip(".").lower()
    address = _address(host)
    if address is not None:
        return None if address.is_global else f"{host} is this machine or a private network"
    if "." not in host or host == "localhost" or host.endswith(_BLOCKED_SUFFIXES):
        return f"{host} names this machine or a local network"
    for match in _EMBEDDED_ADDRESS_RE.finditer(host):
        inner = _address(".".join(match.groups()))
        if inner is not None and not inner.is_global:
            return f"{host} carries a private address ({inner}) in its name"
    return None


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """`host` as the address a resolver would read it as, None for a name."""
    found: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    try:
        found = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        found = _legacy_ipv4(host)
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        return found.ipv4_mapped
    return found


def _legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The forms `inet_aton` accepts beyond dotted decimal, as a resolver reads them: 1 to 4
    parts, each decimal, octal (leading 0) or hex (0x), the last filling the remaining bytes
    (`127.1`, `2130706433`, `0x7f.0.0.1`, `0177.0.0.1`)."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_NUMBER_PART_RE.match(p) for p in parts):
        return None  # checked first: the C library's parser skips what follows a space
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None
