"""Which version of a fact a search lists first (`memory.search.versions`)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from memory.model import ScoreParts, SearchHit
from memory.search.versions import (
    asks_about_now,
    asks_about_the_past,
    by_date_when_close,
    current_first,
    replaced_line,
)

WHEN = datetime(2026, 1, 1, tzinfo=UTC)


def hit(note_id: str, status: str = "active", by: str | None = None) -> SearchHit:
    return SearchHit(
        id=note_id,
        title=note_id,
        type="general",
        scope="user",
        summary="",
        path=f"{note_id}.md",
        tags=(),
        status=status,  # type: ignore[arg-type]
        updated=WHEN,
        score=1.0,
        parts=ScoreParts(1.0, 1.0, 1.0, 1.0),
        superseded_by=by,
        created=WHEN,
    )


@pytest.mark.parametrize(
    ("query", "past"),
    [
        ("去年夏天我们用的是什么数据库", True),
        ("迁移前订单服务监听哪个端口？", True),
        ("what port did it use before the migration", True),
        ("which editor did I use back then", True),
        ("What did we use originally for CI?", True),
        ("订单服务现在监听哪个端口", False),
        ("what is the latest standup time", False),
        ("run the migrations before deploying", False),
        ("上次那个 flaky test 最后怎么 fix 的？", False),
    ],
)
def test_asks_about_the_past(query: str, past: bool) -> None:
    assert asks_about_the_past(query) is past


def ids(hits: list[SearchHit]) -> list[str]:
    return [h.id for h in hits]


def test_a_replaced_note_follows_what_replaced_it_and_leads_it_for_the_past() -> None:
    old, mid, new, other = (
        hit("a", "superseded", "b"),
        hit("b", "superseded", "c"),
        hit("c"),
        hit("x"),
    )
    ranked = [old, other, new, mid]
    assert ids(current_first(ranked)) == ["c", "b", "a", "x"]
    assert ids(current_first(ranked, past=True)) == ["a", "b", "c", "x"]


def test_a_pending_update_lists_the_newer_note_first_both_still_shown() -> None:
    ranked = [hit("old"), hit("x"), hit("new")]
    assert ids(current_first(ranked, pending={"old": "new"})) == ["new", "old", "x"]
    assert ids(current_first(ranked, past=True, pending={"old": "new"})) == ["old", "new", "x"]
    # a pending link to a note the search did not find changes nothing; nor one both ways
    assert ids(current_first(ranked, pending={"old": "gone"})) == ["old", "x", "new"]
    loop = {"old": "new", "new": "old"}
    assert sorted(ids(current_first(ranked, pending=loop))) == ["new", "old", "x"]


def test_deprecated_notes_come_after_every_other_and_lone_replaced_notes_keep_their_place() -> None:
    ranked = [hit("d", "deprecated"), hit("a", "superseded", "gone"), hit("x")]
    assert ids(current_first(ranked)) == ["a", "x", "d"]


def test_a_replaced_line_says_what_replaced_it_and_when_it_was_said() -> None:
    assert replaced_line(hit("a", "superseded", "b")) == " (replaced by [b]; said 2026-01-01)"
    assert replaced_line(hit("x")) == ""


@pytest.mark.parametrize(
    ("query", "now"),
    [
        ("订单服务现在监听哪个端口", True),
        ("what is the latest standup time", True),
        ("Which editor do I use these days?", True),
        ("订单服务监听哪个端口", False),
        ("knowledge of the snow", False),
    ],
)
def test_asks_about_now(query: str, now: bool) -> None:
    assert asks_about_now(query) is now


def dated(note_id: str, day: int, relevance: float) -> SearchHit:
    made = hit(note_id)
    return dataclasses.replace(
        made, created=datetime(2026, 1, day, tzinfo=UTC), relevance=relevance
    )


def test_when_close_the_date_decides_what_holds_now_or_held_before() -> None:
    # two unlinked versions of a fact, both found: the older ranks first by its words
    old, new, other, weak = (
        dated("old", 1, 0.9),
        dated("new", 20, 0.8),
        dated("other", 25, 0.3),
        dated("weak", 30, 0.9),
    )
    ranked = [old, new, other]
    assert ids(by_date_when_close(ranked, newest=True)) == ["new", "old", "other"]
    assert ids(by_date_when_close([new, old, other], newest=False)) == ["old", "new", "other"]
    # a hit far below the best keeps its place: a newer unrelated note never jumps ahead
    assert ids(by_date_when_close(ranked, newest=True))[-1] == "other"
    assert ids(by_date_when_close([weak], newest=True)) == ["weak"]
