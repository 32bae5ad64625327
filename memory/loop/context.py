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

SUMMARY_CHARS: Final = 120


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
) -> list[ContextEntry]:
    """The notes' lines, most relevant first, within `budget_tokens` (a line and its newline
    count). `exclude_ids` lets a caller skip notes injected in recent turns; `floor` is the
    relevance a hit needs (None: the search's own floor). `unasked`: the lines go into a
    prompt nobody asked to search, so a hit also needs the prompt to be about the person's own
    world (`memory.loop.recall.own_world`, with `memory.loop.personal` when it can tell)."""
    budget = budget_tokens
    if budget <= 0:
        return []
    if query and query.strip():
        hits = store.search(query, limit=limit, scope=scope, record_access=False, floor=floor)
        # after the search: the probe reads the query vector it left in the cache
        about = own_world(query, scope, read_prompt(store, query)) if unasked and hits else None
        found = [
            (h.id, h.type, h.title, h.summary, h.tags, h.score)
            for h in hits
            if not (h.path == PROFILE_PATH and _untouched_profile(store, h.id))
            and (about is None or about(f"{h.title}\n{h.summary}\n{h.snippet}", h.scope))
        ]
    else:
        found = [
            (n.id, n.type, n.title, n.summary, n.tags, score)
            for n, score in store.top_notes(limit=limit, scope=scope)
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


def _untouched_profile(store: MemoryBackend, note_id: str) -> bool:
    """The profile file as created (headings only): its headings match prompts about the user
    ("communication style") at full relevance, yet it says nothing, so it is never a line.
    Read only when the profile is among the hits."""
    try:
        return is_profile_skeleton(store.get(note_id))
    except ClaudeMemoryError:  # gone or unreadable since the search: no line either way
        return True
