"""The user's word on recalled notes: "not relevant to this prompt" (issue #19).

The chat page's "Memory used" list has a button beside each recalled note; it stores (the
prompt, its words, the note id) in the state database (`mem_feedback`, SQLite or PostgreSQL).
From then on a prompt similar to that one does not get that note injected: `MemoryLoop` leaves
the notes `excluded_for(prompt)` returns out of its recall, as it leaves out the notes of the
injection window. The note stays searchable, and other prompts still recall it.

Similar: the prompts' words (Latin words of two letters or more, Chinese as character pairs,
`episodes.observation_terms`) overlap with a Dice coefficient (2|A∩B| / (|A|+|B|)) of at
least `SIMILAR` (0.5), so "how big is the db pool" and "how big is the db pool now?" are one
prompt (0.92), as are 连接池多大 and 连接池现在多大 (0.6), while "db pool timeout in prod" is
another (0.36). Words, not vectors: the hook processes that assemble a recall
load no encoder, and the rule is the same on both databases.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from errors import InvalidInputError
from memory._text import shorten
from memory.backend import StateBackend
from memory.loop.episodes import observation_terms

SIMILAR: Final = 0.5
"""Dice coefficient of two prompts' words from which they count as the same question."""
KEEP: Final = 500
"""The most recent marks that are compared with a prompt (older ones are forgotten)."""
PROMPT_CHARS: Final = 500


def prompt_words(prompt: str) -> frozenset[str]:
    return frozenset(observation_terms(prompt, limit=40))


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Dice coefficient of two word sets (0 when either is empty)."""
    if not a or not b:
        return 0.0
    return 2 * len(a & b) / (len(a) + len(b))


class FeedbackStore:
    """`mem_feedback` over any `StateBackend`."""

    def __init__(self, db: StateBackend, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    def mark_not_relevant(self, note_id: str, prompt: str) -> None:
        """Remember that `note_id` was not relevant to `prompt` (marking again refreshes it)."""
        words = prompt_words(prompt)
        if not note_id.strip():
            raise InvalidInputError("say which note was not relevant (its id)")
        if not words:
            raise InvalidInputError("the prompt has no word to compare later prompts with")
        with self.db.write() as db:
            db.execute(
                "INSERT INTO mem_feedback(note_id, prompt, words, created) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (note_id, prompt) DO UPDATE SET created = excluded.created",
                (
                    note_id,
                    shorten(prompt, PROMPT_CHARS),
                    " ".join(sorted(words)),  # words hold no space: split() reads them back
                    self.clock(),
                ),
            )

    def excluded_for(self, prompt: str) -> frozenset[str]:
        """Ids of the notes marked not relevant to a prompt similar to this one."""
        words = prompt_words(prompt)
        if not words:
            return frozenset()
        rows = self.db.read(
            "SELECT note_id, words FROM mem_feedback ORDER BY created DESC LIMIT ?", (KEEP,)
        )
        return frozenset(
            row["note_id"]
            for row in rows
            if similarity(words, frozenset(row["words"].split(" "))) >= SIMILAR
        )

    def marks(self, note_id: str) -> list[str]:
        """The prompts a note was marked not relevant to, newest first."""
        rows = self.db.read(
            "SELECT prompt FROM mem_feedback WHERE note_id = ? ORDER BY created DESC", (note_id,)
        )
        return [row["prompt"] for row in rows]
