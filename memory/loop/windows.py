"""Injection windows: what one session was given lately, so it is not given again.

A window belongs to one session key (a chat conversation id, or `<client>:<session id>` for
Claude Code and Codex): its turn count, the ids retrieved last turn (for the topic-change rule)
and the ids injected in the last `WINDOW_TURNS` turns. `StateWindows` keeps them in the memory
state database (`<home>/state.db` or PostgreSQL), so a hook process (a new process per call) and
a restarted app both find them; `MemoryWindows` keeps them in this process (tests).

Clearing a window (compaction, the end of an episode) lets everything be injected again and
makes the next prompt a first turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from memory._record import record
from memory.loop.recall import WINDOW_TURNS

if TYPE_CHECKING:
    from memory.backend import StateBackend


@record
class Window:
    """A session's dedup window."""

    turn: int
    """Turns completed so far (0: the next prompt is the first, or the first after a clear)."""
    previous: tuple[str, ...]
    """What the last turn retrieved (injected or not)."""
    recent: frozenset[str]
    """What was injected in the last `WINDOW_TURNS` turns (the session-start brief counts)."""
    started: bool = False
    """Something was saved since the window was last cleared (the brief was given)."""


EMPTY = Window(0, (), frozenset(), False)


class WindowStore(Protocol):
    """Where windows live. `save` records turn `turn` (its injected ids, its retrieved ids)."""

    def load(self, key: str) -> Window: ...

    def save(
        self, key: str, turn: int, previous: Sequence[str], injected: Sequence[str]
    ) -> None: ...

    def clear(self, key: str) -> None: ...


class MemoryWindows:
    """Windows in this process only."""

    def __init__(self) -> None:
        self._turns: dict[str, tuple[int, tuple[str, ...]]] = {}
        self._injected: dict[str, dict[str, int]] = {}

    def load(self, key: str) -> Window:
        if key not in self._turns:
            return EMPTY
        turn, previous = self._turns[key]
        injected = self._injected.get(key, {})
        recent = frozenset(i for i, at in injected.items() if at > turn - WINDOW_TURNS)
        return Window(turn, previous, recent, True)

    def save(self, key: str, turn: int, previous: Sequence[str], injected: Sequence[str]) -> None:
        self._turns[key] = (turn, tuple(previous))
        kept = self._injected.setdefault(key, {})
        kept.update(dict.fromkeys(injected, turn))
        for note_id in [i for i, at in kept.items() if at <= turn - WINDOW_TURNS]:
            del kept[note_id]

    def clear(self, key: str) -> None:
        self._turns.pop(key, None)
        self._injected.pop(key, None)


class StateWindows:
    """Windows in the memory state database (tables `mem_turns`, `mem_injections`)."""

    def __init__(self, db: StateBackend) -> None:
        self.db = db

    def load(self, key: str) -> Window:
        rows = self.db.read("SELECT turn, previous FROM mem_turns WHERE key = ?", (key,))
        if not rows:
            recent = self.db.read("SELECT note_id FROM mem_injections WHERE key = ?", (key,))
            return Window(0, (), frozenset(r["note_id"] for r in recent), False)
        turn = int(rows[0]["turn"])
        previous = tuple(json.loads(rows[0]["previous"] or "[]"))
        recent = self.db.read(
            "SELECT note_id FROM mem_injections WHERE key = ? AND turn > ?",
            (key, turn - WINDOW_TURNS),
        )
        return Window(turn, previous, frozenset(r["note_id"] for r in recent), True)

    def save(self, key: str, turn: int, previous: Sequence[str], injected: Sequence[str]) -> None:
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO mem_turns(key, turn, previous) VALUES (?, ?, ?) ON CONFLICT(key)"
                " DO UPDATE SET turn = excluded.turn, previous = excluded.previous",
                (key, turn, json.dumps(list(previous))),
            )
            conn.executemany(
                "INSERT INTO mem_injections(key, note_id, turn) VALUES (?, ?, ?)"
                " ON CONFLICT(key, note_id) DO UPDATE SET turn = excluded.turn",
                [(key, note_id, turn) for note_id in injected],
            )
            conn.execute(
                "DELETE FROM mem_injections WHERE key = ? AND turn <= ?",
                (key, turn - WINDOW_TURNS),
            )

    def clear(self, key: str) -> None:
        with self.db.write() as conn:
            conn.execute("DELETE FROM mem_injections WHERE key = ?", (key,))
            conn.execute("DELETE FROM mem_turns WHERE key = ?", (key,))
