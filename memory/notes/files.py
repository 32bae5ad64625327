"""Notes on disk: markdown with YAML front matter, atomic writes, the folder layout.

Files are the source of truth. Reading never rewrites a file: a hand-written note without an
id gets one derived from its path (`model.path_note_id`), and broken front matter is reported
as a warning while the whole text stays searchable.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import field, replace
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Final

from errors import InvalidInputError
from memory import _text
from memory._record import record
from memory.model import (
    DEFAULT_IMPORTANCE,
    FRONT_MATTER_KEYS,
    Note,
    NoteDraft,
    new_note_id,
    normalize_id,
    normalize_importance,
    normalize_scope,
    normalize_status,
    normalize_tags,
    normalize_type,
    parse_datetime,
    path_note_id,
    utcnow,
)
from memory.notes.capture import sanitize, without_credentials
from storage.text import require_text

log = logging.getLogger(__name__)

NOTE_SUFFIX: Final = ".md"
# Never notes, wherever they are.
RESERVED_NAMES: Final = frozenset({"README.md", "MEMORY_SCHEMA.md", "_index.json", "_index.yaml"})
LAYOUT_DIRS: Final = ("user", "learned", "projects", "sessions", "inbox")
TEMP_PREFIX: Final = ".tmp-"

_yaml_parts: tuple[Any, Any, Any] | None = None


def _yaml() -> tuple[Any, Any, Any]:
    """`(yaml, Loader, Dumper)`, imported on first use: most notes parse without it
    (`fast_front_matter`), and a hook process that saves nothing skips its ~10 ms import."""
    global _yaml_parts
    if _yaml_parts is None:
        import yaml

        try:  # the C loader is ~10x faster; PyYAML wheels ship it
            _yaml_parts = (yaml, yaml.CSafeLoader, yaml.CSafeDumper)
        except AttributeError:  # pragma: no cover - pure-Python PyYAML build
            _yaml_parts = (yaml, yaml.SafeLoader, yaml.SafeDumper)
    return _yaml_parts


@record(slots=False)
class ParsedFile:
    """A note file as read: the note (always), and whether it parsed cleanly."""

    note: Note
    ok: bool
    """False when the front matter is broken or the bytes are not UTF-8: not rewritable."""
    warnings: tuple[str, ...] = field(default=())


def is_note_name(name: str) -> bool:
    return (
        name.endswith(NOTE_SUFFIX)
        and name not in RESERVED_NAMES
        and not name.startswith(".")
        and not name.startswith(TEMP_PREFIX)
    )


def iter_note_files(
    root: Path, subdir: str = "", *, dirs: list[str] | None = None
) -> Iterator[tuple[str, os.stat_result]]:
    """(relative POSIX path, stat) of every note under `root/subdir`; hidden folders skipped.
    Folders visited are appended to `dirs` when given."""
    base = os.fspath(root)
    stack = [subdir]
    while stack:
        rel_dir = stack.pop()
        if dirs is not None:
            dirs.append(rel_dir)
        try:
            entries = list(os.scandir(os.path.join(base, rel_dir) if rel_dir else base))
        except (FileNotFoundError, NotADirectoryError):
            continue
        prefix = f"{rel_dir}/" if rel_dir else ""
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(prefix + name)
                elif is_note_name(name) and entry.is_file():
                    yield prefix + name, entry.stat()
            except FileNotFoundError:  # removed while we looked
                continue


def list_dirs(root: Path) -> list[str]:
    """Relative paths of the root and every non-hidden folder below it ("" is the root)."""
    found = [""]
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
                found.append(Path(entry.path).relative_to(root).as_posix())
    return found


# --- parsing ---------------------------------------------------------------------------------


def _split_front_matter(text: str) -> tuple[str | None, str, bool]:
    """(front matter text or None, body, well-formed). Only `---` on the first line opens it."""
    if not (text.startswith("---\n") or text.startswith("---\r\n")):
        return None, text, True
    lines = text.splitlines(keepends=True)
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n") in ("---", "..."):
            body = "".join(lines[i + 1 :])
            if body.startswith("\n") or body.startswith("\r\n"):  # the blank separator line
                body = body.split("\n", 1)[1]
            return "".join(lines[1:i]), body, True
    return None, text, False


def _as_text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def parse_note(data: bytes, relpath: str, mtime: float | None = None) -> ParsedFile:
    """Parse a note file. Never raises: problems become warnings and defaults."""
    warnings: list[str] = []
    ok = True
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        warnings.append(f"not valid UTF-8 (byte {exc.start}); undecodable bytes shown as U+FFFD")
        ok = False
    text = text.removeprefix("\ufeff")
    fm_text, body, well_formed = _split_front_matter(text)
    meta: dict[str, Any] = {}
    if not well_formed:
        warnings.append("front matter opened with '---' is never closed; indexed as plain text")
        meta = _salvage("\n".join(text.splitlines()[1:40]))
        ok = False
    elif fm_text is not None:
        loaded = fast_front_matter(fm_text)
        yaml, loader, _ = _yaml() if loaded is None else (None, None, None)
        try:
            if yaml is not None:
                loaded = yaml.load(fm_text, Loader=loader)
        except Exception as exc:  # yaml.YAMLError (yaml may not be imported: see `_yaml`)
            if yaml is None or not isinstance(exc, yaml.YAMLError):
                raise
            warnings.append(f"front matter is not valid YAML ({_first_line(exc)}); indexed as text")
            loaded = _salvage(fm_text)
            body = text
            ok = False
        if isinstance(loaded, dict):
            meta = {str(k): v for k, v in loaded.items()}
        elif loaded is not None or (ok and fm_text.strip()):
            warnings.append("front matter is not a mapping; indexed as plain text")
            body = text
            ok = False
    note = _note_from_meta(meta, body, relpath, mtime, warnings)
    return ParsedFile(note=note, ok=ok, warnings=tuple(warnings))


_FAST_KEY_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(?: (.*))?")
_INT_RE = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_FLOAT_RE = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+][0-9]+)?")
# words YAML 1.1 reads as booleans, null or special floats (in any case)
_YAML_WORDS = frozenset(("y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"))
_PLAIN_START = frozenset("[]{}&*!|>%@`\"'#?:-,+=.<")
_NOT_PARSED = object()


def _fast_scalar(raw: str) -> object:
    raw = raw.rstrip(" ")
    if raw.startswith("'"):
        inner = raw[1:-1]
        if len(raw) < 2 or not raw.endswith("'") or "'" in inner.replace("''", ""):
            return _NOT_PARSED
        return inner.replace("''", "'")
    if raw == "null":
        return None
    if raw in ("true", "false"):
        return raw == "true"
    if _INT_RE.fullmatch(raw):
        return int(raw)
    if _FLOAT_RE.fullmatch(raw):
        return float(raw)
    if (
        not raw
        or raw[0] in _PLAIN_START
        or raw.lower() in _YAML_WORDS
        or ": " in raw
        or " #" in raw
        or raw.endswith(":")
        or "\t" in raw
        or raw[0].isdigit()  # dates, times, sexagesimal numbers: YAML's own rules
    ):
        return _NOT_PARSED
    return raw


def fast_front_matter(text: str) -> dict[str, Any] | None:
    """Parse the simple YAML the store writes (`key: scalar`, block lists of scalars) in pure
    Python, ~10x faster than PyYAML; None when the text uses anything else (then PyYAML
    decides). A test checks that both agree on everything `render_note` writes."""
    data: dict[str, Any] = {}
    list_key: str | None = None
    for line in text.split("\n"):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        if line.startswith("- ") and list_key is not None:
            value = _fast_scalar(line[2:])
            if value is _NOT_PARSED:
                return None
            data[list_key].append(value)
            continue
        match = _FAST_KEY_RE.fullmatch(line)
        if match is None or match.group(1) in data:
            return None
        key, raw = match.group(1), match.group(2)
        if list_key is not None and data[list_key] == []:
            data[list_key] = None  # `key:` with nothing after it is null in YAML
        list_key = None
        if raw is None or raw == "":
            data[key] = []
            list_key = key
        elif raw == "[]":
            data[key] = []
        else:
            value = _fast_scalar(raw)
            if value is _NOT_PARSED:
                return None
            data[key] = value
    if list_key is not None and data[list_key] == []:
        data[list_key] = None
    return data


_SALVAGE_RE = re.compile(r"^(id|title):[ \t]*['\"]?([^'\"\n]+?)['\"]?[ \t]*$", re.MULTILINE)


def _salvage(fm_text: str) -> dict[str, Any]:
    """`id` and `title` from front matter YAML cannot parse, so the note keeps its identity."""
    found: dict[str, Any] = {}
    for match in _SALVAGE_RE.finditer(fm_text):
        found.setdefault(match.group(1), match.group(2))
    return found


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _field(meta: dict[str, Any], key: str, convert: Any, default: Any, warnings: list[str]) -> Any:
    if key not in meta or meta[key] is None:
        return default
    try:
        return convert(meta[key])
    except InvalidInputError as exc:
        warnings.append(f"{key}: {exc.message}; using {default!r}")
        return default


def _note_from_meta(
    meta: dict[str, Any], body: str, relpath: str, mtime: float | None, warnings: list[str]
) -> Note:
    stamp = (
        datetime.fromtimestamp(int(mtime), UTC)
        if mtime is not None
        else utcnow()  # only for parse of text without a file
    )
    fallback_title = PurePosixPath(relpath).stem
    note_id = _field(meta, "id", normalize_id, None, warnings) or path_note_id(relpath)
    title = _as_text(meta.get("title")) or _text.derive_title(body, fallback_title)
    created = _field(meta, "created", lambda v: parse_datetime(v, "created"), None, warnings)
    updated = _field(meta, "updated", lambda v: parse_datetime(v, "updated"), None, warnings)
    created = created or updated or stamp
    updated = updated or stamp
    summary = _as_text(meta.get("summary")) or _text.derive_summary(body)
    access = meta.get("access_count", 0)
    if not isinstance(access, int) or isinstance(access, bool) or access < 0:
        warnings.append(f"access_count: {access!r} is not a count; using 0")
        access = 0
    superseded_by = _as_text(meta.get("superseded_by"))
    extra = {k: v for k, v in meta.items() if k not in FRONT_MATTER_KEYS}
    return Note(
        id=note_id,
        title=_text.shorten(title, 300),
        type=_field(meta, "type", normalize_type, "general", warnings),
        scope=_field(meta, "scope", normalize_scope, "user", warnings),
        tags=_field(meta, "tags", normalize_tags, (), warnings),
        created=created,
        updated=updated,
        summary=_text.shorten(summary, 1000),
        importance=_field(meta, "importance", normalize_importance, DEFAULT_IMPORTANCE, warnings),
        status=_field(meta, "status", normalize_status, "active", warnings),
        superseded_by=superseded_by,
        expires_at=_field(
            meta, "expires_at", lambda v: parse_datetime(v, "expires_at"), None, warnings
        ),
        source=_as_text(meta.get("source")),
        access_count=access,
        body=body,
        path=relpath,
        extra=extra,
    )


def render_note(note: Note) -> str:
    """The file text of a note: YAML front matter, a blank line, the body."""
    yaml, _, dumper = _yaml()
    front = yaml.dump(
        note.front_matter(),
        Dumper=dumper,
        allow_unicode=True,
        sort_keys=False,
        default_flow_style=False,
        width=1_000_000,  # one line per field: no folded scalars
    )
    body = note.body if note.body.endswith("\n") or not note.body else note.body + "\n"
    return f"---\n{front}---\n\n{body}"


def read_note(root: Path, relpath: str) -> ParsedFile:
    path = root / relpath
    data = path.read_bytes()
    return parse_note(data, relpath, path.stat().st_mtime)


# --- writing ---------------------------------------------------------------------------------


def write_temp(folder: Path, text: str, *, fsync: bool = True) -> Path:
    """Write `text` to a uniquely named hidden temp file in `folder` (skipped by scans)."""
    folder.mkdir(parents=True, exist_ok=True)
    # `os.urandom(n).hex()` is `secrets.token_hex` without importing `secrets` (random, hmac)
    tmp = folder / f"{TEMP_PREFIX}{os.getpid()}-{os.urandom(6).hex()}{NOTE_SUFFIX}"
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def publish(tmp: Path, path: Path, *, exclusive: bool = False) -> None:
    """Move a temp file from `write_temp` (same folder) to `path`, atomically.

    With `exclusive`, fail with FileExistsError instead of replacing an existing file.
    """
    try:
        if exclusive:
            os.link(tmp, path)  # atomic "create if absent"
            tmp.unlink()
        else:
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: Path, text: str, *, fsync: bool = True, exclusive: bool = False) -> None:
    """Write through a uniquely named temp file in the same folder, then rename over `path`.

    With `exclusive`, fail with FileExistsError instead of replacing an existing file.
    """
    publish(write_temp(path.parent, text, fsync=fsync), path, exclusive=exclusive)


def note_folder(note_type: str, scope: str) -> str:
    """Where a new note goes: project scope -> projects/<key>/, a chat member's own notes ->
    people/<open_id>/, a group's team notes -> teams/<chat_id>/, chat scope or conversation
    -> sessions/, user-scoped identity/preference -> learned/, anything else -> inbox/.

    `user/` is the person's own (seed 001): the system never creates a note there; what it
    learns about the person goes to `learned/`, shown beside `user/` in every brief."""
    if scope.startswith("project:"):
        return f"projects/{_text.slugify(scope.split(':', 1)[1], 60)}"
    if scope.startswith(("person:", "team:")):  # whose a note is shows in the tree too
        kind, owner = scope.split(":", 1)
        return f"{'people' if kind == 'person' else 'teams'}/{_text.slugify(owner, 60)}"
    if scope.startswith("chat:") or note_type == "conversation":
        return "sessions"
    if note_type in ("identity", "preference"):
        return "learned"
    return "inbox"


def new_note_path(root: Path, folder: str, note: Note) -> str:
    """A free relative path `<folder>/<date>-<slug>-<id tail>.md`."""
    stem = f"{note.created:%Y%m%d}-{_text.slugify(note.title)}-{note.id[-6:]}"
    for attempt in range(100):
        name = f"{stem}{'' if attempt == 0 else f'-{attempt}'}{NOTE_SUFFIX}"
        rel = f"{folder}/{name}" if folder else name
        if not (root / rel).exists():
            return rel
    raise InvalidInputError(f"no free file name for {stem!r} in {folder!r}")  # pragma: no cover


def safe_relpath(relpath: str) -> str:
    """Reject paths that leave the memory root or are not notes."""
    pure = PurePosixPath(relpath.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise InvalidInputError(f"note path {relpath!r} must be relative, inside the memory root")
    if not is_note_name(pure.name) or any(p.startswith(".") for p in pure.parts):
        raise InvalidInputError(f"note path {relpath!r} must end in .md and not be reserved")
    return pure.as_posix()


def note_from_draft(draft: NoteDraft, *, relpath: str = "", now: datetime | None = None) -> Note:
    """Validate a draft and make it a note; text fields are sanitized (private spans, secrets)
    and refused when a credential is left in them (`CredentialError`)."""
    if not isinstance(draft.content, str):
        raise InvalidInputError("content must be a string")
    for name in ("content", "title", "summary", "type", "scope", "tags", "source", "id"):
        require_text(name, getattr(draft, name))
    body = without_credentials("content", sanitize(draft.content).strip("\r\n") + "\n")
    if not body.strip():
        raise InvalidInputError("content is empty (after removing <private> spans)")
    moment = (now or utcnow()).replace(microsecond=0)
    title = (
        without_credentials("title", sanitize(draft.title).strip())
        if draft.title
        else _text.derive_title(body)
    )
    summary = (
        without_credentials("summary", sanitize(draft.summary).strip())
        if draft.summary
        else _text.derive_summary(body)
    )
    created = parse_datetime(draft.created, "created") or moment
    updated = parse_datetime(draft.updated, "updated") or created
    if not isinstance(draft.access_count, int) or draft.access_count < 0:
        raise InvalidInputError("access_count must be a non-negative integer")
    return Note(
        id=normalize_id(draft.id) if draft.id else new_note_id(),
        title=_text.shorten(title, 300) or "Untitled",
        type=normalize_type(draft.type),
        scope=normalize_scope(draft.scope),
        tags=tuple(without_credentials("tags", sanitize(t)) for t in normalize_tags(draft.tags)),
        created=created,
        updated=updated,
        summary=_text.shorten(summary, 1000),
        importance=normalize_importance(draft.importance),
        status=normalize_status(draft.status),
        superseded_by=draft.superseded_by,
        expires_at=parse_datetime(draft.expires_at, "expires_at"),
        source=without_credentials("source", sanitize(draft.source)) if draft.source else None,
        access_count=draft.access_count,
        body=body,
        path=relpath,
        extra=dict(draft.extra),
    )


def create_inbox_note(
    root: Path, draft: NoteDraft, *, fsync: bool = True, now: datetime | None = None
) -> Note:
    """Write a new capture into `inbox/` without touching the index (the next sync picks it up).

    For processes that must not open the database; `MemoryStore.save` is the usual path and
    also deduplicates.
    """
    note = note_from_draft(draft, now=now)
    rel = new_note_path(root, "inbox", note)
    note = _with_path(note, rel)
    atomic_write(root / rel, render_note(note), fsync=fsync, exclusive=True)
    return note


def _with_path(note: Note, relpath: str) -> Note:
    return replace(note, path=relpath)


# --- layout ----------------------------------------------------------------------------------

README_TEXT: Final = """\
# Memory

This folder is a long-term memory: one markdown file per memory, readable and editable in
any editor. The files are the truth; `../index.db` is a search index rebuilt from them
(`claude-memory memory reindex`).

- `user/` - your profile and preferences (maintained by hand; start with `profile.md`)
- `learned/` - preferences and facts about you the assistant captured (edit or delete freely)
- `projects/<project-key>/` - memories about one project
- `sessions/` - one summary per CLI or chat session
- `inbox/` - new captures awaiting organisation

See `MEMORY_SCHEMA.md` for the front matter fields. Edits, new files and deletions show up
in search on their own. `README.md`, `MEMORY_SCHEMA.md` and `_index.json` are not memories.
"""

SCHEMA_TEXT: Final = """\
# Memory note format

Each note is a markdown file (`.md`) with YAML front matter between `---` lines:

```yaml
---
id: mem_01jb3k0qz8x2ab      # stable id; missing -> derived from the file path
title: 修复连接池泄漏
type: bug                   # identity preference decision architecture project research
                            # code bug conversation general
                            # (Decision Architecture File Preference Concept Habit accepted)
scope: project:api          # user | project:<key> | chat:<id> | person:<id> | team:<id>
tags: [database, 连接池]
created: '2025-06-01T08:00:00+00:00'
updated: '2025-06-02T09:30:00+00:00'
summary: One line used in listings.
importance: 0.7             # 0..1
status: active              # active | deprecated | superseded
superseded_by: null         # id of the replacing note
expires_at: null            # ISO date; past -> left out of search
source: null                # where it came from
access_count: 3             # how often it was found
---

Body in any language.
```

Every field is optional; missing ones get defaults. Secrets are redacted and
`<private>...</private>` text is removed before the store writes a note.
"""

PROFILE_PATH: Final = "user/profile.md"
"""Where the person's own profile lives (seed 001: the system never writes into `user/`)."""

PROFILE_TEXT: Final = """\
---
id: mem_user_profile
title: User profile
type: identity
scope: user
tags: [profile]
summary: Who the user is, how they like to work and to be spoken to.
importance: 0.9
status: active
---

# User profile

## Preferences

## Technical background

## Communication style
"""


def ensure_memory_layout(root: Path) -> None:
    """Create the folders, `user/profile.md`, `README.md` and `MEMORY_SCHEMA.md` if missing.

    Existing files are never overwritten (several processes may run this at once).
    """
    root.mkdir(parents=True, exist_ok=True)
    for name in LAYOUT_DIRS:
        (root / name).mkdir(exist_ok=True)
    for rel, text in (
        ("README.md", README_TEXT),
        ("MEMORY_SCHEMA.md", SCHEMA_TEXT),
        (PROFILE_PATH, PROFILE_TEXT),
    ):
        path = root / rel
        if path.exists():
            continue
        with contextlib.suppress(FileExistsError):  # another process was first
            atomic_write(path, text, fsync=False, exclusive=True)
