"""Which version of a fact a search lists first (`memory.search.versions`)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.model import ScoreParts, SearchHit
from memory.search.versions import asks_about_the_past, current_first, replaced_line

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


def test_deprecated_notes_come_after_every_other_and_lone_replaced_notes_keep_their_place() -> None:
    ranked = [hit("d", "deprecated"), hit("a", "superseded", "gone"), hit("x")]
    assert ids(current_first(ranked)) == ["a", "x", "d"]


def test_a_replaced_line_says_what_replaced_it_and_when_it_was_said() -> None:
    assert replaced_line(hit("a", "superseded", "b")) == " (replaced by [b]; said 2026-01-01)"
    assert replaced_line(hit("x")) == ""
