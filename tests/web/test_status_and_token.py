"""The status indicator from /health, and the API token prompt."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.agent.test_endpoint import closed_port
from tests.helpers import PlainWebServer
from tests.web.conftest import PageProblems, Served, local_storage, open_app

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_status_is_ready_when_everything_is_in_place(page: Page, served: Served) -> None:
    open_app(page, served.url)
    status = page.locator("#status")
    expect(status).to_have_attribute("data-state", "ok")
    expect(status).to_have_text("Ready")
    status.click()
    panel = page.locator("#status-panel")
    expect(panel).to_be_visible()
    expect(panel.locator("li")).to_have_text(
        [
            "✓Model endpointreachable",
            "✓Claude CLIfound",
            "✓Credentialspresent",
            re.compile(r"✓Memory indexok · \d+ notes?"),
            "–Feishunot configured",
        ]
    )


def test_status_hints_at_missing_credentials(page: Page, start_app: Callable[..., Served]) -> None:
    served = start_app(anthropic_api_key=None)
    open_app(page, served.url)
    status = page.locator("#status")
    expect(status).to_have_attribute("data-state", "warn")
    expect(status).to_have_text("Check setup (1)")
    status.click()
    expect(page.locator("#status-hints")).to_contain_text("ANTHROPIC_API_KEY")


@pytest.mark.parametrize(
    ("plain_server", "shown"), [(True, "not an Anthropic API"), (False, "unreachable")]
)
def test_status_is_not_ready_when_the_model_endpoint_is_wrong_or_down(
    page: Page, start_app: Callable[..., Served], plain_server: bool, shown: str
) -> None:
    """Another web server (404 everywhere) or a closed port as `ANTHROPIC_BASE_URL`: the page
    says what to check instead of a green "Ready"."""
    with PlainWebServer(404) as server:
        url = server.url if plain_server else f"http://127.0.0.1:{closed_port()}"
        served = start_app(anthropic_base_url=url)
        open_app(page, served.url)
        status = page.locator("#status")
        expect(status).to_have_attribute("data-state", "warn")
        expect(status).to_have_text("Check setup (1)")
        status.click()
        panel = page.locator("#status-panel")
        expect(panel.locator("li").first).to_have_text(f"✕Model endpoint{shown}")
        expect(page.locator("#status-hints")).to_contain_text(
            f"Model endpoint {shown}: check ANTHROPIC_BASE_URL"
        )
        assert url not in page.content()  # the page is public: the URL is not on it


def test_token_is_asked_once_and_sent_as_bearer(
    page: Page, start_app: Callable[..., Served], problems: PageProblems
) -> None:
    problems.expect_console("status of 401")  # the browser logs the refused calls
    served = start_app(api_token="s3cret-token")
    open_app(page, served.url)
    dialog = page.locator("#token-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("needs a token")
    dialog.locator("#token-input").fill("wrong")
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_contain_text("was refused")  # asked again
    dialog.locator("#token-input").fill("s3cret-token")
    with page.expect_request("**/api/conversations") as listed:
        dialog.get_by_role("button", name="Save").click()
    assert listed.value.headers["authorization"] == "Bearer s3cret-token"
    expect(dialog).to_be_hidden()
    expect(page.locator("#conv-list")).to_contain_text("No conversations yet.")

    page.locator("#input").fill("with a token")
    page.locator("#input").press("Enter")
    expect(page.locator(".msg.assistant .content")).to_have_text("echo: with a token")
    assert local_storage(page)["cm.token"] == "s3cret-token"

    page.reload()
    expect(page.locator(".turn")).to_have_count(1)
    expect(dialog).to_be_hidden()


def test_a_refused_or_missing_token_locks_the_page_and_says_so(
    page: Page, start_app: Callable[..., Served], problems: PageProblems
) -> None:
    problems.expect_console("status of 401")
    served = start_app(api_token="s3cret-token")
    open_app(page, served.url)
    dialog = page.locator("#token-dialog")
    expect(dialog).to_contain_text("needs a token")
    dialog.locator("#token-input").fill("wrong")
    dialog.get_by_role("button", name="Save").click()
    # A wrong token reopens the dialog, saying so.
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("That token was refused")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    # Given up: the page says it is locked, never "Ready", never the server's raw detail.
    status = page.locator("#status")
    expect(status).to_have_attribute("data-state", "locked")
    expect(status).to_have_text("Locked")
    sidebar = page.locator("#conv-list")
    expect(sidebar).to_contain_text("Locked.")
    expect(sidebar).not_to_contain_text("bearer")
    expect(sidebar).not_to_contain_text("Could not load")
    # The way back in.
    sidebar.get_by_role("button", name="Enter the API token…").click()
    expect(dialog).to_be_visible()
    dialog.locator("#token-input").fill("s3cret-token")
    dialog.get_by_role("button", name="Save").click()
    expect(sidebar).to_contain_text("No conversations yet.")
    expect(status).to_have_text("Ready")
