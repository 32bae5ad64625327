"""'Not relevant' beside a recalled note, in a real browser (issue #19): after the click, a
similar prompt no longer gets the note, another prompt still does."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import Served, open_app
from tests.web.test_chat_page import last_reply, send

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_a_note_marked_not_relevant_is_left_out_of_similar_prompts(
    page: Page, served: Served
) -> None:
    with served.api() as api:
        saved = api.post(
            "/api/memories",
            json={"content": "项目 atlas 部署在 fra-2，用 docker compose。", "title": "Atlas 部署"},
        ).json()
    open_app(page, served.url)
    send(page, "atlas 部署在哪里？")
    used = last_reply(page).locator(".memory-used")
    expect(used.locator(".count")).to_have_text("1")
    used.locator("summary").click()
    used.get_by_role("button", name="Not relevant").click()
    expect(used.get_by_role("button", name="Marked not relevant")).to_be_disabled()
    expect(used.locator(".memory-notes li")).to_have_class("dismissed")

    with served.api() as api:  # the mark is the server's, not the page's
        assert api.get(f"/api/memories/{saved['id']}").status_code == 200

    page.get_by_role("button", name="+ New conversation").click()
    send(page, "atlas 部署在哪里")  # the same question: the note stays out
    reply = last_reply(page)
    expect(reply.locator(".content")).to_have_text("echo: atlas 部署在哪里")
    expect(reply.locator(".memory-used")).to_be_hidden()
    assert "fra-2" not in served.fake.requests_for("atlas 部署在哪里")[-1].all_text()

    page.get_by_role("button", name="+ New conversation").click()
    send(page, "atlas 用 docker compose 吗")  # another question: it is recalled
    reply = last_reply(page)
    expect(reply.locator(".content")).to_have_text("echo: atlas 用 docker compose 吗")
    expect(reply.locator(".memory-used .count")).to_have_text("1")
    assert "fra-2" in served.fake.requests_for("atlas 用 docker compose 吗")[-1].all_text()
