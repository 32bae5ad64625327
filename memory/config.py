"""Configuration of the memory store.

`MemoryConfig` is built by the app (from its Settings), by the CLI or by a test and passed
down; `memory/` never reads environment variables or settings itself.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import Any

from memory._record import record
from memory.search.relevance import DEFAULT_FLOOR, DEFAULT_INJECT_FLOOR


@record
class RankingWeights:
    """How the five score parts are combined (see docs/search.md)."""

    relevance: float = 0.65
    type: float = 0.20
    recency: float = 0.10
    importance: float = 0.05
    usage: float = 0.05
    """How often a note was found, injected or read (log scale, docs/search.md)."""


@record(slots=False)
class MemoryConfig:
    """Where the notes and the index live, and how the store behaves."""

    root: Path
    """The notes folder, normally `<home>/memory`."""
    index_path: Path
    """The SQLite index, normally `<home>/index.db`; derived data, safe to delete."""
    ranking: RankingWeights = field(default_factory=RankingWeights)
    dedup_threshold: float = 0.92
    """Similarity (0..1) above which a new note counts as a near duplicate of an existing one."""
    relevance_floor: float = DEFAULT_FLOOR
    """Search hits whose calibrated relevance (`memory.search.relevance`) is below it are not
    returned unless asked for (`floor=0`)."""
    inject_floor: float = DEFAULT_INJECT_FLOOR
    """The relevance a hit needs to be injected into a prompt (per-prompt recall of the chat
    agent and the hooks); never below `relevance_floor`."""
    rescan_interval: float = 2.0
    """Seconds between full file scans triggered by reads on large stores, stretched to 20x the
    last scan's duration so rescans stay under ~5% of the time (see docs/search.md)."""
    rescan_every_read_below: int = 500
    """Stores with fewer notes rescan every file on every read (a scan costs ~3 µs a file)."""
    max_note_bytes: int = 20_000_000
    """Larger notes are refused by `save`/`update` (hand-written ones are indexed in part)."""
    max_ranked_matches: int = 10_000
    """A query matching more notes ranks only the most recently changed this many (BM25 costs
    ~1 µs per matching note; a very common word can match most of a large store)."""
    max_indexed_chars: int = 500_000
    """Body characters indexed per note; the file always keeps everything."""
    busy_timeout_ms: int = 5000
    lock_timeout: float = 60.0
    """Total seconds a write waits for other processes before failing."""
    fsync: bool = True
    """fsync note files before the rename that publishes them."""
    access_flush_batch: int = 50
    """`close()` writes access counts kept in the index into the notes' front matter once at
    least this many hits are pending (rewriting files on every close would slow hooks)."""
    index_json_interval: float = 2.0
    """Minimum seconds between rewrites of `_index.json` while notes change (always on close)."""
    index_json_limit: int = 2000
    """`_index.json` lists the newest this many notes (`count` still gives the total)."""
    database_url: str | None = field(default=None, repr=False)
    """The shared PostgreSQL database (CLAUDE_MEMORY_DATABASE_URL): the notes live there
    instead of in `root` (memory.clients.opening chooses). None: files and SQLite in the home."""

    @property
    def injection_floor(self) -> float:
        """What per-prompt recall injects at: the inject floor, never below the search floor
        (a hit a search leaves out is never injected)."""
        return max(self.inject_floor, self.relevance_floor)

    @classmethod
    def for_home(cls, home: Path, **overrides: Any) -> MemoryConfig:
        """The standard layout: `<home>/memory` for notes and `<home>/index.db` for the index."""
        home = Path(home).expanduser()
        return cls(root=home / "memory", index_path=home / "index.db", **overrides)
