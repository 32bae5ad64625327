"""Memory in the agent loop, with the real CLI: injection, dedup window, tools, skills."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from settings import Settings
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI, RecordedRequest, text, tool

pytestmark = pytest.mark.e2e

NOTE = "The deploy target for project atlas is the Hetzner box fra-2; 部署 用 docker compose。"


async def save_note(client: httpx.AsyncClient, content: str = NOTE, **fields: object) -> str:
    resp = await client.post(
        "/api/memories", json={"content": content, "title": "Atlas deploy target", **fields}
    )
    assert resp.status_code == 200, resp.text
    return str(resp.json()["id"])


def reminder_text(request: RecordedRequest) -> str:
    """The memory context blocks added in this request's turn (not earlier turns' history)."""
    blocks = request.turn_text().split("<memory-context>")[1:]
    return "\n".join(b.split("</memory-context>")[0] for b in blocks)


async def test_memory_saved_in_one_conversation_reaches_the_next(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on(
        "remember the deploy target",
        tool(
            "mcp__memory__memory_save",
            {
                "content": NOTE,
                "title": "Atlas deploy target",
                "type": "project",
                "tags": ["deploy"],
            },
        ),
        text("Saved."),
    )
    settings = make_settings()
    async with running_app(settings) as client:
        saved = (
            await client.post(
                "/api/chat", json={"message": "remember the deploy target", "conversation_id": "A"}
            )
        ).json()
        assert saved == saved | {"reply": "Saved.", "is_error": False}
        found = (await client.post("/api/memories/search", json={"query": "atlas deploy"})).json()
        note_id = found["results"][0]["id"]
        assert list(settings.memory_dir.rglob("*.md")) and any(
            NOTE[:30] in p.read_text(encoding="utf-8") for p in settings.memory_dir.rglob("*.md")
        )
        fake_model.on(
            "where do we deploy atlas",
            tool("mcp__memory__memory_get", {"ids": [note_id]}),
            text("On fra-2."),
        )
        answer = (
            await client.post(
                "/api/chat", json={"message": "where do we deploy atlas?", "conversation_id": "B"}
            )
        ).json()
        detail = (await client.get("/api/conversations/B")).json()
    first_b = fake_model.requests_for("where do we deploy atlas")[0]
    assert note_id in reminder_text(first_b)
    assert "Atlas deploy target" in reminder_text(first_b)
    (result,) = fake_model.message_requests()[-1].tool_results
    assert "Hetzner box fra-2" in str(result["content"])
    assert answer["reply"] == "On fra-2."
    assert [n["id"] for n in detail["history"][0]["injected"]] == [note_id]


async def test_a_memory_is_not_reinjected_within_five_turns_but_is_after_compaction(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    async with running_app(make_settings()) as client:
        note_id = await save_note(client)
        seen = []
        for turn in range(7):
            await client.post("/api/chat", json={"message": f"our atlas deploy question {turn}"})
            request = fake_model.requests_for(f"our atlas deploy question {turn}")[0]
            seen.append(note_id in reminder_text(request))
        await client.post("/api/chat", json={"message": "our atlas deploy before compaction"})
        compacted = await client.app.state.container.sessions.compact("main")  # type: ignore[attr-defined]
        await client.post("/api/chat", json={"message": "our atlas deploy after compaction"})
    # Injected on turn 1, held back for the next five turns, allowed again on turn 7.
    assert seen == [True, False, False, False, False, False, True]
    assert compacted.is_error is False
    after = fake_model.requests_for("our atlas deploy after compaction")[0]
    assert note_id in reminder_text(after)


async def test_acknowledgements_get_no_memory(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    async with running_app(make_settings()) as client:
        await save_note(client)
        await client.post("/api/chat", json={"message": "atlas deploy?"})
        await client.post("/api/chat", json={"message": "好的"})
    assert reminder_text(fake_model.requests_for("好的")[0]) == ""


async def test_saved_note_is_found_by_search_in_the_next_turn(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on(
        "note that",
        tool(
            "mcp__memory__memory_save",
            {
                "content": "用户偏好：测试一律用 pytest 编写。",
                "type": "preference",
                "title": "测试框架偏好",
            },
        ),
        text("记住了。"),
    )
    fake_model.on(
        "which test framework",
        tool("mcp__memory__memory_search", {"query": "测试框架"}),
        text("pytest"),
    )
    async with running_app(make_settings()) as client:
        await client.post("/api/chat", json={"message": "note that I use pytest"})
        await client.post("/api/chat", json={"message": "which test framework do I use?"})
    (result,) = fake_model.message_requests()[-1].tool_results
    assert "测试框架偏好" in str(result["content"])


async def test_user_notes_and_skill_descriptions_reach_a_new_conversation(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    settings = make_settings()
    async with running_app(settings) as client:
        profile = settings.memory_dir / "user" / "profile.md"
        profile.write_text(
            profile.read_text(encoding="utf-8").replace(
                "## Preferences\n", "## Preferences\n- Answers in Chinese, short.\n"
            ),
            encoding="utf-8",
        )
        await client.post("/api/chat", json={"message": "hello there"})
    first = fake_model.requests_for("hello there")[0]
    assert "Answers in Chinese, short." in reminder_text(first)
    everything = first.all_text()
    assert "Save a lasting fact, preference, decision or lesson" in everything
    assert "mcp__memory__memory_save" in first.tool_names


WORK_NOTES = (
    ("Atlas deploy target", NOTE),
    (
        "Connection pool leak",
        "订单服务的数据库连接池泄漏：事务异常时连接没有归还，已在 finally 中释放。",
    ),
    ("Rate limiting", "We chose a token bucket of 100 requests per minute per API key in nginx."),
    ("Code review rule", "Every pull request needs one approval and green CI before merge."),
    ("Feature flags", "Feature flags live in Unleash; remove a flag two weeks after full rollout."),
)


UNRELATED = ("今天天气怎么样？", "tell me a joke about penguins and how they merge on the ice")


async def test_a_new_conversations_unrelated_first_message_injects_no_note(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    async with running_app(make_settings()) as client:
        ids = [await save_note(client, content, title=title) for title, content in WORK_NOTES]
        for n, message in enumerate(UNRELATED):
            await client.post("/api/chat", json={"message": message, "conversation_id": f"new-{n}"})
        # a common word is shared: the search sees a weak hit, the floor keeps it out
        weak = await client.post("/api/memories/search?all=true", json={"query": UNRELATED[1]})
        found = weak.json()["results"]
        assert ids[3] in [r["id"] for r in found] and all(r["relevance"] < 0.4 for r in found)
        # the same memory still answers a question about it, in a new conversation too
        await client.post(
            "/api/chat",
            json={"message": "我们的数据库连接池泄漏是怎么修的？", "conversation_id": "new-2"},
        )
    for message in UNRELATED:
        injected = reminder_text(fake_model.requests_for(message)[0])
        assert not any(note_id in injected for note_id in ids), injected
    related = reminder_text(fake_model.requests_for("我们的数据库连接池泄漏是怎么修的？")[0])
    assert ids[1] in related
    assert not any(note_id in related for note_id in ids[2:])
