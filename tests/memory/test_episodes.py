"""Episodes: lifecycle, cleaning, summaries and the per-scope cap on summary files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory._text import sentences
from memory.config import MemoryConfig
from memory.loop.episodes import (
    MAX_SUMMARIES_PER_SCOPE,
    EpisodeMessage,
    EpisodeStore,
    episode_title,
    observation_terms,
    rule_based_summary,
    should_summarize,
    summary_path,
    summary_title,
)
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore


@pytest.fixture
def episodes(tmp_path: Path) -> Iterator[EpisodeStore]:
    store = MemoryStore.open(MemoryConfig.for_home(tmp_path, fsync=False))
    db = StateDB(tmp_path / "state.db")
    yield EpisodeStore(db, store)
    db.close()
    store.close()


def test_title_names_place_and_time() -> None:
    assert episode_title("atlas", 0).startswith("atlas 会话 01-01 ")
    assert " 开发会话 " in episode_title("atlas", 0, kind="开发会话")


def test_trivial_episodes_get_no_summary(episodes: EpisodeStore) -> None:
    ep = episodes.start("k", title="t")
    for _ in range(2):
        episodes.record(ep.id, "user", "hi", turn=True)
    assert not should_summarize(episodes.get(ep.id))
    episodes.record(ep.id, "assistant", "wrote a file", file_changes=1)
    assert should_summarize(episodes.get(ep.id))


def test_rule_based_summary_is_short_and_keeps_decisions() -> None:
    messages = [
        EpisodeMessage(1, "user", "message", "", "Migrate atlas to the new cluster " * 10, 0),
        EpisodeMessage(2, "assistant", "message", "", "We decided to use blue-green deploys.", 0),
        EpisodeMessage(3, "user", "message", "", "TODO: update the runbook later.", 0),
    ]
    summary = rule_based_summary(messages)
    assert len(summary) <= 300
    assert summary.startswith("Done: Migrate atlas")
    assert "blue-green" in summary
    assert "runbook" in summary


def test_close_writes_one_summary_note_and_caps_files_per_scope(
    episodes: EpisodeStore, tmp_path: Path
) -> None:
    for i in range(MAX_SUMMARIES_PER_SCOPE + 3):
        ep = episodes.start(f"conv-{i}", title=f"Web 会话 {i}")
        episodes.record(ep.id, "user", f"topic number {i}", turn=True)
        closed = episodes.close(ep.id, f"Done: topic number {i} handled.")
        assert closed.status == "completed"
        assert closed.summary_note_id
    files = list((tmp_path / "memory" / "sessions").glob("*.md"))
    assert len(files) == MAX_SUMMARIES_PER_SCOPE
    # The oldest summaries left the folder but their text stays findable as episodes.
    found = [e.summary for e in episodes.search("number", limit=50)]
    assert "Done: topic number 0 handled." in found


def test_messages_are_cleaned_and_redacted(episodes: EpisodeStore) -> None:
    ep = episodes.start("k", title="t")
    episodes.record(ep.id, "user", "key sk-ant-api03-" + "a" * 40 + "\n```\ncode\n```")
    (message,) = episodes.messages(ep.id)
    assert "sk-ant-api03" not in message.content
    assert "[代码块已省略]" in message.content


def _said(*lines: tuple[str, str]) -> list[EpisodeMessage]:
    return [EpisodeMessage(i, role, "message", "", text, 0) for i, (role, text) in enumerate(lines)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "We chose Postgres. Next: the index! Version 3.5 stays; app.py too.",
            ["We chose Postgres.", "Next: the index!", "Version 3.5 stays;", "app.py too."],
        ),
        (
            "我们决定用 PostgreSQL。下一步加索引！还要测 app.py。",
            ["我们决定用 PostgreSQL。", "下一步加索引！", "还要测 app.py。"],
        ),
        ("Use a pool e.g. psycopg's. Done", ["Use a pool e.g. psycopg's.", "Done"]),
        ("- one\n- two\n1. three", ["one", "two", "three"]),
        ("before\n```\nx = 1. y = 2.\n```\nafter", ["before", "after"]),
        ("  \n\n ", []),
    ],
)
def test_sentences_split_chinese_english_and_lists(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


@pytest.mark.parametrize(
    ("messages", "starts", "contains", "absent"),
    [
        # English: the reply is split into sentences, so "Open" is one sentence, not the reply.
        (
            _said(
                ("user", "Fix the flaky login test."),
                (
                    "assistant",
                    "I found a race in the fixture. We decided to use a lock. "
                    "The retry test still needs a look later. Everything else passes.",
                ),
            ),
            "Done: Fix the flaky login test.",
            [
                "Decisions: We decided to use a lock.",
                "Open: The retry test still needs a look later.",
            ],
            ["Everything else passes", "完成"],
        ),
        # Chinese: Chinese labels, the pleasantry is not what was done.
        (
            _said(
                ("user", "把部署改成蓝绿发布。"),
                ("assistant", "好的，我们采用蓝绿发布。下一步更新手册。"),
                ("user", "谢谢"),
            ),
            "完成：把部署改成蓝绿发布。",
            ["决定：", "采用蓝绿发布", "待办：下一步更新手册。"],
            ["谢谢", "Done"],
        ),
        # Several requests: the first and the last.
        (
            _said(
                ("user", "Set up CI."),
                ("user", "Also add ruff."),
                ("user", "And publish the docs."),
            ),
            "Done: Set up CI.; And publish the docs.",
            [],
            ["Also add ruff"],
        ),
        (_said(("assistant", "Hello.")), "Done: a conversation", [], []),
    ],
)
def test_rule_based_summary_speaks_the_conversations_language(
    messages: list[EpisodeMessage], starts: str, contains: list[str], absent: list[str]
) -> None:
    summary = rule_based_summary(messages)
    assert summary.startswith(starts), summary
    assert len(summary) <= 300
    for part in contains:
        assert part in summary, summary
    for part in absent:
        assert part not in summary, summary


@pytest.mark.parametrize(
    ("key", "path"),
    [
        (
            "claude-code:0f7c9a2e-1b2c-4d5e-8f90-123456789abc",
            "sessions/0f7c9a2e-1b2c-4d5e-8f90-123456789abc.md",
        ),
        ("codex:rollout/../../etc", "sessions/rollout-..-..-etc.md"),
        ("feishu:p2p:v2", "sessions/p2p-v2.md"),
        ("conv-1", "sessions/conv-1.md"),
        ("..", "sessions/session.md"),
    ],
)
def test_one_summary_file_per_session_id(key: str, path: str) -> None:
    assert summary_path(key) == path


def test_summary_title_follows_the_summary_language() -> None:
    assert (
        summary_title("atlas 开发会话 01-01 10:00", chinese=True)
        == "atlas 开发会话 01-01 10:00 摘要"
    )
    assert (
        summary_title("atlas 开发会话 01-01 10:00", chinese=False)
        == "atlas coding session 01-01 10:00 summary"
    )
    assert summary_title("Web 会话 01-01 10:00", chinese=False) == "Web session 01-01 10:00 summary"


def test_a_resumed_session_rewrites_its_own_summary_file(
    episodes: EpisodeStore, tmp_path: Path
) -> None:
    key = "claude-code:6b1d"
    first = episodes.start(key, title="atlas 开发会话 01-01 10:00")
    episodes.close(first.id, "Done: set up CI.")
    again = episodes.start(key, title="atlas 开发会话 01-02 09:00")  # the same session, resumed
    mid = episodes.write_summary(again.id, "Done: set up CI and ruff.")  # a trigger point
    episodes.close(again.id, "Done: set up CI, ruff and docs.")
    files = list((tmp_path / "memory" / "sessions").glob("*.md"))
    assert [f.name for f in files] == ["6b1d.md"]
    text = files[0].read_text(encoding="utf-8")
    assert "set up CI, ruff and docs." in text
    assert "coding session" in text  # an English summary gets an English title
    assert (
        mid[1] == episodes.get(again.id).summary_note_id == episodes.get(first.id).summary_note_id
    )


@pytest.mark.parametrize("huge", ["麻薯" * 100_000, "x" * 200_000, "a/b" * 70_000])
def test_a_huge_message_without_spaces_still_searches_sessions(
    episodes: EpisodeStore, huge: str
) -> None:
    # one 200 KB word was one LIKE pattern over SQLite's limit: the turn lost its memory
    ep = episodes.start("conv-1", title="Web 会话")
    episodes.record(ep.id, "user", "麻薯的体检", turn=True)
    episodes.close(ep.id, "Done: 麻薯 xxxxx 体检")
    assert [e.id for e in episodes.search(f"体检 {huge}")] == [ep.id]
    assert len(max(observation_terms(huge), key=len)) <= 64


def test_a_summary_keeps_what_was_asked_when_there_is_room() -> None:
    # issue #32: requests were cut at 60 characters whatever the room, and read as clipped logs
    asked = (
        "Please migrate the billing tables from MySQL to PostgreSQL 16, keeping the invoice "
        "ids stable and the refunds history intact."
    )
    summary = rule_based_summary(_said(("user", asked), ("assistant", "Done, all migrated.")))
    assert summary == f"Done: {asked}"
    then = "Then update the runbook with the new backup schedule."
    both = rule_based_summary(_said(("user", asked), ("user", then)))
    assert len(both) <= 300 and both.endswith(then) and "keeping the invoice ids" in both


def test_the_assistants_narration_is_no_decision_of_the_session() -> None:
    # issue #32: "I'll switch to … instead of …" in a reply was listed as a decision
    summary = rule_based_summary(
        _said(
            ("user", "Fix the flaky checkout test."),
            ("assistant", "I'll switch to a fixed clock instead of sleeping. The test passes."),
        )
    )
    assert "Decisions" not in summary, summary
    agreed = rule_based_summary(
        _said(
            ("user", "Fix the flaky checkout test."),
            ("assistant", "We decided to freeze the clock in the fixture."),
        )
    )
    assert "Decisions: We decided to freeze the clock in the fixture." in agreed
    # the person's own words decide as before
    said = rule_based_summary(_said(("user", "Let's switch to a fixed clock instead.")))
    assert "Decisions: Let's switch to a fixed clock instead." in said
