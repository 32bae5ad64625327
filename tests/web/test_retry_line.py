"""The page shows a retried model request while it happens, then the answer."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.agent.test_endpoint_e2e import overloaded_then
from tests.fakes.anthropic_api import text
from tests.web.conftest import Served, open_app

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_a_retried_request_shows_a_line_until_the_answer_comes(
    page: Page, served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "2")  # read by the CLI the app starts
    overloaded_then(served.fake, 2, text("finally here", delay=3))
    open_app(page, served.url)
    page.locator("#input").fill("are you there?")
    page.locator("#input").press("Enter")
    reply = page.locator(".msg.assistant").last
    expect(reply.locator(".retrying")).to_have_text(
        re.compile(r"Retrying \(2/2\) in \d+ s: overloaded")
    )
    expect(reply.locator(".content")).to_have_text("finally here")
    expect(reply.locator(".retrying")).to_have_count(0)
