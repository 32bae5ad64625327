"""HTTP API: `/api/memories...`, `/api/memories/pending` and a note's history (`/history`,
docs/history.md); see docs/ARCHITECTURE contract.

Each route is a module-level handler on one of the routers (`memory_router`, `pending_router`,
`supersessions_router`, `observations_router`, `history_router`, `feedback_router`); what it
serves comes as a dependency from the app's `MemoryApi` (`app.state.memory_api`). The app
mounts them and adds auth around them. Store calls block (SQLite, files), so every endpoint
runs them in a thread (the memory lane when the app gives one). Errors are raised,
never mapped here: `ClaudeMemoryError` carries its status (unknown id -> 404, bad input -> 422)
and the app's one handler (web/errors.py) answers it, as it answers anything unexpected.
Changes made here are recorded in a note's history as made by the `web` door.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import Annotated, Any, Literal, Protocol, TypeVar

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from errors import InvalidInputError, NotFoundError
from memory._record import record
from memory.backend import MemoryBackend, StateBackend
from memory.history.conflicts import ConflictStore, Supersession
from memory.history.conflicts import status_filter as conflict_status
from memory.history.store import HistoryStore
from memory.inputs import ID_MAX, Flag, SearchText
from memory.loop.entities import PendingStore, confirm_pending, pending_filter
from memory.loop.episodes import EpisodeStore
from memory.loop.feedback import FeedbackStore
from memory.model import Note, NoteDraft, NoteStatus, Reader, SearchHit, normalize_scope
from memory.notes.changes import ChangeSource, acting_as
from storage.lanes import Lane

T = TypeVar("T")


class SaveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = Field(min_length=1, description="The memory text (markdown, any language).")
    title: str | None = Field(default=None, max_length=300)
    summary: str | None = Field(default=None, max_length=1000)
    type: str | None = Field(
        default=None, description="Note type or entity name (Decision, File, Habit, ...)."
    )
    scope: str | None = Field(
        default=None,
        description="user | project:<key> | chat:<id> | person:<open_id> | team:<chat_id>",
    )
    tags: list[str] | None = None
    importance: float | None = Field(default=None, ge=0, le=1)
    expires_at: datetime | None = None
    source: str | None = Field(default=None, max_length=1000)
    supersedes: str | None = Field(default=None, description="Id of a note this one replaces.")


class SaveResponse(BaseModel):
    id: str
    deduplicated: bool
    path: str
    conflicts_with: str | None = Field(
        default=None,
        description="An older active note this one contradicts (a negation or a number "
        "changed): both are kept until resolved at /api/memories/supersessions.",
    )
    pending_supersession: str | None = Field(
        default=None, description="The pending choice to resolve (keep new, old or both)."
    )
    notice: str | None = Field(default=None, description="Says so in words, for a person.")


class UpdateRequest(BaseModel):
    """Only the fields sent are changed; `null` clears expires_at/superseded_by/source."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = Field(default=None, min_length=1)
    title: str | None = Field(default=None, min_length=1, max_length=300)
    summary: str | None = Field(default=None, max_length=1000)
    type: str | None = None
    scope: str | None = None
    tags: list[str] | None = None
    importance: float | None = Field(default=None, ge=0, le=1)
    status: Literal["active", "deprecated", "superseded"] | None = None
    superseded_by: str | None = None
    expires_at: datetime | None = None
    source: str | None = None


NameLookup = Callable[[str], str | None]
"""A Feishu member's display name by open_id, if the bridge knows it (None: it does not)."""


class WhoseOut(BaseModel):
    """Whose a note is, from its scope (docs/memory-format.md, "Whose a note is")."""

    kind: Literal["owner", "person", "team"] = Field(
        description="owner: the machine owner's (user, project:, chat:); person: one chat "
        "member's own; team: one group's team notes."
    )
    id: str | None = Field(description="The member's open_id or the group's chat_id.")
    name: str = Field(
        description="The member's display name if the Feishu bridge knows it, else the id; "
        "the group's chat_id; 'owner' for the owner's."
    )

    @classmethod
    def of(cls, scope: str, names: NameLookup | None = None) -> WhoseOut:
        kind, _, ident = scope.partition(":")
        if kind == "person":
            return cls(kind="person", id=ident, name=(names(ident) if names else None) or ident)
        if kind == "team":
            return cls(kind="team", id=ident, name=ident)
        return cls(kind="owner", id=None, name="owner")


class NoteOut(BaseModel):
    id: str
    title: str
    type: str
    scope: str
    whose: WhoseOut
    tags: list[str]
    created: datetime
    updated: datetime
    summary: str
    importance: float
    status: str
    superseded_by: str | None
    superseded_by_title: str | None = Field(
        default=None,
        description="The title of the note named by `superseded_by` (null when there is none, "
        "or it was deleted since).",
    )
    expires_at: datetime | None
    source: str | None
    access_count: int
    path: str

    @classmethod
    def of(
        cls, note: Note, successor: str | None = None, names: NameLookup | None = None
    ) -> NoteOut:
        """`successor`: the title of the note that replaced this one (`_titles`); `names`:
        members' display names, for `whose`."""
        return cls(**_note_fields(note, names), superseded_by_title=successor)


class NoteFull(NoteOut):
    body: str

    @classmethod
    def of(
        cls, note: Note, successor: str | None = None, names: NameLookup | None = None
    ) -> NoteFull:
        fields = _note_fields(note, names)
        return cls(**fields, superseded_by_title=successor, body=note.body)


class NoteList(BaseModel):
    items: list[NoteOut]
    total: int
    limit: int
    offset: int


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: SearchText = Field(
        description="What to look for; blank queries are refused (list notes with GET instead)."
    )
    limit: int = Field(default=10, ge=1, le=100)
    type: str | None = None
    scope: str | None = None
    person: str | None = Field(
        default=None, description="Only this Feishu member's own notes (an open_id)."
    )
    group: str | None = Field(
        default=None, description="Only this Feishu group's team notes (a chat_id)."
    )
    tag: str | None = None
    include_inactive: Flag = False
    mode: Literal["auto", "keyword", "vector", "hybrid"] = Field(
        default="auto",
        description="auto: hybrid (keywords + vectors) when the encoder is ready, else keyword.",
    )
    all: Flag = Field(
        default=False,
        description="Also return hits below the relevance floor (CLAUDE_MEMORY_RELEVANCE_FLOOR); "
        "`?all=true` does the same.",
    )


class ScorePartsOut(BaseModel):
    relevance: float
    type_weight: float
    recency: float
    importance: float
    usage: float


class SearchHitOut(BaseModel):
    id: str
    title: str
    type: str
    scope: str
    whose: WhoseOut
    summary: str
    path: str
    tags: list[str]
    status: str
    updated: datetime
    score: float
    relevance: float = Field(
        description="Calibrated relevance 0..1 from the hit's own evidence (docs/retrieval.md); "
        "hits below the relevance floor are left out unless `all`."
    )
    score_parts: ScorePartsOut
    snippet: str
    superseded_by: str | None = Field(
        default=None, description="The note that replaced this one (a superseded hit)."
    )
    superseded_by_title: str | None = Field(
        default=None, description="Its title (null when it was deleted since)."
    )

    @classmethod
    def of(cls, hit: SearchHit) -> SearchHitOut:
        return cls(**hit.to_dict(), whose=WhoseOut.of(hit.scope))


class SearchResponse(BaseModel):
    results: list[SearchHitOut]
    mode: Literal["keyword", "vector", "hybrid"] = "keyword"
    notice: str | None = Field(
        default=None,
        description="Why semantic search did not run (encoder loading, failed, no vectors yet).",
    )


class DeleteResponse(BaseModel):
    id: str
    deleted: bool


def _note_fields(note: Note, names: NameLookup | None = None) -> dict[str, Any]:
    return {
        "id": note.id,
        "title": note.title,
        "type": note.type,
        "scope": note.scope,
        "whose": WhoseOut.of(note.scope, names),
        "tags": list(note.tags),
        "created": note.created,
        "updated": note.updated,
        "summary": note.summary,
        "importance": note.importance,
        "status": note.status,
        "superseded_by": note.superseded_by,
        "expires_at": note.expires_at,
        "source": note.source,
        "access_count": note.access_count,
        "path": note.path,
    }


def _titles(store: MemoryBackend, ids: Iterable[str | None]) -> dict[str, str]:
    """The titles of the notes named by `ids` (the notes that replaced others), by id; one
    deleted since is left out. For a page that says "replaced by <title>"."""
    titles: dict[str, str] = {}
    for note_id in {i for i in ids if i}:
        try:
            titles[note_id] = store.get(note_id).title
        except NotFoundError:
            continue
    return titles


def _hits_out(
    store: MemoryBackend, hits: Iterable[SearchHit], names: NameLookup | None = None
) -> list[SearchHitOut]:
    """Search hits as answered: each superseded one names the note that replaced it, and
    that note's title; each says whose it is."""
    rows = [hit.to_dict() for hit in hits]
    titles = _titles(store, (row["superseded_by"] for row in rows))
    return [
        SearchHitOut(
            **row,
            whose=WhoseOut.of(row["scope"], names),
            superseded_by_title=titles.get(row["superseded_by"] or ""),
        )
        for row in rows
    ]


def _full(store: MemoryBackend, note: Note, names: NameLookup | None = None) -> NoteFull:
    """A note in full, with the title of the one that replaced it."""
    titles = _titles(store, [note.superseded_by])
    return NoteFull.of(note, titles.get(note.superseded_by or ""), names)


def _scope_of(scope: str | None, person: str | None, group: str | None) -> str | None:
    """The scope a list asks for: `scope` as given, or one member's own notes (`person`, an
    open_id) or one group's team notes (`group`, a chat_id); one of the three at most."""
    if sum(x is not None for x in (scope, person, group)) > 1:
        raise InvalidInputError("give one of scope, person and group")
    if person is not None:
        return f"person:{person}"
    if group is not None:
        return f"team:{group}"
    return scope


# The list's order when no status is asked for: current notes first, then retired ones.
_STATUS_ORDER: tuple[NoteStatus, ...] = ("active", "deprecated", "superseded")


def _list_current_first(
    store: MemoryBackend, limit: int, offset: int, **query: Any
) -> tuple[list[Note], int]:
    """All statuses, active notes first, then deprecated, then superseded, each group in the
    asked order; paged over the whole sequence. A query per status: both backends' lists
    take one status, and a note superseded a minute ago must not come before current ones."""
    notes: list[Note] = []
    total = 0
    skip = offset
    for status in _STATUS_ORDER:
        count = store.count(
            type=query["type"], scope=query["scope"], tag=query["tag"], status=status
        )
        total += count
        if skip >= count:
            skip -= count
            continue
        if len(notes) < limit:
            notes += store.list(status=status, limit=limit - len(notes), offset=skip, **query)
        skip = 0
    return notes, total


WEB: ChangeSource = ChangeSource("web")


# --- what the routes serve ------------------------------------------------------------------


@record
class MemoryApi:
    """What the memory routes serve: the app sets `app.state.memory_api` once its container is
    built (a test, on its own FastAPI app, with the parts it asks of). `lane`: the threads the
    store's calls run on (storage/lanes.py: a locked state database never holds them up; the
    loop's default pool when None)."""

    store: MemoryBackend
    pending: PendingStore | None = None
    episodes: EpisodeStore | None = None
    conflicts: ConflictStore | None = None
    history: HistoryStore | None = None
    feedback: FeedbackStore | None = None
    lane: Lane | None = None
    names: NameLookup | None = None
    """Feishu members' display names (the bridge's, when it runs), for whose a note is."""

    @classmethod
    def over(
        cls,
        store: MemoryBackend,
        state: StateBackend,
        *,
        pending: PendingStore,
        episodes: EpisodeStore,
        lane: Lane | None = None,
        names: NameLookup | None = None,
    ) -> MemoryApi:
        """Every part, the state's stores built once (the app's)."""
        return cls(
            store,
            pending=pending,
            episodes=episodes,
            conflicts=ConflictStore(state),
            history=HistoryStore(state),
            feedback=FeedbackStore(state),
            lane=lane,
            names=names,
        )


def _api(request: Request) -> MemoryApi:
    api: MemoryApi = request.app.state.memory_api
    return api


def _part(part: T | None, name: str) -> T:
    if part is None:  # the app mounted a route without what it serves: a bug, a 500
        raise RuntimeError(f"the memory API serves no {name}")
    return part


def _as_web(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    with acting_as(WEB):
        return fn(*args, **kwargs)


async def _run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking store call off the event loop, as the `web` door (for the notes'
    history). Its errors propagate: the app's one handler answers them (web/errors.py)."""
    return await asyncio.to_thread(_as_web, fn, *args, **kwargs)


class _OnLane(Protocol):
    def __call__(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Awaitable[T]: ...


def _on_lane(api: Annotated[MemoryApi, Depends(_api)]) -> _OnLane:
    """`_run` on the API's lane (the loop's default pool when it has none)."""
    lane = api.lane

    async def run(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        if lane is None:
            return await _run(fn, *args, **kwargs)
        return await lane.run(_as_web, fn, *args, **kwargs)

    return run


def _store(api: Annotated[MemoryApi, Depends(_api)]) -> MemoryBackend:
    return api.store


def _pending(api: Annotated[MemoryApi, Depends(_api)]) -> PendingStore:
    return _part(api.pending, "pending memories")


def _episodes(api: Annotated[MemoryApi, Depends(_api)]) -> EpisodeStore:
    return _part(api.episodes, "observations")


def _conflicts(api: Annotated[MemoryApi, Depends(_api)]) -> ConflictStore:
    return _part(api.conflicts, "supersessions")


def _history(api: Annotated[MemoryApi, Depends(_api)]) -> HistoryStore:
    return _part(api.history, "history")


def _feedback(api: Annotated[MemoryApi, Depends(_api)]) -> FeedbackStore:
    return _part(api.feedback, "feedback")


def _names(api: Annotated[MemoryApi, Depends(_api)]) -> NameLookup | None:
    return api.names


Store = Annotated[MemoryBackend, Depends(_store)]
Names = Annotated[NameLookup | None, Depends(_names)]
OnLane = Annotated[_OnLane, Depends(_on_lane)]
Pending = Annotated[PendingStore, Depends(_pending)]
Episodes = Annotated[EpisodeStore, Depends(_episodes)]
Conflicts = Annotated[ConflictStore, Depends(_conflicts)]
History = Annotated[HistoryStore, Depends(_history)]
Feedback = Annotated[FeedbackStore, Depends(_feedback)]


# --- /api/memories ----------------------------------------------------------------------------

memory_router = APIRouter(prefix="/api/memories", tags=["memories"])
"""Mounted after the pending, supersessions and history routers, so `/{note_id}` never
captures their paths."""


# Fixed paths first, so `/{note_id}` never captures them.
@memory_router.get("/stats")
async def memory_stats(store: Store, on_lane: OnLane, names: Names) -> dict[str, Any]:
    """Counts by type/scope/status, index and encoder state; `whose`: whose each counted scope
    is (a member's display name when the bridge knows it)."""
    stats = await on_lane(store.stats)
    stats["whose"] = {
        scope: WhoseOut.of(scope, names).model_dump() for scope in stats.get("by_scope", {})
    }
    return stats


@memory_router.post("/search", response_model=SearchResponse)
async def search_memories(
    body: SearchRequest,
    store: Store,
    on_lane: OnLane,
    names: Names,
    everything: bool = Query(
        default=False, alias="all", description="Also hits below the relevance floor."
    ),
) -> SearchResponse:
    """Ranked search (hybrid keyword + vector when the encoder is ready, else keyword, with a
    `notice`); results carry their calibrated relevance and score parts. Hits below the
    relevance floor are left out unless `all` (in the body or `?all=true`). `person` and
    `group` search one member's own notes or one group's team notes, exactly (a `scope` also
    brings the user's notes)."""
    whose = _scope_of(None, body.person, body.group)
    if whose is not None and body.scope is not None:
        raise InvalidInputError("give one of scope, person and group")
    outcome = await on_lane(
        store.search_detailed,
        body.query,
        limit=body.limit,
        type=body.type,
        scope=body.scope,
        tag=body.tag,
        include_inactive=body.include_inactive,
        mode=body.mode,
        floor=0.0 if everything or body.all else None,
        # that scope alone, read as its own reader reads it
        reader=Reader(owner=False, scopes=(normalize_scope(whose),)) if whose else None,
    )
    return SearchResponse(
        results=await on_lane(_hits_out, store, outcome.hits, names),
        mode=outcome.mode,
        notice=outcome.notice,
    )


@memory_router.post("/rebuild")
async def rebuild_index(store: Store, on_lane: OnLane, vectors: bool = False) -> dict[str, Any]:
    """Rebuild the index from the note files. Vectors survive a rebuild (they are keyed by
    note id and text); `?vectors=true` drops them so that every note is embedded again, in the
    background (progress: `encoder.vectors` in `/stats`)."""
    report = (await on_lane(store.rebuild)).to_dict()
    if vectors:
        report["vectors"] = await on_lane(store.reset_vectors)
    return report


@memory_router.post("", response_model=SaveResponse)
async def save_memory(body: SaveRequest, store: Store, on_lane: OnLane) -> SaveResponse:
    """Save a memory; a duplicate refreshes the existing note (`deduplicated: true`)."""
    draft = NoteDraft(
        content=body.content,
        title=body.title,
        summary=body.summary,
        type=body.type or "general",
        scope=body.scope or "user",
        tags=tuple(body.tags or ()),
        importance=0.5 if body.importance is None else body.importance,
        expires_at=body.expires_at,
        source=body.source,
        supersedes=body.supersedes,
    )
    result = await on_lane(store.save, draft)
    return SaveResponse(
        id=result.id,
        deduplicated=result.deduplicated,
        path=result.path,
        conflicts_with=result.conflicts_with,
        pending_supersession=result.pending,
        notice=result.notice() if result.conflicts_with else None,
    )


@memory_router.get("", response_model=NoteList)
async def list_memories(
    store: Store,
    on_lane: OnLane,
    names: Names,
    type: str | None = None,
    scope: str | None = None,
    person: str | None = Query(
        default=None, description="Only this Feishu member's own notes (an open_id)."
    ),
    group: str | None = Query(
        default=None, description="Only this Feishu group's team notes (a chat_id)."
    ),
    tag: str | None = None,
    status: Literal["active", "deprecated", "superseded"] | None = None,
    limit: int = Query(default=50, ge=1, le=500),
    offset: int = Query(default=0, ge=0),
    sort: Literal["updated", "created", "importance", "access"] = "updated",
) -> NoteList:
    """List notes. Without `status`, all of them with the current ones first: active notes,
    then deprecated, then superseded ones, each group in the `sort` order. Each says whose it
    is; `person` and `group` list one member's own notes or one group's team notes."""
    scope = _scope_of(scope, person, group)

    def run() -> tuple[list[Note], int, dict[str, str]]:
        query: dict[str, Any] = {"type": type, "scope": scope, "tag": tag, "sort": sort}
        if status is None:
            notes, total = _list_current_first(store, limit, offset, **query)
        else:
            notes = store.list(status=status, limit=limit, offset=offset, **query)
            total = store.count(type=type, scope=scope, tag=tag, status=status)
        return notes, total, _titles(store, (n.superseded_by for n in notes))

    notes, total, titles = await on_lane(run)
    items = [NoteOut.of(n, titles.get(n.superseded_by or ""), names) for n in notes]
    return NoteList(items=items, total=total, limit=limit, offset=offset)


@memory_router.get("/{note_id}", response_model=NoteFull)
async def get_memory(note_id: str, store: Store, on_lane: OnLane, names: Names) -> NoteFull:
    """A note with its full text, read from its file."""
    return await on_lane(lambda: _full(store, store.get(note_id), names))


@memory_router.put("/{note_id}", response_model=NoteFull)
async def update_memory(
    note_id: str, body: UpdateRequest, store: Store, on_lane: OnLane
) -> NoteFull:
    """Partial update; the note is rewritten and re-indexed. `{"status": "superseded",
    "superseded_by": "<newer id>"}` marks it replaced by that note (the page's "Replaces…");
    `{"status": "active", "superseded_by": null}` makes it current again."""
    changes = body.model_dump(exclude_unset=True)
    if not changes:
        raise InvalidInputError("send at least one field to change")
    return await on_lane(lambda: _full(store, store.update(note_id, **changes)))


@memory_router.delete("/{note_id}", response_model=DeleteResponse)
async def delete_memory(note_id: str, store: Store, on_lane: OnLane) -> DeleteResponse:
    """Delete the note file and its index entry."""
    await on_lane(store.delete, note_id)
    return DeleteResponse(id=note_id, deleted=True)


# --- /api/memories/pending: captured entities waiting for the user's confirm or reject ------
# Mounted before the main memory router so `/api/memories/{id}` never captures `pending`.

pending_router = APIRouter(prefix="/api/memories/pending", tags=["memories"])


@pending_router.get("")
async def list_pending(
    pending: Pending, status: str = "pending", limit: int = Query(default=100, ge=1, le=500)
) -> dict[str, Any]:
    wanted = pending_filter(status)  # an unknown status: 422 saying which ones exist
    items = await _run(pending.list, wanted, limit)
    return {"pending": [p.to_dict() for p in items]}


@pending_router.post("/{pending_id}/confirm")
async def confirm(pending_id: str, pending: Pending, store: Store) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        entity, note_id, deduplicated = confirm_pending(store, pending, pending_id)
        return {"id": note_id, "deduplicated": deduplicated, "pending": entity.to_dict()}

    return await _run(run)


@pending_router.post("/{pending_id}/reject")
async def reject(pending_id: str, pending: Pending) -> dict[str, Any]:
    resolved = await _run(pending.resolve, pending_id, "rejected")
    return {"pending": resolved.to_dict()}


# --- /api/memories/supersessions: a new note contradicting an older one, the user's choice ---
# (memory.history.conflicts). Mounted before the main memory router, as the pending router is.


class ResolveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keep: Literal["new", "old", "both"] = Field(
        description="new: the old note is superseded; old: the new note is deprecated; "
        "both: both stay active."
    )


supersessions_router = APIRouter(prefix="/api/memories/supersessions", tags=["memories"])


def _with_notes(store: MemoryBackend, sup: Supersession) -> dict[str, Any]:
    """The supersession and both notes in full, side by side (None: deleted since)."""
    notes: dict[str, Any] = {}
    for side, note_id in (("new", sup.new_id), ("old", sup.old_id)):
        try:
            notes[side] = _full(store, store.get(note_id)).model_dump(mode="json")
        except NotFoundError:
            notes[side] = None
    return {**sup.to_dict(), **notes}


@supersessions_router.get("")
async def list_supersessions(
    conflicts: Conflicts,
    store: Store,
    status: str = "pending",
    limit: int = Query(default=100, ge=1, le=500),
) -> dict[str, Any]:
    """Pending (or resolved, or all) supersessions, newest first, each with both notes."""

    def run() -> dict[str, Any]:
        found = conflicts.list(conflict_status(status), limit)
        return {"supersessions": [_with_notes(store, s) for s in found]}

    return await _run(run)


@supersessions_router.get("/{sup_id}")
async def get_supersession(sup_id: str, conflicts: Conflicts, store: Store) -> dict[str, Any]:
    return await _run(lambda: _with_notes(store, conflicts.get(sup_id)))


@supersessions_router.post("/{sup_id}/resolve")
async def resolve_supersession(
    sup_id: str, body: ResolveRequest, conflicts: Conflicts, store: Store
) -> dict[str, Any]:
    """Keep the new note, the old one or both. Final: the same choice again answers as before,
    another one is refused (409)."""
    return await _run(lambda: _with_notes(store, conflicts.resolve(store, sup_id, body.keep)))


# --- /api/observations: what Claude Code and Codex sessions did, searchable -----------------
# Seed 004's progressive disclosure: search (compact hits with ids) -> the timeline around a
# hit -> the full observations by id. The MCP server offers the same three steps.

observations_router = APIRouter(prefix="/api/observations", tags=["observations"])


@observations_router.get("/search")
async def search_observations(
    episodes: Episodes,
    q: str = Query(min_length=1, max_length=500, pattern=r"\S"),
    project: str | None = Query(default=None, max_length=300),
    limit: int = Query(default=20, ge=1, le=100),
) -> dict[str, Any]:
    hits = await _run(episodes.search_observations, q, project=project, limit=limit)
    return {"results": [h.to_dict() for h in hits]}


@observations_router.get("/{observation_id}/timeline")
async def timeline(
    episodes: Episodes,
    observation_id: int = Path(ge=1, le=ID_MAX),
    before: int = Query(default=3, ge=0, le=20),
    after: int = Query(default=3, ge=0, le=20),
) -> dict[str, Any]:
    episode, messages = await _run(episodes.timeline, observation_id, before=before, after=after)
    return {
        "episode": {"id": episode.id, "title": episode.title, "project": episode.project},
        "anchor": observation_id,
        "messages": [m.to_dict() for m in messages],
    }


@observations_router.get("")
async def get_observations(
    episodes: Episodes,
    ids: str = Query(min_length=1, max_length=1000, description="comma-separated ids"),
) -> dict[str, Any]:
    try:
        wanted = [int(part) for part in ids.split(",") if part.strip()]
    except ValueError:
        raise InvalidInputError("ids must be numbers separated by commas") from None
    if not wanted or len(wanted) > 50:
        raise InvalidInputError("send between 1 and 50 ids")
    if min(wanted) < 1 or max(wanted) > ID_MAX:
        raise InvalidInputError(f"ids are positive numbers, at most {ID_MAX}")
    found = await _run(episodes.observations, wanted)
    observations = [m.to_dict() for m in found if m.role == "observation"]
    if not observations:
        raise NotFoundError("observation", ids)
    return {"observations": observations}


# --- /api/memories/.../history: every change of a note, and restoring one (docs/history.md) --


class RestoreResponse(BaseModel):
    note: NoteFull
    restored_from: int
    versions: int = Field(description="How many versions the note has now.")


history_router = APIRouter(prefix="/api/memories", tags=["memories"])


@history_router.get("/history/deleted")
async def deleted_notes(
    history: History, limit: int = Query(default=50, ge=1, le=500)
) -> dict[str, Any]:
    """Deleted notes, most recent first, each with the version it was deleted with (restore
    it with `POST /{id}/history/{version}/restore`)."""
    found = await _run(history.deleted, limit)
    return {"deleted": [v.to_dict(full=False) for v in found]}


@history_router.get("/{note_id}/history")
async def note_history(note_id: str, history: History, store: Store) -> dict[str, Any]:
    """A note's versions, newest first: kind, who (door and session), when, title. A note
    saved before history was kept has none until its next change."""

    def run() -> dict[str, Any]:
        try:
            store.get(note_id)  # first: a read sees (and records) hand edits
            exists = True
        except NotFoundError:
            exists = False
        versions = history.versions(note_id)
        if not exists and not versions:
            raise NotFoundError("note", note_id)
        return {
            "id": note_id,
            "exists": exists,
            "keep": history.keep,
            "versions": [v.to_dict(full=False) for v in versions],
        }

    return await _run(run)


@history_router.get("/{note_id}/history/{version}")
async def note_version(
    note_id: str, history: History, version: int = Path(ge=1, le=ID_MAX)
) -> dict[str, Any]:
    """One version in full: its fields, its text and `text` (fields then body, for a diff)."""
    found = await _run(history.version, note_id, version)
    return found.to_dict()


@history_router.post("/{note_id}/history/{version}/restore", response_model=RestoreResponse)
async def restore_version(
    note_id: str, history: History, store: Store, version: int = Path(ge=1, le=ID_MAX)
) -> RestoreResponse:
    """Bring a version's title, summary, text, tags and status back (a deleted note comes back
    under its id); the restore is itself a new version."""

    def run() -> RestoreResponse:
        note = store.restore_version(note_id, version)
        count = len(history.versions(note.id))
        return RestoreResponse(note=_full(store, note), restored_from=version, versions=count)

    return await _run(run)


# --- /api/memories/{id}/not-relevant: the user's word on a recalled note (issue #19) ---------


class NotRelevantRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: SearchText = Field(description="The prompt the note was recalled for.")


feedback_router = APIRouter(prefix="/api/memories", tags=["memories"])


@feedback_router.post("/{note_id}/not-relevant")
async def not_relevant(
    note_id: str, body: NotRelevantRequest, feedback: Feedback, store: Store
) -> dict[str, Any]:
    """The note was recalled for `prompt` and did not belong there: from now on prompts like
    it (the same words, mostly) do not get it injected; it stays searchable (docs/search.md,
    "Usage and feedback")."""

    def run() -> dict[str, Any]:
        store.get(note_id)  # an unknown note: 404
        feedback.mark_not_relevant(note_id, body.prompt)
        return {"id": note_id, "not_relevant_for": feedback.marks(note_id)}

    return await _run(run)
