"""Row filters shared by list, search and context, on both backends.

`Filters.sql()` writes `?` placeholders and the column names both schemas share (the
PostgreSQL adapter turns the placeholders into `%s`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory.model import normalize_scope, normalize_status, normalize_type


@dataclass(frozen=True, slots=True)
class Filters:
    """Row filters shared by list, search and context."""

    type: str | None = None
    scope: str | None = None
    scope_includes_user: bool = False
    tag: str | None = None
    status: str | None = None
    active_at: float | None = None
    """When set: only active notes not expired at this timestamp."""

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
    ) -> Filters:
        """Filters from what a caller asked for (names normalized as notes store them)."""
        return cls(
            type=normalize_type(type) if type else None,
            scope=normalize_scope(scope) if scope else None,
            scope_includes_user=include_user,
            tag=tag or None,
            status=normalize_status(status) if status else None,
            active_at=active_at,
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
    ) -> Filters:
        """What a search sees: a project scope includes the user's notes, and only active
        notes not expired at `now_ts` unless `include_inactive`."""
        active_at = None if include_inactive else now_ts
        return cls.of(type, scope, tag, None, include_user=True, active_at=active_at)

    @property
    def narrows(self) -> bool:
        """Whether a type, scope, tag or status is asked for (not just "active"): then the
        notes that pass may be few, and are worth finding before ranking."""
        return bool(self.type or self.scope or self.tag or self.status)

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
        return (" AND ".join(clauses) or "1"), params
