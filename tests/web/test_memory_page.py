"""The memory view in a real browser: bilingual search, filters, edit, deprecate, delete,
and the pending entities list."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from memory.loop.entities import EntityCandidate
from tests.web.conftest import Served, open_app

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

HIKING = "用户喜欢在周末去爬山，尤其是香山。"


def search(page: Page, query: str) -> None:
    page.locator("#mem-query").fill(query)
    page.locator("#mem-query").press("Enter")


def test_find_by_chinese_query_edit_and_the_file_changes(page: Page, served: Served) -> None:
    with served.api() as api:
        hiking = api.post(
            "/api/memories", json={"content": HIKING, "title": "周末爬山", "tags": ["hobby"]}
        ).json()
        api.post(
            "/api/memories",
            json={
                "content": "The user prefers concise answers with the code first.",
                "title": "Answer style",
                "type": "preference",
                "tags": ["style"],
            },
        ).raise_for_status()
        total = api.get("/api/memories").json()["total"]  # ours and the profile skeleton
    note_file = served.settings.memory_dir / hiking["path"]
    assert note_file.is_file()

    open_app(page, f"{served.url}/#memory")
    expect(page.locator(".mem-item")).to_have_count(total)  # no query: the list of notes
    expect(page.locator("#mem-count")).to_have_text(f"{total} notes")
    search(page, "爬山")
    items = page.locator(".mem-item")
    expect(items).to_have_count(1)
    expect(items).to_contain_text("周末爬山")
    search(page, "concise answers")
    expect(items).to_have_count(1)
    expect(items).to_contain_text("Answer style")

    search(page, "香山")
    items.first.click()
    expect(page.locator("#mem-title")).to_have_value("周末爬山")
    expect(page.locator("#mem-body")).to_have_value(re.compile(re.escape(HIKING)))
    page.locator("#mem-title").fill("周末爬山 Weekend hiking")
    page.locator("#mem-summary").fill("每月至少一次，秋天最好。")
    page.locator("#mem-tags").fill("hobby, 户外")
    page.locator("#mem-body").fill(HIKING + "\n\n秋天的香山红叶最好看。")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#mem-saved")).to_have_text("Saved.")

    saved = note_file.read_text(encoding="utf-8")
    assert "秋天的香山红叶最好看。" in saved
    assert "周末爬山 Weekend hiking" in saved
    assert "每月至少一次，秋天最好。" in saved
    assert "户外" in saved
    search(page, "红叶")
    expect(items).to_have_count(1)
    expect(items).to_contain_text("周末爬山 Weekend hiking")
    expect(items).to_contain_text("#户外")


def test_filters_deprecate_and_delete_with_confirm(page: Page, served: Served) -> None:
    with served.api() as api:
        for content, title, kind, tag in [
            ("Deploys go through the staging box first.", "Deploy order", "decision", "ops"),
            ("用户喜欢深色主题。", "深色主题", "preference", "ui"),
            ("The cache layer is Redis 7.", "Cache layer", "architecture", "ops"),
        ]:
            api.post(
                "/api/memories",
                json={"content": content, "title": title, "type": kind, "tags": [tag]},
            ).raise_for_status()
    open_app(page, f"{served.url}/#memory")
    items = page.locator(".mem-item")
    expect(items.filter(has_text="Deploy order")).to_have_count(1)
    page.locator("#mem-type").select_option("preference")
    expect(items).to_have_count(1)
    expect(items).to_contain_text("深色主题")
    page.locator("#mem-type").select_option("")
    page.locator("#mem-tag").fill("ops")
    page.locator("#mem-tag").press("Enter")
    expect(items).to_have_count(2)
    page.locator("#mem-tag").fill("")

    search(page, "Redis")
    items.first.click()
    expect(page.locator("#mem-title")).to_have_value("Cache layer")
    page.get_by_role("button", name="Deprecate").click()
    expect(page.locator("#mem-saved")).to_have_text("Deprecated.")
    expect(items.first.locator(".badge-deprecated")).to_have_text("deprecated")
    note_path = page.locator("#mem-meta dd").last.inner_text()
    note_file = served.settings.memory_dir / note_path
    assert "status: deprecated" in note_file.read_text(encoding="utf-8")
    page.locator("#mem-status").select_option("active")
    expect(page.locator("#mem-list")).to_contain_text("Nothing found.")
    page.locator("#mem-status").select_option("")
    expect(items).to_have_count(1)

    page.get_by_role("button", name="Delete").click()
    dialog = page.locator("#confirm-dialog")
    expect(dialog).to_contain_text("Cache layer")
    dialog.get_by_role("button", name="Cancel").click()
    assert note_file.exists()
    page.get_by_role("button", name="Delete").click()
    dialog.get_by_role("button", name="Delete").click()
    expect(page.locator("#mem-detail")).to_be_hidden()
    expect(page.locator("#mem-list")).to_contain_text("Nothing found.")
    assert not note_file.exists()


def test_pending_entities_are_confirmed_or_rejected(page: Page, served: Served) -> None:
    pending = served.container.pending
    keep = pending.add(
        EntityCandidate(
            type="decision",
            content="我们决定用 PostgreSQL 存索引。",
            confidence=0.6,
            title="用 PostgreSQL",
        )
    )
    drop = pending.add(
        EntityCandidate(
            type="preference", content="Maybe the user likes tabs.", confidence=0.4, title="Tabs?"
        )
    )
    open_app(page, f"{served.url}/#memory")
    rows = page.locator(".pending-item")
    expect(rows).to_have_count(2)
    row = page.locator(f".pending-item[data-id='{keep.id}']")
    expect(row).to_contain_text("我们决定用 PostgreSQL 存索引。")
    row.get_by_role("button", name="Confirm").click()
    expect(rows).to_have_count(1)
    page.locator(f".pending-item[data-id='{drop.id}']").get_by_role("button", name="Reject").click()
    expect(page.locator("#pending-list")).to_contain_text("Nothing waiting.")
    assert pending.get(keep.id).status == "confirmed"
    assert pending.get(drop.id).status == "rejected"
    # The confirmed entity is now a note.
    search(page, "PostgreSQL")
    expect(page.locator(".mem-item").first).to_contain_text("用 PostgreSQL")


def test_a_pinned_note_starts_every_conversation_and_nothing_else_does(
    page: Page, served: Served
) -> None:
    # Issue #19: a new conversation whose first message is unrelated to every note got the
    # whole memory. Now it gets the user's profile and what the user pinned, from the page.
    with served.api() as api:
        for content, title in [
            ("Deploys go staging first, then production after a smoke test.", "Deploy order"),
            ("The cache layer is Redis 7 with a 15 minute TTL.", "Cache layer"),
        ]:
            api.post("/api/memories", json={"content": content, "title": title}).raise_for_status()
    open_app(page, f"{served.url}/#memory")
    items = page.locator(".mem-item")
    items.filter(has_text="Deploy order").click()
    pin = page.locator("#mem-pin")
    expect(pin).to_have_text("Pin")
    pin.click()
    expect(page.locator("#mem-saved")).to_have_text("Pinned: every session starts with it.")
    expect(pin).to_have_text("Unpin")
    expect(pin).to_have_attribute("aria-pressed", "true")
    expect(items.filter(has_text="Deploy order").locator(".badge-pinned")).to_have_text("pinned")
    note_path = page.locator("#mem-meta dd").last.inner_text()
    assert "- pinned" in (served.settings.memory_dir / note_path).read_text(encoding="utf-8")

    with served.api() as api:
        answer = api.post("/api/chat", json={"message": "今天天气怎么样"})
        assert answer.status_code == 200, answer.text
    (request,) = served.fake.requests_for("今天天气怎么样")
    sent = request.all_text()
    assert "Always relevant (pinned by the user):" in sent
    assert "staging first, then production" in sent
    assert "Redis 7" not in sent  # neither pinned nor relevant

    page.get_by_role("button", name="Unpin").click()
    expect(page.locator("#mem-saved")).to_have_text("Unpinned.")
    expect(items.filter(has_text="Deploy order").locator(".badge-pinned")).to_have_count(0)
