"""Episodes, session summaries and entity capture through the real pipeline."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from settings import Settings
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI, error, text

pytestmark = pytest.mark.e2e

SUMMARY = (
    "Done: planned the atlas migration. Decisions: use PostgreSQL 16. Open: write the runbook."
)


async def test_a_three_turn_conversation_gets_a_summary_the_next_one_starts_with_it(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on("Summarize this session", text(SUMMARY))
    settings = make_settings()
    async with running_app(settings) as client:
        for message in ("plan the atlas migration", "which database?", "ok write it down"):
            await client.post("/api/chat", json={"message": message, "conversation_id": "long"})
        await client.post("/api/chat", json={"message": "just hi", "conversation_id": "short"})
        # A new conversation replaces both (their clients close after the grace period).
        await client.app.state.container.sessions.close_conversation("long", reason="test")  # type: ignore[attr-defined]
        await client.app.state.container.sessions.close_conversation("short", reason="test")  # type: ignore[attr-defined]
        fresh = (
            await client.post(
                "/api/chat", json={"message": "hello again", "new_conversation": True}
            )
        ).json()
        episodes = client.app.state.container.episodes.list()  # type: ignore[attr-defined]
    summaries = list((settings.memory_dir / "sessions").glob("*.md"))
    assert len(summaries) == 1, "only the 3-turn conversation is summarized"
    content = summaries[0].read_text(encoding="utf-8")
    assert SUMMARY in content
    assert "episode:long" in content
    first = fake_model.requests_for("hello again")[0]
    assert SUMMARY in first.turn_text()
    assert fresh["is_error"] is False
    by_key = {e.key: e for e in episodes}
    assert by_key["long"].status == by_key["short"].status == "completed"
    assert by_key["long"].title.startswith("Web 会话 ")
    assert by_key["short"].summary == ""


async def test_summary_falls_back_to_rules_when_the_model_fails(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on("Summarize this session", *([error(529, "overloaded_error")] * 4))
    settings = make_settings()
    async with running_app(settings) as client:
        for message in ("我们决定采用 PostgreSQL", "下一步写迁移脚本", "谢谢"):
            await client.post("/api/chat", json={"message": message, "conversation_id": "zh"})
        await client.app.state.container.sessions.close_conversation("zh", reason="test")  # type: ignore[attr-defined]
    (summary,) = (settings.memory_dir / "sessions").glob("*.md")
    assert summary.name == "zh.md"  # one file per session id
    content = summary.read_text(encoding="utf-8")
    # In the conversation's language, with its three parts; "谢谢" is not what was done.
    assert "完成：我们决定采用 PostgreSQL；下一步写迁移脚本｜" in content
    assert "决定：我们决定采用 PostgreSQL" in content
    assert "待办：下一步写迁移脚本" in content
    assert "title: Web 会话 " in content


async def test_decisions_are_captured_and_vague_mentions_wait_for_confirmation(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    async with running_app(make_settings()) as client:
        await client.post("/api/chat", json={"message": "我决定以后都用 pytest 写测试"})
        await client.post("/api/chat", json={"message": "我觉得 ruff 还不错"})
        await client.post("/api/chat", json={"message": "maybe we should use redis"})
        saved = (await client.post("/api/memories/search", json={"query": "pytest 测试"})).json()
        pending = (await client.get("/api/memories/pending")).json()["pending"]
        by_content = {p["content"]: p for p in pending}
        confirmed = (
            await client.post(
                f"/api/memories/pending/{by_content['我觉得 ruff 还不错']['id']}/confirm"
            )
        ).json()
        rejected = (
            await client.post(
                f"/api/memories/pending/{by_content['maybe we should use redis']['id']}/reject"
            )
        ).json()
        after = (await client.get("/api/memories/pending")).json()["pending"]
        note = (await client.get(f"/api/memories/{confirmed['id']}")).json()
        missing = await client.post("/api/memories/pending/pend_nope/confirm")
    top = saved["results"][0]
    assert "我决定以后都用 pytest 写测试" in top["summary"] or "pytest" in top["title"]
    assert top["type"] in ("decision", "preference")
    assert set(by_content) == {"我觉得 ruff 还不错", "maybe we should use redis"}
    assert rejected["pending"]["status"] == "rejected"
    assert after == []
    assert "ruff" in note["body"]
    assert missing.status_code == 404


async def test_assistant_words_are_never_captured(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on("what should I do", text("We decided to use MongoDB from now on."))
    async with running_app(make_settings()) as client:
        await client.post("/api/chat", json={"message": "what should I do?"})
        found = (await client.post("/api/memories/search", json={"query": "MongoDB"})).json()
        pending = (await client.get("/api/memories/pending")).json()["pending"]
    assert found["results"] == []
    assert pending == []


async def test_episode_messages_are_cleaned(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    async with running_app(make_settings()) as client:
        await client.post(
            "/api/chat",
            json={"message": "look at this:\n```python\nprint('secret')\n```\nand `x = 1` please"},
        )
        container = client.app.state.container  # type: ignore[attr-defined]
        episode = container.episodes.active("main")
        messages = container.episodes.messages(episode.id)
    user = messages[0].content
    assert "[代码块已省略]" in user and "[代码]" in user
    assert "print('secret')" not in user
