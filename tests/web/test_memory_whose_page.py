"""Whose each note is, on the memory page in a real browser (issue #33): a Feishu member's own
notes and a group's team notes say so in the list and in the note's details, and the scope box
filters by person and by group. Without the bridge running the member is shown by open_id."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import Served, open_app

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

ALICE = "ou_alice0000000000000000000000000"
GROUP = "oc_team000000000000000000000000"


def test_the_page_says_whose_each_note_is_and_filters_by_person_and_group(
    page: Page, served: Served
) -> None:
    with served.api() as api:
        for content, title, scope in [
            ("Alice prefers oolong tea.", "Alice's tea", f"person:{ALICE}"),
            ("Weekly reports are due Friday at five.", "Weekly reports", f"team:{GROUP}"),
            ("I drink jasmine tea.", "My tea", "user"),
        ]:
            api.post(
                "/api/memories", json={"content": content, "title": title, "scope": scope}
            ).raise_for_status()
    open_app(page, f"{served.url}/#memory")
    items = page.locator(".mem-item")
    expect(items.filter(has_text="Alice's tea")).to_contain_text(f"{ALICE}'s own")
    expect(items.filter(has_text="Weekly reports")).to_contain_text(f"team of {GROUP}")
    expect(items.filter(has_text="My tea")).to_contain_text("user")

    page.locator("#mem-scope").fill(f"person:{ALICE}")
    page.locator("#mem-scope").press("Enter")
    expect(items).to_have_count(1)
    expect(items).to_contain_text("Alice's tea")
    items.first.click()
    expect(page.locator("#mem-meta")).to_contain_text(f"{ALICE}'s own")
    page.locator("#mem-scope").fill(f"team:{GROUP}")
    page.locator("#mem-scope").press("Enter")
    expect(items).to_have_count(1)
    expect(items).to_contain_text("Weekly reports")
