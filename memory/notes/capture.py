"""What may be stored: secret redaction, `<private>` spans, message cleaning.

`MemoryStore.save`/`update` and `files.create_inbox_note` run `sanitize` before anything is
written, and the index runs it on hand-written notes, so a secret never reaches the index.
Episodes, pending entities, conversation turns, request logs and the hook and MCP logs go
through the same functions (`RedactingFilter` for log records: a URL's `?key=` too). Redacted
secrets become `[REDACTED:<kind>]`; docs/memory-format.md ("Secrets") lists what is and is
not redacted. A note is held to more (`without_credentials`): one that still looks like it
holds a password after redaction is refused (docs/permissions.md, "Credentials").
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, Final

from errors import CredentialError
from memory._patterns import lazy_pattern
from memory._record import record

Accept = Callable[[re.Match[str]], bool]


@record
class _Rule:
    kind: str
    triggers: tuple[str, ...]
    """Lower-case literals one of which every match starts with (contains, if not `anchored`):
    the pattern is only tried where one of them occurs, so a big text costs a few `find`s."""
    pattern: Callable[[], re.Pattern[str]]
    """Compiled on first use (`lazy_pattern`): most texts fail the pre-check and need none."""
    accept: Accept | None = None
    """Whether a match is a secret (code and placeholders are not); None: every match is.
    The secret is the group named `s`, `sq` or `su` that took part (the whole match if none)."""
    anchored: bool = True


_NOT_REDACTED = r"(?!\[REDACTED)"
# A token starts after a non-word ASCII character, a CJK one or a JSON escape (`\n`):
# `密钥ghp_...`, `"...\nghp_..."`; never inside a word (`task-...`).
_TOKEN_START = r"(?:(?<![A-Za-z0-9_])|(?<=\\[nrt]))"

# A value after `key=`: quoted (spaces allowed, the quotes kept) or one bare word. A bare word
# stops at whitespace, quotes, separators and brackets, ASCII or full-width.
# In JSON-escaped text (`\n`, `\"`) an escape ends the value, a lone backslash does not.
_VALUE = (
    _NOT_REDACTED
    + r"""(?:(?P<q>\\?["'“「‘`])(?!\[REDACTED)(?P<sq>(?:[^"'”」’`\n\\]|\\(?![nrt"'\\]))"""
    + r"""{1,200})|(?P<su>(?:[^\s"'“”「」‘’`,;，。；、()\[\]{}<>\\]|\\(?![nrtu"'\\/]))+))"""
)
# `key = value` separators: `=`, `:`, `：`, `:=`, `=>`; `is` only before a quoted value.
_SEPARATOR = r"""(?:\\?["'])?[ \t]*(?::=|=>|[:：＝]|=(?!=)|[ \t]is[ \t]+(?=["“']))[ \t]*"""
# The keyword starts a word or a camelCase part: `DB_PASSWORD`, `clientSecret`, never `bypass`.
_KEY_START = (
    r"(?:(?<![A-Za-z0-9])|(?<=\\[nrt])|(?-i:(?<=[a-z0-9])(?=[A-Z])"
    r"|(?<=[A-Z0-9])(?=PASSWORD|PASSWD|SECRET|TOKEN|APIKEY)))"  # PGPASSWORD, not BYPASS
)
_PASSWORD_WORDS = r"pass(?:word|wd|phrase|code)?|pwd|pw"
_SECRET_WORDS = (
    r"secret(?:[_-]?key)?|token|api[_-]?key|(?:private|access|account|shared[_-]?access|signing"
    r"|encryption|master)[_-]?key|credentials?|sharedaccesssignature"
)

# Prose: `my server password is X`, `the pw was X`, `password for root is: X`, `App Secret 是
# X`. The bare value is ASCII (prose after `is` is a word, checked by the rule's `accept`) and
# ends before a sentence's closing punctuation: `password is hunter2.` keeps the full stop.
_PHRASE_QUALIFIER = r"(?:[ \t]+(?:for|of|on|to)(?:[ \t]+[\w.@-]+){1,2}?)?"
_PHRASE_SEPARATOR = (
    r"(?:[ \t]+(?:is|was)(?:[ \t]+(?:now|still))?(?:[ \t]*[:：][ \t]*|[ \t]+)"
    r"|[ \t]*(?:是|为|為)[ \t]*(?:[:：][ \t]*)?)"
)
_PHRASE_VALUE = (
    _NOT_REDACTED
    + r"""(?:(?P<pq>["'“「‘`])(?!\[REDACTED)(?P<psq>[^"'”」’`\n]{1,200})(?=["'”」’`])"""
    + r"""|(?P<psu>(?![\[(])(?:(?!["'`]|\\[nrtu"'\\/])[!-~])+?)"""
    + r"""(?=[.,;:!?)\]]*(?:[\s"'”」’`\\]|[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]|\Z)))"""
)
# `密码：x`, `密码是 x`, `令牌为"x"`; a quoted value needs no separator: `密码 "x"`, `密码'x'`.
_CHINESE_SEPARATOR = r"""(?:(?:[ \t]*(?:是|为|為|[:：=＝])){1,2}[ \t]*|[ \t]*(?=["'“「‘`]))"""
_CHINESE_VALUE = (
    _NOT_REDACTED + r"""(?:(?P<q>["'“「‘`])(?!\[REDACTED)(?P<sq>[^"'”」’`\n]{1,200})"""
    r"""|(?P<su>[^\s"'“”「」‘’`,;，。；、！？（）\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]+))"""
)
_PHRASE_PASSWORD_WORDS = r"pass(?:word|wd|phrase|code)|pwd|pw"
_PHRASE_SECRET_WORDS = r"secret(?:[ _-]?key)?|token|api[ _-]?key|credentials?"

# Query parameters of a URL that carry a credential: `https://host/v1/messages?key=...`.
_URL_SECRET_NAMES: Final = (
    "key=",
    "apikey=",
    "api_key=",
    "api-key=",
    "token=",
    "access_token=",
    "refresh_token=",
    "id_token=",
    "auth=",
    "secret=",
    "client_secret=",
    "password=",
    "passwd=",
    "pwd=",
)

# Bare values that are code or placeholders, not secrets: `password: str`, `= None`, ...
_PLACEHOLDERS: Final = frozenset(
    [
        "none",
        "null",
        "nil",
        "true",
        "false",
        "str",
        "string",
        "bytes",
        "int",
        "optional",
        "secretstr",
        "undefined",
        "required",
        "empty",
        "self",
        "this",
    ]
)
_IDENTIFIER_RE = lazy_pattern(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_KEYWORD_IN_NAME_RE = lazy_pattern(r"(?i)pass|pwd|secret|token|key|cred")
_MASK_RE = lazy_pattern(r"\*+|[x•.#?]{3,}", re.IGNORECASE)
_TEMPLATE_RE = lazy_pattern(r"\$\{|\$[A-Za-z_]\w*$|%[(\w]|\{")


def _bare_value_is_code(match: re.Match[str], group: str = "su") -> bool:
    value = match.group(group)
    rest = match.string[match.end() : match.end() + 1]
    if rest in ("(", "[", "{") or value.lower() in _PLACEHOLDERS or _TEMPLATE_RE().match(value):
        return True  # a call, a subscript, a type, a keyword, `${VAR}`, `%s`, `{name}`
    if _MASK_RE().fullmatch(value):
        return True  # `****`, `xxx`: already masked
    if _IDENTIFIER_RE().fullmatch(value) and not any(c.isdigit() for c in value):
        # `password=password`, `pwd=self.pwd`, `password=args.db` are variables, not values
        return bool(_KEYWORD_IN_NAME_RE().search(value)) or "." in value
    return False


def _accept_password(match: re.Match[str]) -> bool:
    """Any length (short passwords are passwords), unless it is code or a placeholder."""
    if match.group("sq") is not None:
        value = match.group("sq")
        return not (_TEMPLATE_RE().match(value) or _MASK_RE().fullmatch(value))
    return not _bare_value_is_code(match)


def _accept_secret(match: re.Match[str]) -> bool:
    """Tokens and keys look random: 6+ characters with a digit or a symbol, or 12+ letters;
    never all digits (`token: 4096` is a count)."""
    if match.group("sq") is not None:
        value = match.group("sq")
        return len(value) >= 6 and not value.isdigit() and not _MASK_RE().fullmatch(value)
    if _bare_value_is_code(match):
        return False
    value = match.group("su")
    if value.isdigit():
        return False
    return len(value) >= 12 or (len(value) >= 6 and not value.isalpha())


def _accept_chinese(match: re.Match[str]) -> bool:
    if match.group("sq") is not None:
        return True
    return not _MASK_RE().fullmatch(match.group("su"))


def _accept_chinese_token(match: re.Match[str]) -> bool:
    """`令牌：x`: like `_accept_chinese`, but a number is a count (`令牌：4096`)."""
    return _accept_chinese(match) and (match.group("sq") is not None or not match["su"].isdigit())


# Prose around a word that only looks like a value: `v2.3.1`, `case-sensitive`, `E-Mail`.
_VERSION_RE = lazy_pattern(r"v?\d+(?:\.\d+)+\w*", re.IGNORECASE)
_HYPHENATED_WORDS_RE = lazy_pattern(r"[A-Za-z]+(?:-[A-Za-z]+)+")
# `sha256-hashed`, `iPhone-only`, `OAuth2-based`: a compound adjective, not a password
_COMPOUND_RE = lazy_pattern(
    r"\w+-(?:[a-z]+ed|only|based|like|style|free|safe|aware|specific|compatible|friendly)"
)
_CAMEL_HUMP_RE = lazy_pattern(r"[a-z][A-Z]")


def looks_like_credential(value: str, *, digits: bool = False, shortest: int = 4) -> bool:
    """Whether a bare word said to be a password or token looks like one: `hunter2`,
    `PlainPw-Zebra-4471`, `pa$$word`, `aBcDeFgH`; a word (`strict`, `case-sensitive`), a
    version (`v2.3.1`) or a URL does not. All digits only with `digits` (a PIN, `4471`)."""
    if len(value) < shortest or "://" in value:
        return False
    if _VERSION_RE().fullmatch(value) or _COMPOUND_RE().fullmatch(value):
        return False
    if value.isdigit():
        return digits
    has_digit = any(c.isdigit() for c in value)
    has_letter = any(c.isalpha() for c in value)
    if has_digit and has_letter:
        return True
    if _CAMEL_HUMP_RE().search(value):  # `PlainPw`, `aBcD`, not `Required` nor `NOT`
        return True
    symbols = not value.isalnum()
    return symbols and (has_digit or has_letter) and not _HYPHENATED_WORDS_RE().fullmatch(value)


def _accept_password_or_phrase(match: re.Match[str]) -> bool:
    """`password=x` (`_accept_password`), or prose: `my password is hunter2`, where a bare
    value must look like a credential (`looks_like_credential`: `the password is strict` is
    prose); a quoted one is taken unless it is a placeholder."""
    if (quoted := match.group("psq")) is not None:
        return not (_TEMPLATE_RE().match(quoted) or _MASK_RE().fullmatch(quoted))
    if (bare := match.group("psu")) is not None:
        return not _bare_value_is_code(match, "psu") and looks_like_credential(bare, digits=True)
    return _accept_password(match)


def _accept_secret_or_phrase(match: re.Match[str]) -> bool:
    """`token: x` (`_accept_secret`), or prose: `the token is abc123DEF456`, where the value
    must also look random (`looks_like_credential`)."""
    if (quoted := match.group("psq")) is not None:
        return len(quoted) >= 6 and not quoted.isdigit() and not _MASK_RE().fullmatch(quoted)
    if (bare := match.group("psu")) is not None:
        if len(bare) < 12 and bare.isalpha():  # `GitHub`: a name, not a token
            return False
        return not _bare_value_is_code(match, "psu") and looks_like_credential(bare, shortest=6)
    return _accept_secret(match)


# Order matters: specific forms first, so they get their own label.
_RULES: Final[tuple[_Rule, ...]] = (
    _Rule(
        "private_key",
        ("-----begin",),
        lazy_pattern(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*\Z)"
        ),
    ),
    _Rule(
        "anthropic_key", ("sk-ant-",), lazy_pattern(_TOKEN_START + r"sk-ant-[A-Za-z0-9_\-]{20,}")
    ),
    _Rule(
        "openai_key",
        ("sk-",),
        lazy_pattern(_TOKEN_START + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ),
    _Rule(
        "aws_access_key",
        ("akia", "asia", "abia", "acca"),
        lazy_pattern(_TOKEN_START + r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    ),
    _Rule(
        "aws_secret_key",
        ("aws",),
        lazy_pattern(
            r"(?i)aws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?"
            + _NOT_REDACTED
            + r"(?P<s>[A-Za-z0-9/+=]{40})"
        ),
    ),
    _Rule(
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        lazy_pattern(_TOKEN_START + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{30,})"),
    ),
    _Rule(
        "gitlab_token",
        ("glpat-", "gldt-", "glrt-", "glptt-", "gloas-", "glsoat-", "glcbt-", "glimt-", "glft-"),
        lazy_pattern(_TOKEN_START + r"gl(?:pat|dt|rt|ptt|oas|soat|cbt|imt|ft)-[A-Za-z0-9_\-]{20,}"),
    ),
    _Rule("google_api_key", ("aiza",), lazy_pattern(_TOKEN_START + r"AIza[0-9A-Za-z_\-]{35}")),
    _Rule(
        "google_oauth",
        ("gocspx-", "ya29."),
        lazy_pattern(_TOKEN_START + r"(?:GOCSPX-[0-9A-Za-z_\-]{20,}|ya29\.[0-9A-Za-z_\-]{20,})"),
    ),
    _Rule(
        "azure_client_secret",
        ("q~",),
        lazy_pattern(r"(?<![\w~.\-])[\w\-.]{3}\dQ~[\w\-.~]{31,34}(?![\w~])"),
        anchored=False,
    ),
    _Rule(
        "azure_sas",
        ("sig=",),
        lazy_pattern(r"(?i)(?<=[?&;])sig=" + _NOT_REDACTED + r"(?P<s>[A-Za-z0-9%+/=]{16,})"),
    ),
    _Rule(
        "url_secret",
        ("key=", "token=", "auth=", "secret=", "password=", "passwd=", "pwd="),
        # `?key=...` of an endpoint URL, as httpx logs it: `...&access_token=...`
        lazy_pattern(
            r"(?i)[?&](?:"
            + "|".join(re.escape(n) for n in _URL_SECRET_NAMES)
            + r")"
            + _NOT_REDACTED
            + r"(?P<s>[^&#;\s\"'<>]+)"
        ),
        lambda match: not _TEMPLATE_RE().match(match["s"]) and not _MASK_RE().fullmatch(match["s"]),
        anchored=False,
    ),
    _Rule(
        "slack_token",
        ("xox", "xapp-"),
        lazy_pattern(_TOKEN_START + r"(?:xox[abposr]|xapp)-[A-Za-z0-9\-]{10,}"),
    ),
    _Rule(
        "slack_webhook",
        ("https://hooks.slack.com",),
        lazy_pattern(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+"),
    ),
    _Rule(
        "stripe_key",
        ("sk_live_", "rk_live_", "sk_test_", "rk_test_"),
        lazy_pattern(_TOKEN_START + r"[sr]k_(?:live|test)_[0-9A-Za-z]{20,}"),
    ),
    _Rule("huggingface_token", ("hf_",), lazy_pattern(_TOKEN_START + r"hf_[A-Za-z0-9]{30,}")),
    _Rule(
        "jwt",
        ("eyj",),
        lazy_pattern(
            _TOKEN_START + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"
        ),
    ),
    _Rule(
        "url_password",
        ("://",),
        # the password runs to the last `@` of the authority: `p@ss` in `u:p@ss@host`
        lazy_pattern(
            r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@?#]*:" + _NOT_REDACTED + r"(?P<s>[^\s/?#]+)@"
        ),
        anchored=False,
    ),
    _Rule(
        "authorization",
        ("authorization",),
        lazy_pattern(
            r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?>(?:(?:bearer|basic|token|digest)\s+)?)"
            + _NOT_REDACTED
            + r"(?P<s>[^\s\"',;]+)"
        ),
    ),
    _Rule(
        "authorization",
        ("bearer",),
        lazy_pattern(
            r"(?i)\bbearer\s+" + _NOT_REDACTED + r"(?P<s>(?=[\w.~+/\-]*\d)[\w.~+/\-]{16,}=*)"
        ),
    ),
    _Rule(
        "feishu_app_secret",
        ("feishu_app_secret", "lark_app_secret", "app"),
        lazy_pattern(
            r"(?i)(?<![A-Za-z0-9])(?:feishu_app_secret|lark_app_secret|app_?secret)[\"']?\s*[:=]\s*[\"']?"
            + _NOT_REDACTED
            + r"(?P<s>[A-Za-z0-9]{16,})"
        ),
    ),
    _Rule(
        "password",
        ("mysql", "mariadb"),
        # `mysql -pPASS`, `-p'pa ss'`; `-p PASS` with a space is the prompt and a database name
        lazy_pattern(
            r"\b(?:mysql\w*|mariadb[\w-]*)\b[^\n|;&]*?[ \t]-p"
            + _NOT_REDACTED
            + r"""(?:(?P<q>["'])(?!\[REDACTED)(?P<sq>[^"'\n]+)["']|(?P<su>[^\s"'|;&]+))"""
        ),
    ),
    _Rule(
        "password",
        ("sshpass", "redis-cli", "curl"),
        lazy_pattern(
            r"\b(?:sshpass\b[^\n|;&]*?[ \t]-p[ \t]*|redis-cli\b[^\n|;&]*?[ \t]-a[ \t]+"
            r"|curl\b[^\n|;&]*?[ \t](?:-u|--user)[ \t]*[\"']?[^\s:\"']+:)"
            + _NOT_REDACTED
            + r"""(?:(?P<q>["'])(?!\[REDACTED)(?P<sq>[^"'\n]+)["']|(?P<su>[^\s"'|;&]+))"""
        ),
    ),
    _Rule(
        "password",
        ("--pass", "-pass"),
        # `--password x`, `-pass x` (the `=` form is the assignment rule below)
        lazy_pattern(r"(?i)(?<![\w-])--?pass(?:word|wd)?[ \t]+(?!-)" + _VALUE),
        _accept_password,
    ),
    _Rule(
        "password",
        ("pw", "pass"),
        # one pattern for both forms: each occurrence of the word is tried once
        lazy_pattern(
            r"(?i)"
            + _KEY_START
            + r"(?:"
            + _PASSWORD_WORDS
            + r")(?:"
            + _SEPARATOR
            + _VALUE
            + r"|(?<!\bpass)"  # `pass is 3/4` is prose
            + _PHRASE_QUALIFIER
            # `use password 'x'`: a quoted value needs no `is`
            + r"(?:"
            + _PHRASE_SEPARATOR
            + r"""|[ \t]+(?=["'“「‘`]))"""
            + _PHRASE_VALUE
            + r")"
        ),
        _accept_password_or_phrase,
    ),
    _Rule(
        "password",
        ("密码", "口令", "密钥", "秘钥"),
        # `密码：abc`, `密码是 abc`, `口令为"a b"`, `密码 "a b"`; `密码是什么`, `密码学` are
        # prose (CJK value)
        lazy_pattern(r"(?:密码|口令|密钥|秘钥)" + _CHINESE_SEPARATOR + _CHINESE_VALUE),
        _accept_chinese,
    ),
    _Rule(
        "secret",
        ("令牌",),
        lazy_pattern(r"令牌" + _CHINESE_SEPARATOR + _CHINESE_VALUE),
        _accept_chinese_token,
    ),
    _Rule(
        "secret",
        (
            "secret",
            "token",
            "api",
            "private",
            "access",
            "account",
            "shared",
            "signing",
            "encryption",
            "master",
            "credential",
        ),
        lazy_pattern(
            r"(?i)"
            + _KEY_START
            + r"(?:(?:"
            + _SECRET_WORDS
            + r")"
            + _SEPARATOR
            + _VALUE
            + r"|(?:"
            + _PHRASE_SECRET_WORDS
            + r")"
            + _PHRASE_QUALIFIER
            + _PHRASE_SEPARATOR
            + _PHRASE_VALUE
            + r")"
        ),
        _accept_secret_or_phrase,
    ),
)

_TRIGGERS: Final = tuple(dict.fromkeys(t for rule in _RULES for t in rule.triggers))
# The pre-check: each `in` scans the whole text, so drop triggers that contain another one
# (`sk-ant-` holds `sk-`); an ASCII text cannot hold the Chinese ones.
_PRECHECK: Final = tuple(t for t in _TRIGGERS if not any(u != t and u in t for u in _TRIGGERS))
_PRECHECK_ASCII: Final = tuple(t for t in _PRECHECK if t.isascii())

_PRIVATE_RE = lazy_pattern(r"<private>[\s\S]*?(?:</private>|\Z)", re.IGNORECASE)
_STRAY_CLOSE_RE = lazy_pattern(r"</private>", re.IGNORECASE)
_FENCE_RE = lazy_pattern(r"(?ms)^[ \t]*(```|~~~)[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)")
_INLINE_CODE_RE = lazy_pattern(r"`[^`\n]+`")
_BLANK_LINES_RE = lazy_pattern(r"\n{3,}")

CODE_BLOCK_PLACEHOLDER: Final = "[代码块已省略]"
INLINE_CODE_PLACEHOLDER: Final = "[代码]"


_SECRET_GROUPS: Final = ("s", "sq", "su", "psq", "psu")


def _replacer(rule: _Rule) -> Callable[[re.Match[str]], str]:
    label = f"[REDACTED:{rule.kind}]"

    def replace(match: re.Match[str]) -> str:
        if rule.accept is not None and not rule.accept(match):
            return match.group(0)
        groups = match.re.groupindex
        for group in _SECRET_GROUPS:
            if group in groups and match.group(group) is not None:
                start, end = match.span(group)
                whole = match.group(0)
                offset = match.start()
                return whole[: start - offset] + label + whole[end - offset :]
        return label

    return replace


_REPLACERS: Final = tuple(_replacer(rule) for rule in _RULES)


def _matches(rule: _Rule, text: str, lower: str) -> list[re.Match[str]]:
    if not rule.anchored or len(lower) != len(text):  # `lower()` may change lengths
        if any(t in lower for t in rule.triggers):
            return list(rule.pattern().finditer(text))
        return []
    starts: set[int] = set()
    for trigger in rule.triggers:
        at = lower.find(trigger)
        while at >= 0:
            starts.add(at)
            at = lower.find(trigger, at + 1)
    found: list[re.Match[str]] = []
    end = 0
    for start in sorted(starts):
        if start >= end and (match := rule.pattern().match(text, start)) is not None:
            found.append(match)
            end = max(match.end(), start + 1)
    return found


def redact(text: str) -> str:
    """Replace every secret form we know with `[REDACTED:<kind>]`."""
    lower = text.lower()
    # substring checks are far cheaper than one big alternation: most texts stop here
    if not any(t in lower for t in (_PRECHECK_ASCII if lower.isascii() else _PRECHECK)):
        return text
    for rule, replace in zip(_RULES, _REPLACERS, strict=True):
        matches = _matches(rule, text, lower)
        if not matches:
            continue
        parts: list[str] = []
        last = 0
        for match in matches:
            parts.append(text[last : match.start()])
            parts.append(replace(match))
            last = match.end()
        parts.append(text[last:])
        new = "".join(parts)
        if new != text:
            text, lower = new, new.lower()
    return text


# What `credential_left` looks for: a password word, then within the clause a word that looks
# like a password (`the NAS password, the one I use at home: Zebra-4471`, `密码 Zebra-4471`).
_LEFT_KEYWORD_RE = lazy_pattern(
    r"(?i)(?<![a-z])(?:pass(?:word|wd|phrase|code)|pwd|pw|密码|口令)(?![a-z])"
)
_LEFT_VALUE_RE = lazy_pattern(r"""[^\s"'“”‘’「」,，。;；:：()（）<>\[\]]{6,}""")
_NAME_WITH_NUMBER_RE = lazy_pattern(r"\d*[A-Z][a-z]+\d*")
# a clause ends at `;`, `!`, `?`, a line break or a full stop ending a sentence (not `v2.3`)
_CLAUSE_END_RE = lazy_pattern(r"[。;；！？\n]|[.!?](?:\s|$)")


def _credential_shaped(word: str) -> bool:
    """A digit and letters in mixed case or with a symbol: `Zebra-4471`, `hunter2!`; never a
    word, `argon2id`, `claude-3-5`, a version, a path, a URL or an e-mail address."""
    word = word.rstrip(".,!?")
    if len(word) < 6 or "/" in word or "REDACTED" in word or not any(c.isdigit() for c in word):
        return False
    if "@" in word and "." in word.rsplit("@", 1)[-1]:
        return False
    if _NAME_WITH_NUMBER_RE().fullmatch(word):  # `1Password`, `Windows11`
        return False
    upper = any(c.isupper() for c in word)
    lower = any(c.islower() for c in word)
    symbols = any(not c.isalnum() and c not in "-_." for c in word)
    return (upper and lower) or (symbols and (upper or lower))


def credential_left(text: str) -> str | None:
    """The password word after which `text` (already redacted) still holds something shaped
    like a credential, within 40 characters of the same clause; None when nothing is left.
    Stricter than `redact`, which runs on every log line: a note is kept for good and recalled
    into prompts, so one that still looks like it holds a password is refused instead."""
    lower = text.lower()
    if not any(t in lower for t in ("pw", "pass", "密码", "口令")):
        return None
    for keyword in _LEFT_KEYWORD_RE().finditer(text):
        window = _CLAUSE_END_RE().split(text[keyword.end() : keyword.end() + 40], maxsplit=1)[0]
        if any(_credential_shaped(w.group()) for w in _LEFT_VALUE_RE().finditer(window)):
            return keyword.group()
    return None


def without_credentials(field: str, text: str) -> str:
    """`text` (already sanitized), or `CredentialError` when a credential is left in it
    (`credential_left`): what a note's every text field goes through before it is saved."""
    keyword = credential_left(text)
    if keyword is not None:
        raise CredentialError(field, keyword)
    return text


def strip_private(text: str) -> str:
    """Remove `<private>...</private>` spans; an unclosed `<private>` runs to the end."""
    if "private>" not in text.lower():
        return text
    return _STRAY_CLOSE_RE().sub("", _PRIVATE_RE().sub("", text))


def sanitize(text: str) -> str:
    """`strip_private` then `redact`: what every stored text goes through."""
    return redact(strip_private(text))


def sanitize_data(value: object) -> Any:
    """JSON-like data (dicts, lists, strings) with every string, keys included, sanitized."""
    if isinstance(value, str):
        return sanitize(value)
    if isinstance(value, dict):
        return {sanitize(str(k)): sanitize_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [sanitize_data(v) for v in value]
    return value


def clean_message(text: str, limit: int = 2000) -> str:
    """A chat message made fit for memory: private spans gone, secrets redacted,
    code blocks and inline code replaced by short placeholders, at most `limit` characters."""
    text = strip_private(text)
    text = _FENCE_RE().sub(CODE_BLOCK_PLACEHOLDER, text)
    text = _INLINE_CODE_RE().sub(INLINE_CODE_PLACEHOLDER, text)
    text = redact(text)
    text = _BLANK_LINES_RE().sub("\n\n", text).strip()
    if len(text) > limit:
        text = text[: max(limit - 1, 0)].rstrip() + "…"
    return text


class RedactingFilter(logging.Filter):
    """A handler filter: the formatted message, and any traceback, sanitized before a log
    record is written. Attach it to the handler so records from every logger pass through it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = sanitize(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = sanitize(record.exc_text)
        if record.stack_info:
            record.stack_info = sanitize(record.stack_info)
        return True
