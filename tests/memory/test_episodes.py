"""Episodes: lifecycle, cleaning, summaries and the per-scope cap on summary files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory.config import MemoryConfig
from memory.loop.episodes import (
    MAX_SUMMARIES_PER_SCOPE,
    EpisodeMessage,
    EpisodeStore,
    episode_title,
    rule_based_summary,
    should_summarize,
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
