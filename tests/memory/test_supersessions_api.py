"""A contradicting note over HTTP (the real app, its lifespan, the token): the save says it
conflicts, the pending supersession is listed with both notes, and resolving it is final and
kept in both notes' histories; unknown ids are 404, unknown choices 422."""

from __future__ import annotations

from collections.abc import Callable

from settings import Settings
from tests.conftest import running_app

TOKEN = "supersession-token"


async def test_a_contradicting_note_is_pending_until_resolved(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(api_token=TOKEN)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with running_app(settings) as client:

        async def save(content: str) -> dict[str, object]:
            body = {"content": content, "type": "decision", "scope": "project:api"}
            response = await client.post("/api/memories", json=body, headers=auth)
            assert response.status_code == 200, response.text
            saved: dict[str, object] = response.json()
            return saved

        old = await save("数据库端口是 5432。")
        assert old["conflicts_with"] is None and old["notice"] is None
        new = await save("数据库端口是 5433")
        assert new["deduplicated"] is False and new["conflicts_with"] == old["id"]
        pending_id = new["pending_supersession"]
        assert isinstance(pending_id, str) and pending_id.startswith("sup_")
        notice = str(new["notice"])
        assert f"conflicts with [{old['id']}]" in notice and "5432 -> 5433" in notice
        assert "Pending your choice" in notice
        # only spaces and punctuation changed: the same note, no conflict
        again = await save("数据库端口是5432")
        assert again["deduplicated"] is True and again["id"] == old["id"]

        listed = (await client.get("/api/memories/supersessions", headers=auth)).json()
        [item] = listed["supersessions"]
        assert (item["id"], item["status"], item["keep"]) == (pending_id, "pending", None)
        assert item["old"]["body"].startswith("数据库端口是 5432")
        assert item["new"]["body"].startswith("数据库端口是 5433")
        assert item["old"]["status"] == item["new"]["status"] == "active"

        url = f"/api/memories/supersessions/{pending_id}/resolve"
        bad = await client.post(url, json={"keep": "neither"}, headers=auth)
        assert bad.status_code == 422
        unknown = await client.post(
            "/api/memories/supersessions/sup_nope/resolve", json={"keep": "new"}, headers=auth
        )
        assert unknown.status_code == 404
        assert (
            await client.get("/api/memories/supersessions/sup_nope", headers=auth)
        ).status_code == 404
        assert (
            await client.get("/api/memories/supersessions?status=maybe", headers=auth)
        ).status_code == 422

        resolved = await client.post(url, json={"keep": "new"}, headers=auth)
        assert resolved.status_code == 200, resolved.text
        body = resolved.json()
        assert (body["status"], body["keep"]) == ("resolved", "new")
        assert (body["old"]["status"], body["old"]["superseded_by"]) == ("superseded", new["id"])
        # the same choice again answers as before; another one is refused
        same = await client.post(url, json={"keep": "new"}, headers=auth)
        assert same.status_code == 200 and same.json()["keep"] == "new"
        other = await client.post(url, json={"keep": "old"}, headers=auth)
        assert other.status_code == 409

        pending = (await client.get("/api/memories/supersessions", headers=auth)).json()
        assert pending["supersessions"] == []
        everything = (
            await client.get("/api/memories/supersessions?status=all", headers=auth)
        ).json()
        assert [s["id"] for s in everything["supersessions"]] == [pending_id]

        # both notes keep their history: the old one's supersede is a version, by the web door
        old_history = (await client.get(f"/api/memories/{old['id']}/history", headers=auth)).json()
        assert [(v["kind"], v["source"]["door"]) for v in old_history["versions"]] == [
            ("supersede", "web"),
            ("create", "web"),
        ]
        new_history = (await client.get(f"/api/memories/{new['id']}/history", headers=auth)).json()
        assert [v["kind"] for v in new_history["versions"]] == ["create"]


async def test_the_supersession_routes_need_the_token(
    make_settings: Callable[..., Settings],
) -> None:
    async with running_app(make_settings(api_token=TOKEN)) as client:
        assert (await client.get("/api/memories/supersessions")).status_code == 401
