"""`memory/_index.json`: a listing of the notes for tools that read files (Claude Code, Codex).

The SQLite store rewrites it (atomically, throttled) after writes; it is derived, like the index.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from memory.notes.files import atomic_write

INDEX_JSON: Final = "_index.json"


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
