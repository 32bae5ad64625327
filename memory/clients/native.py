"""`claude-memory memory import-native`: Claude Code's and Codex's own memories as our notes.

* Claude Code auto memory: `<autoMemoryDirectory>` (user settings.json) or
  `$CLAUDE_CONFIG_DIR/projects/<project root, non-alphanumerics as "->/memory/`. Each topic
  file (`*.md` with front matter `name`, `description`, and `type` under `metadata:` since
  2.1.327, or top-level before) becomes one note: `user` -> identity (scope user),
  `feedback` -> preference (scope user), `project` -> project, `reference` -> research (both in
  the project's scope), anything else -> general (project). `MEMORY.md` is the index of those
  files; its lines that do not link to a topic file become one more note.
* Codex memories (`$CODEX_HOME/memories/`, written by Codex's own model calls when
  `[features] memories` is on): `MEMORY.md` and `memory_summary.md`, one note each, scope user.

Every note records where it came from (`source`: `claude-code:auto-memory:<dir>/<file>` or
`codex:memories:<file>`) and the file's time. Saving goes through the store (redaction,
duplicate detection), so a second import of unchanged files adds nothing; a file that changed
replaces its earlier note (`supersedes`).

With `CLAUDE_MEMORY_NATIVE_MEMORY=import` (the default) every session start does this for its
project when the native files changed since the last time (`import_changed`: a stat of each
file against the fingerprint kept in the state database, so an unchanged start costs a few
stats); `off` leaves them alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

from errors import CredentialError
from memory._record import record
from memory.backend import MemoryBackend, StateBackend
from memory.clients.conventions import claude_config_dir, codex_home
from memory.clients.project import ProjectIdentity
from memory.model import NoteDraft
from memory.notes.files import note_from_draft

NativeClient = Literal["claude-code", "codex"]
CLAUDE_TYPES: Final[dict[str, tuple[str, bool]]] = {
    "user": ("identity", True),
    "feedback": ("preference", True),
    "project": ("project", False),
    "reference": ("research", False),
}
"""Claude Code's memory type -> (our note type, whether it belongs to the user scope)."""
CODEX_FILES: Final = ("MEMORY.md", "memory_summary.md")
_FRONT = re.compile(r"\A---\r?\n(.*?)\r?\n---\r?\n?", re.DOTALL)
_LINK = re.compile(r"\]\(([^)]+\.md)\)")


@record
class NativeNote:
    """One native memory file, as the note it becomes."""

    source: str
    title: str
    content: str
    type: str
    scope: str
    modified: datetime
    summary: str | None = None


@dataclass
class ImportReport:
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """Sources whose note still holds a credential after redaction (`CredentialError`)."""
    searched: list[str] = field(default_factory=list)
    """The folders looked in."""


def parse_front_matter(text: str) -> tuple[dict[str, str], str]:
    """The simple YAML front matter Claude Code writes (`key: value`, one nested level for
    `metadata:`; nested keys are flattened, the top level wins) and the body."""
    match = _FRONT.match(text)
    if not match:
        return {}, text
    fields: dict[str, str] = {}
    nested: dict[str, str] = {}
    for line in match.group(1).splitlines():
        if not line.strip() or line.lstrip().startswith("#") or ":" not in line:
            continue
        key, _, value = line.partition(":")
        value = value.strip().strip("\"'")
        if line[:1] in (" ", "\t"):
            nested.setdefault(key.strip(), value)
        elif value:
            fields[key.strip()] = value
    return {**nested, **fields}, text[match.end() :]


def claude_memory_dir(environ: Mapping[str, str], project: ProjectIdentity) -> Path:
    """Where Claude Code keeps this project's auto memory."""
    custom = _auto_memory_setting(claude_config_dir(environ) / "settings.json")
    if custom:
        return Path(custom).expanduser()
    name = re.sub(r"[^A-Za-z0-9]", "-", project.root)
    return claude_config_dir(environ) / "projects" / name / "memory"


def _auto_memory_setting(settings: Path) -> str | None:
    """`autoMemoryDirectory` from the user's settings (Claude Code ignores it in a project's
    checked-in settings, so we do too)."""
    try:
        data = json.loads(settings.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("autoMemoryDirectory") if isinstance(data, dict) else None
    return value if isinstance(value, str) and value.strip() else None


def _modified(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)


def read_claude_memory(folder: Path, project: ProjectIdentity) -> list[NativeNote]:
    notes: list[NativeNote] = []
    try:
        files = sorted(p for p in folder.glob("*.md") if p.is_file())
    except OSError:
        return notes
    label = folder.parent.name if folder.name == "memory" else folder.name
    topic_names = {p.name for p in files if p.name != "MEMORY.md"}
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        source = f"claude-code:auto-memory:{label}/{path.name}"
        if path.name == "MEMORY.md":
            # the index: keep what is not a pointer to a topic file imported on its own
            rest = [
                line
                for line in text.splitlines()
                if not any(Path(m).name in topic_names for m in _LINK.findall(line))
            ]
            body = "\n".join(rest).strip()
            if body and body.strip("# \n"):
                notes.append(
                    NativeNote(
                        source,
                        f"Claude Code memory index ({project.name})",
                        body,
                        "project",
                        project.scope,
                        _modified(path),
                        summary=list_summary(body),
                    )
                )
            continue
        meta, body = parse_front_matter(text)
        if not body.strip():
            continue
        note_type, user_scope = CLAUDE_TYPES.get(meta.get("type", "").lower(), ("general", False))
        notes.append(
            NativeNote(
                source,
                meta.get("name") or path.stem,
                body.strip(),
                note_type,
                "user" if user_scope else project.scope,
                _modified(path),
                summary=meta.get("description") or None,
            )
        )
    return notes


def read_codex_memories(folder: Path) -> list[NativeNote]:
    notes: list[NativeNote] = []
    for name in CODEX_FILES:
        path = folder / name
        try:
            body = path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if body:
            title = "Codex memory summary" if name == "memory_summary.md" else "Codex memories"
            notes.append(
                NativeNote(
                    f"codex:memories:{name}",
                    title,
                    body,
                    "general",
                    "user",
                    _modified(path),
                    summary=list_summary(body),
                )
            )
    return notes


def list_summary(body: str, limit: int = 160) -> str | None:
    """The summary of a note that is a list of facts (an index, Codex's memories): its lines
    joined, as many as fit, not only the first (issue #32: the index read as its first line)."""
    from memory._text import derive_summary, shorten

    lines = [derive_summary(raw, limit).rstrip(".。;；") for raw in body.splitlines()]
    lines = [line for line in lines if line]
    return shorten("; ".join(lines), limit) if len(lines) > 1 else None


def native_folders(
    environ: Mapping[str, str], project: ProjectIdentity, clients: Iterable[NativeClient]
) -> list[tuple[NativeClient, Path]]:
    """Where each client keeps its memories for `project`."""
    return [
        (
            client,
            claude_memory_dir(environ, project)
            if client == "claude-code"
            else codex_home(environ) / "memories",
        )
        for client in clients
    ]


def find_native(
    environ: Mapping[str, str], project: ProjectIdentity, clients: Iterable[NativeClient]
) -> tuple[list[NativeNote], list[str]]:
    """The native memories of `clients` for `project`, and the folders looked in."""
    notes: list[NativeNote] = []
    searched: list[str] = []
    for client, folder in native_folders(environ, project, clients):
        if client == "claude-code":
            notes += read_claude_memory(folder, project)
        else:
            notes += read_codex_memories(folder)
        searched.append(str(folder))
    return notes, searched


# --- at session start: import what changed ------------------------------------------------------

NATIVE_CLIENTS: Final[tuple[NativeClient, ...]] = ("claude-code", "codex")


def folders_fingerprint(folders: Iterable[Path]) -> str:
    """What the memory files of `folders` look like, from a stat of each (`*.md`: name, size,
    mtime): equal fingerprints, nothing to import. No file is read."""
    digest = hashlib.sha256()
    for folder in folders:
        digest.update(f"{folder}\0".encode("utf-8", "surrogateescape"))
        try:
            entries = sorted(
                (e.name, e.stat()) for e in os.scandir(folder) if e.name.endswith(".md")
            )
        except OSError:  # no such folder (yet): its absence is part of the picture
            entries = []
        for name, stat in entries:
            digest.update(
                f"{name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode("utf-8", "surrogateescape")
            )
    return digest.hexdigest()


def import_changed(
    state: StateBackend,
    store: Callable[[], MemoryBackend],
    environ: Mapping[str, str],
    project: ProjectIdentity,
    *,
    clients: Iterable[NativeClient] = NATIVE_CLIENTS,
    clock: Callable[[], float] = time.time,
) -> ImportReport | None:
    """`import-native` for a session start (`CLAUDE_MEMORY_NATIVE_MEMORY=import`): only when
    the native files changed since the last import recorded in the state database (a stat
    per file decides; the store is opened only then). Returns None when nothing changed.
    Idempotent: an import of unchanged notes adds nothing (`import_notes`)."""
    folders = native_folders(environ, project, clients)
    key = "\n".join(str(folder) for _, folder in folders)
    fingerprint = folders_fingerprint(folder for _, folder in folders)
    rows = state.read("SELECT fingerprint FROM mem_native_imports WHERE folders = ?", (key,))
    if rows and rows[0]["fingerprint"] == fingerprint:
        return None
    notes, searched = find_native(environ, project, clients)
    report = import_notes(store(), notes) if notes else ImportReport()
    report.searched = searched
    with state.write() as db:
        db.execute("DELETE FROM mem_native_imports WHERE folders = ?", (key,))
        db.execute(
            "INSERT INTO mem_native_imports(folders, fingerprint, imported) VALUES (?, ?, ?)",
            (key, fingerprint, clock()),
        )
    return report


def import_notes(
    store: MemoryBackend, notes: Iterable[NativeNote], *, dry_run: bool = False
) -> ImportReport:
    """Save each native note unless its source's current note already says the same."""
    report = ImportReport()
    wanted = list(notes)
    sources = {n.source for n in wanted}
    current = {
        note.source: note
        for note in store.iter_notes()
        if note.source in sources and note.status == "active"
    }
    for native in wanted:
        previous = current.get(native.source)
        draft = NoteDraft(
            content=native.content,
            title=native.title,
            summary=native.summary,
            type=native.type,
            scope=native.scope,
            source=native.source,
            created=native.modified,
            updated=native.modified,
            tags=("imported",),
            supersedes=previous.id if previous is not None else None,
        )
        try:
            # compared as the store will hold it (secrets redacted, private spans dropped)
            held = note_from_draft(draft).body.strip()
        except CredentialError:  # the other notes are imported; this one never will be
            report.refused.append(native.source)
            continue
        if previous is not None and previous.body.strip() == held:
            report.unchanged.append(native.source)
            continue
        if not dry_run:
            result = store.save(draft)
            if result.deduplicated:  # the same fact is already a note (from elsewhere)
                report.unchanged.append(native.source)
                continue
        (report.replaced if previous is not None else report.added).append(native.source)
    return report
