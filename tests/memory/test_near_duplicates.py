"""The near-duplicate pair set (issue #19): notes that differ only in width, case, spaces,
punctuation or a particle are one note; notes that differ in meaning (a negation, a number, a
different choice) stay two, however similar their text. The same set runs through the stores'
save on both backends (tests/storage/test_near_duplicate_contract.py)."""

from __future__ import annotations

import pytest

from memory import _text
from memory._text import (
    contradicts,
    dedup_bands,
    how_meaning_differs,
    meaning_differs,
    near_duplicate,
    skeleton,
    subject,
)

OWNED = (
    "The API gateway terminates TLS, forwards requests to the billing service over mTLS, retries"
    " twice on a timeout and is owned by {}"
)
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
    # a spelling fixed in a long note
    (
        "Webhooks from the payment provider are verified before we recieve the event body",
        "Webhooks from the payment provider are verified before we receive the event body",
    ),
    # found by users: spaces, punctuation or one 的 changed in a Chinese note
    ("项目使用 uv 管理依赖，不用 pip。", "项目使用uv管理依赖,不用pip"),
    ("接口超时设置为 30 秒", "接口超时设置为30秒。"),
    ("代码评审至少需要两个人通过", "代码评审至少需要两个人的通过"),
    ("测试环境的数据库每天凌晨重置", "测试环境数据库每天凌晨重置了"),
    ("「周报」每周五下午发给团队", "“周报”每周五下午发给团队"),
    ("日志保留 14 天（生产环境）", "日志保留14天(生产环境)"),
    # width, case and whitespace in English
    ("ＣＩ runs on every push", "CI runs on every push"),
    ("Use  Python\t3.12  for new services", "use python 3.12 for new services"),
    (
        "The staging URL is https://staging.example.com",
        "the staging url is https://staging.example.com.",
    ),
    ("Never commit uv.lock!", "never commit uv.lock"),
    ("A release needs a changelog entry", "Release needs changelog entry"),
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
    # more negations
    ("缓存要设置过期时间", "缓存不要设置过期时间"),
    ("上线前通知了运维", "上线前没通知运维"),
    ("Use tabs", "Never use tabs"),
    ("The bot may post in the group", "The bot may not post in the group"),
    ("We squash merge pull requests", "We don't squash merge pull requests"),
    # numbers and dates
    ("接口超时设置为 30 秒", "接口超时设置为 60 秒"),
    ("Release on 2026-05-01", "Release on 2026-06-01"),
    ("Keep logs for 14 days", "Keep logs for 30 days"),
    ("版本号是 v1.2.3", "版本号是 v1.2.4"),
    ("重试三次后放弃", "重试五次后放弃"),
    # a different person
    ("张三负责支付模块", "李四负责支付模块"),
    ("Alice owns the billing service", "Bob owns the billing service"),
    ("Ask Wang before changing the schema", "Ask Li before changing the schema"),
    (OWNED.format("Alice"), OWNED.format("Bob")),
]

LONG = (
    "部署流程：先在 staging 环境跑集成测试，通过后由 CI 打 tag，再用 Docker Compose 滚动发布到"
    "生产环境，最后检查 /health 与告警面板，健康检查超时 {} 秒。Rollback uses the previous tag."
)

# A new note about the same subject with a negation or a number changed: a conflict (the
# user chooses), never a duplicate.
CONFLICTS = [
    ("部署前跑迁移", "部署前不跑迁移", "negation"),
    ("周末有空", "周末没空", "negation"),
    ("The user likes dark mode", "The user doesn't like dark mode", "negation"),
    ("Tests can run in parallel", "Tests cannot run in parallel", "negation"),
    ("Run migrations before deploys", "Never run migrations before deploys", "negation"),
    ("数据库端口是 5432", "数据库端口是 5433", "number"),
    ("连接池大小为 20", "连接池大小为 200", "number"),
    ("Python 3.11 is required", "Python 3.12 is required", "number"),
    ("Keep logs for 14 days", "Keep logs for 30 days", "number"),
    # a long note with one number changed: similar enough to merge, if numbers did not count
    (LONG.format(30), LONG.format(60), "number"),
    (
        "The API gateway terminates TLS and forwards requests to the billing service on port 8443",
        "The API gateway terminates TLS and forwards requests to the billing service on port 9443",
        "number",
    ),
]

# Related notes that are neither the same nor a different claim about the same thing.
UNRELATED = [
    ("数据库用 PostgreSQL", "数据库用 MySQL"),
    ("用户非常喜欢爬山", "用户喜欢爬山"),  # 非常 ("very") is no negation
    ("缓存层是 Redis", "队列是 Redis"),
    ("Deploy on Monday", "Deploy on Friday"),
    ("部署前跑迁移", "部署后检查告警面板的 5 个指标"),
    # a number that names the thing: two things, not two claims about one
    ("Issue #12 is fixed", "Issue #13 is fixed"),
    ("Task 7 is done", "Task 8 is done"),
    ("编号 12 的工单已关闭", "编号 13 的工单已关闭"),
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
    assert skeleton("The API's gateway") == "apisgateway"
    assert skeleton(" , 。！") == ""
    assert not near_duplicate("", "")


@pytest.mark.parametrize(("old", "new", "why"), CONFLICTS)
def test_a_changed_claim_about_the_same_subject_is_a_conflict(old: str, new: str, why: str) -> None:
    assert contradicts(old, new) and contradicts(new, old)
    assert not near_duplicate(old, new)
    assert why in how_meaning_differs(old, new)


@pytest.mark.parametrize(("a", "b"), UNRELATED + SAME)
def test_other_pairs_are_no_conflict(a: str, b: str) -> None:
    assert not contradicts(a, b) and not contradicts(b, a)


@pytest.mark.parametrize(("a", "b"), SAME)
def test_true_pairs_share_their_first_dedup_key(a: str, b: str) -> None:
    # the store finds the older note by a key both hold (no luck of MinHash needed)
    if skeleton(a) == skeleton(b):
        assert dedup_bands(a)[0] == dedup_bands(b)[0]
    else:
        assert set(dedup_bands(a)) & set(dedup_bands(b)) or len(skeleton(a)) > 60


@pytest.mark.parametrize(("old", "new", "why"), CONFLICTS)
def test_conflicting_pairs_share_their_subject_key(old: str, new: str, why: str) -> None:
    assert subject(old) == subject(new)
    assert set(dedup_bands(old)) & set(dedup_bands(new))


@pytest.mark.parametrize(
    ("text", "folded"),
    [
        ("下午三点交", "下午3点交"),
        ("每周五", "每周5"),
        ("星期三", "星期3"),
        ("二十个", "20个"),
        ("一百零五人", "105人"),
        ("一万二千个", "12000个"),
        ("两点", "2点"),
        ("第三章", "第3章"),
        ("一起吃饭", "一起吃饭"),  # words, not numbers
        ("统一", "统一"),
        ("万一", "万一"),
        ("三明治", "三明治"),
    ],
)
def test_chinese_numerals_that_count_or_date_read_as_numbers(text: str, folded: str) -> None:
    assert _text._fold(text) == folded


@pytest.mark.parametrize(
    ("old", "new", "merged", "conflict"),
    [
        ("周报每周五下午三点交", "周报每周五下午3点交", True, False),
        ("周报每周五下午三点交", "周报每周五下午五点交", False, True),
        ("周会在周三", "周会在周四", False, True),
        ("我们一起吃饭", "我们一起吃饭了", True, False),
    ],
)
def test_a_changed_chinese_numeral_is_a_changed_claim(
    old: str, new: str, merged: bool, conflict: bool
) -> None:
    assert (_text.skeleton(old) == _text.skeleton(new)) is merged
    assert _text.contradicts(old, new) is conflict


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("周会在周一上午 10 点", "周会在周一上午 11 点", "a number changed (10 -> 11)"),
        ("Keep logs for 14 days", "Keep logs for 30 days", "a number changed (14 -> 30)"),
        ("retry 3 times, wait 3 s", "retry 5 times, wait 3 s", "a number changed (3 -> 5)"),
        ("部署前跑迁移", "部署前不跑迁移", "one says the opposite (a negation differs)"),
    ],
)
def test_the_reason_names_only_what_changed(old: str, new: str, reason: str) -> None:
    assert _text.how_meaning_differs(old, new) == reason
