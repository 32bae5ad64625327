"""A conflicting note in a real browser: the memory view shows the new note and the old one
side by side under "Pending: conflicting notes", and "Keep new" supersedes the old one, with
both notes' histories kept."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import Served, open_app

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_a_conflict_is_shown_side_by_side_and_resolved_from_the_page(
    page: Page, served: Served
) -> None:
    with served.api() as api:
        old = api.post(
            "/api/memories", json={"content": "周会在周一上午 10 点。", "type": "decision"}
        ).json()
        new = api.post(
            "/api/memories", json={"content": "周会在周一上午 11 点。", "type": "decision"}
        ).json()
    assert new["conflicts_with"] == old["id"]

    open_app(page, f"{served.url}/#memory")
    item = page.locator(".conflict-item")
    expect(item).to_have_count(1)
    expect(item).to_contain_text("a number changed (10 -> 11)")
    expect(item.locator('.conflict-side[data-side="new"]')).to_contain_text("上午 11 点")
    expect(item.locator('.conflict-side[data-side="old"]')).to_contain_text("上午 10 点")
    for label in ("Keep new", "Keep old", "Keep both"):
        expect(item.get_by_role("button", name=label)).to_be_visible()

    item.get_by_role("button", name="Keep new").click()
    expect(page.locator("#conflict-list")).to_contain_text("No conflicts.")
    with served.api() as api:
        kept = api.get(f"/api/memories/{old['id']}").json()
        assert (kept["status"], kept["superseded_by"]) == ("superseded", new["id"])
        assert api.get(f"/api/memories/{new['id']}").json()["status"] == "active"
        versions = api.get(f"/api/memories/{old['id']}/history").json()["versions"]
        assert [v["kind"] for v in versions] == ["supersede", "create"]
        assert api.get(f"/api/memories/{new['id']}/history").json()["versions"]
