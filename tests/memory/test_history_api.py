"""A note's history over HTTP (the real app, its lifespan, the token): list, read, restore,
deleted notes, and clear refusals for unknown ids and versions."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from settings import Settings
from tests.conftest import running_app

TOKEN = "history-token"


def _hand_edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace(old, new), encoding="utf-8")
    later = time.time_ns() + 2_000_000_000
    os.utime(path, ns=(later, later))


async def test_history_lists_each_change_and_restores_a_version(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(api_token=TOKEN)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with running_app(settings) as client:
        saved = (
            await client.post(
                "/api/memories",
                json={"content": "周会在周一上午十点。", "title": "周会", "tags": ["team"]},
                headers=auth,
            )
        ).json()
        note_id = saved["id"]
        edited = await client.put(
            f"/api/memories/{note_id}", json={"content": "周会改到周二下午三点。"}, headers=auth
        )
        assert edited.status_code == 200
        _hand_edit(settings.memory_dir / saved["path"], "周二", "周三")

        history = (await client.get(f"/api/memories/{note_id}/history", headers=auth)).json()
        # the hand edit is seen by the read that lists the history
        rows = [(v["version"], v["kind"], v["source"]["door"]) for v in history["versions"]]
        assert rows == [(3, "edit", "hand edit"), (2, "edit", "web"), (1, "create", "web")]
        assert history["exists"] is True and history["keep"] == 50
        assert "body" not in history["versions"][0]  # the list is light; a version is full

        first = (await client.get(f"/api/memories/{note_id}/history/1", headers=auth)).json()
        assert first["body"] == "周会在周一上午十点。"
        assert first["tags"] == ["team"]
        assert "title: 周会" in first["text"]

        restored = await client.post(f"/api/memories/{note_id}/history/1/restore", headers=auth)
        assert restored.status_code == 200, restored.text
        body: dict[str, Any] = restored.json()
        assert body["restored_from"] == 1 and body["versions"] == 4
        assert body["note"]["body"].strip() == "周会在周一上午十点。"
        assert "周会在周一上午十点。" in (settings.memory_dir / saved["path"]).read_text("utf-8")
        newest = (await client.get(f"/api/memories/{note_id}/history", headers=auth)).json()
        top = newest["versions"][0]
        assert (top["kind"], top["restored_from"], top["source"]["door"]) == ("restore", 1, "web")


async def test_a_deleted_note_is_listed_and_restored(
    make_settings: Callable[..., Settings],
) -> None:
    async with running_app(make_settings()) as client:
        saved = (await client.post("/api/memories", json={"content": "Gone soon."})).json()
        assert (await client.delete(f"/api/memories/{saved['id']}")).status_code == 200
        assert (await client.get(f"/api/memories/{saved['id']}")).status_code == 404
        deleted = (await client.get("/api/memories/history/deleted")).json()["deleted"]
        assert [(d["note_id"], d["kind"], d["version"]) for d in deleted] == [
            (saved["id"], "delete", 2)
        ]
        history = (await client.get(f"/api/memories/{saved['id']}/history")).json()
        assert history["exists"] is False
        back = await client.post(f"/api/memories/{saved['id']}/history/2/restore")
        assert back.status_code == 200, back.text
        assert (await client.get(f"/api/memories/{saved['id']}")).json()["body"].strip() == (
            "Gone soon."
        )
        assert (await client.get("/api/memories/history/deleted")).json()["deleted"] == []


async def test_unknown_ids_and_versions_are_refused_clearly(
    make_settings: Callable[..., Settings],
) -> None:
    async with running_app(make_settings()) as client:
        saved = (await client.post("/api/memories", json={"content": "Here to stay."})).json()
        nid = saved["id"]
        unknown = await client.get("/api/memories/no-such-note/history")
        assert unknown.status_code == 404
        assert "no-such-note" in unknown.json()["detail"]
        missing = await client.get(f"/api/memories/{nid}/history/7")
        assert missing.status_code == 404
        assert "v7" in missing.json()["detail"]
        assert (await client.post(f"/api/memories/{nid}/history/7/restore")).status_code == 404
        assert (await client.post("/api/memories/nope/history/1/restore")).status_code == 404
        assert (await client.get(f"/api/memories/{nid}/history/0")).status_code == 422
        assert (await client.get(f"/api/memories/{nid}/history/abc")).status_code == 422
        assert (await client.get("/api/memories/history/deleted?limit=0")).status_code == 422


async def test_history_needs_the_token(make_settings: Callable[..., Settings]) -> None:
    async with running_app(make_settings(api_token=TOKEN)) as client:
        assert (await client.get("/api/memories/history/deleted")).status_code == 401
        assert (await client.post("/api/memories/x/history/1/restore")).status_code == 401


async def test_a_deleted_note_comes_back_with_the_status_its_version_had(
    make_settings: Callable[..., Settings],
) -> None:
    """Restoring a deleted note never undoes a conflict choice: the note kept out by "keep
    old" comes back deprecated, the one replaced by "keep new" superseded by the same note,
    and neither makes a new pending choice nor touches the note that won."""
    async with running_app(make_settings()) as client:

        async def save(content: str) -> dict[str, Any]:
            body = {"content": content, "type": "decision", "scope": "project:api"}
            response = await client.post("/api/memories", json=body)
            assert response.status_code == 200, response.text
            saved: dict[str, Any] = response.json()
            return saved

        async def delete_and_restore(note_id: str) -> dict[str, Any]:
            assert (await client.delete(f"/api/memories/{note_id}")).status_code == 200
            [gone] = [
                d
                for d in (await client.get("/api/memories/history/deleted")).json()["deleted"]
                if d["note_id"] == note_id
            ]
            back = await client.post(f"/api/memories/{note_id}/history/{gone['version']}/restore")
            assert back.status_code == 200, back.text
            note: dict[str, Any] = (await client.get(f"/api/memories/{note_id}")).json()
            return note

        async def pending() -> list[Any]:
            listed = (await client.get("/api/memories/supersessions")).json()
            return list(listed["supersessions"])

        # keep old: the new note is deprecated; deleted and restored, it stays deprecated
        kept = await save("数据库端口是 5432。")
        rejected = await save("数据库端口是 5433")
        choice = f"/api/memories/supersessions/{rejected['pending_supersession']}/resolve"
        assert (await client.post(choice, json={"keep": "old"})).status_code == 200
        back = await delete_and_restore(rejected["id"])
        assert (back["status"], back["superseded_by"]) == ("deprecated", None)
        assert back["body"].strip() == "数据库端口是 5433"
        assert (await client.get(f"/api/memories/{kept['id']}")).json()["status"] == "active"
        assert await pending() == []
        found = await client.post("/api/memories/search", json={"query": "数据库端口", "all": True})
        assert [hit["id"] for hit in found.json()["results"]] == [kept["id"]]
        history = (await client.get(f"/api/memories/{rejected['id']}/history")).json()
        top = history["versions"][0]
        assert (top["kind"], top["status"]) == ("restore", "deprecated")

        # keep new: the old note is superseded; restored, it still names its successor
        old = await save("Keep logs for 14 days.")
        new = await save("Keep logs for 30 days.")
        choice = f"/api/memories/supersessions/{new['pending_supersession']}/resolve"
        assert (await client.post(choice, json={"keep": "new"})).status_code == 200
        back = await delete_and_restore(old["id"])
        assert (back["status"], back["superseded_by"]) == ("superseded", new["id"])
        assert (await client.get(f"/api/memories/{new['id']}")).json()["status"] == "active"
        assert await pending() == []
