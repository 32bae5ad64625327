"""Browser fixtures: Debian's Chromium driven by Playwright, the app served by uvicorn.

The app runs in a thread of the test process on a free loopback port, with the fake Messages
API as its model (`fake_model`), so tests can script replies and reach the container directly.
The browser is `/usr/bin/chromium` from the distribution; a missing browser fails the tests
(CI installs it with apt), it never skips them.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Dialog,
    Page,
    Playwright,
    expect,
    sync_playwright,
)

from app import Container, create_app
from settings import Settings
from tests.fakes.anthropic_api import FakeMessagesAPI

CHROMIUM = Path("/usr/bin/chromium")
# What the machine notes ask for: no network chatter, no sandbox as root, a fresh profile
# (Playwright's launch() makes a new temporary user-data-dir each time).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
OUTPUT_DIR = Path(__file__).resolve().parents[2] / "test-output" / "web"

# A turn starts a Claude CLI process; on a busy 2-core CI machine that can take a few seconds.
expect.set_options(timeout=15_000)


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    assert CHROMIUM.is_file(), (
        f"{CHROMIUM} is missing: install Debian's chromium (`apt-get install chromium`); "
        "the browser tests never download a browser"
    )
    browser = playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
    )
    try:
        yield browser
    finally:
        browser.close()


@dataclass
class Served:
    """The app running on a loopback port, and what a test needs to talk to it."""

    url: str
    settings: Settings
    fake: FakeMessagesAPI
    app: Any

    @property
    def container(self) -> Container:
        return self.app.state.container

    def api(self) -> httpx.Client:
        headers = {}
        if self.settings.api_token is not None:
            headers["Authorization"] = f"Bearer {self.settings.api_token.get_secret_value()}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


def serve(settings: Settings, fake: FakeMessagesAPI) -> Generator[Served, None, None]:
    """Run `create_app(settings)` under uvicorn in a thread until the generator is closed."""
    app = create_app(settings)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", access_log=False, lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="web-app", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the app did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(url=f"http://127.0.0.1:{port}", settings=settings, fake=fake, app=app)
    finally:
        server.should_exit = True
        thread.join(timeout=40)


@pytest.fixture
def start_app(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> Iterator[Callable[..., Served]]:
    """`start_app(**settings_overrides)` serves the app; it is stopped after the test."""
    running: list[Generator[Served, None, None]] = []

    def start(**overrides: Any) -> Served:
        gen = serve(make_settings(**overrides), fake_model)
        running.append(gen)
        return next(gen)

    try:
        yield start
    finally:
        for gen in reversed(running):
            gen.close()


@pytest.fixture
def served(start_app: Callable[..., Served]) -> Served:
    return start_app()


@dataclass
class PageProblems:
    """What the page said went wrong: JS errors, console errors, native dialogs."""

    errors: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    expected_console: list[str] = field(default_factory=list)

    def expect_console(self, fragment: str) -> None:
        """Console errors containing `fragment` are expected (e.g. a 401 before the token)."""
        self.expected_console.append(fragment)

    def attach(self, page: Page) -> None:
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("console", self._console)
        page.on("dialog", self._dialog)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error" and not any(
            fragment in message.text for fragment in self.expected_console
        ):
            self.console.append(message.text)

    def _dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()


@pytest.fixture
def problems() -> PageProblems:
    return PageProblems()


@pytest.fixture
def new_page(
    browser: Browser, problems: PageProblems, start_app: Callable[..., Served]
) -> Iterator[Callable[..., Page]]:
    """`new_page(viewport=..., color_scheme=...)`: a page in a fresh browser context.

    Pages close before the app stops (hence `start_app` here), so no request of a live page
    meets a closed port. After the test, any script error, console error or native dialog
    fails it.
    """
    contexts = []

    def make(
        *,
        width: int = 1280,
        height: int = 800,
        color_scheme: str = "light",
        mobile: bool = False,
    ) -> Page:
        context = browser.new_context(
            viewport={"width": width, "height": height},
            color_scheme=color_scheme,  # type: ignore[arg-type]
            is_mobile=mobile,
            has_touch=mobile,
            device_scale_factor=2 if mobile else 1,
            locale="zh-CN",
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        problems.attach(page)
        return page

    yield make
    for context in contexts:
        context.close()
    assert not problems.errors, f"script errors in the page: {problems.errors}"
    assert not problems.console, f"console errors in the page: {problems.console}"
    assert not problems.dialogs, f"native dialogs opened: {problems.dialogs}"


@pytest.fixture
def page(new_page: Callable[..., Page]) -> Page:
    return new_page()


def open_app(page: Page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]")


def local_storage(page: Page) -> dict[str, Any]:
    return json.loads(page.evaluate("JSON.stringify({...localStorage})"))


def screenshot(page: Page, name: str) -> Path:
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUTPUT_DIR / f"{name}.png"
    page.screenshot(path=str(path), animations="disabled")
    return path
