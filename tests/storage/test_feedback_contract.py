"""'Not relevant' marks on recalled notes (memory.loop.feedback), one contract run against the
SQLite state and the PostgreSQL state: a mark is seen by another instance, similar prompts
find it, other prompts do not; and which prompts count as similar (a table)."""

from __future__ import annotations

import pytest

from errors import InvalidInputError
from memory.loop.feedback import SIMILAR, FeedbackStore, prompt_words, similarity
from tests.storage.test_memory_state_contract import Open, open_state  # noqa: F401


@pytest.mark.parametrize(
    ("marked", "later", "same"),
    [
        ("how big is the db pool", "how big is the db pool now?", True),
        ("How big is the DB pool?", "how big is the db pool", True),
        ("how big is the db pool", "db pool timeout in prod", False),
        ("连接池多大", "连接池现在多大", True),
        ("连接池多大", "部署在周几", False),
        ("deploy on friday", "what is the deploy day, friday?", False),
        ("？！", "？！", False),  # no words: nothing to compare
    ],
)
def test_which_prompts_count_as_the_same_question(marked: str, later: str, same: bool) -> None:
    assert (similarity(prompt_words(marked), prompt_words(later)) >= SIMILAR) is same


def test_a_mark_lowers_the_note_for_similar_prompts_on_every_instance(
    open_state: Open,  # noqa: F811
) -> None:
    one, two = FeedbackStore(open_state()), FeedbackStore(open_state())
    one.mark_not_relevant("mem_pool", "how big is the db pool")
    one.mark_not_relevant("mem_pool", "how big is the db pool")  # again: one mark
    one.mark_not_relevant("mem_deploy", "连接池多大")
    assert two.excluded_for("how big is the db pool now?") == {"mem_pool"}
    assert two.excluded_for("连接池现在多大") == {"mem_deploy"}
    assert two.excluded_for("db pool timeout in prod") == frozenset()
    assert two.marks("mem_pool") == ["how big is the db pool"]
    with pytest.raises(InvalidInputError, match="no word"):
        two.mark_not_relevant("mem_pool", "？！")
    with pytest.raises(InvalidInputError, match="which note"):
        two.mark_not_relevant(" ", "how big is the db pool")
