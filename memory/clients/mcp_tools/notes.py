"""The note tools: memory_search (notes and past sessions), memory_get (notes and sessions by
id), memory_save (new or changed), memory_deprecate. Each runs in a worker thread."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from errors import ClaudeMemoryError, InvalidInputError
from memory.clients.mcp_tools.context import ToolContext
from memory.clients.mcp_tools.schema import Arguments
from memory.history.store import HistoryStore
from memory.loop.entities import ChangeAction
from memory.loop.episodes import Episode
from memory.loop.reach import (
    person_made,
    propose_change,
    propose_save,
    review_change,
    review_save,
    waiting_answer,
)
from memory.model import ENTITY_TYPE_MAP, OWNER, Note, NoteDraft, normalize_type
from memory.search.fusion import SearchOutcome
from memory.search.ranking import check_updatable, clean_changes

BODY_LIMIT = 8000
EPISODE_MESSAGES = 200
USER_TYPES = frozenset({"preference", "identity", "habit"})


def when(timestamp: float | None) -> str:
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M") if timestamp else "-"


def episode_line(episode: Episode) -> str:
    line = f"[{episode.id}] {episode.status} · {episode.title} · {when(episode.started)}"
    if episode.summary:
        line += f" — {episode.summary}"
    return line


def search_line(outcome: SearchOutcome) -> str:
    """How the search ran, as the HTTP API says it (`mode`, `notice`)."""
    match outcome.mode:
        case "hybrid":
            how = "hybrid (keywords + vectors, any language)"
        case "vector":
            how = "vectors"
        case _:
            how = "keywords only"
    return f"(search: {how}" + (f"; {outcome.notice})" if outcome.notice else ")")


def memory_search(ctx: ToolContext, args: Arguments) -> str:
    query = args.required("query")
    all_projects = args.flag("all_projects")
    kind = args.text("type")
    note_type = normalize_type(kind) if kind else None
    asked = args.text("scope")
    scope = asked or (None if all_projects else ctx.project.scope)
    # the machine owner's session: their own notes and sessions, never a Feishu member's or a
    # group's unless a scope names them (docs/memory-format.md, "Whose a note is")
    reader = None if asked else OWNER
    store = ctx.store
    outcome = store.search_detailed(
        query, limit=args.whole("limit", 8), type=note_type, scope=scope, reader=reader
    )
    sessions: list[Episode] = []
    if note_type is None:  # past sessions have no note type: a typed search is about notes
        floor = store.config.relevance_floor  # as the notes' search above
        found = ctx.episodes.search(query, limit=10, floor=floor)
        sessions = [
            e
            for e in found
            if (all_projects or e.project == ctx.project.key) and OWNER.reads(e.scope)
        ][:5]
    # a past session and its summary note are one memory: listed once, as the session (as
    # the prompt's recall does, memory/loop/prompt.py)
    listed = {e.summary_note_id for e in sessions}
    hits = [h for h in outcome.hits if h.id not in listed]
    if not hits and not sessions:
        return f"No memories found.\n{search_line(outcome)}"
    lines = [
        f"[{h.id}] {h.type} · {h.title} — {h.summary} ({h.updated:%Y-%m-%d}, "
        f"relevance {h.relevance:.2f})"
        for h in hits
    ]
    if sessions:
        lines += ["Past sessions:", *(episode_line(e) for e in sessions)]
    lines += ["Full text: memory_get(ids).", search_line(outcome)]
    return "\n".join(lines)


def memory_get(ctx: ToolContext, args: Arguments) -> str:
    parts, read = [], []
    for item in args.texts("ids") or []:
        try:
            if item.startswith("ep_"):
                parts.append(_episode_detail(ctx, item))
                continue
            note = ctx.store.get(item)
        except ClaudeMemoryError as exc:
            parts.append(f"[{item}] {exc.message}")
            continue
        parts.append(note.detail_text(BODY_LIMIT))
        read.append(note.id)
    if read:
        ctx.store.record_access(read)  # a note read in full is a use: it ranks higher
    return "\n\n---\n\n".join(parts)


def _episode_detail(ctx: ToolContext, episode_id: str) -> str:
    episodes = ctx.episodes
    episode = episodes.get(episode_id)
    lines = [episode_line(episode), ""]
    for m in episodes.messages(episode.id, limit=EPISODE_MESSAGES):
        head = f"#{m.id} {m.role}" + (f"/{m.kind}" if m.role == "observation" else "")
        lines.append(f"{head} · {when(m.created)}: {m.title or ''}".rstrip(": "))
        lines.append(m.content)
    return "\n".join(lines)


def _default_scope(ctx: ToolContext, kind: str) -> str:
    key = kind.strip().lower()
    mapped = ENTITY_TYPE_MAP.get(key, key)
    return "user" if key in USER_TYPES or mapped in USER_TYPES else ctx.project.scope


def memory_save(ctx: ToolContext, args: Arguments) -> str:
    if "id" in args:
        return _update(ctx, args)
    if "content" not in args:
        raise InvalidInputError("content: Field required (or give the id of a note to change)")
    kind = args.text("type") or "general"
    draft = NoteDraft(
        content=args.required("content"),
        title=args.text("title"),
        summary=args.text("summary"),
        type=kind,
        scope=args.text("scope") or _default_scope(ctx, kind),
        tags=tuple(args.texts("tags") or ()),
        importance=args.number("importance", 0.5) or 0.0,
        source=f"mcp:{ctx.project.name}",
        supersedes=args.text("supersedes"),
    )
    waits = review_save(draft.tags)
    if waits is None and draft.supersedes:
        # replacing a note changes it: the same reach as an edit
        old, persons = _read_target(ctx, draft.supersedes)
        waits = ctx.budget(review_change(old, persons=persons))
    if waits is not None:
        return waiting_answer(propose_save(ctx.pending, draft, waits, source=ctx.proposer()))
    # a note that contradicts an older one says so: the user chooses which to keep
    return ctx.store.save(draft).notice()


def _update(ctx: ToolContext, args: Arguments) -> str:
    note_id = args.required("id")
    if "supersedes" in args:
        raise InvalidInputError("supersedes: only for a new note (leave out id)")
    changes: dict[str, Any] = {
        key: args.given[key]
        for key in ("title", "summary", "type", "scope", "tags", "importance")
        if key in args
    }
    if "content" in args:
        changes["body"] = args.required("content")
    # the store's own checks first: a change that cannot be made is refused, not proposed
    check_updatable(changes)
    clean_changes(dict(changes), max_note_bytes=ctx.store.config.max_note_bytes)
    return _change(
        ctx,
        "update",
        note_id,
        changes,
        lambda: ctx.store.update(note_id, **changes),
        lambda note: f"Updated [{note.id}] {note.title}.",
    )


def memory_deprecate(ctx: ToolContext, args: Arguments) -> str:
    note_id = args.required("id")
    by = args.text("superseded_by")
    if by:
        return _change(
            ctx,
            "supersede",
            note_id,
            {"by": by},
            lambda: ctx.store.supersede(note_id, by),
            lambda _note: f"[{note_id}] is now superseded by [{by}].",
        )
    reason = args.text("reason")
    return _change(
        ctx,
        "deprecate",
        note_id,
        {"reason": reason},
        lambda: ctx.store.deprecate(note_id, reason),
        lambda _note: f"[{note_id}] is deprecated; search leaves it out from now on.",
    )


def _read_target(ctx: ToolContext, note_id: str) -> tuple[Note, bool]:
    """The note a change is about, and whether the person wrote or confirmed it."""
    note = ctx.store.get(note_id)
    return note, person_made(note, HistoryStore(ctx.state).latest(note.id))


def _change(
    ctx: ToolContext,
    action: ChangeAction,
    note_id: str,
    change: dict[str, Any],
    apply: Callable[[], Note],
    done: Callable[[Note], str],
) -> str:
    """A change of an existing note, made now or proposed to the person (memory.loop.reach)."""
    note, persons = _read_target(ctx, note_id)
    waits = ctx.budget(review_change(note, change if action == "update" else None, persons=persons))
    if waits is not None:
        proposal = propose_change(ctx.pending, action, note, change, waits, source=ctx.proposer())
        return waiting_answer(proposal)
    try:
        return done(apply())
    except BaseException:
        ctx.give_back()
        raise
