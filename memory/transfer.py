"""Export and import: JSONL, a markdown tree, and Claude Code's `MEMORY.md` / `CLAUDE.md`.

- Export JSONL: one JSON object per note (front matter fields, `path`, `body`).
- Export markdown: the note files copied as they are, same relative paths.
- Import JSONL: each line becomes a note; ids, dates and paths are kept when free.
- Import a folder: every `.md` note (front matter kept, relative path kept when free);
  `MEMORY.md` / `CLAUDE.md` files inside are split into sections.
- Import `MEMORY.md` / `CLAUDE.md` (Claude Code memory files): each section becomes a note.
Everything goes through `MemoryStore.save`: redaction and dedup apply.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Final, TextIO

from errors import ClaudeMemoryError, InvalidInputError, NotFoundError
from memory import _text
from memory.backend import MemoryBackend
from memory.model import NoteDraft, path_note_id
from memory.notes.files import is_note_name, iter_note_files, parse_note, render_note, safe_relpath
from memory.sqlite.store import MemoryStore

ProgressFn = Callable[[str, int, int], None]
CLAUDE_FILES: Final = frozenset({"memory.md", "claude.md", "claude.local.md"})
_HEADING_RE = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE_RE = re.compile(r"^\s*(```|~~~)")


@dataclass
class ImportReport:
    added: int = 0
    deduplicated: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "deduplicated": self.deduplicated,
            "skipped": self.skipped,
            "errors": list(self.errors),
        }


# --- export ----------------------------------------------------------------------------------


def export_jsonl(store: MemoryBackend, out: TextIO) -> int:
    count = 0
    for note in store.iter_notes():
        out.write(json.dumps(note.to_dict(), ensure_ascii=False, default=str) + "\n")
        count += 1
    return count


def export_markdown(store: MemoryBackend, dest: Path) -> int:
    """Every note as a markdown file in `dest`, keeping relative paths: the files copied
    byte for byte from a home, or rendered from the database (PostgreSQL mode)."""
    dest.mkdir(parents=True, exist_ok=True)
    count = 0
    if isinstance(store, MemoryStore):
        for rel, _stat in iter_note_files(store.root):
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(store.root / rel, target)
            count += 1
        return count
    for note in store.iter_notes():
        target = dest / safe_relpath(note.path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_note(note), encoding="utf-8")
        count += 1
    return count


# --- import ----------------------------------------------------------------------------------


def split_sections(text: str, fallback_title: str) -> list[tuple[str, str]]:
    """Sections of a markdown file: split at the shallowest heading level that occurs more
    than once (headings inside code fences ignored). Text before the first such heading
    becomes its own section when it has content beyond a lone title."""
    lines = text.splitlines()
    headings: list[tuple[int, int, str]] = []
    in_fence = False
    for i, line in enumerate(lines):
        if _FENCE_RE.match(line):
            in_fence = not in_fence
            continue
        match = None if in_fence else _HEADING_RE.match(line)
        if match:
            headings.append((i, len(match.group(1)), match.group(2).strip()))
    levels = sorted({level for _, level, _ in headings})
    split_level = next((lv for lv in levels if sum(h[1] == lv for h in headings) > 1), None)
    if split_level is None:
        body = text.strip()
        return [(_text.derive_title(body, fallback_title), body)] if body else []
    doc_title = fallback_title
    cuts = [(i, title) for i, level, title in headings if level == split_level]
    sections: list[tuple[str, str]] = []
    preamble = lines[: cuts[0][0]]
    shallower = [t for i, lv, t in headings if lv < split_level and i < cuts[0][0]]
    if shallower:
        doc_title = shallower[0]
    pre_body = "\n".join(
        line for line in preamble if not (_HEADING_RE.match(line) and line.strip("# ") == doc_title)
    ).strip()
    if pre_body:
        sections.append((doc_title, pre_body))
    for n, (start, title) in enumerate(cuts):
        end = cuts[n + 1][0] if n + 1 < len(cuts) else len(lines)
        body = "\n".join(lines[start + 1 : end]).strip()
        if body:
            sections.append(
                (title if doc_title == fallback_title else f"{doc_title}: {title}", body)
            )
    return sections


def _draft_from_record(record: dict[str, Any]) -> NoteDraft:
    content = record.get("body", record.get("content"))
    if not isinstance(content, str):
        raise InvalidInputError("record has no 'body' (or 'content') text")
    return NoteDraft(
        content=content,
        title=record.get("title"),
        summary=record.get("summary"),
        type=record.get("type") or "general",
        scope=record.get("scope") or "user",
        tags=record.get("tags") or (),
        importance=0.5 if record.get("importance") is None else record["importance"],
        expires_at=record.get("expires_at"),
        source=record.get("source"),
        id=record.get("id"),
        created=record.get("created"),
        updated=record.get("updated"),
        status=record.get("status") or "active",
        superseded_by=record.get("superseded_by"),
        access_count=int(record.get("access_count") or 0),
        path=record.get("path"),
    )


def _jsonl_drafts(path: Path) -> Iterator[tuple[str, NoteDraft | Exception]]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        for n, line in enumerate(handle, 1):
            if not line.strip():
                continue
            label = f"{path.name}:{n}"
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise InvalidInputError("line is not a JSON object")
                yield label, _draft_from_record(record)
            except (json.JSONDecodeError, ClaudeMemoryError, TypeError, ValueError) as exc:
                yield label, exc


def _claude_drafts(path: Path, scope: str, note_type: str) -> Iterator[tuple[str, NoteDraft]]:
    text = path.read_bytes().decode("utf-8", errors="replace")
    for n, (title, body) in enumerate(split_sections(text, path.stem), 1):
        yield (
            f"{path.name}#{n}",
            NoteDraft(
                content=body,
                title=title,
                type=note_type,
                scope=scope,
                tags=("claude-code", "imported"),
                source=f"{path.name}",
            ),
        )


def _markdown_draft(path: Path, rel: str, scope: str | None, note_type: str | None) -> NoteDraft:
    parsed = parse_note(path.read_bytes(), rel, path.stat().st_mtime)
    note = parsed.note
    if not parsed.ok:
        return NoteDraft(
            content=note.body, title=note.title, scope=scope or "user", type=note_type or "general"
        )
    explicit_id = note.id if note.id != path_note_id(rel) else None
    return NoteDraft(
        content=note.body,
        title=note.title,
        summary=note.summary,
        type=note_type or note.type,
        scope=scope or note.scope,
        tags=note.tags,
        importance=note.importance,
        expires_at=note.expires_at,
        source=note.source,
        id=explicit_id,
        created=note.created,
        updated=note.updated,
        status=note.status,
        superseded_by=note.superseded_by,
        access_count=note.access_count,
        path=rel,
        extra=note.extra,
    )


def import_path(
    store: MemoryBackend,
    path: Path,
    *,
    scope: str | None = None,
    note_type: str | None = None,
    progress: ProgressFn | None = None,
) -> ImportReport:
    """Import a JSONL file, a folder of markdown notes, or a MEMORY.md / CLAUDE.md file."""
    if not path.exists():
        raise InvalidInputError(f"{path} does not exist")
    items: list[tuple[str, NoteDraft | Exception]] = []
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*.md") if p.is_file()):
            rel = file.relative_to(path).as_posix()
            if any(part.startswith(".") for part in file.relative_to(path).parts):
                continue
            if file.name.lower() in CLAUDE_FILES:
                items.extend(_claude_drafts(file, scope or "user", note_type or "general"))
            elif is_note_name(file.name):
                items.append((rel, _safe(partial(_markdown_draft, file, rel, scope, note_type))))
    elif path.suffix.lower() == ".jsonl":
        items.extend(_jsonl_drafts(path))
    elif path.name.lower() in CLAUDE_FILES:
        items.extend(_claude_drafts(path, scope or "user", note_type or "general"))
    elif path.suffix.lower() in (".md", ".markdown"):
        items.append((path.name, _safe(lambda: _markdown_draft(path, path.name, scope, note_type))))
    else:
        raise InvalidInputError(
            f"cannot import {path}: use a .jsonl file, a folder of .md notes, "
            "or a MEMORY.md / CLAUDE.md file"
        )
    report = ImportReport()
    total = len(items)
    for done, (label, item) in enumerate(items, 1):
        if isinstance(item, Exception):
            report.errors.append(f"{label}: {_message(item)}")
        else:
            if scope or note_type:
                item = _override(item, scope, note_type)
            try:
                if item.id and _exists(store, item.id):
                    report.skipped += 1
                else:
                    result = store.save(item)
                    if result.deduplicated:
                        report.deduplicated += 1
                    else:
                        report.added += 1
            except ClaudeMemoryError as exc:
                report.errors.append(f"{label}: {exc.message}")
        if progress:
            progress("import", done, total)
    return report


def _exists(store: MemoryBackend, note_id: str) -> bool:
    try:
        store.get(note_id)
    except NotFoundError:
        return False
    return True


def _override(draft: NoteDraft, scope: str | None, note_type: str | None) -> NoteDraft:
    return replace(draft, scope=scope or draft.scope, type=note_type or draft.type)


def _safe(build: Callable[[], NoteDraft]) -> NoteDraft | Exception:
    try:
        return build()
    except (OSError, ClaudeMemoryError) as exc:
        return exc


def _message(exc: Exception) -> str:
    return exc.message if isinstance(exc, ClaudeMemoryError) else str(exc)
