"""Export and import: JSONL, a markdown tree, and Claude Code's `MEMORY.md` / `CLAUDE.md`.

- Export JSONL: one JSON object per note (front matter fields, `path`, `body`).
- Export markdown: the note files copied as they are, same relative paths.
- Import JSONL: each line becomes a note; ids, dates and paths are kept when free. A type
  that is neither a note type nor an entity name becomes `general`, keeps its name as the tag
  `type:<name>`, and the report warns about the line.
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
from pathlib import Path
from typing import Any, Final, TextIO

from errors import ClaudeMemoryError, InvalidInputError, NotFoundError
from memory import _text
from memory.backend import MemoryBackend
from memory.model import NoteDraft, normalize_tags, normalize_type, path_note_id
from memory.notes.files import (
    ParsedFile,
    is_note_name,
    iter_note_files,
    parse_note,
    render_note,
    safe_relpath,
)
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
    warnings: list[str] = field(default_factory=list)
    """Notes imported otherwise than written (an unknown type imported as `general`)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "deduplicated": self.deduplicated,
            "skipped": self.skipped,
            "errors": list(self.errors),
            "warnings": list(self.warnings),
        }


# An import item: where it came from, the draft (or why there is none), and a warning to
# report once the note is added.
_Item = tuple[str, NoteDraft | Exception, str | None]


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


def _record_type(value: object) -> tuple[str, str | None, str | None]:
    """A JSONL record's `type` as (type, tag keeping the original, warning). What the store
    does not know becomes `general`, as a hand-written note's unknown type does; the record's
    own name for it stays as the tag `type:<name>` so those notes can still be found."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return "general", None, None
    if not isinstance(value, str):
        shown = _text.shorten(json.dumps(value, ensure_ascii=False, default=str), 60)
        return "general", None, f"type {shown} is not a name, imported as general"
    try:
        return normalize_type(value), None, None
    except InvalidInputError:
        pass
    name = value.strip()
    tag = f"type:{name}"
    if len(tag) > 100 or "\n" in tag:  # not a tag (normalize_tags): the warning only
        return "general", None, f"unknown type {_text.shorten(name, 60)!r}, imported as general"
    return "general", tag, f"unknown type {name!r}, imported as general (tagged {tag})"


def _draft_from_record(
    record: dict[str, Any], note_type: str | None = None
) -> tuple[NoteDraft, str | None]:
    """The draft of one JSONL record, and a warning when it is not imported as written.
    With `note_type` (import --type) the record's own type is not read."""
    content = record.get("body", record.get("content"))
    if not isinstance(content, str):
        raise InvalidInputError("record has no 'body' (or 'content') text")
    kind, tag, warning = (note_type, None, None) if note_type else _record_type(record.get("type"))
    tags = normalize_tags(record.get("tags"))
    if tag:
        tags = (*tags, tag)
    draft = NoteDraft(
        content=content,
        title=record.get("title"),
        summary=record.get("summary"),
        type=kind,
        scope=record.get("scope") or "user",
        tags=tags,
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
    return draft, warning


def _jsonl_drafts(path: Path, note_type: str | None) -> Iterator[_Item]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        for n, line in enumerate(handle, 1):
            if not line.strip():
                continue
            label = f"{path.name}:{n}"
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise InvalidInputError("line is not a JSON object")
                draft, warning = _draft_from_record(record, note_type)
                yield label, draft, warning
            except (json.JSONDecodeError, ClaudeMemoryError, TypeError, ValueError) as exc:
                yield label, exc, None


def _claude_drafts(path: Path, scope: str, note_type: str) -> Iterator[_Item]:
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
            None,
        )


def _markdown_item(path: Path, rel: str, scope: str | None, note_type: str | None) -> _Item:
    """A markdown note file as an import item; what reading it fell back on (an unknown
    type, a malformed date: `parse_note`'s warnings) is its warning."""
    try:
        parsed = parse_note(path.read_bytes(), rel, path.stat().st_mtime)
    except (OSError, ClaudeMemoryError) as exc:
        return rel, exc, None
    return rel, _markdown_draft(parsed, rel, scope, note_type), "; ".join(parsed.warnings) or None


def _markdown_draft(
    parsed: ParsedFile, rel: str, scope: str | None, note_type: str | None
) -> NoteDraft:
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
    items: list[_Item] = []
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*.md") if p.is_file()):
            rel = file.relative_to(path).as_posix()
            if any(part.startswith(".") for part in file.relative_to(path).parts):
                continue
            if file.name.lower() in CLAUDE_FILES:
                items.extend(_claude_drafts(file, scope or "user", note_type or "general"))
            elif is_note_name(file.name):
                items.append(_markdown_item(file, rel, scope, note_type))
    elif path.suffix.lower() == ".jsonl":
        items.extend(_jsonl_drafts(path, note_type))
    elif path.name.lower() in CLAUDE_FILES:
        items.extend(_claude_drafts(path, scope or "user", note_type or "general"))
    elif path.suffix.lower() in (".md", ".markdown"):
        items.append(_markdown_item(path, path.name, scope, note_type))
    else:
        raise InvalidInputError(
            f"cannot import {path}: use a .jsonl file, a folder of .md notes, "
            "or a MEMORY.md / CLAUDE.md file"
        )
    report = ImportReport()
    total = len(items)
    for done, (label, item, warning) in enumerate(items, 1):
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
                        if warning:
                            report.warnings.append(f"{label}: {warning}")
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


def _message(exc: Exception) -> str:
    return exc.message if isinstance(exc, ClaudeMemoryError) else str(exc)
