"""Index-first context: the notes a prompt's recall lists, as compact lines within a budget.

The model first sees ids, types, titles and one-line summaries, and opens a note only when it
needs the details. `memory.loop` assembles these lines (with the brief, past sessions, the
window and the reminders) into what every front door injects. `memory/_index.json` holds a
listing for tools that read files (Claude Code, Codex); the store keeps it current.

Token estimate (`_text.estimate_tokens`): each CJK character counts as one token, any other
text as one token per four characters, rounded up. It errs on the high side for Chinese, so
a listing never exceeds the budget of a real tokenizer by much.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from memory import _text
from memory.files import atomic_write

if TYPE_CHECKING:
    from memory.backend import MemoryBackend

INDEX_JSON: Final = "_index.json"
SUMMARY_CHARS: Final = 120


@dataclass(frozen=True, slots=True)
class ContextEntry:
    id: str
    title: str
    type: str
    summary: str
    tags: tuple[str, ...]
    score: float
    line: str
    tokens: int


def _line(note_id: str, note_type: str, title: str, summary: str) -> str:
    line = f"- [{note_id}] {note_type} · {_text.shorten(title, 80)}"
    if summary and summary != title:
        line += f" — {_text.shorten(summary, SUMMARY_CHARS)}"
    return line


def select_context_entries(
    store: MemoryBackend,
    query: str | None = None,
    budget_tokens: int = 1500,
    *,
    exclude_ids: Collection[str] = (),
    scope: str | None = None,
    limit: int = 30,
) -> list[ContextEntry]:
    """The notes' lines, most relevant first, within `budget_tokens` (a line and its newline
    count). `exclude_ids` lets a caller skip notes injected in recent turns."""
    budget = budget_tokens
    if budget <= 0:
        return []
    if query and query.strip():
        found = [
            (h.id, h.type, h.title, h.summary, h.tags, h.score)
            for h in store.search(query, limit=limit, scope=scope, record_access=False)
        ]
    else:
        found = [
            (n.id, n.type, n.title, n.summary, n.tags, score)
            for n, score in store.top_notes(limit=limit, scope=scope)
        ]
    entries: list[ContextEntry] = []
    excluded = set(exclude_ids)
    for note_id, note_type, title, summary, tags, score in found:
        if note_id in excluded:
            continue
        line = _line(note_id, note_type, title, summary)
        cost = _text.estimate_tokens(line) + 1  # + newline
        if cost > budget:
            continue  # a shorter line further down may still fit
        budget -= cost
        entries.append(ContextEntry(note_id, title, note_type, summary, tags, score, line, cost))
    return entries


# --- _index.json -----------------------------------------------------------------------------


def index_listing(conn: sqlite3.Connection, limit: int = -1) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT id, path, title, type, scope, tags, status, updated, mtime_ns, size, summary"
        " FROM notes ORDER BY updated_ts DESC, id DESC LIMIT ?",
        (limit,),
    ).fetchall()
    return [
        {
            "id": r["id"],
            "path": r["path"],
            "title": r["title"],
            "type": r["type"],
            "scope": r["scope"],
            "tags": json.loads(r["tags"]),
            "status": r["status"],
            "updated_at": r["updated"],
            "mtime": datetime.fromtimestamp(r["mtime_ns"] / 1e9, UTC).isoformat(timespec="seconds"),
            "size": r["size"],
            "summary": r["summary"],
        }
        for r in rows
    ]


def write_index_json(
    conn: sqlite3.Connection, root: Path, *, limit: int = 2000, fsync: bool = False
) -> Path:
    """Rewrite `<root>/_index.json` (atomic) from the index: the newest `limit` notes first;
    `count` is the number of all notes, `truncated` says whether some were left out."""
    total = int(conn.execute("SELECT count(*) FROM notes").fetchone()[0])
    notes = index_listing(conn, limit)
    payload = {
        "version": 1,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "count": total,
        "truncated": len(notes) < total,
        "notes": notes,
    }
    path = root / INDEX_JSON
    atomic_write(path, json.dumps(payload, ensure_ascii=False, indent=1) + "\n", fsync=fsync)
    return path
