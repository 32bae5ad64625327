"""Pure rules of per-turn memory injection."""

from __future__ import annotations

import pytest

from memory.loop.personal import Reading
from memory.loop.recall import (
    FIRST_TURN_LIMIT,
    LATER_TURN_LIMIT,
    about_own_world,
    is_trivial_prompt,
    own_world,
    plan_injection,
    topic_changed,
)


@pytest.mark.parametrize(
    ("prompt", "trivial"),
    [
        ("ok", True),
        ("OK!", True),
        ("好的", True),
        ("好的。", True),
        ("thanks", True),
        ("Thank you!", True),
        ("谢谢！", True),
        ("👍", True),
        ("   ", True),
        ("?", True),
        ("收到", True),
        ("got it", True),
        ("how do we deploy?", False),
        ("连接池怎么配置", False),
        ("ok, now fix the JWT bug", False),
        ("缓存", False),
        ("JWT", False),
    ],
)
def test_acknowledgements_retrieve_nothing(prompt: str, trivial: bool) -> None:
    assert is_trivial_prompt(prompt) is trivial


@pytest.mark.parametrize(
    ("current", "previous", "changed"),
    [
        ([], [], False),
        (["a", "b"], [], False),  # nothing to compare with on the first turn
        (["a", "b"], ["a", "b"], False),
        (["a", "b", "c"], ["a", "x"], True),  # 2 of 3 new
        (["a", "b"], ["a"], False),  # exactly half new is not "more than half"
        (["x", "y", "z", "a"], ["a", "b", "c"], True),
    ],
)
def test_topic_change_means_more_than_half_new(
    current: list[str], previous: list[str], changed: bool
) -> None:
    assert topic_changed(current, previous) is changed


def test_first_turn_carries_up_to_ten_later_turns_five() -> None:
    ids = [f"m{i}" for i in range(20)]
    first = plan_injection(ids, recent=set(), previous=[], first_turn=True)
    later = plan_injection(ids, recent=set(), previous=ids, first_turn=False)
    assert len(first.inject) == FIRST_TURN_LIMIT == 10
    assert len(later.inject) == LATER_TURN_LIMIT == 5


def test_recently_injected_memories_are_skipped_in_order() -> None:
    plan = plan_injection(["a", "b", "c", "d"], recent={"a", "c"}, previous=[], first_turn=False)
    assert plan.inject == ("b", "d")


@pytest.mark.parametrize(
    ("prompt", "note", "scope", "place", "own"),
    [
        (
            "Can cats eat chocolate?",
            "麻薯 is my cat; the vet said no chicken.",
            "user",
            None,
            False,
        ),
        ("我家猫能吃巧克力吗", "麻薯 is my cat; the vet said no chicken.", "user", None, True),
        ("昆仑山脉最高峰是哪座？", "kunlun 项目用 Kafka 做事件总线", "project:kunlun", None, False),
        ("kunlun 的 consumer lag 怎么这么高", "事件总线", "project:kunlun", None, True),
        (
            "Plan a dinner for Zhou Ning's parents",
            "Zhou Ning is allergic to mango",
            "user",
            None,
            True,
        ),
        ("How does Kafka rebalancing work?", "kunlun 用 Kafka", "user", None, True),
        ("What is the history of Berlin?", "Moved from Berlin to Shanghai", "user", None, True),
        ("tell me a joke about databases", "orders-api 用 PostgreSQL", "user", None, False),
        # in a project session, the project's notes need no more evidence than the place
        (
            "fix the flaky settlement test",
            "settlement job retries",
            "project:pg",
            "project:pg",
            True,
        ),
        # ... and without the probe (keyword search alone) a project session's prompt is work
        ("fix the flaky settlement test", "settlement job retries", "user", "project:pg", True),
    ],
)
def test_about_own_world(prompt: str, note: str, scope: str, place: str | None, own: bool) -> None:
    assert about_own_world(prompt, note, scope, place) is own


@pytest.mark.parametrize(
    "prompt", ["tell me a joke about databases", "给我讲个关于数据库的笑话", "帮我写一首关于猫的诗"]
)
def test_asking_for_something_is_not_speaking_of_oneself(prompt: str) -> None:
    assert not about_own_world(prompt, "orders-api 用 PostgreSQL; 麻薯 is a cat", "user", None)


@pytest.mark.parametrize(
    ("personal", "scope", "place", "own"),
    [
        # first person and names, yet the probes say no
        (Reading(personal=False, work=False), "user", None, False),
        (Reading(personal=True, work=True), "user", None, True),
        # the session's own project lets its notes in when the prompt reads as its work, never
        # whatever the prompt ("今天天气怎么样？" in a project session)
        (Reading(personal=False, work=True), "project:pg", "project:pg", True),
        (Reading(personal=False, work=False), "project:pg", "project:pg", False),
        (Reading(personal=False, work=True), "user", "project:pg", False),
        (Reading(personal=True, work=True), "project:other", "project:pg", True),
        (Reading(personal=False, work=True), "project:other", "project:pg", False),
        # the words alone (no vector probe) decide in a project session only
        (Reading(personal=False, work=False, by_meaning=False), "project:pg", "project:pg", False),
        # ...where a coding request lets the person's own notes in from a lower bar
        (
            Reading(personal=False, work=True, beyond_project=True, by_meaning=False),
            "user",
            "project:pg",
            True,
        ),
        (
            Reading(personal=False, work=True, beyond_project=False, by_meaning=False),
            "user",
            "project:pg",
            False,
        ),
        (Reading(personal=False, work=False, by_meaning=False), "user", None, True),
    ],
)
def test_the_probe_decides_when_it_can_tell(
    personal: Reading, scope: str, place: str | None, own: bool
) -> None:
    test = own_world("I told Zhou Ning my kunlun Kafka plan", place, personal)
    assert test("Zhou Ning reviews the kunlun Kafka plan", scope) is own
