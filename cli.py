"""The `claude-memory` command. Heavy modules are imported inside the subcommands that need
them, so `claude-memory hook ...` starts fast."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # `claude-memory hook` imports this module: nothing more at the top
if TYPE_CHECKING:
    import argparse
    import logging
    from collections.abc import Mapping, Sequence
    from pathlib import Path
    from typing import Any


def _settings(args: argparse.Namespace, *, dotenv: bool = True) -> Any:
    """The settings, or a `ConfigurationError` naming the bad variable (one line, exit 2).
    `dotenv=False`: the environment only, for processes a Claude Code or Codex session starts
    in the user's project (the MCP server, as the hooks): that folder's `.env` is not ours."""
    from pathlib import Path

    from settings import load_settings

    overrides: dict[str, Any] = {} if dotenv else {"_env_file": None}
    if getattr(args, "home", None):
        overrides["home"] = Path(args.home)
    if getattr(args, "host", None):
        overrides["host"] = args.host
    if getattr(args, "port", None):
        overrides["port"] = args.port
    return load_settings(**overrides)


def configure_logging(level: str = "INFO", log_file: Path | None = None) -> None:
    import logging
    import logging.handlers  # here, not at the top: `claude-memory hook` must start fast

    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(
            logging.handlers.RotatingFileHandler(
                log_file, maxBytes=5_000_000, backupCount=3, encoding="utf-8"
            )
        )
    from memory.notes.capture import RedactingFilter

    for handler in handlers:  # chat text and tool input reach log lines: no secret on disk
        handler.addFilter(RedactingFilter())
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )


def cmd_serve(args: argparse.Namespace) -> int:
    from memory.encoders.models import WORKER_THREAD_ENV

    # Before numpy loads: the app's own vector products are small, and a BLAS thread pool
    # spinning here would take the cores from the encoder worker (docs/retrieval.md).
    for name, value in WORKER_THREAD_ENV.items():
        os.environ.setdefault(name, value)
    import asyncio

    import uvicorn

    from app import create_app
    from errors import ConfigurationError

    settings = _settings(args)
    settings.encoder_spec()  # a bad encoder setting: one line now, not a failed start-up
    if not settings.is_loopback and settings.api_token is None:
        raise ConfigurationError(
            f"refusing to bind {settings.host}: set CLAUDE_MEMORY_API_TOKEN to expose the API "
            "beyond loopback, or keep CLAUDE_MEMORY_HOST=127.0.0.1"
        )
    configure_logging(args.log_level or settings.log_level, settings.logs_dir / "server.log")
    app = create_app(settings)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            # At the first SIGTERM/SIGINT, before uvicorn drains its connections: running
            # turns stop now and their replies say the app is shutting down, so a waiting
            # caller gets an answer instead of a connection cut when the drain times out.
            container = getattr(app.state, "container", None)
            loop = getattr(self, "_loop", None)
            if container is not None and loop is not None and not self.should_exit:
                loop.call_soon_threadsafe(container.sessions.stop_all_soon)
            super().handle_exit(sig, frame)

        async def serve(self, sockets: Any = None) -> None:
            self._loop = asyncio.get_running_loop()
            await super().serve(sockets)

    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        timeout_graceful_shutdown=int(settings.shutdown_timeout_seconds) + 5,
    )
    Server(config).run()
    return 0


def cmd_feishu(args: argparse.Namespace) -> int:
    import asyncio

    from app import run_bridge_alone
    from errors import ConfigurationError
    from storage.private import tighten_home

    settings = _settings(args)
    if not settings.feishu_enabled:
        raise ConfigurationError("the Feishu bridge needs FEISHU_APP_ID and FEISHU_APP_SECRET")
    tighten_home(settings.home_dir)  # the home may come from .env, which `run` does not read
    # the bridge also writes logs/feishu_ws_bridge.log
    configure_logging(args.log_level or settings.log_level)
    return asyncio.run(run_bridge_alone(settings))


def cmd_doctor(args: argparse.Namespace) -> int:
    from doctor import run_doctor

    return run_doctor(_settings(args))


def build_parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(
        prog="claude-memory", description="A personal Claude agent with a long-term memory."
    )
    parser.add_argument(
        "--home", help="data root (default: CLAUDE_MEMORY_HOME or ~/.claude-memory)"
    )
    parser.add_argument(
        "--traceback", action="store_true", help="on an unexpected error, print its traceback"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser(
        "serve", help="run the web app and API (and the Feishu bridge if configured)"
    )
    serve.add_argument("--host", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="bind port (default 8000)")
    serve.add_argument("--log-level", help="default: CLAUDE_MEMORY_LOG_LEVEL or INFO")
    serve.set_defaults(func=cmd_serve)

    feishu = sub.add_parser("feishu", help="run only the Feishu bridge (no web app)")
    feishu.add_argument("--log-level", help="default: CLAUDE_MEMORY_LOG_LEVEL or INFO")
    feishu.set_defaults(func=cmd_feishu)

    doctor = sub.add_parser("doctor", help="check the installation and say what is missing")
    doctor.set_defaults(func=cmd_doctor)

    hook = sub.add_parser(
        "hook", help="Claude Code / Codex hook: JSON on stdin, one JSON object or nothing out"
    )
    hook.add_argument(
        "event",
        choices=(
            *("session-start", "user-prompt-submit", "post-tool-use"),
            *("stop", "session-end", "pre-compact"),
        ),
    )
    hook.add_argument("--client", choices=("claude-code", "codex"), default="claude-code")
    hook.set_defaults(func=cmd_hook)

    mcp = sub.add_parser("mcp", help="run the MCP memory server on stdio (exits when stdin closes)")
    mcp.set_defaults(func=cmd_mcp)

    for name, verb in (("install", "add"), ("uninstall", "remove")):
        p = sub.add_parser(name, help=f"{verb} the hooks and MCP server in a CLI's config")
        p.add_argument("target", choices=("claude-code", "codex"))
        p.add_argument("--dry-run", action="store_true", help="print the change, write nothing")
        p.set_defaults(func=cmd_install)

    _register_optional(sub)
    return parser


def _register_optional(sub: Any) -> None:
    """Subcommands owned by other packages register themselves here."""
    from memory.cli import commands as memory_cli

    memory_sub = memory_cli.register(
        sub,
        lambda args: _settings(args).memory_config(),
        lambda args: _settings(args).encoder_spec(),
    )
    p = memory_sub.add_parser(
        "migrate",
        help="copy this home (notes, vectors, episodes, conversations, transcripts) into "
        "an empty PostgreSQL database and compare the counts",
    )
    p.add_argument("--to", required=True, metavar="URL", help="postgresql://... (must be empty)")
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    p.set_defaults(func=cmd_migrate)
    p = memory_sub.add_parser(
        "import-native",
        help="import Claude Code's auto memory (this project) and Codex's memories as notes",
    )
    p.add_argument("--client", choices=("claude-code", "codex", "all"), default="all")
    p.add_argument("--project", default=".", help="the project folder (default: here)")
    p.add_argument("--dry-run", action="store_true", help="say what would be imported")
    p.set_defaults(func=cmd_import_native)


def cmd_import_native(args: argparse.Namespace) -> int:
    from memory.clients.native import NativeClient, find_native, import_notes
    from memory.clients.opening import open_memory
    from memory.clients.project import identify

    clients: tuple[NativeClient, ...] = (
        ("claude-code", "codex") if args.client == "all" else (args.client,)
    )
    notes, searched = find_native(os.environ, identify(args.project), clients)
    with open_memory(_settings(args).memory_config()) as store:
        report = import_notes(store, notes, dry_run=args.dry_run)
    verb = "would import" if args.dry_run else "imported"
    print(
        f"{verb} {len(report.added)} new, {len(report.replaced)} changed, "
        f"{len(report.unchanged)} unchanged (looked in {', '.join(searched)})"
    )
    for source in report.added + report.replaced:
        print(f"  {source}")
    for source in report.refused:
        print(f"  not imported, it holds a credential (remove it and import again): {source}")
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    import json

    from memory.cli.commands import ProgressBar
    from migration import migrate_home

    settings = _settings(args)
    report = migrate_home(settings, args.to, progress=ProgressBar())
    if args.json:
        counts = [{"what": c.what, "home": c.source, "database": c.target} for c in report.counts]
        data = {
            "ok": report.ok,
            "counts": counts,
            "missing_transcripts": report.missing_transcripts,
        }
        print(json.dumps(data, indent=2))
    else:
        print(report.table())
        for session_id in report.missing_transcripts:
            print(f"note: transcript {session_id} not found here; that conversation starts afresh")
    if not report.ok:
        print(
            "error: some counts differ (see above); nothing was removed from the home",
            file=sys.stderr,
        )
        return 1
    print(
        "done: set CLAUDE_MEMORY_DATABASE_URL to use the database; the home is unchanged",
        file=sys.stderr,
    )
    return 0


def _hook_argv(argv: Sequence[str]) -> list[str] | None:
    """`hook ...` and `--home DIR hook ...` skip the full parser: a hook must start fast."""
    args = list(argv)
    if "-h" in args or "--help" in args:
        return None
    if args[:1] == ["hook"]:
        return args[1:]
    if len(args) >= 3 and args[0] == "--home" and args[2] == "hook":
        return ["--home", args[1], *args[3:]]
    if args[:1] and args[0].startswith("--home=") and args[1:2] == ["hook"]:
        return [args[0], *args[2:]]
    return None


def _mcp_argv(argv: Sequence[str]) -> str | None:
    """The home of `mcp` or `--home DIR mcp` ("" when none is given), None for any other
    command: building the full parser costs ~0.1 s (issue #32: `initialize` in 0.2 s)."""
    args = list(argv)
    if args == ["mcp"]:
        return ""
    if len(args) == 3 and args[0] == "--home" and args[2] == "mcp":
        return args[1]
    if len(args) == 2 and args[0].startswith("--home=") and args[1] == "mcp":
        return args[0].removeprefix("--home=")
    return None


def cmd_hook(args: argparse.Namespace) -> int:
    from memory.clients.hook_process import main as hook_main

    home = ["--home", args.home] if getattr(args, "home", None) else []
    return hook_main([*home, args.event, "--client", args.client])


def _memory_home(args: argparse.Namespace) -> Path:
    from memory.settings_fields import memory_home

    return memory_home(getattr(args, "home", None), os.environ)


def cmd_mcp(args: argparse.Namespace) -> int:
    from memory.clients.mcp_server import serve_stdio

    def config() -> Any:
        """Read once the server has answered `initialize` (issue #32: the settings alone cost
        ~0.2 s of pydantic); a bad setting is then every tool call's error."""
        from memory.encoders.models import WORKER_THREAD_ENV

        for name, value in WORKER_THREAD_ENV.items():  # before numpy loads, as for `serve`
            os.environ.setdefault(name, value)
        from memory.clients.mcp_tools.context import McpConfig

        settings = _settings(args, dotenv=False)
        return McpConfig(
            home=settings.home_dir,
            memory=settings.memory_config(),
            encoder=settings.encoder_spec(),
            encoder_timeout=settings.encoder_timeout_seconds,
            logs_dir=settings.logs_dir,
            # Claude Code's own variable for the session that started this server
            client_session=_claude_code_session(os.environ),
        )

    return serve_stdio(config)


def _claude_code_session(environ: Mapping[str, str]) -> str | None:
    from memory.clients.conventions import normalize_session_id

    session = environ.get("CLAUDE_CODE_SESSION_ID", "").strip()
    return f"claude-code:{normalize_session_id(session)}" if session else None


def cmd_install(args: argparse.Namespace) -> int:
    from memory.clients import installer

    explicit = getattr(args, "home", None) or os.environ.get("CLAUDE_MEMORY_HOME")
    return installer.run(
        args.target,
        remove=args.command == "uninstall",
        dry_run=args.dry_run,
        environ=os.environ,
        home=_memory_home(args) if explicit else None,
        executable=installer.resolve_executable(sys.argv[0]),
    )


def main(argv: Sequence[str] | None = None) -> int:
    from errors import ClaudeMemoryError

    hook_argv = _hook_argv(sys.argv[1:] if argv is None else argv)
    if hook_argv is not None:
        from memory.clients.hook_process import main as hook_main

        return hook_main(hook_argv)
    mcp_home = _mcp_argv(sys.argv[1:] if argv is None else argv)
    if mcp_home is not None:  # the client waits on its `initialize` answer: no parser
        import argparse

        return cmd_mcp(argparse.Namespace(home=mcp_home or None))
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "memory":
            _settings(args)  # a bad env value: one line and exit 2 here, as for every command
        return int(args.func(args) or 0)
    except ClaudeMemoryError as exc:
        from storage.public_text import clean_error

        print(f"claude-memory: {clean_error(exc.message, local=True)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader left (`| head`): `run` ends quietly
        raise
    except Exception as exc:  # unplanned: one cleaned line and what to do, as at every door
        from storage.public_text import exception_text, next_step

        print(
            f"claude-memory: unexpected error: {exception_text(exc, local=True)}", file=sys.stderr
        )
        print(f"  -> {next_step(exc)}", file=sys.stderr)
        if getattr(args, "traceback", False):
            import traceback

            from storage.public_text import clean_error

            print(clean_error(traceback.format_exc(), local=True), file=sys.stderr, end="")
        else:
            print("  (claude-memory --traceback ... prints the traceback)", file=sys.stderr)
        return 1


def run(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (every `claude-memory` command, the hook included).

    Private first: the umask makes everything this process and its children (the Claude CLI)
    create 0600/0700, and a home created wider before is narrowed (storage/private.py), except
    by `doctor`, which reports instead.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    hook_argv = _hook_argv(args)
    if hook_argv is not None:  # first: the hook's served path imports almost nothing
        import gc

        # A hook process lives well under a second: the cyclic collector's passes over
        # everything it imports were ~5 ms (3 %) of a direct prompt; refcounting frees the rest.
        gc.disable()
        from memory.clients.hook_process import exit_process
        from memory.clients.hook_process import main as hook_main

        # ends without closing SQLite: a last connection's close is a checkpoint (`_LEFT_OPEN`)
        exit_process(hook_main(hook_argv, leave_open=True))
    from storage.private import private_process, tighten_home

    private_process()
    home = _entry_home(args)
    if home is not None:
        tighten_home(home)
    try:
        code = main(args)
        if not sys.stdout.closed:  # `mcp` hands stdout's buffer to a wrapper that closes it
            sys.stdout.flush()
    except BrokenPipeError:
        # `claude-memory ... | head`: the reader left; quietly, as other command-line tools do
        # (stdout is pointed at /dev/null so the interpreter's own last flush cannot fail).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141  # 128 + SIGPIPE, what a shell reports for a process killed by it
    sys.exit(code)


def _entry_home(argv: Sequence[str]) -> Path | None:
    """The home a command will use as far as `--home` and the environment say, read as the hook
    reads it (no .env: that costs the hook ~0.5 s; `serve` and `feishu` narrow the home their
    settings name again); None for `doctor` and `--help`."""
    args = list(argv)
    explicit: str | None = None
    if args[:1] == ["--home"] and len(args) >= 2:
        explicit, args = args[1], args[2:]
    elif args[:1] and args[0].startswith("--home="):
        explicit, args = args[0].removeprefix("--home="), args[1:]
    if not args or args[0] in ("doctor", "-h", "--help"):
        return None
    from memory.settings_fields import memory_home  # the hook's own reading: one rule for both

    return memory_home(explicit, os.environ)


if __name__ == "__main__":
    run()
