"""Redaction of secrets, <private> spans and message cleaning."""

from __future__ import annotations

import io
import json
import logging
import sqlite3
from pathlib import Path

import httpx
import pytest

from errors import CredentialError
from memory.model import NoteDraft
from memory.notes.capture import (
    RedactingFilter,
    clean_message,
    credential_left,
    redact,
    sanitize,
    strip_private,
)
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


# Passwords and tokens named in prose (#30): the value goes, the sentence stays.
PROSE_CREDENTIALS: list[tuple[str, str]] = [
    (
        "my server password is PlainPw-Zebra-4471",
        "my server password is [REDACTED:password]",
    ),
    ("My wifi password is hunter2.", "My wifi password is [REDACTED:password]."),
    ("the root pw was pa$$word, ok?", "the root pw was [REDACTED:password], ok?"),
    ("my NAS passcode is 4471", "my NAS passcode is [REDACTED:password]"),
    ("PW is now: Zebra-4471", "PW is now: [REDACTED:password]"),
    ("pw: Zebra-4471", "pw: [REDACTED:password]"),
    ("the password for root is Zebra-4471", "the password for root is [REDACTED:password]"),
    ("the password of the day is 'swordfish'", "the password of the day is '[REDACTED:password]'"),
    ("use password 'swordfish'", "use password '[REDACTED:password]'"),
    ("password 是 Zebra4471", "password 是 [REDACTED:password]"),
    ("服务器密码是 PlainPw-Zebra-4471", "服务器密码是 [REDACTED:password]"),
    ("我的密码是'Zebra 4471'", "我的密码是'[REDACTED:password]'"),
    ("密码 'Zebra-4471'", "密码 '[REDACTED:password]'"),
    ("密码“Zebra-4471”", "密码“[REDACTED:password]”"),
    ("密码「Zebra-4471」", "密码「[REDACTED:password]」"),
    ("令牌：abcDEF123456", "令牌：[REDACTED:secret]"),
    ("访问令牌是 tk9QxLm27", "访问令牌是 [REDACTED:secret]"),
    (
        "飞书的 App Secret 是 aBcD1234EfGh5678IjKl",
        "飞书的 App Secret 是 [REDACTED:secret]",
    ),
    ("App Secret 为：aBcD1234EfGh5678IjKl", "App Secret 为：[REDACTED:secret]"),
    ("the access token is tk9QxLm27Zz", "the access token is [REDACTED:secret]"),
    ("the API key is qwertyQWERTY123", "the API key is [REDACTED:secret]"),
    (
        'POST https://gw.example/v1/messages?key=gwKey77Qx9 "HTTP/1.1 200 OK"',
        'POST https://gw.example/v1/messages?key=[REDACTED:url_secret] "HTTP/1.1 200 OK"',
    ),
    (
        "https://h.example/cb?code=1&access_token=at55Zq9&x=1",
        "https://h.example/cb?code=1&access_token=[REDACTED:url_secret]&x=1",
    ),
    (
        '"text": "my password is Zebra-4471\\nnext"',
        '"text": "my password is [REDACTED:password]\\nnext"',
    ),
]

# Prose that only talks about passwords and tokens: a word after `is` is not a credential.
PROSE_WITHOUT_CREDENTIALS = [
    "the password policy is strict",
    "I forgot my password",
    "The password is required.",
    "the password is case-sensitive",
    "the password is Case-Sensitive",
    "My password is too weak, I need a new one.",
    "the password is at least 12 characters long",
    "the password was reset yesterday",
    "the password is stored in 1Password",
    "the password for the server is in the vault",
    "password for root is required",
    "the password is NOT stored anywhere",
    "the password was changed in v2.3.1",
    "the password is sha256-hashed",
    "the password is password",
    "the password is: see the wiki",
    "if password is None:",
    "the passcode is sent by SMS",
    "the passwd file is /etc/passwd",
    "test pass is 3/4",
    "pw is the abbreviation",
    "the token is valid for 24 hours",
    "the token is JWT-encoded",
    "the token is 4096 long",
    "the token is GitHub's",
    "access token is short-lived",
    "token is None",
    "The secret is out.",
    "the secret is to keep it simple",
    "the secret key is rotated every 90 days",
    "the credential is OAuth-based",
    "the API key is in the .env file",
    "the api key is ${API_KEY}",
    "令牌桶算法限制每秒请求数",
    "令牌是什么？",
    "令牌数：4096",
    "密码学是一门学科",
    "密码是多少？",
    "App Secret 是在开发者后台生成的",
    "The App Secret 是 飞书后台里的值",
    "see https://example.com/search?q=cats&page=2",
    "https://example.com/?key={key}",
]


@pytest.mark.parametrize(("text", "expected"), PROSE_CREDENTIALS)
def test_credentials_named_in_prose_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize("text", PROSE_WITHOUT_CREDENTIALS)
def test_prose_about_passwords_and_tokens_is_left_alone(text: str) -> None:
    assert redact(text) == text
    assert credential_left(sanitize(text)) is None


# What redaction leaves but a note may not keep: a password word, then in the same clause a
# word shaped like a password.
LEFT_IN_A_NOTE: list[tuple[str, str]] = [
    ("the NAS password, the one I use at home: Zebra-4471", "password"),
    ("password → Zebra-4471", "password"),
    ("my password is now set to Zebra-4471", "password"),
    ("pw Hunter2!x", "pw"),
    ("密码 Zebra-4471", "密码"),
    ("口令（旧的）Zebra-4471", "口令"),
]
NOTHING_LEFT = [
    "the password is [REDACTED:password]",
    "password hashing uses argon2id in v3.2",
    "password rotation every 90 days; GPT4-Turbo is next",
    "Password policy: at least 12 chars, mixed case (Aa1!)",
    "the password for admin@example.com is in the vault",
    "reset the password at https://Example.com/Reset2",
    "password reset shipped in v2.3.1. Zebra-4471 is a codename",
    "Zebra-4471 is the build; the password was rotated",
]


@pytest.mark.parametrize(("text", "keyword"), LEFT_IN_A_NOTE)
def test_a_credential_redaction_leaves_is_found(text: str, keyword: str) -> None:
    assert credential_left(sanitize(text)) == keyword


@pytest.mark.parametrize("text", NOTHING_LEFT)
def test_nothing_is_left_in_prose_and_redacted_text(text: str) -> None:
    assert credential_left(sanitize(text)) is None


def test_the_corpus_redacted_leaves_no_credential_and_its_look_alikes_are_not_one() -> None:
    assert credential_left(sanitize("\n".join(s.text for s in CORPUS))) is None
    assert [t for t in LOOKALIKES if credential_left(sanitize(t))] == []


def test_a_note_holding_a_credential_is_refused_and_nothing_is_written(
    store: MemoryStore,
) -> None:
    before = sorted(p.name for p in store.root.rglob("*.md"))
    with pytest.raises(CredentialError) as refused:
        store.save(NoteDraft(content="NAS login: admin, password → Zebra-4471"))
    assert "credential" in refused.value.message and "'password'" in refused.value.message
    assert "Zebra-4471" not in refused.value.message  # the error never repeats the value
    assert refused.value.status_code == 422
    assert sorted(p.name for p in store.root.rglob("*.md")) == before
    for field, draft in (
        ("title", NoteDraft(content="NAS login", title="密码 Zebra-4471")),
        ("summary", NoteDraft(content="NAS login", summary="密码 Zebra-4471")),
    ):
        with pytest.raises(CredentialError, match=field):
            store.save(draft)
    with pytest.raises(CredentialError, match="tags"):
        store.save(NoteDraft(content="NAS login", tags=["pw Hunter2!x"]))


def test_an_update_that_would_keep_a_credential_is_refused(store: MemoryStore) -> None:
    saved = store.save(NoteDraft(content="NAS login: admin, password in the vault"))
    with pytest.raises(CredentialError, match="content"):
        store.update(saved.id, content="NAS login: admin, password → Zebra-4471")
    with pytest.raises(CredentialError, match="title"):
        store.update(saved.id, title="NAS 密码 Zebra-4471")
    note = store.get(saved.id)
    assert "Zebra" not in note.body and "Zebra" not in note.title
    assert "Zebra" not in store.abspath(note.path).read_text(encoding="utf-8")


def test_a_note_whose_credential_was_redacted_is_saved_without_it(store: MemoryStore) -> None:
    """Redaction took the value: nothing credential-shaped is left, the note is kept."""
    result = store.save(NoteDraft(content="my server password is PlainPw-Zebra-4471"))
    text = store.abspath(result.path).read_text(encoding="utf-8")
    assert "PlainPw-Zebra-4471" not in text
    assert "my server password is [REDACTED:password]" in text


def test_httpx_request_lines_lose_a_urls_key_query_value() -> None:
    """httpx logs every request's URL at INFO: the model endpoint's `?key=` must not reach a
    log file (the filter `cli.configure_logging` puts on every handler)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("httpx")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        transport = httpx.MockTransport(lambda request: httpx.Response(200))
        with httpx.Client(transport=transport) as client:
            client.post("https://gw.example/v1/messages?key=gwKey77Qx9&beta=true")
            client.get("https://gw.example/v1/models?access_token=at55Zq9Qx")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    lines = stream.getvalue()
    assert (
        "HTTP Request: POST https://gw.example/v1/messages?key=[REDACTED:url_secret]&beta=true"
        in lines
    )
    assert "gwKey77Qx9" not in lines and "at55Zq9Qx" not in lines


def test_the_app_log_file_gets_the_redacting_filter(tmp_path: Path) -> None:
    from cli import configure_logging

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    log_file = tmp_path / "logs" / "server.log"
    try:
        configure_logging("INFO", log_file)
        logging.getLogger("httpx").info(
            'HTTP Request: %s %s "%s %d %s"',
            "POST",
            httpx.URL("https://gw.example/v1/messages?key=gwKey77Qx9"),
            "HTTP/1.1",
            200,
            "OK",
        )
        for handler in root.handlers:
            handler.flush()
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:], root.level = saved[0], saved[1]
    text = log_file.read_text(encoding="utf-8")
    assert "?key=[REDACTED:url_secret]" in text and "gwKey77Qx9" not in text
