"""Row filters shared by list, search and context, on both backends.

`Filters.sql()` writes `?` placeholders and the column names both schemas share (the
PostgreSQL adapter turns the placeholders into `%s`).
"""

from __future__ import annotations

from typing import Any, Final

from memory._record import record
from memory.model import (
    PRIVATE_SCOPE_PREFIXES,
    Reader,
    normalize_scope,
    normalize_status,
    normalize_type,
)

PREFILTER_MAX: Final = 5000
"""Most notes a filter may leave for searches to find them first, on both backends
(docs/search.md, "Filters first")."""
PREFILTER_SHARE: Final = 4
"""...and at most this share of the index (1/4): a filter that leaves more (a project and the
user's notes, 40 % of a 10k home) is cheaper after ranking (FTS5's best matches, then the
filter) than counted first and walked (25 vs 20 ms a search of a prompt's five words)."""


def prefilter_most(notes: int) -> int:
    """How many notes a narrowing filter may leave, in an index of `notes`, for the search to
    take them first and rank them with their own statistics (`Filters.statistics`)."""
    return min(PREFILTER_MAX, notes // PREFILTER_SHARE)


@record
class Filters:
    """Row filters shared by list, search and context."""

    type: str | None = None
    scope: str | None = None
    scope_includes_user: bool = False
    tag: str | None = None
    status: str | None = None
    active_at: float | None = None
    """When set: only active notes not expired at this timestamp."""
    reader: Reader | None = None
    """When set: only the notes of scopes this reader reads (a chat member's turn: their own
    and their group's team notes), whatever else is asked (`memory.model.Reader`)."""

    @classmethod
    def of(
        cls,
        type: str | None,
        scope: str | None,
        tag: str | None,
        status: str | None,
        *,
        include_user: bool = False,
        active_at: float | None = None,
        reader: Reader | None = None,
    ) -> Filters:
        """Filters from what a caller asked for (names normalized as notes store them)."""
        return cls(
            type=normalize_type(type) if type else None,
            scope=normalize_scope(scope) if scope else None,
            scope_includes_user=include_user,
            tag=tag or None,
            status=normalize_status(status) if status else None,
            active_at=active_at,
            reader=reader,
        )

    @classmethod
    def for_search(
        cls,
        type: str | None,
        scope: str | None,
        tag: str | None,
        *,
        include_inactive: bool,
        now_ts: float,
        reader: Reader | None = None,
    ) -> Filters:
        """What a search sees: a project scope includes the user's notes, and only active
        notes not expired at `now_ts` unless `include_inactive`."""
        active_at = None if include_inactive else now_ts
        return cls.of(type, scope, tag, None, include_user=True, active_at=active_at, reader=reader)

    @property
    def narrows(self) -> bool:
        """Whether a type, scope, tag or status is asked for (not just "active"), or a member
        reads (their few scopes): then the notes that pass may be few, and are worth finding
        before ranking. The owner's reach (every scope but members' and teams') does not."""
        member = self.reader is not None and not self.reader.owner
        return bool(self.type or self.scope or self.tag or self.status or member)

    @property
    def statistics(self) -> Filters | None:
        """The notes whose statistics rank a search under these filters when the filters
        leave few notes (`prefilter_most`; BM25's statistics and the IDF weights of keyword
        trust): the notes of its type, scope, tag and status, active or not (so their counts
        hold until the notes change). None: not narrowing. A scope then ranks as it would in
        a home holding it alone (docs/search.md, "Filters first")."""
        if not self.narrows:
            return None
        return Filters(
            type=self.type,
            scope=self.scope,
            scope_includes_user=self.scope_includes_user,
            tag=self.tag,
            status=self.status,
            reader=self.reader,
        )

    def sql(self, alias: str = "n") -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if self.type:
            clauses.append(f"{alias}.type = ?")
            params.append(self.type)
        if self.scope:
            if self.scope_includes_user and self.scope != "user":
                clauses.append(f"{alias}.scope IN (?, 'user')")
            else:
                clauses.append(f"{alias}.scope = ?")
            params.append(self.scope)
        if self.tag:
            clauses.append(f"{alias}.nid IN (SELECT nid FROM note_tags WHERE tag = ?)")
            params.append(self.tag.strip().lstrip("#").casefold())
        if self.status:
            clauses.append(f"{alias}.status = ?")
            params.append(self.status)
        if self.active_at is not None:
            clauses.append(
                f"{alias}.status = 'active' AND ({alias}.expires_ts IS NULL"
                f" OR {alias}.expires_ts > ?)"
            )
            params.append(self.active_at)
        if self.reader is not None:
            clause, values = reader_sql(self.reader, alias)
            clauses.append(clause)
            params.extend(values)
        return (" AND ".join(clauses) or "1"), params


def reader_sql(reader: Reader, alias: str = "n", mark: str = "?") -> tuple[str, list[Any]]:
    """The condition of the notes `reader` reads, with `mark` placeholders (PostgreSQL's
    `%s`): the owner's scopes are every scope but `PRIVATE_SCOPE_PREFIXES`', a member's are
    listed. Read by neither: no note (`1 = 0`)."""
    parts: list[str] = []
    params: list[Any] = []
    if reader.owner:
        parts.append(
            "("
            + " AND ".join(f"{alias}.scope NOT LIKE {mark}" for _ in PRIVATE_SCOPE_PREFIXES)
            + ")"
        )
        params.extend(f"{prefix}%" for prefix in PRIVATE_SCOPE_PREFIXES)
    if reader.scopes:
        parts.append(f"{alias}.scope IN ({', '.join(mark for _ in reader.scopes)})")
        params.extend(reader.scopes)
    return ("(" + " OR ".join(parts) + ")" if parts else "1 = 0"), params
