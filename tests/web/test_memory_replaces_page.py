"""Replaced notes in a real browser (issue #29): a superseded note found by a search says
"Replaced by <the newer note>" with a link that opens it; "Replaces…" on an open note marks an
older note as replaced by it, from the page (recorded in the older note's history as the
`web` door), and Reactivate makes that note current again."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import Served, open_app

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

NOTES = {
    "staging": ("Deploy via staging", "Deploys go through the staging box first."),
    "canary": ("Deploy via canary", "Deploys go through the canary pool before every region."),
    "jenkins": ("Builds on Jenkins", "Builds run on the Jenkins server in the basement."),
    "actions": ("Builds on Actions", "Builds run on GitHub Actions runners."),
}


def search(page: Page, query: str) -> None:
    page.locator("#mem-query").fill(query)
    page.locator("#mem-query").press("Enter")


def test_a_replaced_note_is_marked_and_replaces_is_done_from_the_page(
    page: Page, served: Served
) -> None:
    with served.api() as api:
        ids = {}
        for key, (title, content) in NOTES.items():
            saved = api.post("/api/memories", json={"content": content, "title": title}).json()
            assert not saved.get("conflicts_with"), saved
            ids[key] = saved["id"]
        api.put(
            f"/api/memories/{ids['jenkins']}",
            json={"status": "superseded", "superseded_by": ids["actions"]},
        ).raise_for_status()

    open_app(page, f"{served.url}/#memory")
    results = page.locator("#mem-list")
    items = results.locator(":scope > li")
    # the list under "Any status": current notes first, the replaced one last
    expect(items.last).to_have_attribute("data-id", ids["jenkins"])
    statuses = [items.nth(i).get_attribute("data-status") for i in range(items.count())]
    assert statuses == sorted(statuses, key=lambda s: s != "active"), statuses

    # a search under "Any status" finds the replaced note too, marked, in the server's order
    search(page, "Builds")
    expect(items).to_have_count(2)
    with served.api() as api:
        found = api.post(
            "/api/memories/search", json={"query": "Builds", "include_inactive": True}
        ).json()["results"]
    shown = [items.nth(i).get_attribute("data-id") for i in range(items.count())]
    assert shown == [r["id"] for r in found]  # the page does not re-sort
    jenkins = results.locator(f"li[data-id='{ids['jenkins']}']")
    marker = jenkins.locator(".mem-replaced")
    expect(marker).to_contain_text("Replaced by Builds on Actions")
    expect(marker.locator("time")).to_be_visible()
    expect(results.locator(f"li[data-id='{ids['actions']}'] .mem-replaced")).to_have_count(0)
    marker.get_by_role("link", name="Builds on Actions").click()
    expect(page.locator("#mem-title")).to_have_value("Builds on Actions")

    # "Replaces…" from the newer note: it cannot pick itself
    search(page, "Deploys")
    results.locator(f"li[data-id='{ids['canary']}'] .mem-item").click()
    expect(page.locator("#mem-title")).to_have_value("Deploy via canary")
    page.get_by_role("button", name="Replaces…").click()
    picker = page.locator("#mem-replaces")
    expect(picker).to_be_visible()
    candidates = picker.locator("#mem-replaces-list .mem-item")
    picker.get_by_role("searchbox").fill("Deploy via")
    expect(candidates).to_have_count(1)
    expect(candidates).to_contain_text("Deploy via staging")
    picker.get_by_role("searchbox").fill(ids["canary"])
    expect(picker).to_contain_text("A note cannot replace itself.")
    expect(candidates).to_have_count(0)
    picker.get_by_role("searchbox").fill("staging")
    candidates.filter(has_text="Deploy via staging").click()
    expect(picker).to_be_hidden()
    expect(page.locator("#mem-saved")).to_have_text(
        "“Deploy via staging” is now marked as replaced by this note."
    )
    staging = results.locator(f"li[data-id='{ids['staging']}']")
    expect(staging.locator(".badge-superseded")).to_have_text("superseded")
    expect(staging.locator(".mem-replaced")).to_contain_text("Replaced by Deploy via canary")

    with served.api() as api:
        old = api.get(f"/api/memories/{ids['staging']}").json()
        assert (old["status"], old["superseded_by"]) == ("superseded", ids["canary"])
        assert old["superseded_by_title"] == "Deploy via canary"
        [latest, *_] = api.get(f"/api/memories/{ids['staging']}/history").json()["versions"]
        assert (latest["kind"], latest["source"]["door"]) == ("supersede", "web")

    # the replaced note opened: its detail names the newer one; Reactivate restores it
    staging.locator(".mem-item").click()
    expect(page.locator("#mem-title")).to_have_value("Deploy via staging")
    expect(page.locator("#mem-meta")).to_contain_text("Replaced by")
    expect(page.locator("#mem-meta").get_by_role("link", name="Deploy via canary")).to_be_visible()
    page.get_by_role("button", name="Reactivate").click()
    expect(page.locator("#mem-saved")).to_have_text("Reactivated.")
    expect(page.locator("#mem-meta")).not_to_contain_text("Replaced by")
    expect(staging.locator(".mem-replaced")).to_have_count(0)
    with served.api() as api:
        back = api.get(f"/api/memories/{ids['staging']}").json()
        assert (back["status"], back["superseded_by"]) == ("active", None)
