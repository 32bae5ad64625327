"""Screenshots of the chat and memory views, desktop and phone, light and dark.

Written to `test-output/web/` (git-ignored) so a person can look at them after a run.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.fakes.anthropic_api import text, tool
from tests.web.conftest import Served, open_app, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

REPLY = """## 周末计划 Weekend plan

Here is what I found in your notes — 你喜欢**爬山**，尤其是香山。

1. Saturday: hike *Xiangshan* (香山), start at 8:00
2. Sunday: rest, read [the trail guide](https://example.com/trails)
   - bring water
   - 带上相机

```python
def plan(day: str) -> str:
    return {"sat": "hike", "sun": "rest"}[day]
```

| Day | Plan |
|-----|------|
| Sat | 爬山 |
| Sun | 休息 |
"""


def test_screenshots_of_chat_and_memory_views(
    new_page: Callable[..., Page], served: Served
) -> None:
    with served.api() as api:
        for content, title, tags in [
            ("用户喜欢在周末去爬山，尤其是香山。", "周末爬山 Weekend hiking", ["hobby", "户外"]),
            ("The user prefers concise answers with code first.", "Answer style", ["style"]),
            ("项目 atlas 部署在 fra-2，用 docker compose。", "Atlas 部署", ["atlas"]),
        ]:
            body = {"content": content, "title": title, "tags": tags}
            resp = api.post("/api/memories", json=body)
            assert resp.status_code == 200, resp.text
    served.fake.on(
        "周末",
        tool("Bash", {"command": "ls ~/notes"}),
        tool("Bash", {"command": "curl http://example.com"}),
        text(REPLY),
    )
    desktop = {"width": 1280, "height": 800}
    phone = {"width": 390, "height": 844, "mobile": True}
    for name, options in {
        "desktop-light": {**desktop, "color_scheme": "light"},
        "desktop-dark": {**desktop, "color_scheme": "dark"},
        "phone-light": {**phone, "color_scheme": "light"},
        "phone-dark": {**phone, "color_scheme": "dark"},
    }.items():
        page = new_page(**options)
        open_app(page, served.url)
        if name == "desktop-light":
            page.locator("#input").fill("这个周末做什么？ What should I do this weekend?")
            page.locator("#input").press("Enter")
        elif "phone" in name:
            # A new browser has no current conversation: pick it from the drawer.
            page.get_by_role("button", name="Conversations").click()
            expect(page.locator("#sidebar")).to_be_in_viewport()
            screenshot(page, f"drawer-{name}")
            page.locator("#conv-list .conv-open").first.click()
            expect(page.locator("#sidebar")).not_to_be_in_viewport()
        else:
            page.locator("#conv-list .conv-open").first.click()
        expect(page.locator(".msg.assistant .content h2")).to_have_text("周末计划 Weekend plan")
        expect(page.locator("#send")).to_be_visible()
        screenshot(page, f"chat-{name}")
        page.get_by_role("tab", name="Memory").click()
        page.locator("#mem-query").fill("爬山")
        page.locator("#mem-query").press("Enter")
        page.locator(".mem-item", has_text="周末爬山").click()
        expect(page.locator("#mem-title")).to_have_value("周末爬山 Weekend hiking")
        screenshot(page, f"memory-{name}")
