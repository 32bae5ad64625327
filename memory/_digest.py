"""SHA-256 from the interpreter's built-in module, not `hashlib`: importing `hashlib` loads
OpenSSL (`_hashlib`), ~2.5 ms of every hook process, for digests of a few bytes. Same digests."""

from __future__ import annotations

try:
    from _sha256 import sha256  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # Python 3.12+: `_sha2`; a build without either: hashlib's
    try:
        from _sha2 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]
    except ImportError:
        from hashlib import sha256

__all__ = ["sha256"]
