"""How a newer note relates to an older one (`memory.notes.facts.judge`): the same fact, an
update of it, or another fact; which of them the store may apply by itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory import _text
from memory.config import MemoryConfig
from memory.model import NoteDraft
from memory.notes.facts import judge
from memory.sqlite.store import MemoryStore


@pytest.mark.parametrize(
    ("old", "new", "cosine", "same_type", "relation", "confident"),
    [
        # an update that says so, with a changed value: applied by itself
        ("订单服务监听 8080 端口", "订单服务现在监听 8081 端口", 0.91, True, "update", True),
        ("Daily standup is at 9:30", "Daily standup is now at 9:45", 0.80, True, "update", True),
        # ... across languages the vectors are less sure: the person chooses
        (
            "订单服务监听 8080 端口",
            "The order service listens on 8081 now",
            0.66,
            True,
            "update",
            False,
        ),
        # a negation and words of change, the vectors unsure: pending
        ("我喜欢深色主题", "我现在不喜欢深色主题了，改用浅色主题", 0.73, True, "update", False),
        # the same words in another order are another decision, never the same fact
        (
            "前端统一使用 React，不再使用 Vue。",
            "前端统一使用 Vue，不再使用 React。",
            0.996,
            True,
            "update",
            False,
        ),
        (
            "We moved CI from Jenkins to GitHub Actions.",
            "CI runs on Buildkite.",
            0.70,
            True,
            "update",
            False,
        ),
        (
            "The user prefers pytest and ruff",
            "The user prefers unittest and black",
            0.66,
            True,
            "other",
            False,
        ),
        # one preference said again: merged when the vectors are sure and it says as much
        ("I write code in Vim.", "I write all my code in Vim.", 0.95, True, "same", True),
        ("我喜欢用 Vim 写代码", "I prefer Vim for writing code", 0.81, True, "same", False),
        # a shorter rewording never replaces a note that said more by itself
        (
            "我写代码用 Vim，主题是 gruvbox，开相对行号。",
            "我写代码用 Vim。",
            0.93,
            True,
            "same",
            False,
        ),
        (
            "I write code in Vim with the gruvbox theme and relative line numbers.",
            "I use Vim.",
            0.93,
            True,
            "same",
            False,
        ),
        # across languages a translation sits lower: offered as one fact from the subject's
        # cosine on; so are two rewordings naming the same two things
        (
            "下午三点以后我不喝咖啡。",
            "I don't drink coffee after 3pm.",
            0.66,
            True,
            "same",
            False,
        ),
        (
            "I like writing table-driven tests in Go.",
            "My Go tests are usually table-driven.",
            0.66,
            True,
            "same",
            False,
        ),
        # every name one writes is in the other: the five-ways preference of issue #29
        (
            "写 Go 单测的时候我习惯用表驱动的写法。",
            "Go 的单元测试我喜欢写成 table-driven 的形式。",
            0.70,
            True,
            "same",
            False,
        ),
        # (real cosines) a note naming more is another fact
        (
            "我用 Vim 写代码。",
            "我用 Vim 写 Markdown 文档，配 vim-markdown 插件。",
            0.68,
            True,
            "other",
            False,
        ),
        (
            "I like writing tests in Go.",
            "My tests are usually written first.",
            0.66,
            True,
            "other",
            False,
        ),
        # a number spelt in words on one side, a weekday, numbers only dropped: no change
        (
            "下午三点以后我不喝咖啡。",
            "No coffee for me past three in the afternoon.",
            0.81,
            True,
            "same",
            False,
        ),
        ("星期五禁止上线到生产环境。", "周五一律不做生产发布。", 0.85, True, "same", False),
        ("周会周二、周四 10 点", "周会每周两次", 0.80, True, "same", False),
        # one refusal said with two negations is still one refusal
        (
            "下午三点以后我不喝咖啡。",
            "三点之后别给我推荐咖啡了，我不喝。",
            0.78,
            True,
            "same",
            False,
        ),
        # a line near a long note (a design doc, a week's diary) is not that note's update
        (
            "设计文档：" + "订单服务的每个接口都有说明。" * 40 + "端口 8080。",
            "订单服务的端口 8081",
            0.80,
            True,
            "other",
            False,
        ),
        # another fact about the same cat, another topic, another type or scope
        ("我的猫叫年糕", "我的猫年糕对鸡肉过敏", 0.70, True, "other", False),
        ("订单服务监听 8080 端口", "支付网关部署在新加坡区域", 0.25, True, "other", False),
        ("Standup is at 9:30", "Standup is now at 9:45", 0.80, False, "other", False),
    ],
)
def test_judge(
    old: str, new: str, cosine: float, same_type: bool, relation: str, confident: bool
) -> None:
    verdict = judge(old, new, cosine=cosine, same_type=same_type)
    assert (verdict.relation, verdict.confident) == (relation, confident), verdict.reason


def test_a_weekday_is_one_character_after_its_word() -> None:
    assert _text._fold("周五一律不做生产发布") == "周5一律不做生产发布"
    assert _text._fold("星期三下午") == "星期3下午"
    assert _text._fold("第十五次") == "第15次"


def test_a_pending_update_is_listed_before_the_note_it_may_update(tmp_path: Path) -> None:
    from memory.history.store import HistoryStore
    from memory.sqlite.state import StateDB

    state = StateDB(tmp_path / "state.db")
    with MemoryStore.open(MemoryConfig.for_home(tmp_path / "home", fsync=False)) as store:
        store.attach_history(HistoryStore(state))
        old = store.save(NoteDraft(content="我喜欢深色主题", type="preference"))
        new = store.save(
            NoteDraft(content="我现在不喜欢深色主题了，改用浅色主题", type="preference")
        )
        store.attach_history(HistoryStore(state))
        if new.conflicts_with is None:  # the text rules left it to the vectors: as they would
            HistoryStore(state).propose_supersession(new.id, old.id, "may update it")
        assert store.get(old.id).status == "active"  # nothing decided for the person
        assert [h.id for h in store.search("我喜欢深色主题")][:2] == [new.id, old.id]
    state.close()


def test_notes_of_two_scopes_are_never_one_fact() -> None:
    assert judge("a", "a", cosine=1.0, same_type=True, same_scope=False).relation == "other"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("订单服务现在监听 8081 端口", {"现在"}),
        ("我现在不喜欢深色主题了，改用浅色主题", {"现在", "改用"}),
        ("Daily standup is now at 9:45", {"now"}),
        ("We moved to GitHub Actions and no longer use Jenkins", {"no longer"}),
        ("We know the snow is heavy", set()),  # "now" inside words is not a word of change
        ("订单服务监听 8080 端口", set()),
    ],
)
def test_change_words(text: str, words: set[str]) -> None:
    assert _text.change_words(text) >= words
    if not words:
        assert not _text.change_words(text)


def test_words_of_change_are_not_part_of_a_claims_subject() -> None:
    assert _text.subject("订单服务现在监听 8081 端口") == _text.subject("订单服务监听 8080 端口")
    assert _text.subject("Standup is now at 9:45") == _text.subject("Standup is at 9:30")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("订单服务监听 8080 端口", "订单服务现在监听 8081 端口"),
        ("Daily standup is at 9:30.", "Daily standup is now at 9:45."),
    ],
)
def test_a_note_that_says_it_changed_a_value_replaces_the_older_one_at_save(
    tmp_path: Path, old: str, new: str
) -> None:
    # no encoder needed: the words of change leave the subject, the number differs
    with MemoryStore.open(MemoryConfig.for_home(tmp_path, fsync=False)) as store:
        first = store.save(NoteDraft(content=old, type="architecture"))
        second = store.save(NoteDraft(content=new, type="architecture"))
        assert second.replaced == first.id and "replaces" in second.notice()
        assert store.get(first.id).status == "superseded"
        assert store.get(first.id).superseded_by == second.id
        assert [h.id for h in store.search(old)] == [second.id]  # the current one only
        past = store.search(f"{old} 以前 before")
        assert [h.id for h in past][:2] == [first.id, second.id]  # the past wants both, old first


def test_without_words_of_change_a_changed_number_stays_a_choice(tmp_path: Path) -> None:
    with MemoryStore.open(MemoryConfig.for_home(tmp_path, fsync=False)) as store:
        first = store.save(NoteDraft(content="数据库端口是 5432", type="architecture"))
        second = store.save(NoteDraft(content="数据库端口是 5433", type="architecture"))
        assert second.conflicts_with == first.id and second.replaced is None
        assert store.get(first.id).status == "active"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "The database is the source of truth for idempotency keys; Redis is only a cache.",
            "Redis is the source of truth for idempotency keys; the database is only a cache.",
        ),
        (
            "jaguar 的 parser 用 pandas，match 用 polars。",
            "jaguar 的 parser 用 polars，match 用 pandas。",
        ),
        ("前端统一使用 React，不再使用 Vue。", "前端统一使用 Vue，不再使用 React。"),
    ],
)
def test_the_same_words_in_another_order_are_never_one_note(tmp_path: Path, a: str, b: str) -> None:
    assert not _text.near_duplicate(a, b, 0.92)
    with MemoryStore.open(MemoryConfig.for_home(tmp_path, fsync=False)) as store:
        first, second = store.save(NoteDraft(content=a)), store.save(NoteDraft(content=b))
        assert not second.deduplicated and second.id != first.id


def test_notes_another_process_saved_are_checked_when_they_get_their_vectors(
    tmp_path: Path,
) -> None:
    # a hook working directly (no encoder) saves; the app embeds and checks later. Before, only
    # notes the embedding process saved itself were checked: these stayed two unlinked notes
    from memory.encoders.models import EncoderSpec, load_encoder
    from memory.history.conflicts import ConflictStore
    from memory.history.store import HistoryStore
    from memory.sqlite.state import StateDB

    home = tmp_path / "home"
    with MemoryStore.open(MemoryConfig.for_home(home, fsync=False)) as hook:
        old = hook.save(
            NoteDraft(content="I write all my code in Vim with relative line numbers.")
        ).id
        new = hook.save(
            NoteDraft(content="All my code is written in Vim, with relative line numbers.")
        ).id
    state = StateDB(home / "state.db")
    try:
        with MemoryStore.open(MemoryConfig.for_home(home, fsync=False)) as app:
            app.attach_history(HistoryStore(state))
            app.attach_encoder(load_encoder(EncoderSpec("hashing")))
            app.sync_vectors()
            pending = [(s.new_id, s.old_id) for s in ConflictStore(state).list()]
            assert pending == [(new, old)]
    finally:
        state.close()


def test_an_old_note_embedded_again_is_not_judged_again(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from memory.encoders.models import EncoderSpec, load_encoder
    from memory.history.conflicts import ConflictStore
    from memory.history.store import HistoryStore
    from memory.sqlite.state import StateDB

    home = tmp_path / "home"
    then = datetime(2026, 1, 1, tzinfo=UTC)
    with MemoryStore.open(MemoryConfig.for_home(home, fsync=False), clock=lambda: then) as hook:
        hook.save(NoteDraft(content="I write all my code in Vim with relative line numbers."))
        hook.save(NoteDraft(content="All my code is written in Vim, with relative line numbers."))
    state = StateDB(home / "state.db")
    later = then + timedelta(days=30)
    try:
        config = MemoryConfig.for_home(home, fsync=False)
        with MemoryStore.open(config, clock=lambda: later) as app:
            app.attach_history(HistoryStore(state))
            app.attach_encoder(load_encoder(EncoderSpec("hashing")))
            app.sync_vectors()
            assert ConflictStore(state).list() == []
    finally:
        state.close()
