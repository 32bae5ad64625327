"""Serving the page: routes, security headers, and rules the page's files keep (no browser)."""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser

from settings import Settings
from tests.conftest import running_app
from web.page import CONTENT_SECURITY_POLICY, STATIC_DIR

REQUIRED_CSP = (
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
)


async def test_page_and_files_are_served_with_a_strict_policy(
    make_settings: Callable[..., Settings],
) -> None:
    async with running_app(make_settings(api_token="s3cret")) as client:
        page = await client.get("/")
        script = await client.get("/static/js/main.js")
        style = await client.get("/static/app.css")
        outside = await client.get("/static/../app.py")
        missing = await client.get("/static/nope.js")
        api = await client.get("/api/conversations")
    # The page loads without the token; the API behind it does not.
    assert page.status_code == 200
    assert api.status_code == 401
    assert page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/static/js/main.js">' in page.text
    for response in (page, script, style):
        policy = response.headers["content-security-policy"]
        assert policy == CONTENT_SECURITY_POLICY
        assert all(part in policy for part in REQUIRED_CSP)
        assert response.headers["x-content-type-options"] == "nosniff"
    assert "javascript" in script.headers["content-type"]
    assert style.headers["content-type"].startswith("text/css")
    assert outside.status_code == 404
    assert missing.status_code == 404


class _Inline(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name for name, _ in attrs}
        if tag == "script" and "src" not in names:
            self.problems.append("inline <script>")
        if tag == "style":
            self.problems.append("<style> element")
        self.problems.extend(f"{name}= on <{tag}>" for name in names if name.startswith("on"))
        if "style" in names:
            self.problems.append(f"style= on <{tag}>")
        for name, value in attrs:
            if name in ("src", "href") and value and re.match(r"(https?:)?//", value):
                self.problems.append(f"foreign {name} {value}")


def test_page_needs_nothing_the_policy_refuses() -> None:
    parser = _Inline()
    parser.feed((STATIC_DIR / "index.html").read_text(encoding="utf-8"))
    assert parser.problems == []


def test_scripts_never_parse_html() -> None:
    sinks = re.compile(r"\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write|\beval\(")
    for path in sorted(STATIC_DIR.rglob("*.js")):
        source = path.read_text(encoding="utf-8")
        assert not sinks.search(source), f"{path.name} uses an HTML sink"
