"""Index-first context: the notes a prompt's recall lists, as compact lines within a budget.

The model first sees ids, types, titles and one-line summaries, and opens a note only when it
needs the details. `memory.loop.prompt` assembles these lines (with the brief, past sessions, the
window and the reminders) into what every front door injects.

Token estimate (`_text.estimate_tokens`): each CJK character counts as one token, any other
text as one token per four characters, rounded up. It errs on the high side for Chinese, so
a listing never exceeds the budget of a real tokenizer by much.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Final

from errors import ClaudeMemoryError
from memory import _text
from memory._record import record
from memory.loop.personal import read_prompt
from memory.loop.recall import is_profile_skeleton, own_world
from memory.notes.files import PROFILE_PATH

if TYPE_CHECKING:
    from memory.backend import MemoryBackend
    from memory.model import Reader

SUMMARY_CHARS: Final = 120
PERSONAL_FLOOR_SHARE: Final = 0.5
"""A prompt the probes read as about the person's own world (`memory.loop.personal`) gets its
notes injected from this share of the inject floor (0.25 of the default 0.5): the probes already
keep general prompts out, and the floor had become what kept the right note from 28 % of the life
set's related prompts (relevance 0.2-0.5 for most of them). There it took the gold note injected
through the chat from 61 % to 83 % (at 0.7 of the floor: 74 %), unrelated prompts given a note
unchanged (docs/retrieval.md). A note of the session's own project that comes in only because
the prompt reads as its work keeps the whole floor."""


@record
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
    floor: float | None = None,
    unasked: bool = False,
    reader: Reader | None = None,
) -> list[ContextEntry]:
    """The notes' lines, most relevant first, within `budget_tokens` (a line and its newline
    count). `exclude_ids` lets a caller skip notes injected in recent turns; `floor` is the
    relevance a hit needs (None: the search's own floor). `unasked`: the lines go into a
    prompt nobody asked to search, so a hit also needs the prompt to be about the person's own
    world (`memory.loop.recall.own_world`, with `memory.loop.personal` when it can tell).
    `reader`: only the notes of the scopes it reads (a chat member's turn)."""
    budget = budget_tokens
    if budget <= 0:
        return []
    if query and query.strip():
        # unasked, a prompt the probes read as the person's own needs less of each hit (the
        # search is made at the lower floor, the rest held to `floor` below)
        lowered = _personal_floor(store, floor) if unasked else floor
        hits = store.search(
            query, limit=limit, scope=scope, record_access=False, floor=lowered, reader=reader
        )
        # after the search: the probe reads the query vector it left in the cache
        reading = read_prompt(store, query) if unasked and hits else None
        about = own_world(query, scope, reading) if unasked and hits else None
        personal = reading is not None and reading.personal
        found = [
            (h.id, h.type, h.title, h.summary, h.tags, h.score)
            for h in hits
            if not (h.path == PROFILE_PATH and _untouched_profile(store, h.id))
            and (floor is None or personal or h.relevance >= floor)
            and (about is None or about(f"{h.title}\n{h.summary}\n{h.snippet}", h.scope))
        ]
    else:
        found = [
            (n.id, n.type, n.title, n.summary, n.tags, score)
            for n, score in store.top_notes(limit=limit, scope=scope, reader=reader)
            if not (n.path == PROFILE_PATH and is_profile_skeleton(n))
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


def _personal_floor(store: MemoryBackend, floor: float | None) -> float | None:
    """The floor a prompt about the person's own world injects at: `PERSONAL_FLOOR_SHARE` of
    the inject floor, never below the search floor."""
    if floor is None:
        return None
    return max(floor * PERSONAL_FLOOR_SHARE, store.config.relevance_floor)


def _untouched_profile(store: MemoryBackend, note_id: str) -> bool:
    """The profile file as created (headings only): its headings match prompts about the user
    ("communication style") at full relevance, yet it says nothing, so it is never a line.
    Read only when the profile is among the hits."""
    try:
        return is_profile_skeleton(store.get(note_id))
    except ClaudeMemoryError:  # gone or unreadable since the search: no line either way
        return True
