"""`HistoryStore`: the versions of every note in the state database (`mem_note_versions`),
on SQLite `state.db` or the shared PostgreSQL alike (the portable SQL of `memory.sqlite.state`).

A note's versions are numbered from 1 per note id; each write transaction reads the newest
number and adds one (writers are serialized: `BEGIN IMMEDIATE`, or the advisory lock), then
drops what falls past `KEEP_VERSIONS`. Versions outlive their note: a deleted note keeps its
history, its last version the content it had, so it can be restored (docs/history.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from errors import InvalidInputError, NotFoundError
from memory.backend import StateBackend, StateWriter
from memory.notes.changes import (
    CHANGE_KINDS,
    KEEP_VERSIONS,
    ChangeKind,
    ChangeSource,
    Snapshot,
    Version,
    versions_to_drop,
)

_COLUMNS = "note_id, version, kind, door, session, at, snapshot, restored_from"


class HistoryStore:
    """The `memory.notes.changes.HistoryRecorder` over a `StateBackend`, and the reads the API and
    the web page make."""

    def __init__(
        self,
        state: StateBackend,
        *,
        keep: int = KEEP_VERSIONS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if keep < 1:
            raise InvalidInputError("keep at least one version per note")
        self.state = state
        self.keep = keep
        self._clock = clock

    # --- writes (HistoryRecorder) ------------------------------------------------------------

    def append(
        self,
        note_id: str,
        kind: ChangeKind,
        source: ChangeSource,
        snapshot: Snapshot,
        *,
        restored_from: int | None = None,
        if_changed: bool = False,
    ) -> int | None:
        if kind not in CHANGE_KINDS:
            raise InvalidInputError(f"unknown change kind {kind!r}")
        digest = snapshot.digest()
        with self.state.write() as tx:
            newest = tx.execute(
                "SELECT version, digest FROM mem_note_versions WHERE note_id = ?"
                " ORDER BY version DESC LIMIT 1",
                (note_id,),
            ).fetchone()
            if if_changed and newest is not None and newest["digest"] == digest:
                return None
            number = 1 if newest is None else int(newest["version"]) + 1
            self._insert(
                tx, note_id, number, kind, source, digest, snapshot.to_json(), restored_from
            )
        return number

    def record_gone(self, note_id: str, source: ChangeSource) -> int | None:
        with self.state.write() as tx:
            newest = tx.execute(
                "SELECT version, kind, digest, snapshot FROM mem_note_versions"
                " WHERE note_id = ? ORDER BY version DESC LIMIT 1",
                (note_id,),
            ).fetchone()
            if newest is None or newest["kind"] == "delete":
                return None
            number = int(newest["version"]) + 1
            snapshot = str(newest["snapshot"])
            self._insert(tx, note_id, number, "delete", source, newest["digest"], snapshot, None)
        return number

    def _insert(
        self,
        tx: StateWriter,
        note_id: str,
        number: int,
        kind: str,
        source: ChangeSource,
        digest: str,
        snapshot: str,
        restored_from: int | None,
    ) -> None:
        tx.execute(
            "INSERT INTO mem_note_versions (note_id, version, kind, door, session, at, digest,"
            " snapshot, restored_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                note_id,
                number,
                kind,
                source.door,
                source.session or "",
                self._clock(),
                digest,
                snapshot,
                restored_from,
            ),
        )
        drop = versions_to_drop(number, self.keep)
        if drop:
            tx.execute(
                "DELETE FROM mem_note_versions WHERE note_id = ? AND version <= ?",
                (note_id, drop),
            )

    def propose_supersession(self, new_id: str, old_id: str, reason: str) -> str:
        from memory.history.conflicts import ConflictStore  # only a save that contradicts a note

        return ConflictStore(self.state).propose(new_id, old_id, reason).id

    def pending_successors(self, note_ids: Sequence[str]) -> dict[str, str]:
        if len(note_ids) < 2:
            return {}
        marks = ", ".join("?" * len(note_ids))
        rows = self.state.read(
            "SELECT old_id, new_id FROM mem_supersessions WHERE status = 'pending'"
            f" AND old_id IN ({marks}) AND new_id IN ({marks}) ORDER BY created, id",
            (*note_ids, *note_ids),
        )
        return {str(r["old_id"]): str(r["new_id"]) for r in rows}

    # --- reads -------------------------------------------------------------------------------

    def latest_digest(self, note_id: str) -> str | None:
        rows = self.state.read(
            "SELECT digest FROM mem_note_versions WHERE note_id = ? ORDER BY version DESC LIMIT 1",
            (note_id,),
        )
        return str(rows[0]["digest"]) if rows else None

    def latest(self, note_id: str) -> Version | None:
        """The newest version (None when the note has no history)."""
        rows = self.state.read(
            f"SELECT {_COLUMNS} FROM mem_note_versions WHERE note_id = ?"
            " ORDER BY version DESC LIMIT 1",
            (note_id,),
        )
        return _version(rows[0]) if rows else None

    def versions(self, note_id: str) -> list[Version]:
        """A note's versions, newest first (empty when it has none)."""
        rows = self.state.read(
            f"SELECT {_COLUMNS} FROM mem_note_versions WHERE note_id = ? ORDER BY version DESC",
            (note_id,),
        )
        return [_version(r) for r in rows]

    def version(self, note_id: str, number: int) -> Version:
        rows = self.state.read(
            f"SELECT {_COLUMNS} FROM mem_note_versions WHERE note_id = ? AND version = ?",
            (note_id, number),
        )
        if not rows:
            if not self.state.read(
                "SELECT 1 AS one FROM mem_note_versions WHERE note_id = ? LIMIT 1", (note_id,)
            ):
                raise NotFoundError("note history", note_id)
            raise NotFoundError("version", f"{note_id} v{number}")
        return _version(rows[0])

    def deleted(self, limit: int = 50) -> list[Version]:
        """Deleted notes, most recently deleted first: the version each was deleted with."""
        rows = self.state.read(
            f"SELECT {_COLUMNS} FROM mem_note_versions v WHERE v.kind = 'delete' AND v.version ="
            " (SELECT max(w.version) FROM mem_note_versions w WHERE w.note_id = v.note_id)"
            " ORDER BY v.at DESC, v.note_id LIMIT ?",
            (limit,),
        )
        return [_version(r) for r in rows]


def _version(row: Any) -> Version:
    session = str(row["session"] or "")
    kind = str(row["kind"])
    restored = row["restored_from"]
    return Version(
        note_id=str(row["note_id"]),
        number=int(row["version"]),
        kind=cast(ChangeKind, kind if kind in CHANGE_KINDS else "edit"),
        source=ChangeSource(str(row["door"]), session or None),
        at=datetime.fromtimestamp(float(row["at"]), UTC),
        snapshot=Snapshot.from_json(str(row["snapshot"])),
        restored_from=None if restored is None else int(restored),
    )
