"""Two app instances on one PostgreSQL database: one agent, one set of conversations, one Feishu.

Each instance has its own home (so its own workspace path) and the CLI of each runs with its
own, empty `CLAUDE_CONFIG_DIR`: whatever history a turn sees came through the database.
The real CLI talks to the fake model; the database is a real PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from agent.pg_session_store import SHARED_PROJECT_KEY
from settings import Settings
from tests.bridge.conftest import feishu_app, message_id, wait_answer
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI, text
from tests.fakes.feishu_platform import OWNER_OPEN_ID, FakeFeishu
from tests.helpers import wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Point the CLIs an instance starts from now on at a new, empty config dir."""

    def use(name: str, *instances: Settings) -> Path:
        path = tmp_path / f"claude-config-{name}"
        path.mkdir()
        monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(path))
        for settings in instances:  # read once by Settings (CLAUDE_CONFIG_DIR), passed on
            settings.claude_config_dir = path
        return path

    return use


async def _chat(client: httpx.AsyncClient, message: str) -> dict[str, object]:
    resp = await client.post("/api/chat", json={"message": message, "conversation_id": "shared"})
    assert resp.status_code == 200, resp.text
    body: dict[str, object] = resp.json()
    assert body["is_error"] is False, body
    return body


def _transcripts(config: Path) -> list[Path]:
    return list((config / "projects").rglob("*.jsonl"))


async def test_a_conversation_moves_between_instances_with_its_history(
    make_settings: Callable[..., Settings],
    fake_model: FakeMessagesAPI,
    database_url: str,
    tmp_path: Path,
    config_dir: Callable[..., Path],
) -> None:
    a = make_settings(home=tmp_path / "home-a", database_url=database_url)
    b = make_settings(home=tmp_path / "home-b", database_url=database_url)
    async with running_app(a) as client_a, running_app(b) as client_b:
        config_a = config_dir("a", a)
        first = await _chat(client_a, "my locker code is 4711")
        assert _transcripts(config_a)  # A's CLI wrote its transcript locally...
        config_b = config_dir("b", b)
        second = await _chat(client_b, "which locker code did I give you?")
        # ...B resumed the same session with A's turn in the request, from the database alone.
        assert second["session_id"] == first["session_id"]
        [request_b] = fake_model.requests_for("which locker code")
        assert "my locker code is 4711" in request_b.all_text()
        assert _transcripts(config_b) == []
        store = client_b.app.state.container.sessions.session_store  # type: ignore[attr-defined]
        transcript = await store.load(
            {"project_key": SHARED_PROJECT_KEY, "session_id": str(first["session_id"])}
        )
        assert transcript and len(transcript) >= 4

        # A's client is still connected but behind: its next turn resumes from the database.
        config_dir("a-again", a)
        await _chat(client_a, "and what did I just ask?")
        [request_a] = fake_model.requests_for("what did I just ask")
        assert "which locker code did I give you?" in request_a.all_text()

        # Two messages to one conversation on both instances at once: the turn lock runs them
        # one after the other, and the later one sees the earlier one's turn.
        fake_model.on("slow from A", text("A done", delay=1.5))
        await asyncio.gather(
            _chat(client_a, "slow from A"),
            _chat(client_b, "quick from B"),
        )
        [slow] = fake_model.requests_for("slow from A")
        [quick] = fake_model.requests_for("quick from B")
        assert ("slow from A" in quick.all_text()) != ("quick from B" in slow.all_text())

        listed = (await client_a.get("/api/conversations/shared")).json()
    assert listed["turns"] == 5
    assert len(listed["history"]) == 5


async def test_the_same_feishu_event_reaching_two_instances_is_answered_once(
    make_settings: Callable[..., Settings],
    fake_model: FakeMessagesAPI,
    fake_feishu: FakeFeishu,
    database_url: str,
    tmp_path: Path,
) -> None:
    def settings(name: str) -> Settings:
        return make_settings(
            home=tmp_path / f"home-{name}",
            database_url=database_url,
            feishu_app_id=fake_feishu.app_id,
            feishu_app_secret=fake_feishu.app_secret,
            feishu_domain=fake_feishu.url,
            feishu_allowed_users=[OWNER_OPEN_ID],
        )

    event = fake_feishu.text_event("count me once across instances")
    backfilled = fake_feishu.text_event(
        "count me once across instances", message_id=message_id(event)
    )
    async with feishu_app(settings("a")):
        fake_feishu.push_event(event)  # the only connection: instance A gets it
        async with feishu_app(settings("b")):  # B connects last: the fake now pushes to B
            fake_feishu.push_event(event)  # Feishu re-delivers the event to the other instance
            fake_feishu.push_event(backfilled)  # and again under a new event id
            await wait_answer(fake_feishu, message_id(event))
            await wait_until(lambda: len(fake_feishu.acks) == 3)
            probe = fake_feishu.push_text("/status")  # B answers what is new to it
            await wait_answer(fake_feishu, message_id(probe))
    replies = fake_feishu.replies_to(message_id(event))
    assert len(replies) == 1, [(r.msg_type, r.text[:200]) for r in replies]
    assert len(fake_model.requests_for("count me once")) == 1
    assert {a.code for a in fake_feishu.acks} == {200}


async def test_two_instances_share_one_memory_and_concurrent_saves_lose_nothing(
    make_settings: Callable[..., Settings], database_url: str, tmp_path: Path
) -> None:
    a = make_settings(home=tmp_path / "home-a", database_url=database_url)
    b = make_settings(home=tmp_path / "home-b", database_url=database_url)
    async with running_app(a) as client_a, running_app(b) as client_b:

        async def save(client: httpx.AsyncClient, n: int) -> str:
            resp = await client.post(
                "/api/memories", json={"content": f"实例笔记 {n}: deploy step number {n} of 80"}
            )
            assert resp.status_code in (200, 201), resp.text
            return str(resp.json()["id"])

        saved = await asyncio.gather(*(save(client_a if n % 2 else client_b, n) for n in range(80)))
        assert len(set(saved)) == 80
        # what A wrote, B finds (and the other way round): one memory, not two
        found = (await client_b.post("/api/memories/search", json={"query": "实例笔记 17"})).json()
        assert saved[17] in [hit["id"] for hit in found["results"]]
        stats_a = (await client_a.get("/api/memories/stats")).json()
        stats_b = (await client_b.get("/api/memories/stats")).json()
    assert stats_a["total"] == stats_b["total"] == 81  # and the profile skeleton
    # the homes hold no notes of their own: the database does
    assert not list((tmp_path / "home-a" / "memory").rglob("*-*.md"))
