"""Whether a new note repeats, updates or merely sits beside an older one (pure; docs/retrieval.md,
"The newest fact wins" and "One fact, one note").

A person's memory says one thing many ways and changes its mind without saying so: "订单服务监听
8080 端口" months before "the order service listens on 8081 now"; "我喜欢深色主题" before "我现在不
喜欢深色主题了，改用浅色主题"; one preference in two Chinese paraphrases and an English
translation. No single number tells these apart: on the default encoder a paraphrase sits at
cosine 0.67-0.81 from its original, a translation at 0.66-0.81, a changed fact at 0.66-0.91 and
another fact about the same cat at 0.70. So `judge` weighs three kinds of evidence:

* **the subject**: how close the two texts are (the vectors' cosine, which also reaches across
  languages), and whether they are of one scope and type;
* **a changed value**: a number or time that differs, a negation on one side only, a name
  standing where another stood ("Jenkins" / "GitHub Actions"), the same words in another order
  ("React, 不再 Vue" / "Vue, 不再 React": another decision, never a duplicate);
* **words of change** in the newer text only: 现在, 改成, 改用, 换成, 不再, now, no longer,
  switched to, moved to, instead ...

A change (value or words) on one subject is an `update`; the same subject with nothing changed is
`same`. `confident` marks what the store may apply by itself (the older note superseded, its
history kept, restorable); the rest becomes a pending choice for the person ("keep new / keep
old / keep both", `memory.history.conflicts`). The thresholds come from the life set of
`bench/retrieval_eval.py` (docs/retrieval.md).
"""

from __future__ import annotations

from typing import Final, Literal

from memory import _text
from memory._record import record

Relation = Literal["same", "update", "other"]

SUBJECT_COSINE: Final = 0.62
"""Below this cosine two notes are not taken to be about one thing, whatever their words."""
CONFIDENT_UPDATE_COSINE: Final = 0.78
"""An update is applied by itself from here when the newer note also says it changed
something (words of change and a changed value)."""
SAME_COSINE: Final = 0.74
"""Two notes with nothing changed between them are offered as one fact from here (another fact
about the same cat sits at 0.70: "我的猫叫年糕" / "我的猫年糕对鸡肉过敏")..."""
CROSS_SAME_COSINE: Final = SUBJECT_COSINE
"""...or from here when more than the vectors say so: the two are written in two languages (a
translation sits at cosine 0.54-0.81 from its original, where a same-language paraphrase sits
at 0.67-0.81), or they share two names ("Go", "table-driven"; the life set's same-fact groups,
docs/retrieval.md), or every name one of them writes is in the other ("写 Go 单测的时候我习惯用表
驱动的写法" / "Go 的单元测试我喜欢写成 table-driven 的形式": the five-ways preference of issue
#29, whose first two sit at 0.70)..."""
SHARED_NAMES: Final = 2
LONGER: Final = 4
LONG_NOTE: Final = 300
"""An older note of more than `LONG_NOTE` tokens and `LONGER` times longer than the newer is
not compared value by value, nor taken to say the same: a line near a design doc or a week's
diary is one of its parts (the life set's pending updates: 4 of 13 wrong ones were such)."""
CONFIDENT_SAME_COSINE: Final = 0.90
"""...and merged by themselves from here (the newer keeps the fact, the older is replaced),
when the newer says at least as much."""


@record
class Judgement:
    """How a newer note relates to an older one."""

    relation: Relation
    confident: bool
    reason: str


OTHER: Final = Judgement("other", False, "")


def changed_value(old: str, new: str) -> str:
    """What differs in value between two texts on one subject ("" for nothing): a number or
    time, a negation, a name standing where another stood, the same words in another order.
    Ordinary words swapped ("prefers" / "likes") are a rewording, not a change."""
    reason = _text.how_meaning_differs(old, new, loose=True)
    if reason:
        return reason
    if _text.renamed(old, new):
        return "another name stands where one stood"
    if _text.reordered(old, new):
        return "the same words in another order"
    return ""


def judge(
    old: str,
    new: str,
    *,
    cosine: float,
    same_type: bool,
    same_scope: bool = True,
) -> Judgement:
    """How `new` (saved later) relates to `old`: `same` fact, an `update` of it, or `other`.

    `cosine`: of the two notes' vectors (their first chunks). Notes of two scopes are never one
    fact; two types are one only when the vectors say so strongly (a decision noted as
    architecture)."""
    if not same_scope or cosine < SUBJECT_COSINE:
        return OTHER
    if not same_type and cosine < CONFIDENT_SAME_COSINE:
        return OTHER
    words = _text.change_words(new) - _text.change_words(old)
    # a short note's numbers differ from those of a long one it sits near (a design doc, a
    # diary of the week) without changing any of them: only its words of change count there
    old_tokens = _text.estimate_tokens(old)
    comparable = old_tokens <= max(LONG_NOTE, LONGER * _text.estimate_tokens(new))
    value = changed_value(old, new) if comparable else ""
    if value or words:
        why = value or f"it says it changed ({', '.join(sorted(words))})"
        confident = bool(value and words) and cosine >= CONFIDENT_UPDATE_COSINE
        return Judgement("update", confident, f"may update it: {why}")
    if not comparable or cosine < (CROSS_SAME_COSINE if _more_evidence(old, new) else SAME_COSINE):
        return OTHER
    # merged by itself only when the newer says at least as much as the older: a short
    # rewording never replaces a note that said more
    says_as_much = _text.estimate_tokens(new) >= 0.8 * _text.estimate_tokens(old)
    confident = cosine >= CONFIDENT_SAME_COSINE and says_as_much
    return Judgement("same", confident, "looks like the same fact")


def _more_evidence(old: str, new: str) -> bool:
    """Whether two notes on one subject have more than their cosine to show for being one fact
    (`CROSS_SAME_COSINE`)."""
    if _text.is_mostly_chinese(old) != _text.is_mostly_chinese(new):
        return True
    old_names, new_names = _text.names(old), _text.names(new)
    if len(old_names & new_names) >= SHARED_NAMES:
        return True
    # one set of names inside the other, adding at most one: a rewording that spells out one
    # more thing ("Go" / "Go, table-driven"), where a note naming more is another fact ("Vim" /
    # "Vim, Markdown, vim-markdown", 0.68)
    few, more = sorted((old_names, new_names), key=len)
    return bool(few) and few <= more and len(more - few) <= 1
