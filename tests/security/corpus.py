"""The secrets corpus and its look-alikes, shared by the redaction unit tests and the at-rest
scan. Each secret holds a distinctive value that must never be found on disk."""

from __future__ import annotations

from typing import NamedTuple


class Secret(NamedTuple):
    kind: str
    text: str
    value: str
    """The distinctive part of the secret: searched for in every byte on disk."""


_JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJqd3R1c2VyNzcxIiwibmFtZSI6IkpvaG4ifQ."
    "JwtSigQx7Vb2Lm9Kp4Rt6Yw8Zc1Nd3Fh5Gj0"
)
_PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpemBodyQx7y2Qk9zR8vT3nE1cW0o\n"
    "q2W8Zk1Lm0Np3Qr4St5Uv6Wx7Yz8\n-----END RSA PRIVATE KEY-----"
)
_GCP_SERVICE_ACCOUNT = (
    '{"type": "service_account", "project_id": "demo-project", "private_key_id": "0a1b2c",'
    ' "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvgcpBodyGcpKey7Qx9Lm\\n'
    '-----END PRIVATE KEY-----\\n", "client_email": "bot@demo-project.iam.gserviceaccount.com"}'
)

SECRETS: tuple[Secret, ...] = (
    # passwords, English: assignments, quoted, short, flags
    Secret("password", "password=Hunter2xq", "Hunter2xq"),
    Secret("password", "DB_PASSWORD: correcthorsebattery", "correcthorsebattery"),
    Secret("password", 'password = "pa ss wqz"', "pa ss wqz"),
    Secret("password", "PASSWORD='Qz8!v'", "Qz8!v"),
    # short values hold a letter ids never do ("u": Crockford base32 and hex lack it), so a
    # random id cannot hold them by chance (CI found "zq7" in index.db on 26 Nov, where only
    # ids could put it: the text was redacted everywhere else)
    Secret("password", "the admin password: zu7", "zu7"),
    Secret("password", "pwd=ku83", "ku83"),
    Secret("password", "login with user=root pw: 9Lx2", "9Lx2"),
    Secret("password", '{"password": "json-Pw-551"}', "json-Pw-551"),
    Secret("password", "export PGPASSWORD=pgPw77x && psql", "pgPw77x"),
    Secret("password", "mysql -u root -pMyPw123 app", "MyPw123"),
    Secret("password", "mysql -u root -p'pa ss88' app", "pa ss88"),
    Secret("password", "sshpass -p sshPw903 ssh deploy@host", "sshPw903"),
    Secret("password", "redis-cli -h cache -a redisPw445 ping", "redisPw445"),
    Secret("password", "curl -u admin:curlPw301 https://api.example.com", "curlPw301"),
    Secret("password", "deploy --password cliPw802 --yes", "cliPw802"),
    Secret("password", 'the password is "quotedPw19"', "quotedPw19"),
    # passwords in prose: `is`, `was`, a qualifier, a quoted value right after the word
    Secret("password", "my server password is PlainPw-Zebra-4471", "PlainPw-Zebra-4471"),
    Secret("password", "the wifi pw was hunter2qu.", "hunter2qu"),
    Secret("password", "my pw: Colon-Pw-5521", "Colon-Pw-5521"),
    Secret("password", "the password for root is Root-Pw-9921", "Root-Pw-9921"),
    Secret("password", "my NAS passcode is Pc-7731u", "Pc-7731u"),
    Secret("password", "use password 'swordfish-q7u'", "swordfish-q7u"),
    # passwords, Chinese
    Secret("password", "数据库密码：Zh9pw31", "Zh9pw31"),
    Secret("password", "服务器的密码是 Mima2024!", "Mima2024!"),
    Secret("password", "密码是qwe77z，别告诉别人", "qwe77z"),
    Secret("password", "口令：kl78m", "kl78m"),
    Secret("password", "新密码为“ab cd 99”", "ab cd 99"),
    Secret("password", "密钥: sk9Mi4oQ2", "sk9Mi4oQ2"),
    Secret("password", "服务器密码是ZhPw-Zebra-8812", "ZhPw-Zebra-8812"),
    Secret("password", "数据库密码 “QuotedMi-551u”", "QuotedMi-551u"),
    Secret("password", "密码'QtMi-662u'别外传", "QtMi-662u"),
    # tokens and secrets by keyword
    Secret("secret", "token: tkn8FhQ2mZ9x", "tkn8FhQ2mZ9x"),
    Secret("secret", "GITLAB_TOKEN=plainTok77aa", "plainTok77aa"),
    Secret("secret", "client_secret = 'cs-4f9a8b7c6d'", "cs-4f9a8b7c6d"),
    Secret("secret", "SECRET_KEY=django-insecure-k3y9", "django-insecure-k3y9"),
    Secret("secret", "export API_KEY=apiKeyQ9w8e7", "apiKeyQ9w8e7"),
    Secret("secret", "accessToken: acT0kenZZ91", "acT0kenZZ91"),
    Secret("secret", "x-api-key: hdrKey55aa77", "hdrKey55aa77"),
    Secret("secret", "the access token is tokPhrase77Qxu", "tokPhrase77Qxu"),
    Secret("secret", "飞书应用的 App Secret 是 AppSecZh77Qx9Lm2Vb", "AppSecZh77Qx9Lm2Vb"),
    Secret("secret", "访问令牌：lingPai88QxZu", "lingPai88QxZu"),
    # a URL's credential query parameter, as httpx logs the model endpoint's URL
    Secret("url_secret", "POST https://gw.example/v1/messages?key=gwQueryKey77u", "gwQueryKey77u"),
    Secret("url_secret", "GET https://h.example/cb?x=1&access_token=qsTok55Zu&y=2", "qsTok55Zu"),
    # connection strings
    Secret("url_password", "postgres://admin:pgUrlPw66@db.example.com/app", "pgUrlPw66"),
    Secret("url_password", "redis://:redisUrlPw4@cache:6379/0", "redisUrlPw4"),
    Secret("url_password", "mongodb://u:mo@ngoPw2@host/db", "ngoPw2"),
    Secret("password", "Server=db;User Id=sa;Password=adoPw8899;Database=x", "adoPw8899"),
    # private keys and JWTs
    Secret("private_key", f"key:\n{_PEM}\nafter", "MIIEpemBodyQx7y2Qk9zR8vT3nE1cW0o"),
    Secret("private_key", _GCP_SERVICE_ACCOUNT, "MIIEvgcpBodyGcpKey7Qx9Lm"),
    Secret("jwt", f"cookie session={_JWT}; path=/", "JwtSigQx7Vb2Lm9Kp4Rt6Yw8Zc1Nd3Fh5Gj0"),
    # vendors
    Secret("aws_access_key", "aws id AKIAQX7EXAMPLEZZ9QWE here", "AKIAQX7EXAMPLEZZ9QWE"),
    Secret(
        "aws_secret_key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYAwsSecret1",
        "wJalrXUtnFEMI/K7MDENG",
    ),
    Secret(
        "google_api_key", "maps key AIzaSyQx7Vb2Lm9Kp4Rt6Yw8Zc1Nd3Fh5Gj0Qa_ end", "SyQx7Vb2Lm9Kp4"
    ),
    Secret("google_oauth", "GOCSPX-gOauThSeCrEt1234567890ab", "gOauThSeCrEt12345"),
    Secret(
        "secret",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=azAcctKey9+Zm/Qx==;"
        "EndpointSuffix=core.windows.net",
        "azAcctKey9+Zm/Qx",
    ),
    Secret(
        "secret",
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=root;"
        "SharedAccessKey=sbKeyQx77Lm99==",
        "sbKeyQx77Lm99",
    ),
    Secret(
        "azure_client_secret",
        "azure 8Qx8Q~AbCdEfGhIjKlMnOpQrStUvWxYz0123456 ok",
        "AbCdEfGhIjKlMnOp",
    ),
    Secret("secret", "AZURE_CLIENT_SECRET=azCliSecret77Qx", "azCliSecret77Qx"),
    Secret("github_token", "token ghp_GhTok1234567890abcdefghijABCDEF end", "GhTok1234567890"),
    Secret(
        "github_token",
        "github_pat_11ABCDEFG0123456789_PatBodyqrstuvwxyzABCDEFGHIJ",
        "PatBodyqrstuvwxyz",
    ),
    Secret("gitlab_token", "glpat-GlTokQx7Vb2Lm9Kp4Rt6Y", "GlTokQx7Vb2Lm9"),
    Secret("slack_token", "bot xoxb-123456789012-1234567890123-SlAcKtOkEnXyZ", "SlAcKtOkEnXyZ"),
    Secret(
        "slack_webhook",
        "post to https://hooks.slack.com/services/T0SLACK00/B0HOOK000/XXXXXXXXXXXXXXXX",
        "T0SLACK00/B0HOOK000",
    ),
    Secret("openai_key", "key sk-proj-OpEnAiKeyabcdefghijklmnop1234567890 ok", "OpEnAiKeyabcdefg"),
    Secret(
        "anthropic_key",
        "ANTHROPIC_API_KEY=sk-ant-api03-AnThRoPiCkEy1234567890ghijklmnop-yz_0123456789AA",
        "AnThRoPiCkEy1234567890",
    ),
    Secret(
        "feishu_app_secret", "FEISHU_APP_SECRET=FsAppSecretQx7Vb2Lm9Kp4Rt6Yw8", "FsAppSecretQx7Vb2"
    ),
    Secret("secret", "飞书 App Secret：fsZh9Qx7Vb2Lm9Kp", "fsZh9Qx7Vb2Lm9Kp"),
    Secret("authorization", "curl -H 'Authorization: Bearer authHdr123456.ghijk'", "authHdr123456"),
    # private spans (sanitize, not redact)
    Secret(
        "private", "visible <private>my diary 日记秘闻 privSpan77</private> after", "privSpan77"
    ),
    Secret("private", "前面 <private>私人内容 隐私片段九九</private>", "隐私片段九九"),
)

LOOKALIKES: tuple[str, ...] = (
    "Reset your password in settings if you forget it.",
    "Password policy requires twelve characters.",
    "密码学是一门学科。",
    "忘记密码怎么办？",
    "密码是多少我不记得了",
    "def check_password(user):",
    "if password is None:",
    "password = getpass()",
    "password = os.environ['DB_PASSWORD']",
    "connect(user=user, password=password)",
    "password: str | None = None",
    "the token limit is 200k; the tokenizer splits words",
    "max_tokens=4096",
    "token: 4096",
    "run pwd to see the folder",
    "commit 3f9c2a1b7d4e5f60718293a4b5c6d7e8f9012345 Author: Dev <dev@example.com>",
    "a1b2c3d fix: bypass cache when the key rotates",
    "request id 123e4567-e89b-12d3-a456-426614174000",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  app.tar.gz",
    "see https://example.com/docs/auth?page=2#top",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
    "The Authorization header is required for every call.",
    "飞书应用的 app secret 放在环境变量里。",
    "scikit-learn is imported as sklearn; sk-learn is a typo.",
    "eyJ is how base64 JSON starts.",
    "mkdir -p build && ssh -p 22 host",
    "mysql -u root -p app_db",
    # prose about passwords and tokens: `is` before a word, not a credential
    "I forgot my password",
    "the password policy is strict",
    "The password is required.",
    "the password is case-sensitive",
    "the password was reset yesterday",
    "the password for the server is in the vault",
    "password hashing uses argon2id in v3.2",
    "the passcode is sent by SMS",
    "the token is valid for 24 hours",
    "the secret is to keep it simple",
    "the API key is in the .env file",
    "令牌桶算法限制每秒请求数",
    "令牌是什么？",
    "App Secret 是在开发者后台生成的",
    "see https://example.com/search?q=cats&page=2",
)
