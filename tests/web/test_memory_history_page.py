"""A note's history in a real browser: edits through the page and by hand are listed with who
made them, an old version is read and restored (the file holds it again), and a deleted note
comes back from the page."""

from __future__ import annotations

import os
import re
import time

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import Served, open_app

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

FIRST = "构建用 Jenkins，每晚一次。"


def _edit_by_hand(path: os.PathLike[str], old: str, new: str) -> None:
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    assert old in text
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text.replace(old, new))
    later = time.time_ns() + 2_000_000_000  # past the app's own write, whatever the granularity
    os.utime(path, ns=(later, later))


def _save_body(page: Page, body: str) -> None:
    page.locator("#mem-body").fill(body)
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#mem-saved")).to_have_text("Saved.")


def test_page_and_hand_edits_are_listed_and_the_first_version_restored(
    page: Page, served: Served
) -> None:
    with served.api() as api:
        saved = api.post("/api/memories", json={"content": FIRST, "title": "CI 构建"}).json()
    note_file = served.settings.memory_dir / saved["path"]

    open_app(page, f"{served.url}/#memory")
    page.locator(".mem-item", has_text="CI 构建").click()
    expect(page.locator("#mem-title")).to_have_value("CI 构建")
    versions = page.locator("#mem-history-list li")
    expect(versions).to_have_count(1)

    _save_body(page, "构建用 Buildkite。")
    expect(versions).to_have_count(2)
    _save_body(page, "构建用 GitHub Actions。")
    expect(versions).to_have_count(3)

    _edit_by_hand(note_file, "GitHub Actions", "GitLab CI")
    page.locator(".mem-item", has_text="CI 构建").click()  # reading the note sees the edit
    expect(page.locator("#mem-body")).to_have_value(re.compile("GitLab CI"))
    expect(versions).to_have_count(4)
    doors = [versions.nth(i).get_attribute("data-door") for i in range(4)]
    kinds = [versions.nth(i).get_attribute("data-kind") for i in range(4)]
    assert doors == ["hand edit", "web", "web", "web"]
    assert kinds == ["edit", "edit", "edit", "create"]
    expect(versions.first).to_contain_text("v4 · edited · hand edit")
    expect(versions.last).to_contain_text("v1 · created · web")

    versions.last.get_by_role("button").click()
    expect(page.locator("#mem-version-text")).to_contain_text(FIRST)
    expect(page.locator("#mem-version-text")).to_contain_text("title: CI 构建")
    page.get_by_role("button", name="Restore this version").click()
    expect(page.locator("#mem-saved")).to_have_text("Restored v1.")
    expect(versions).to_have_count(5)
    expect(versions.first).to_contain_text("v5 · restored v1 · web")
    expect(page.locator("#mem-body")).to_have_value(re.compile(re.escape(FIRST)))
    text = note_file.read_text(encoding="utf-8")
    assert FIRST in text
    assert "GitLab" not in text and "Buildkite" not in text


def test_a_note_deleted_from_the_page_is_restored_from_the_page(page: Page, served: Served) -> None:
    with served.api() as api:
        saved = api.post(
            "/api/memories",
            json={"content": "The on-call rota lives in PagerDuty.", "title": "On-call"},
        ).json()
    note_file = served.settings.memory_dir / saved["path"]
    open_app(page, f"{served.url}/#memory")
    expect(page.locator("#deleted-list")).to_contain_text("Nothing deleted.")
    page.locator(".mem-item", has_text="On-call").click()
    page.get_by_role("button", name="Delete").click()
    page.locator("#confirm-dialog").get_by_role("button", name="Delete").click()
    expect(page.locator("#mem-detail")).to_be_hidden()
    assert not note_file.exists()

    gone = page.locator("#deleted-list li", has_text="On-call")
    expect(gone).to_contain_text("deleted")
    gone.get_by_role("button", name="Restore").click()
    expect(page.locator("#mem-title")).to_have_value("On-call")
    expect(page.locator("#deleted-list")).to_contain_text("Nothing deleted.")
    expect(page.locator(".mem-item", has_text="On-call")).to_have_count(1)
    assert "PagerDuty" in note_file.read_text(encoding="utf-8")
    expect(page.locator("#mem-history-list li").first).to_contain_text("restored v2")
