"""What every memory backend does the same way, written once: save (with dedup and
supersession), update, the search entry point, notes ranked without a query, stats and the
vector chores.

`StoreCore` is the half of `MemoryBackend` that is algorithm; a backend subclasses it and
answers a few questions in its own SQL and lifecycle: `memory.sqlite.store.MemoryStore`
(markdown files as the truth, a SQLite index) and `memory.postgres.store.PostgresMemoryStore`
(the notes in PostgreSQL). The search algorithm itself is `memory.search.engine`; a save's
locked step (`save_locked`) runs over `SaveQueries`, answered inside the backend's writer
lock or transaction.

Every committed change passes here on its way out (`save`, `update`, `supersede`, `deprecate`,
`delete`, `restore_version`, and the SQLite store's sync for hand edits), so this is where a
note's history is recorded (`memory.notes.changes`, when a `HistoryRecorder` is attached).
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Protocol, Self

from errors import InvalidInputError, NotFoundError
from memory import _text
from memory._record import record
from memory.config import MemoryConfig
from memory.model import (
    TYPE_PROFILES,
    Note,
    NoteDraft,
    Reader,
    SaveResult,
    SearchHit,
    SortKey,
    normalize_sort,
    parse_datetime,
    utcnow,
)
from memory.notes.capture import sanitize
from memory.notes.changes import (
    HAND_EDIT,
    ChangeKind,
    ChangeSource,
    HistoryRecorder,
    current_source,
    infer_source,
    kind_of_update,
    snapshot_of,
)
from memory.notes.files import note_from_draft, render_note
from memory.search import bilingual
from memory.search.engine import SearchQueries
from memory.search.filters import Filters
from memory.search.fusion import DEFAULT_WEIGHTS, FusionWeights, SearchMode, SearchOutcome
from memory.search.plan import QueryVector, QueryVectors, SearchPlan, plan_search
from memory.search.ranking import (
    check_limit,
    check_offset,
    check_updatable,
    clean_changes,
    rank_rows,
    rederived,
)
from memory.search.vectors import (
    PendingNote,
    embed_pending,
    encoder_stats,
    require_encoder,
)
from memory.search.versions import (
    SEARCHED_STATUSES,
    asks_about_now,
    asks_about_the_past,
    by_date_when_close,
    current_first,
)

if TYPE_CHECKING:  # loaded with an encoder: a keyword-only hook process never needs it
    from memory.encoders.models import Encoder

log = logging.getLogger(__name__)

ProgressFn = Callable[[str, int, int], None]


# --- the write path --------------------------------------------------------------------------


def draft_note(
    draft: NoteDraft, now: datetime, max_note_bytes: int, adapt: Callable[[Note], Note] | None
) -> tuple[Note, str]:
    """A draft made a note (sanitized; `adapt`: what the backend must change to hold it) and
    its file text; refused when larger than `max_note_bytes`."""
    note = note_from_draft(draft, now=now)
    if adapt is not None:
        note = adapt(note)
    text = render_note(note)
    if len(text.encode("utf-8")) > max_note_bytes:
        raise InvalidInputError(
            f"note is larger than {max_note_bytes} bytes; split it or link to a file"
        )
    return note, text


class DuplicateQueries(Protocol):
    """What dedup asks about the active, unexpired notes of the new note's scope (a row: a
    mapping with at least `id`, `path`, `type` and `body`)."""

    def same_content(self, content_hash: str) -> Any | None:
        """The oldest such note with this content hash."""
        ...

    def sharing_bands(self, bands: list[int]) -> list[Any]:
        """Up to 10 such notes sharing keys (`memory._text.dedup_bands`) with the new note,
        most shared first."""
        ...


@record
class Duplicate:
    """The new note says what this active note says: it is refreshed instead."""

    row: Any


@record
class Conflict:
    """The new note makes a different claim about what this active note (same scope and
    type) says. `confident`: it also says it changed something ("现在", "now", "改成"): the
    older note is replaced at once; otherwise both are kept and the choice is the user's."""

    row: Any
    reason: str
    confident: bool = False


def find_duplicate(
    queries: DuplicateQueries,
    *,
    body: str,
    note_type: str,
    content_hash: str,
    bands: list[int],
    threshold: float,
) -> Duplicate | Conflict | None:
    """The note a new one duplicates or contradicts, by its text alone (a save never waits on
    the encoder; what vectors can tell is judged once the note has them, `check_embedded`):

    1. the same content (hash of the normalised text);
    2. among the notes sharing keys, one that says the same (`_text.near_duplicate`: the same
       skeleton, or, with `threshold` < 1, skeletons overlapping at least `threshold`);
    3. among those notes, one of the same type the new note contradicts
       (`_text.contradicts`), confidently when the new note says it changed something.

    A negation or a number that differs never makes a duplicate (`_text.meaning_differs`),
    however close the texts: "port 5432" and "port 5433" are two claims."""
    exact = queries.same_content(content_hash)
    if exact is not None:
        return Duplicate(exact)
    new = _text.Fingerprint(body)  # once: compared with up to ten notes
    rows = queries.sharing_bands(bands) if bands else []
    candidates = [(row, _text.Fingerprint(row["body"])) for row in rows]
    best, best_sim = None, -1.0
    for row, old in candidates:
        if _text.says_the_same(old, new, threshold) and old.similarity(new) > best_sim:
            best, best_sim = row, old.similarity(new)
    if best is not None:
        return Duplicate(best)
    for row, old in candidates:
        if row["type"] == note_type and _text.makes_another_claim(old, new, threshold):
            said = _text.change_words(body) - _text.change_words(old.text)
            return Conflict(row, _text.how_meaning_differs(old.text, body), bool(said))
    return None


class SaveQueries(DuplicateQueries, Protocol):
    """A save's locked step, answered inside the backend's writer lock or transaction."""

    def exists(self, note_id: str) -> bool: ...

    def row_to_supersede(self, note_id: str) -> Any | None:
        """The note a draft supersedes (locked until the end of the save), or None."""
        ...

    def refresh(self, row: Any, now: datetime) -> SaveResult:
        """A duplicate found: its `updated` becomes now and its access count grows by one."""
        ...

    def insert(self, note: Note) -> Note:
        """Store the new note; the note as placed (its path). Its vectors come later
        (background embedding, `sync_vectors`)."""
        ...

    def mark_superseded(self, row: Any, new_id: str, now: datetime) -> None: ...


def save_locked(
    queries: SaveQueries,
    draft: NoteDraft,
    note: Note,
    *,
    content_hash: str,
    bands: list[int],
    threshold: float,
    now: datetime,
) -> SaveResult:
    """Refuse a taken id, find the superseded note, then refresh a duplicate or insert the
    new note and mark the superseded one (a draft that supersedes is never deduplicated).
    A new note that contradicts an older one is inserted and says so (`conflicts_with`), and
    replaces it at once when it says it changed something (`replaced`); one that names what
    it supersedes has said what it replaces."""
    if draft.id and queries.exists(note.id):
        raise InvalidInputError(f"a note with id {note.id!r} already exists")
    old = None
    if draft.supersedes:
        old = queries.row_to_supersede(draft.supersedes)
        if old is None:
            raise NotFoundError("note", draft.supersedes)
    # A retired note (a restored deprecated or superseded version, an imported one) makes no
    # claim: it neither repeats nor contradicts the active notes it is compared with.
    found = (
        find_duplicate(
            queries,
            body=note.body,
            note_type=note.type,
            content_hash=content_hash,
            bands=bands,
            threshold=threshold,
        )
        if note.status == "active"
        else None
    )
    if isinstance(found, Duplicate) and old is None:
        return queries.refresh(found.row, now)
    placed = queries.insert(note)
    if old is not None:
        queries.mark_superseded(old, placed.id, now)
        return SaveResult(id=placed.id, deduplicated=False, path=placed.path)
    if isinstance(found, Conflict):
        other = str(found.row["id"])
        if found.confident:  # it says it changed something: the older note is replaced now
            queries.mark_superseded(found.row, placed.id, now)
        return SaveResult(
            id=placed.id,
            deduplicated=False,
            path=placed.path,
            replaced=other if found.confident else None,
            conflicts_with=None if found.confident else other,
            conflict_reason=found.reason,
        )
    return SaveResult(id=placed.id, deduplicated=False, path=placed.path)


def changed(
    old: Note, changes: dict[str, Any], relpath: str, *, extra: dict[str, Any] | None
) -> dict[str, Any]:
    """An update's changes to `old`: title/summary that were derived from the old body follow
    a new body; `extra` fields join the note's."""
    if "body" in changes:
        changes = rederived(old, changes, relpath)
    if extra:
        changes = {**changes, "extra": {**old.extra, **extra}}
    return changes


def note_from_row(
    row: Any, *, tags: Iterable[str], access_count: int, extra: dict[str, Any] | None = None
) -> Note:
    """A note from a backend's row (dates as ISO text or timestamps)."""
    return Note(
        id=row["id"],
        title=row["title"],
        type=row["type"],
        scope=row["scope"],
        tags=tuple(tags),
        created=parse_datetime(row["created"]) or utcnow(),
        updated=parse_datetime(row["updated"]) or utcnow(),
        summary=row["summary"],
        importance=float(row["importance"]),
        status=row["status"],
        superseded_by=row["superseded_by"],
        expires_at=parse_datetime(row["expires_at"]),
        source=row["source"],
        access_count=access_count,
        body=row["body"],
        path=row["path"],
        extra=extra or {},
    )


RELATE_CANDIDATES: Final = 6
"""Nearest active notes of its scope a newly embedded note is compared with."""
UNCHECKED_MOST: Final = 10_000
"""Saved notes waiting for their vectors' check that a process remembers (the oldest are
forgotten past it: a process that saves without ever embedding)."""


RECENT_UNCHECKED_SECONDS: Final = 86_400.0
"""A note saved elsewhere (another process, before a restart) and embedded here is checked if
it was created within this long."""


class Unchecked:
    """Ids of notes this process saved whose vectors have not been checked yet, oldest first.
    Notes saved elsewhere are checked by their age instead (`RECENT_UNCHECKED_SECONDS`)."""

    def __init__(self) -> None:
        self._ids: dict[str, None] = {}
        self._lock = threading.Lock()

    def wait_for_vectors(self, note_id: str) -> None:
        with self._lock:
            self._ids[note_id] = None
            while len(self._ids) > UNCHECKED_MOST:
                del self._ids[next(iter(self._ids))]

    def take(self, note_id: str) -> bool:
        """Whether the note was waiting (it no longer is)."""
        with self._lock:
            if note_id not in self._ids:
                return False
            del self._ids[note_id]
            return True


# --- the store -------------------------------------------------------------------------------


class CoreVectors(Protocol):
    """What the shared code asks of a backend's vectors."""

    def pending(self, model: str, limit: int | None = None) -> builtins.list[PendingNote]: ...

    def write(self, model: str, items: Sequence[tuple[PendingNote, Any]]) -> int: ...

    def has_vectors(self, model: str) -> bool: ...

    def prune(self, model: str | None = None) -> int: ...

    def clear(self) -> None: ...


@record
class Counts:
    """What `stats` counts, alike on every backend."""

    total: int
    by_type: dict[str, int]
    by_scope: dict[str, int]
    by_status: dict[str, int]
    expired: int
    broken_front_matter: int = 0
    pending_access_counts: int = 0


class StoreCore:
    """The algorithm half of a `MemoryBackend`: a subclass sets `config`, `encoder`,
    `vectors`, `fusion` and `_query_vectors` and answers the hooks below."""

    config: MemoryConfig
    encoder: Encoder | None
    vectors: CoreVectors
    fusion: FusionWeights
    _query_vectors: QueryVectors
    _clock: Callable[[], datetime]
    history: HistoryRecorder | None

    # --- hooks -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        """Raise when the store cannot be used (closed)."""

    def _before_read(self, scope: str | None = None) -> None:
        """Bring what reads see up to date (the SQLite index with hand edits); `scope`: the
        read shows only that scope's notes (and the user's)."""
        self._check_open()

    def search_queries(self, filters: Filters) -> AbstractContextManager[SearchQueries]:
        """What the search engine asks of this backend for a search under `filters` (one
        read: a connection, a transaction). The contract suite checks each backend's."""
        raise NotImplementedError

    def _ranked_hits(
        self, plan: SearchPlan, filters: Filters, limit: int, now_ts: float, record: bool
    ) -> builtins.list[SearchHit]:
        """`memory.search.engine.rank` over this backend's queries, as hits; each hit counts
        as an access of its note when `record`."""
        raise NotImplementedError

    def _save(self, draft: NoteDraft) -> SaveResult:
        """Write a new note or refresh its duplicate (`save_locked` in the backend's lock)."""
        raise NotImplementedError

    def _update(
        self, note_id: str, clean: dict[str, Any], extra: dict[str, Any] | None = None
    ) -> Note:
        """Apply cleaned changes (and `extra` front matter fields) to a note, `updated` now."""
        raise NotImplementedError

    def _delete(self, note_id: str) -> None:
        """Remove the note (NotFoundError when unknown)."""
        raise NotImplementedError

    def _top_rows(self, filters: Filters, order: SortKey, limit: int) -> Iterable[tuple[Any, Note]]:
        """(ranking row, note) of the first `limit` notes passing `filters` by `order`."""
        raise NotImplementedError

    def _counts(self, now: datetime) -> Counts:
        raise NotImplementedError

    def _index_stats(self) -> tuple[str, dict[str, Any]]:
        """(where the notes are, what the index is)."""
        raise NotImplementedError

    def _list(
        self, filters: Filters, sort: SortKey, limit: int, offset: int
    ) -> builtins.list[Note]:
        raise NotImplementedError

    def _count(self, filters: Filters) -> int:
        raise NotImplementedError

    def get(self, note_id: str) -> Note:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # --- shared ------------------------------------------------------------------------------

    def _init_core(
        self,
        config: MemoryConfig,
        clock: Callable[[], datetime] | None,
        encoder: Encoder | None,
    ) -> None:
        self.config = config
        self._clock = clock or utcnow
        # semantic search (docs/retrieval.md): optional; keyword search never needs it
        self.encoder = encoder
        self.fusion = DEFAULT_WEIGHTS
        self._query_vectors = QueryVectors()
        self.history = None
        self._unchecked = Unchecked()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _now(self) -> datetime:
        return self._clock().astimezone(UTC).replace(microsecond=0)

    # --- writes: each one recorded in the note's history ---------------------------------------

    def save(self, draft: NoteDraft) -> SaveResult:
        """Write a new note, or refresh the existing one if it is an (exact or near) duplicate
        (`save_locked`). Text is sanitized first (`<private>` spans dropped, secrets
        redacted). A duplicate changes no content, so it makes no version. A new note that
        contradicts an older one (`find_duplicate`) is saved, and with history attached a
        pending supersession links the two (`memory.history.conflicts`): the result says so."""
        if self.history is not None and draft.supersedes:
            self._catch_up(self.get(draft.supersedes))
        result = self._save(draft)
        if not result.deduplicated and self.encoder is not None:
            self._unchecked.wait_for_vectors(result.id)
        replaced = draft.supersedes or result.replaced
        if self.history is not None and not result.deduplicated:
            note = self.get(result.id)
            self._record(note, "create")
            if replaced:
                who = current_source() or infer_source(note.source)
                self._record(self.get(replaced), "supersede", source=who)
        if self.history is not None and result.conflicts_with:
            try:
                pending = self.history.propose_supersession(
                    result.id, result.conflicts_with, result.conflict_reason
                )
            except Exception:
                # the note is saved: failing now would make the caller save it twice
                log.exception(
                    "note %s conflicts with %s; the pending choice could not be recorded",
                    result.id,
                    result.conflicts_with,
                )
            else:
                result = replace(result, pending=pending)
        return result

    def update(self, note_id: str, **changes: Any) -> Note:
        """Change some fields (and/or `content`); the note is rewritten and re-indexed.

        Accepts title, summary, content (or body), type, scope, tags, importance, status,
        superseded_by, expires_at, source. Text is sanitized; `updated` is set to now.
        """
        check_updatable(changes)
        clean = clean_changes(changes, max_note_bytes=self.config.max_note_bytes)
        successor = clean.get("superseded_by")
        if successor is not None:  # a link to nothing would read as "replaced" forever
            if successor == note_id:
                raise InvalidInputError("a note cannot supersede itself")
            self.get(successor)
        if self.history is not None:
            self._catch_up(self._readable(note_id))
        note = self._update(note_id, clean)
        self._record(note, kind_of_update(clean))
        return note

    def delete(self, note_id: str) -> None:
        """Delete the note (raises NotFoundError). Its history keeps the last content, so a
        deleted note can be restored (`restore_version`)."""
        if self.history is None:
            self._delete(note_id)
            return
        before = self._readable(note_id)
        self._catch_up(before)
        self._delete(note_id)
        if before is not None:
            self._record(before, "delete")
        else:  # a file no longer read as a note: the last version that was stands for it
            who = current_source() or HAND_EDIT
            try:
                self.history.record_gone(note_id, who)
            except Exception:
                log.exception("note %s was deleted; its history could not say so", note_id)

    def attach_history(self, history: HistoryRecorder | None) -> None:
        """Record every change in `history` from now on (None: keep no history)."""
        self.history = history

    def restore_version(self, note_id: str, number: int) -> Note:
        """Bring back version `number` of a note: its title, summary, text, tags, status and
        `superseded_by` (type and scope stay as they are now: a restore changes what a note
        says and whether it counts, not where it is filed). A deleted note is saved again
        under its id and path, with everything the version held; when the version was active
        and an active note of its scope already holds the same text, that one is returned (a
        duplicate is not made twice). A deprecated or superseded version comes back so: a
        restore never undoes a "keep old" or "keep new" choice the version recorded. The
        restore is itself a new version (kind `restore`)."""
        if self.history is None:
            raise InvalidInputError(
                "this process keeps no note history; restore from the app (web page or API)"
            )
        wanted = self.history.version(note_id, number).snapshot
        try:
            current = self.get(note_id)
        except NotFoundError:
            current = None
        if current is not None:
            self._catch_up(self._readable(note_id))
            changes = {
                "title": wanted.title,
                "summary": wanted.summary,
                "body": wanted.body,
                "tags": list(wanted.tags),
                "status": wanted.status,
                "superseded_by": wanted.superseded_by,
            }
            clean = clean_changes(changes, max_note_bytes=self.config.max_note_bytes)
            note = self._update(note_id, clean)
        else:
            draft = NoteDraft(
                content=wanted.body,
                title=wanted.title,
                summary=wanted.summary,
                type=wanted.type,
                scope=wanted.scope,
                tags=wanted.tags,
                importance=wanted.importance,
                expires_at=wanted.expires_at,
                source=wanted.source,
                id=note_id,
                path=wanted.path or None,
                created=wanted.created,
                status=wanted.status,
                superseded_by=wanted.superseded_by,
            )
            note = self.get(self._save(draft).id)
        self._record(note, "restore", restored_from=number)
        return note

    def _record(
        self,
        note: Note,
        kind: ChangeKind,
        *,
        source: ChangeSource | None = None,
        restored_from: int | None = None,
        if_changed: bool = False,
    ) -> None:
        """One version of `note` as it is now. Who: `source`, else the front door that said
        (`memory.notes.changes.acting_as`), else the note's own `source` field."""
        if self.history is None:
            return
        who = source or current_source() or infer_source(note.source)
        try:
            self.history.append(
                note.id,
                kind,
                who,
                snapshot_of(note),
                restored_from=restored_from,
                if_changed=if_changed,
            )
        except Exception:
            # The change itself is committed: failing now would tell the caller it was not,
            # and a retry would make it twice. The gap is logged loudly instead.
            log.exception(
                "note %s changed (%s) but its history could not be written", note.id, kind
            )

    def _readable(self, note_id: str) -> Note | None:
        """The note as it is now, for its history; None when it cannot be read as a note (a
        file whose front matter is broken: its raw text is no version of it). Raises
        NotFoundError. Backends whose notes are always well formed need not override it."""
        return self.get(note_id)

    def _catch_up(self, before: Note | None) -> None:
        """Before a change, the note as it is now when history does not hold it yet: written
        before history was kept (`baseline`), or edited by hand where no history was attached
        (a CLI or hook process that read the file first). Nothing for an unreadable note."""
        if self.history is None or before is None:
            return
        try:
            latest = self.history.latest_digest(before.id)
        except Exception:
            log.exception("note %s: its history could not be read", before.id)
            return
        if latest is None:
            self._record(before, "baseline", if_changed=True)
        elif latest != snapshot_of(before).digest():
            self._record(before, "edit", source=HAND_EDIT, if_changed=True)

    def _saw_on_disk(self, edited: Iterable[tuple[Note, bool]], removed: Iterable[str]) -> None:
        """Notes a sync found changed on disk, not through a store: (note, is new) edited or
        added by hand, ids whose file is gone. Versions only when the content moved."""
        if self.history is None:
            return
        for note, new in edited:
            self._record(note, "create" if new else "edit", source=HAND_EDIT, if_changed=True)
        for note_id in removed:
            try:
                self.history.record_gone(note_id, HAND_EDIT)
            except Exception:
                log.exception("note %s was deleted by hand; its history could not say so", note_id)

    def list(
        self,
        type: str | None = None,
        scope: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        limit: int = 50,
        offset: int = 0,
        sort: str = "updated",
        *,
        reader: Reader | None = None,
    ) -> builtins.list[Note]:
        """Notes filtered and sorted; all statuses unless `status` is given (on SQLite the
        body is the indexed text: `get` reads a note's file). `reader`: only the notes of the
        scopes that reader reads (`memory.model.Reader`; None: every note)."""
        self._before_read()
        filters = Filters.of(type, scope, tag, status, reader=reader)
        return self._list(filters, normalize_sort(sort), check_limit(limit), check_offset(offset))

    def count(
        self,
        type: str | None = None,
        scope: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        *,
        reader: Reader | None = None,
    ) -> int:
        self._check_open()
        return self._count(Filters.of(type, scope, tag, status, reader=reader))

    def supersede(self, old_id: str, new_id: str) -> Note:
        """Mark `old_id` superseded by `new_id` (both must exist)."""
        return self.update(old_id, status="superseded", superseded_by=new_id)

    def deprecate(self, note_id: str, reason: str | None = None) -> Note:
        """Mark a note deprecated (left out of search); the reason is kept in the front
        matter as `deprecated_reason`."""
        extra = {"deprecated_reason": sanitize(reason)} if reason else None
        if self.history is not None:
            self._catch_up(self.get(note_id))
        note = self._update(note_id, {"status": "deprecated"}, extra=extra)
        self._record(note, "deprecate")
        return note

    def search(
        self,
        query: str,
        limit: int = 10,
        type: str | None = None,
        scope: str | None = None,
        include_inactive: bool = False,
        *,
        tag: str | None = None,
        record_access: bool = True,
        floor: float | None = None,
        reader: Reader | None = None,
    ) -> builtins.list[SearchHit]:
        """Ranked search (Chinese, English, mixed, identifiers): hybrid keyword + vector when
        an encoder is attached and notes have vectors, else keyword (`search_detailed` says
        which, and why).

        `scope="project:x"` also returns `user` notes (they apply to every project). Expired,
        deprecated and superseded notes are left out unless `include_inactive`. Each hit
        counts as an access of its note unless `record_access=False`. Hits whose calibrated
        relevance is below `floor` (None: `config.relevance_floor`; 0: every hit) are left
        out (docs/retrieval.md, "Relevance and the floors"). `reader`: only the notes of the
        scopes that reader reads (a chat member's turn, `memory.model.Reader`).
        """
        return self.search_detailed(
            query,
            limit,
            type,
            scope,
            include_inactive,
            tag=tag,
            record_access=record_access,
            floor=floor,
            reader=reader,
        ).hits

    def search_detailed(
        self,
        query: str,
        limit: int = 10,
        type: str | None = None,
        scope: str | None = None,
        include_inactive: bool = False,
        *,
        tag: str | None = None,
        record_access: bool = True,
        mode: SearchMode = "auto",
        floor: float | None = None,
        reader: Reader | None = None,
    ) -> SearchOutcome:
        """`search` with the mode used (`keyword`, `vector`, `hybrid`) and a `notice` when
        semantic search was wanted but could not run (encoder loading or failed, no vectors
        yet): keyword results come back then. `mode="keyword"` never touches the encoder;
        `mode="vector"` ranks by vectors alone."""
        self._before_read(scope)
        # the query vector first: encoding beside the keyword search was slower (query_vectors)
        plan = plan_search(
            query,
            mode,
            self._query_vectors,
            self.encoder,
            self.vectors.has_vectors,
            floor=self.config.relevance_floor if floor is None else floor,
        )
        if plan.empty:
            return SearchOutcome([], "keyword", plan.notice)
        limit = check_limit(limit)
        now_ts = self._now().timestamp()
        # words of the past ("去年", "used to") want the notes later ones replaced too
        # (memory.search.versions): they come back, each beside its successor
        past = not include_inactive and asks_about_the_past(query)
        filters = Filters.for_search(
            type,
            scope,
            tag,
            include_inactive=include_inactive or past,
            now_ts=now_ts,
            reader=reader,
        )
        wanted = limit * 2 if past else limit
        found = self._ranked_hits(plan, filters, wanted, now_ts, record_access)
        if past:
            found = [h for h in found if h.status in SEARCHED_STATUSES]
        if past or asks_about_now(query):
            found = by_date_when_close(found, newest=not past)
        ordered = current_first(found, past=past, pending=self._pending_successors(found))
        return SearchOutcome(ordered[:limit], plan.used, plan.notice)

    def query_vector(self, text: str) -> QueryVector | None:
        """The vector a search for `text` ranks by (from the cache when that search just ran);
        None without an encoder, while it loads or fails, or before any note has vectors."""
        self._check_open()
        vector, _ = self._query_vectors.resolve(self.encoder, self.vectors.has_vectors, text)
        return vector

    def _pending_successors(self, hits: Sequence[SearchHit]) -> dict[str, str]:
        """Pending updates among the hits (`HistoryRecorder.pending_successors`); none when
        this process keeps no history or the state database cannot answer (the order is a
        courtesy: a search never fails for it)."""
        if self.history is None or len(hits) < 2:
            return {}
        try:
            return self.history.pending_successors([h.id for h in hits])
        except Exception:
            log.warning("pending updates could not be read; search order without them")
            return {}

    def top_notes(
        self, limit: int = 50, scope: str | None = None, *, reader: Reader | None = None
    ) -> builtins.list[tuple[Note, float]]:
        """Active notes ranked without a query (type weight, recency, importance)."""
        self._before_read()
        now_ts = self._now().timestamp()
        filters = Filters.of(
            None, scope, None, None, include_user=True, active_at=now_ts, reader=reader
        )
        notes: dict[str, Note] = {}
        rows: dict[str, Any] = {}
        orders: tuple[tuple[SortKey, int], ...] = (
            ("updated", max(limit * 4, 200)),
            ("importance", max(limit * 2, 100)),
        )
        for order, count in orders:
            for row, note in self._top_rows(filters, order, count):
                rows[note.id], notes[note.id] = row, note
        ranked = rank_rows(
            ((r, 0.0) for r in rows.values()), now_ts, self.config.ranking, check_limit(limit)
        )
        return [(notes[s.row["id"]], s.score) for s in ranked]

    def stats(self) -> dict[str, Any]:
        """Counts by type, scope and status, and the state of the index."""
        self._before_read()
        counts = self._counts(self._now())
        root, index = self._index_stats()
        return {
            "total": counts.total,
            "by_type": {t: counts.by_type.get(t, 0) for t in TYPE_PROFILES},
            "by_scope": counts.by_scope,
            "by_status": counts.by_status,
            "expired": counts.expired,
            "broken_front_matter": counts.broken_front_matter,
            "pending_access_counts": counts.pending_access_counts,
            "root": root,
            "index": index,
            "encoder": encoder_stats(self.encoder, self.vectors),
        }

    # --- semantic search (docs/retrieval.md) ---------------------------------------------------

    def attach_encoder(self, encoder: Encoder | None) -> None:
        """Use `encoder` for searches and saves from now on (None: keyword search only).
        With one, searches also translate a Chinese query's words (`memory.search.bilingual`):
        its dictionary is read now, in the background, rather than by the first search."""
        self.encoder = encoder
        if encoder is not None:
            bilingual.warm_up_in_background()

    def sync_vectors(self, progress: ProgressFn | None = None, *, batch: int = 32) -> int:
        """Embed the notes whose vectors are missing or stale (blocking; needs an encoder).
        Returns how many notes were embedded; `progress("embed", done, total)`."""
        self._check_open()
        encoder = require_encoder(self.encoder)
        return embed_pending(
            self.vectors, encoder, progress, batch=batch, written=self.check_embedded
        )

    def check_embedded(self, model: str, items: Sequence[tuple[PendingNote, Any]]) -> None:
        """The checks a save leaves until its note has vectors (a save never waits on the
        encoder): for each note saved by this process and now embedded, whether it repeats or
        updates an older active note of its scope (`memory.notes.facts.judge`, on the vectors'
        cosine and the two texts). Confident cases are applied (the older note is superseded
        by the newer, its history kept); unsure ones become pending choices
        (`memory.history.conflicts`, when history is attached). Called by background embedding
        and `sync_vectors` after each batch."""
        # a long note is never folded into another by its first part
        taken = [(p, v, self._unchecked.take(p.id)) for p, v in items]
        single = [(p, v, saved_here) for p, v, saved_here in taken if len(p.chunks) == 1]
        # a note another process saved (a hook working directly, the CLI without an encoder)
        # or one saved before a restart is checked when it gets its first vectors, if new; an
        # older note re-embedded (another encoder, an edit) is not judged again. Their ages
        # come from the index in one read: a reindex re-embeds every note
        recent = self._recent([p.id for p, _, saved_here in single if not saved_here])
        for pending, vectors, saved_here in single:
            if not saved_here and pending.id not in recent:
                continue
            try:
                self._relate(pending.id, model, vectors[0])
            except Exception:  # the note is saved; a check that fails leaves it as it is
                log.exception("note %s: checking what it repeats or updates failed", pending.id)

    def _recent(self, note_ids: Sequence[str]) -> set[str]:
        """Of `note_ids`, those created within `RECENT_UNCHECKED_SECONDS`."""
        if not note_ids:
            return set()
        since = self._now().timestamp() - RECENT_UNCHECKED_SECONDS
        with self.search_queries(Filters.of(None, None, None, None)) as queries:
            rows = queries.rows_by_id(list(note_ids))
        return {
            note_id
            for note_id, row in rows.items()
            if (created := parse_datetime(row["created"])) is not None
            and created.timestamp() >= since
        }

    def _relate(self, note_id: str, model: str, vector: Any) -> None:
        from memory.notes.facts import judge  # only a process that embeds notes needs it
        from memory.search.plan import QueryVector

        try:
            note = self.get(note_id)
        except NotFoundError:
            return
        if note.status != "active":
            return
        now_ts = self._now().timestamp()
        filters = Filters.of(None, note.scope, None, None, active_at=now_ts)
        with self.search_queries(filters) as queries:
            nearest = [
                (i, c)
                for i, c in queries.nearest(QueryVector(vector, model), RELATE_CANDIDATES, filters)
                if i != note_id
            ]
            rows = queries.rows_by_id([i for i, _ in nearest])
        for other_id, cosine in nearest:
            row = rows.get(other_id)
            if row is None or row["scope"] != note.scope:
                continue
            created = parse_datetime(row["created"])
            if created is None or (created, str(row["id"])) > (note.created, note.id):
                continue  # a newer note: it is checked against this one when it is embedded
            same_type = row["type"] == note.type
            verdict = judge(str(row["body"]), note.body, cosine=float(cosine), same_type=same_type)
            if verdict.relation == "other":
                continue
            if verdict.confident:
                self.supersede(other_id, note_id)
                log.info("note %s replaces %s: %s", note_id, other_id, verdict.reason)
            elif self.history is not None:
                self.history.propose_supersession(note_id, other_id, verdict.reason)
            else:
                continue
            return

    def reindex_vectors(self, progress: ProgressFn | None = None) -> int:
        """Drop the vectors of other encoders (and of deleted notes), then embed every note
        whose vectors are missing or stale (`memory reindex --vectors`)."""
        self._check_open()
        encoder = require_encoder(self.encoder)
        self.vectors.prune(encoder.name)
        return self.sync_vectors(progress)

    def reset_vectors(self) -> dict[str, Any]:
        """Drop every note vector (all notes become pending for the encoder)."""
        self._check_open()
        require_encoder(self.encoder)
        self.vectors.clear()
        return {"cleared": True, "pending": self.count()}
