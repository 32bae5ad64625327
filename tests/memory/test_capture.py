"""Redaction of secrets, <private> spans and message cleaning."""

from __future__ import annotations

import json
import sqlite3

import pytest

from memory.model import NoteDraft
from memory.notes.capture import clean_message, redact, sanitize, strip_private
from memory.sqlite.store import MemoryStore
from tests.security.corpus import LOOKALIKES, Secret
from tests.security.corpus import SECRETS as CORPUS

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx7y2Qk9zR8vT3nE1cW0o\n"
    "q2W8Zk1Lm0Np3Qr4St5Uv6Wx7Yz8\n-----END RSA PRIVATE KEY-----"
)

# (kind, text containing the secret, the secret part that must disappear)
SECRETS: list[tuple[str, str, str]] = [
    (
        "anthropic_key",
        "ANTHROPIC_API_KEY=sk-ant-api03-abcDEF1234567890ghijklmnopQRSTuvwx-yz_0123456789AA",
        "abcDEF1234567890ghijklmnop",
    ),
    ("openai_key", "key sk-proj-Abcdefghijklmnopqrstuvwx1234567890ABCD ok", "Abcdefghijklmnop"),
    ("openai_key", "legacy sk-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefghij", "AbCdEfGhIjKl"),
    ("aws_access_key", "aws id AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
    (
        "aws_secret_key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI",
    ),
    ("github_token", "token ghp_1234567890abcdefghijABCDEFGHIJ123456 end", "ghp_1234567890abcdef"),
    (
        "github_token",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ",
        "abcdefghijklmnopqrstuvwxyz",
    ),
    ("slack_token", "bot xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp", "AbCdEfGhIjKlMnOp"),
    (
        "slack_webhook",
        "post to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXX",
        "T00000000/B00000000",
    ),
    ("jwt", f"cookie session={JWT}; path=/", "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV"),
    ("private_key", f"key:\n{PEM}\nafter", "MIIEowIBAAKCAQEAx7y2Qk9zR8vT3nE1cW0o"),
    (
        "private_key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n(truncated",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
    ),
    ("url_password", "DATABASE_URL=postgres://admin:s3cr3tP4ss@db.example.com/app", "s3cr3tP4ss"),
    ("url_password", "clone https://user:hunter2word@git.example.com/repo.git", "hunter2word"),
    ("authorization", "curl -H 'Authorization: Bearer abcdef123456.ghijk'", "abcdef123456"),
    ("authorization", "authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA"),
    ("authorization", '{"Authorization": "Token 9f8e7d6c5b4a3210"}', "9f8e7d6c5b4a3210"),
    (
        "feishu_app_secret",
        "FEISHU_APP_SECRET=AbcdEfghIjklMnopQrstUvwx12345678",
        "AbcdEfghIjklMnop",
    ),
    ("feishu_app_secret", 'app_secret: "abcdefghijklmnopqrstuvwx12345678"', "abcdefghijklmnop"),
    ("feishu_app_secret", "appSecret=ZYXWVUTSRQPONMLKJIHG98765", "ZYXWVUTSRQPONMLK"),
    ("password", "DB_PASSWORD: correcthorsebattery", "correcthorsebattery"),
    ("password", "password=hunter2hunter2", "hunter2hunter2"),
]

HARMLESS = [
    "The token bucket allows 100 requests per minute.",
    "scikit-learn is imported as sklearn; sk-learn is a typo.",
    "Open https://example.com/docs/auth for details.",
    "The Authorization header is required for every call.",
    "Password policy: at least 12 characters.",
    "飞书应用的 app secret 放在环境变量里。",
    "eyJ is how base64 JSON starts.",
]


@pytest.mark.parametrize(("kind", "text", "secret"), SECRETS)
def test_every_secret_form_is_redacted(kind: str, text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out


@pytest.mark.parametrize("text", HARMLESS)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("secret", CORPUS, ids=lambda s: s.value)
def test_every_secret_of_the_corpus_is_sanitized(secret: Secret) -> None:
    out = sanitize(secret.text)
    assert secret.value not in out
    if secret.kind != "private":
        assert f"[REDACTED:{secret.kind}]" in out


@pytest.mark.parametrize("text", LOOKALIKES)
def test_look_alikes_come_through_unchanged(text: str) -> None:
    assert sanitize(text) == text
    assert clean_message(text) == text


def test_the_whole_corpus_in_one_text_loses_every_secret_and_keeps_every_look_alike() -> None:
    text = "\n".join([*LOOKALIKES, *(s.text for s in CORPUS), *LOOKALIKES])
    out = sanitize(text)
    assert [s.value for s in CORPUS if s.value in out] == []
    assert [t for t in LOOKALIKES if t not in out] == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('password = "pa ss"', 'password = "[REDACTED:password]"'),
        ("mysql -u root -p'pa ss' db", "mysql -u root -p'[REDACTED:password]' db"),
        ("密码是 abc，好的", "密码是 [REDACTED:password]，好的"),
        ("PGPASSWORD=x psql", "PGPASSWORD=[REDACTED:password] psql"),
        ("BYPASS=1", "BYPASS=1"),
        ("password: ${DB_PASSWORD}", "password: ${DB_PASSWORD}"),
        ("password=%s", "password=%s"),
        ("password: ****", "password: ****"),
    ],
)
def test_values_keep_their_quotes_and_placeholders_are_not_secrets(
    text: str, expected: str
) -> None:
    assert redact(text) == expected


def test_a_big_text_without_secrets_is_returned_as_is() -> None:
    text = ("the memory system stores notes 我们讨论了数据库迁移方案 " * 200)[:10_000]
    assert redact(text) is text


def test_redaction_is_idempotent() -> None:
    text = "\n".join([*(t for _, t, _ in SECRETS), *(s.text for s in CORPUS)])
    once = redact(text)
    assert redact(once) == once


def test_authorization_keeps_the_scheme_and_drops_the_credential() -> None:
    assert redact("Authorization: Bearer abc123def456") == (
        "Authorization: Bearer [REDACTED:authorization]"
    )


def test_private_spans_are_removed() -> None:
    assert strip_private("keep <private>diary</private> this") == "keep  this"
    assert strip_private("a <PRIVATE>x\ny</Private> b <private>c</private>") == "a  b "
    assert strip_private("visible <private>never closed\nsecret") == "visible "
    assert strip_private("stray </private> tag") == "stray  tag"


def test_sanitize_strips_private_then_redacts() -> None:
    out = sanitize("<private>sk-ant-api03-zzzzzzzzzzzzzzzzzzzzzzzz</private> password=abcdef123")
    assert "zzzz" not in out and "abcdef123" not in out and "private" not in out


def test_clean_message_replaces_code_and_truncates() -> None:
    text = "看这个 `auth_timeout` 配置：\n```python\nx = 1\ny = 2\n```\n"
    text += "然后 <private>秘密</private>重启"
    assert clean_message(text) == "看这个 [代码] 配置：\n[代码块已省略]\n然后 重启"
    long = clean_message("字" * 5000, limit=100)
    assert len(long) == 100 and long.endswith("…")
    assert clean_message("token sk-ant-api03-aaaaaaaaaaaaaaaaaaaaaaaaaaa") == (
        "token [REDACTED:anthropic_key]"
    )
    assert clean_message("```\nunclosed fence with password=hunter22") == "[代码块已省略]"


def test_secrets_never_reach_the_file_or_the_index(store: MemoryStore) -> None:
    # visible text first: the unterminated private key in the corpus runs to the end
    body = "visible head\n<private>my private diary 日记</private>\n"
    body += "\n".join(text for _, text, _ in SECRETS)
    result = store.save(
        NoteDraft(
            content=body,
            title="creds password=titlesecret99",
            summary="summary with ghp_1234567890abcdefghijABCDEFGHIJ123456",
            tags=["password=tagsecret123"],
            source="https://u:sourcepass1@example.com",
        )
    )
    store.close()
    file_text = store.abspath(result.path).read_text(encoding="utf-8")
    conn = sqlite3.connect(store.config.index_path)
    try:
        index_text = json.dumps([list(r) for r in conn.execute("SELECT * FROM notes")])
    finally:
        conn.close()
    listing = (store.root / "_index.json").read_text(encoding="utf-8")
    for _, _, secret in SECRETS:
        for where, text in (("file", file_text), ("index", index_text), ("_index", listing)):
            assert secret not in text, (where, secret)
    for leaked in ("titlesecret99", "tagsecret123", "sourcepass1", "diary", "日记"):
        assert leaked not in file_text and leaked not in index_text
    assert "visible head" in file_text


def test_secrets_in_hand_written_notes_stay_out_of_the_index(store: MemoryStore) -> None:
    path = store.root / "inbox" / "hand.md"
    path.write_text("deploy notes\npassword=handsecret42\n<private>hidden 隐私</private>\n")
    [hit] = store.search("deploy")
    assert store.search("handsecret42") == []
    assert store.search("隐私") == []
    assert "handsecret42" in path.read_text()  # the user's own file is not rewritten on sync
    store.update(hit.id, tags=["ops"])  # an explicit write sanitizes everything
    assert "handsecret42" not in path.read_text() and "隐私" not in path.read_text()
