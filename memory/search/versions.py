"""Which version of a fact a search wants: the current one, unless the query asks about the past
(pure; docs/retrieval.md, "The newest fact wins").

A note that another replaced (`status: superseded`, `superseded_by`) is left out of a search by
default: "现在订单服务监听哪个端口" must not be answered with last year's port. A query with words
of the past ("以前", "去年", "原来", "used to", "last year", "before the migration") wants the
older version too, so replaced notes come back into it and each is listed before the note that
replaced it; in any list that holds both (the page's "any status" search, a past question), the
order says which is current. A deprecated note is never current: it comes after every active one.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

from memory._patterns import lazy_pattern

if TYPE_CHECKING:
    from memory.model import SearchHit

_PAST_ZH: Final = (
    "以前", "之前", "原来", "原先", "过去", "去年", "前年", "当时", "曾经", "早先", "最初", "起初",
    "一开始", "刚开始", "迁移前", "改之前", "换之前", "旧的", "老的", "那时", "上半年", "年初",
)  # fmt: skip
_PAST_EN: Final = (
    r"used to", r"previously", r"originally", r"formerly", r"last year", r"back then",
    r"at first", r"in the past", r"earlier", r"before (?:the|we|it|that|switching|moving)",
    r"before\W*$", r"the old", r"initially", r"prior to", r"last summer", r"last spring",
    r"last winter", r"last autumn", r"in 20\d\d",
)  # fmt: skip
_PAST_EN_RE = lazy_pattern(r"(?<![a-z])(?:" + "|".join(_PAST_EN) + r")")
_PAST_ZH_RE = lazy_pattern("|".join(_PAST_ZH))
_NOW_ZH: Final = (
    "现在", "目前", "如今", "最新", "最近", "当前", "眼下", "这阵子", "这段时间", "还在", "还是",
)  # fmt: skip
_NOW_EN: Final = (
    r"now", r"currently", r"current", r"latest", r"these days", r"nowadays", r"today",
    r"at the moment", r"still", r"anymore", r"lately", r"recently", r"newest", r"right now",
)  # fmt: skip
_NOW_EN_RE = lazy_pattern(r"(?<![a-z])(?:" + "|".join(_NOW_EN) + r")(?![a-z])")
_NOW_ZH_RE = lazy_pattern("|".join(_NOW_ZH))
CLOSE_SHARE: Final = 0.6
"""Hits within this share of the best relevance among the first `CLOSE_DEPTH` are close
enough for the date to decide their order when the query asks what holds now (or before)."""
CLOSE_DEPTH: Final = 5
SEARCHED_STATUSES: Final = ("active", "superseded")
"""What a question about the past searches: current notes and those they replaced."""


def asks_about_the_past(query: str) -> bool:
    """Whether a query asks what held before ("去年我们用的什么数据库", "what port did it use
    before the migration")."""
    folded = unicodedata.normalize("NFKC", query).casefold()
    return bool(_PAST_ZH_RE().search(folded) or _PAST_EN_RE().search(folded))


def asks_about_now(query: str) -> bool:
    """Whether a query asks what holds now ("现在", "目前", "latest", "these days")."""
    folded = unicodedata.normalize("NFKC", query).casefold()
    return bool(_NOW_ZH_RE().search(folded) or _NOW_EN_RE().search(folded))


def by_date_when_close(hits: Sequence[SearchHit], *, newest: bool) -> list[SearchHit]:
    """`hits` with those of the first `CLOSE_DEPTH` whose relevance is close to the best
    (`CLOSE_SHARE`) ordered by when they were written (newest first, or oldest first for a
    question about the past); the others keep their place after them. Most changes of a fact
    are never linked (the newer note does not name the older, often in the other language, at
    cosine 0.3-0.6 from it: `memory.notes.facts` cannot see them), yet a question about the fact
    finds both: its words of time say which one it wants."""
    head = list(hits[:CLOSE_DEPTH])
    if len(head) < 2:
        return list(hits)
    best = max(h.relevance for h in head)
    close = [h for h in head if h.relevance >= CLOSE_SHARE * best and h.created is not None]
    if len(close) < 2:
        return list(hits)
    ordered = sorted(close, key=_written, reverse=newest)
    rest = [h for h in head if h not in close]
    return [*ordered, *rest, *hits[CLOSE_DEPTH:]]


def _written(hit: SearchHit) -> float:
    return hit.created.timestamp() if hit.created else 0.0


def current_first(
    hits: Sequence[SearchHit], *, past: bool = False, pending: Mapping[str, str] | None = None
) -> list[SearchHit]:
    """`hits` with the notes of one chain of replacements together, at the place of the best
    ranked of them, the current one first (the oldest first when the query asks about the
    past), and deprecated notes after every other; otherwise the ranking's order.

    `pending` (old id -> new id): updates the person has not decided on yet
    (`memory.history.conflicts`) order the two the same way, both still shown ("我喜欢深色主题"
    then "我现在不喜欢深色主题了": the newer says what holds unless the person keeps the older)."""
    by_id = {h.id: h for h in hits}
    links = dict(pending or {})
    groups: dict[str, list[tuple[int, int, SearchHit]]] = {}
    for rank, hit in enumerate(hits):
        if hit.status == "deprecated":
            continue
        root, depth = hit, 0
        seen = {hit.id}
        while (successor := _successor(root, links)) in by_id:
            root = by_id[successor or ""]
            if root.id in seen:  # a loop written by hand: stop at it
                break
            seen.add(root.id)
            depth += 1
        groups.setdefault(root.id, []).append((depth, rank, hit))
    out: list[SearchHit] = []
    for members in groups.values():  # dicts keep the order of the first member seen
        members.sort(key=lambda m: (-m[0] if past else m[0], m[1]))
        out += [hit for _, _, hit in members]
    return out + [h for h in hits if h.status == "deprecated"]


def _successor(hit: SearchHit, pending: Mapping[str, str]) -> str | None:
    if hit.status == "superseded":
        return hit.superseded_by
    return pending.get(hit.id) if hit.status == "active" else None


def replaced_line(hit: SearchHit) -> str:
    """What a replaced note's line adds: its date and what replaced it."""
    if hit.status != "superseded":
        return ""
    said = f"; said {hit.created:%Y-%m-%d}" if hit.created else ""
    return f" (replaced by [{hit.superseded_by}]{said})"
