"""The near-duplicate pair set (issue #19): notes that differ only in width, case, spaces,
punctuation or a particle are one note; notes that differ in meaning (a negation, a number, a
different choice) stay two, however similar their text."""

from __future__ import annotations

import pytest

from memory._text import meaning_differs, near_duplicate, skeleton

SAME = [
    # spaces, punctuation, full width
    ("数据库用 PostgreSQL。", "数据库 用 PostgreSQL"),
    ("数据库用PostgreSQL", "数据库用ＰｏｓｔｇｒｅＳＱＬ"),
    ("部署顺序：先 staging，再 production。", "部署顺序: 先staging, 再production"),
    ("用户喜欢在周末去爬山，尤其是香山！", "用户喜欢在周末去爬山尤其是香山"),
    ("缓存层是 Redis 7", "缓存层是Redis 7。"),
    # a particle added or dropped
    ("数据库用PostgreSQL", "数据库用的PostgreSQL"),
    ("我们决定采用蓝绿发布", "我们决定了采用蓝绿发布"),
    ("他很快完成测试", "他很快地完成测试"),
    # case, spacing and punctuation in English
    ("Deploys go staging first, then production.", "deploys go staging first then production"),
    ("The user prefers concise answers.", "The user prefers  concise answers"),
    ("Use ruff for linting!", "use Ruff for linting"),
    ("Port 5432 is the database port.", "port 5432 is the database port"),
    ("Don't run migrations on Friday.", "Don't run migrations on Friday"),
    ("We chose pytest over unittest", "We chose pytest over unittest."),
    # one small word in a long sentence
    (
        "The API gateway terminates TLS and forwards requests to the billing service over mTLS",
        "The API gateway terminates TLS and forwards the requests to the billing service over mTLS",
    ),
    ("用户的时区是北京时间，早上九点开始工作", "用户时区是北京时间，早上九点开始工作"),
]

DIFFERENT = [
    # a negation
    ("部署前跑迁移", "部署前不跑迁移"),
    ("用 Redis 做缓存", "不用 Redis 做缓存"),
    ("周末有空", "周末没空"),
    ("Run migrations before deploys", "Never run migrations before deploys"),
    ("The user likes dark mode", "The user doesn't like dark mode"),
    ("Tests can run in parallel", "Tests cannot run in parallel"),
    ("Deploy with the feature flag", "Deploy without the feature flag"),
    # a number
    ("数据库端口是 5432", "数据库端口是 5433"),
    ("连接池大小为 20", "连接池大小为 200"),
    ("Python 3.11 is required", "Python 3.12 is required"),
    ("Retry 3 times, then give up", "Retry 5 times, then give up"),
    ("每周三 10:00 开会", "每周三 11:00 开会"),
    # a different choice or subject
    ("数据库用 PostgreSQL", "数据库用 MySQL"),
    ("缓存层是 Redis", "队列是 Redis"),
    ("The user prefers tabs", "The user prefers spaces"),
    ("Use ruff for linting", "Use black for formatting"),
    ("前端用 React", "前端用 Vue"),
    ("Deploy on Monday", "Deploy on Friday"),
]


@pytest.mark.parametrize(("a", "b"), SAME)
def test_true_pairs_are_one_note(a: str, b: str) -> None:
    assert near_duplicate(a, b) and near_duplicate(b, a)


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_pairs_that_differ_in_meaning_stay_apart(a: str, b: str) -> None:
    assert not near_duplicate(a, b) and not near_duplicate(b, a)


@pytest.mark.parametrize(
    ("a", "b", "differs"),
    [
        ("用 Redis", "不用 Redis", True),
        ("port 5432", "port 5433", True),
        ("port 5432", "Port ５４３２", False),  # full-width digits are the same number
        ("I can't", "I can", True),
        ("数据库用的 PostgreSQL", "数据库用 PostgreSQL。", False),
    ],
)
def test_a_negation_or_a_number_changes_the_meaning(a: str, b: str, differs: bool) -> None:
    assert meaning_differs(a, b) is differs


def test_the_skeleton_keeps_words_and_drops_form() -> None:
    assert skeleton("数据库 用的 ＰostgreSQL！") == "数据库用postgresql"
    assert skeleton(" , 。！") == ""
    assert not near_duplicate("", "")
