"""`claude-memory memory migrate --to postgresql://...`: a SQLite home moves onto the database.

The home is filled through the product (a real chat turn through the app and the real CLI,
notes saved and embedded by the store, episodes and pending entities by their stores, a
Feishu chat generation); the migration runs as a real `claude-memory` process; then an app
on the database (other home, empty CLI config dir) continues the conversation with its
history, and the notes answer the bilingual questions as they did at home.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from bridge.state import BridgeState
from memory.encoders.models import HashingEncoder
from memory.history.store import HistoryStore
from memory.loop.entities import EntityCandidate, PendingStore
from memory.loop.episodes import EpisodeStore
from memory.model import NoteDraft
from memory.postgres.store import PostgresMemoryStore
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore
from settings import Settings
from storage.postgres import PostgresDatabase
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BILINGUAL = json.loads((ROOT / "tests" / "data" / "bilingual_memory.json").read_text("utf-8"))


def _use_config_dir(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path.mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(path))


async def _chat(client: httpx.AsyncClient, message: str) -> dict[str, object]:
    resp = await client.post("/api/chat", json={"message": message, "conversation_id": "moved"})
    assert resp.status_code == 200, resp.text
    body: dict[str, object] = resp.json()
    assert body["is_error"] is False, body
    return body


def _fill_memory(settings: Settings) -> dict[str, str]:
    """The bilingual notes with vectors, an episode, a pending entity; returns note ids by
    the set's ids."""
    ids: dict[str, str] = {}
    with MemoryStore.open(settings.memory_config()) as store:
        state = StateDB(settings.state_path)
        store.attach_history(HistoryStore(state))  # every save keeps a version, as in the app
        try:
            for note in BILINGUAL["notes"]:
                ids[note["id"]] = store.save(NoteDraft(content=note["text"])).id
            store.attach_encoder(HashingEncoder())
            assert store.sync_vectors() >= len(BILINGUAL["notes"])
            episodes = EpisodeStore(state, store)
            episode = episodes.start("cli:session-1", title="迁移前的会话", project="demo")
            episodes.record(episode.id, "user", "我们把数据库迁移到 PostgreSQL 吧")
            episodes.record(episode.id, "assistant", "好的，先导出再导入。")
            PendingStore(state).add(
                EntityCandidate(
                    type="decision", title="Zhang Wei", content="张伟负责支付服务", confidence=0.6
                )
            )
        finally:
            state.close()
    feishu = BridgeState(settings.home_dir / "feishu.db")
    try:
        feishu.bump_generation("oc_chat_1")
        feishu.bump_generation("oc_chat_1")
        feishu.set_model("oc_chat_1", "claude-sonnet-4-5")
    finally:
        feishu.close()
    return ids


def _migrate(home: Path, url: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "cli.py"),
            "--home",
            str(home),
            "memory",
            "migrate",
            *("--to", url, "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "CLAUDE_MEMORY_ENCODER": "none", **env},
        check=False,
    )


def _top5(store: MemoryStore | PostgresMemoryStore, query: str) -> list[str]:
    # The whole ranking (no relevance floor): what is compared is the two stores' order.
    return [h.id for h in store.search(query, limit=5, record_access=False, floor=0)]


async def test_a_sqlite_home_moves_to_postgresql_and_goes_on_there(
    make_settings: Callable[..., Settings],
    fake_model: FakeMessagesAPI,
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    _use_config_dir(tmp_path / "config-local", monkeypatch)  # read by Settings: first
    local = make_settings(home=home)
    async with running_app(local) as client:
        first = await _chat(client, "my locker code is 4711")
    ids = _fill_memory(local)

    done = _migrate(home, database_url)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    counts = {c["what"]: (c["home"], c["database"]) for c in report["counts"]}
    assert report["ok"] is True
    assert all(home_n == db_n for home_n, db_n in counts.values()), counts
    notes = len(BILINGUAL["notes"]) + 1  # and the profile skeleton every home starts with
    assert counts["notes"] == (notes, notes)
    assert counts["conversations"] == (1, 1) and counts["turns"] == (1, 1)
    assert counts["transcripts"] == (1, 1)
    assert counts["episodes"][0] >= 2  # the chat's own and the one made here
    assert counts["episode messages"][0] >= 2 and counts["pending entities"][0] >= 1
    assert counts["feishu chats"] == (1, 1)
    # every table of the memory state moves, the notes' history with the rest
    assert counts["note versions"][0] >= len(BILINGUAL["notes"])
    [vectors] = [v for k, v in counts.items() if k.startswith("vectors: ")]
    assert vectors == (notes, notes)

    # The same notes answer the bilingual questions, in the same order, from the database.
    database = PostgresDatabase(database_url, min_size=1, max_size=2)
    database.open()
    try:
        with (
            MemoryStore.open(local.memory_config()) as before,
            PostgresMemoryStore.open(database, local.memory_config()) as after,
        ):
            queries = [q["query"] for q in BILINGUAL["queries"]]
            targets = {q["query"]: ids[q["target"]] for q in BILINGUAL["queries"]}
            at_home = {q: _top5(before, q) for q in queries}
            moved_top5 = {q: _top5(after, q) for q in queries}
            # the database ranks with FTS5's words and BM25 (memory/search/fts5.py): same lists
            differ = {
                q: (at_home[q], moved_top5[q]) for q in queries if at_home[q] != moved_top5[q]
            }
            assert not differ, f"{len(differ)}/{len(queries)} differ: {differ}"
            assert sum(targets[q] in moved_top5[q] for q in queries) > len(queries) // 3
            moved = after.get(ids["e01"])
            assert (
                moved.body == before.get(ids["e01"]).body
                and moved.created == before.get(ids["e01"]).created
            )
        [turn] = database.fetch("SELECT tools, status FROM conversation_turns")
        assert (turn["tools"], turn["status"]) == ([], "completed")  # as the home has them
        [chat] = database.fetch(
            "SELECT generation, model FROM feishu_chats WHERE chat_id = 'oc_chat_1'"
        )
        home_feishu = BridgeState(home / "feishu.db")
        try:
            assert chat["generation"] == home_feishu.generation("oc_chat_1") > 1
            assert chat["model"] == "claude-sonnet-4-5"  # the chat's /model moves with it
        finally:
            home_feishu.close()
    finally:
        database.close()

    # An instance on the database, with no home and no transcript of its own, continues.
    config = tmp_path / "config-shared"
    _use_config_dir(config, monkeypatch)
    shared = make_settings(home=tmp_path / "elsewhere", database_url=database_url)
    async with running_app(shared) as client:
        second = await _chat(client, "which locker code did I give you?")
        assert second["session_id"] == first["session_id"]
        [request] = fake_model.requests_for("which locker code")
        assert "my locker code is 4711" in request.all_text()
        listed = (await client.get("/api/conversations/moved")).json()
        assert listed["turns"] == 2
        found = (await client.post("/api/memories/search", json={"query": "JWT Redis"})).json()
        assert ids["e01"] in [hit["id"] for hit in found["results"]]


def test_migrating_into_a_database_in_use_is_refused_and_changes_nothing(
    make_settings: Callable[..., Settings], database_url: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    with MemoryStore.open(make_settings(home=home).memory_config()) as store:
        store.save(NoteDraft(content="a note to move"))
    assert _migrate(home, database_url).returncode == 0
    again = _migrate(home, database_url)
    assert again.returncode == 2
    assert "already holds notes" in again.stderr and "empty database" in again.stderr
    database = PostgresDatabase(database_url, min_size=1, max_size=1)
    database.open()
    try:
        assert database.fetch("SELECT count(*) AS n FROM memory_notes")[0]["n"] == 2
    finally:
        database.close()


def test_migrating_to_a_database_that_is_not_there_says_which_url_to_check(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    with MemoryStore.open(make_settings(home=home).memory_config()) as store:
        store.save(NoteDraft(content="a note that stays at home"))
    url = f"postgresql://postgres@/nope?host={tmp_path / 'no-server'}"
    done = _migrate(home, url, CLAUDE_MEMORY_DATABASE_POOL_TIMEOUT_SECONDS="1")
    assert done.returncode != 0
    assert "could not connect" in done.stderr and "check --to" in done.stderr
    assert "CLAUDE_MEMORY_DATABASE_URL" not in done.stderr
    with MemoryStore.open(make_settings(home=home).memory_config()) as store:
        assert store.count() == 2  # the note and the profile, untouched
