"""A turn's live reply: the shape the bridge drives (`LiveReply`) and its one final card.

Two replies have it: `progress.TurnReply` (a progress card patched in place, then the answer)
and `stream.StreamReply` (a CardKit card the answer streams into, `TurnReply` as its fallback).
The bridge opens one per turn, feeds it the turn's events, ends it with `finish_turn` (or
`finish` for an error, `withdraw` for a recalled message) and reads the delivery fields after
the turn to settle what did not arrive (bridge/feishu/turns.py). Both end on the same final
card, built here once: header by status, error text cleaned, the answer within the documented
limits, the tool trace and the footer on the last card.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from bridge.render import answer_cards, footer_element, trace_panel
from bridge.strings import Locale, t
from storage.public_text import clean_error, without_paths

if TYPE_CHECKING:
    from agent.events import TurnEvent, TurnResult
    from agent.replies import TurnStatus


class LiveReply(Protocol):
    """One turn's answer as the bridge sees it, whatever shows it."""

    sent_ids: list[str]

    @property
    def finished(self) -> bool:
        """A final state was written (or attempted): False after a cancel before any."""
        ...

    async def __aenter__(self) -> LiveReply: ...

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None: ...

    async def on_event(self, event: TurnEvent) -> None:
        """The run_agent event sink."""
        ...

    async def withdraw(self, markdown: str) -> None:
        """End without an answer (the message was recalled)."""
        ...

    async def finish_turn(self, result: TurnResult) -> None:
        """The final state from the turn's result."""
        ...

    async def finish(
        self,
        markdown: str,
        *,
        is_error: bool = False,
        status: TurnStatus | None = None,
        steps: tuple[dict[str, str], ...] | None = None,
        footer: dict[str, Any] | None = None,
    ) -> None:
        """The final state from a text (an error, a command's answer)."""
        ...

    # What the bridge reads after finish(), to hand what did not arrive to the outbox.
    @property
    def delivered(self) -> bool:
        """The answer's first part arrived."""
        ...

    @property
    def final(self) -> list[dict[str, Any]] | None:
        """The cards finish() was asked to write."""
        ...

    @property
    def pending_from(self) -> int | None:
        """The first of `final` not delivered when the platform failed mid-answer."""
        ...

    @property
    def card_left_open(self) -> str | None:
        """A progress card whose final PATCH failed (still "working")."""
        ...

    @property
    def card_id(self) -> str | None:
        """The message a late first card may be patched into, if any."""
        ...


@dataclass(slots=True)
class Step:
    """One tool step of a turn as a card shows it."""

    name: str
    summary: str
    status: str


# The final card's header per turn status: a stopped turn is not an error.
_HEADERS: dict[str, tuple[str | None, str]] = {
    "completed": (None, "blue"),
    "stopped": ("stopped_title", "grey"),
    "timed_out": ("error_title", "red"),  # the time limit cut the answer short: a failure
    "failed": ("error_title", "red"),
}


def header_for(status: str, locale: Locale = "zh") -> tuple[str | None, str]:
    """The final card's header title and colour for a turn status."""
    key, template = _HEADERS.get(status, _HEADERS["failed"])
    return (t(key, locale) if key else None), template


def final_tail(
    seen: Iterable[Step],
    steps: tuple[dict[str, str], ...] | None,
    footer: dict[str, Any] | None,
    locale: Locale,
) -> list[dict[str, Any]]:
    """What ends a turn's final card: the tool trace (`steps`, default: the steps the reply
    `seen`) and the footer. A step's detail is the policy's or the tool's text: no server
    paths in a card."""
    if steps is None:
        steps = tuple({"name": s.name, "summary": s.summary, "status": s.status} for s in seen)
    trace = trace_panel(
        [{**s, "detail": without_paths(s.get("detail", ""))} for s in steps], locale
    )
    return [e for e in (trace, footer) if e is not None]


@dataclass(frozen=True, slots=True)
class FinalAnswer:
    """What a finished turn shows: the text (cleaned if not a completed answer), its status,
    the header, the tail of the last card, and the cards within the documented limits."""

    markdown: str
    status: TurnStatus
    title: str | None
    template: str
    tail: list[dict[str, Any]]
    cards: list[dict[str, Any]]


def final_answer(
    markdown: str,
    *,
    is_error: bool,
    status: TurnStatus | None,
    seen: Iterable[Step],
    steps: tuple[dict[str, str], ...] | None,
    footer: dict[str, Any] | None,
    locale: Locale,
) -> FinalAnswer:
    """The one final card of a turn, for both replies. `status` picks the header (default:
    failed when `is_error`); `steps` default to the tool steps the reply `seen`."""
    status = status or ("failed" if is_error else "completed")
    if status != "completed":
        markdown = clean_error(markdown)  # error texts: no server path, no URL credential
    tail = final_tail(seen, steps, footer, locale)
    title, template = header_for(status, locale)
    cards = [
        c.card
        for c in answer_cards(markdown, title=title, template=template, tail=tail, locale=locale)
    ]
    return FinalAnswer(markdown, status, title, template, tail, cards)


def turn_footer(started: float, result: TurnResult, now: float | None = None) -> dict[str, Any]:
    """The final card's footer: the time the turn took since `started` (monotonic) and its
    cost."""
    elapsed = (time.monotonic() if now is None else now) - started
    return footer_element(elapsed, result.cost_usd)


def unfinished_text(exc_type: object, locale: Locale) -> tuple[str, TurnStatus | None]:
    """The final text of a reply left without one when its turn raised or was cancelled (the
    card never stays "working"): (text, status)."""
    stopped = exc_type is asyncio.CancelledError
    return t("shutting_down" if stopped else "internal_error", locale), (
        "stopped" if stopped else None
    )
