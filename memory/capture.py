"""What may be stored: secret redaction, `<private>` spans, message cleaning.

`MemoryStore.save`/`update` and `files.create_inbox_note` run `sanitize` before anything is
written, and the index runs it on hand-written notes, so a secret never reaches the index.
Redacted secrets become `[REDACTED:<kind>]`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    triggers: tuple[str, ...]
    """Lower-case literals one of which every match contains: cheap pre-check on big texts."""
    pattern: re.Pattern[str]
    group: int = 0
    """Which group is the secret (0: the whole match)."""


_NOT_REDACTED = r"(?!\[REDACTED)"

# Order matters: specific forms first, so they get their own label.
_RULES: Final[tuple[_Rule, ...]] = (
    _Rule(
        "private_key",
        ("private key",),
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*\Z)"
        ),
    ),
    _Rule("anthropic_key", ("sk-ant-",), re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    _Rule(
        "openai_key", ("sk-",), re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")
    ),
    _Rule(
        "aws_access_key",
        ("akia", "asia", "abia", "acca"),
        re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    ),
    _Rule(
        "aws_secret_key",
        ("aws",),
        re.compile(
            r"(?i)(aws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?)"
            + _NOT_REDACTED
            + r"([A-Za-z0-9/+=]{40})"
        ),
        group=2,
    ),
    _Rule(
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{30,})"),
    ),
    _Rule("slack_token", ("xox",), re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    _Rule(
        "slack_webhook",
        ("hooks.slack.com",),
        re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+"),
    ),
    _Rule(
        "jwt",
        ("eyj",),
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ),
    _Rule(
        "url_password",
        ("://",),
        re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]+:)" + _NOT_REDACTED + r"([^\s@/]+)@"),
        group=2,
    ),
    _Rule(
        "authorization",
        ("authorization",),
        re.compile(
            r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?>(?:(?:bearer|basic|token|digest)\s+)?))"
            + _NOT_REDACTED
            + r"([^\s\"',;]+)"
        ),
        group=2,
    ),
    _Rule(
        "feishu_app_secret",
        ("secret",),
        re.compile(
            r"(?i)((?<![A-Za-z0-9])(?:feishu_app_secret|lark_app_secret|app_?secret)[\"']?\s*[:=]\s*[\"']?)"
            + _NOT_REDACTED
            + r"([A-Za-z0-9]{16,})"
        ),
        group=2,
    ),
    _Rule(
        "secret",
        (
            "password",
            "passwd",
            "secret",
            "api_key",
            "apikey",
            "access_token",
            "accesstoken",
            "auth_token",
            "authtoken",
            "refresh_token",
            "refreshtoken",
            "private_key",
            "privatekey",
        ),
        re.compile(
            r"(?i)((?<![A-Za-z0-9])(?:password|passwd|secret|client_secret|api_?key|access_?token"
            r"|auth_?token|refresh_?token|private_?key)[\"']?\s*[:=]\s*[\"']?)"
            + _NOT_REDACTED
            + r"([^\s\"',;]{6,})"
        ),
        group=2,
    ),
)

_ANY_TRIGGER = re.compile("|".join(re.escape(t) for rule in _RULES for t in rule.triggers))
_PRIVATE_RE = re.compile(r"<private>[\s\S]*?(?:</private>|\Z)", re.IGNORECASE)
_STRAY_CLOSE_RE = re.compile(r"</private>", re.IGNORECASE)
_FENCE_RE = re.compile(r"(?ms)^[ \t]*(```|~~~)[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)")
_INLINE_CODE_RE = re.compile(r"`[^`\n]+`")
_BLANK_LINES_RE = re.compile(r"\n{3,}")

CODE_BLOCK_PLACEHOLDER: Final = "[代码块已省略]"
INLINE_CODE_PLACEHOLDER: Final = "[代码]"


def redact(text: str) -> str:
    """Replace every secret form we know with `[REDACTED:<kind>]`."""
    lower = text.lower()
    if not _ANY_TRIGGER.search(lower):
        return text
    for rule in _RULES:
        if not any(t in lower for t in rule.triggers):
            continue
        if rule.group == 0:
            text = rule.pattern.sub(f"[REDACTED:{rule.kind}]", text)
        else:
            text = rule.pattern.sub(
                lambda m, kind=rule.kind, g=rule.group: (
                    m.group(0)[: m.start(g) - m.start(0)]
                    + f"[REDACTED:{kind}]"
                    + m.group(0)[m.end(g) - m.start(0) :]
                ),
                text,
            )
    return text


def strip_private(text: str) -> str:
    """Remove `<private>...</private>` spans; an unclosed `<private>` runs to the end."""
    return _STRAY_CLOSE_RE.sub("", _PRIVATE_RE.sub("", text))


def sanitize(text: str) -> str:
    """`strip_private` then `redact`: what every stored text goes through."""
    return redact(strip_private(text))


def clean_message(text: str, limit: int = 2000) -> str:
    """A chat message made fit for memory: private spans gone, secrets redacted,
    code blocks and inline code replaced by short placeholders, at most `limit` characters."""
    text = strip_private(text)
    text = _FENCE_RE.sub(CODE_BLOCK_PLACEHOLDER, text)
    text = _INLINE_CODE_RE.sub(INLINE_CODE_PLACEHOLDER, text)
    text = redact(text)
    text = _BLANK_LINES_RE.sub("\n\n", text).strip()
    if len(text) > limit:
        text = text[: max(limit - 1, 0)].rstrip() + "…"
    return text
