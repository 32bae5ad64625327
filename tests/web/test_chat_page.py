"""The chat page in a real browser: streaming, conversations, safety, IME, Stop, tools."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.fakes.anthropic_api import error, text, tool
from tests.web.conftest import Served, local_storage, open_app

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def send(page: Page, message: str) -> None:
    box = page.locator("#input")
    box.fill(message)
    box.press("Enter")


def last_reply(page: Page) -> Locator:
    return page.locator(".msg.assistant").last


def test_reply_streams_then_conversation_continues_and_survives_reload(
    page: Page, served: Served
) -> None:
    served.fake.on(
        "tell me a story",
        text("Once upon a time there was a **tiny** robot.", chunks=8, chunk_delay=0.12),
    )
    open_app(page, served.url)
    expect(page.locator(".empty-chat")).to_be_visible()
    # Record every state of the reply as it renders: it must grow in steps, not appear at once.
    page.evaluate(
        """() => {
            window.__states = [];
            new MutationObserver(() => {
                const el = document.querySelector('.msg.assistant .content');
                if (el) window.__states.push(el.textContent);
            }).observe(document.querySelector('#messages'),
                       {childList: true, subtree: true, characterData: true});
        }"""
    )
    send(page, "tell me a story")
    expect(page.locator(".msg.user .bubble").last).to_have_text("tell me a story")
    expect(page.locator("#stop")).to_be_visible()
    reply = last_reply(page)
    expect(reply.locator(".content")).to_have_text("Once upon a time there was a tiny robot.")
    expect(reply).not_to_have_class("msg assistant error")
    expect(reply.locator(".content strong")).to_have_text("tiny")
    expect(page.locator("#send")).to_be_visible()
    states = [s for s in page.evaluate("window.__states") if s]
    partial = [s for s in states if s and s != "Once upon a time there was a tiny robot."]
    assert len(set(partial)) >= 2, states

    send(page, "and then?")
    expect(last_reply(page).locator(".content")).to_have_text("echo: and then?")
    expect(page.locator("#conv-meta")).to_contain_text("2 turns")
    conversation_id = local_storage(page)["cm.conversation"]
    assert conversation_id.startswith("c-")
    # Both messages went to one Claude session: the second request carries the first turn.
    second = served.fake.requests_for("and then?")[0]
    assert "tell me a story" in second.all_text()

    page.reload()
    expect(page.locator(".turn")).to_have_count(2)
    expect(page.locator(".msg.user .bubble")).to_have_text(["tell me a story", "and then?"])
    expect(last_reply(page).locator(".content")).to_have_text("echo: and then?")
    expect(page.locator("#conv-title")).to_have_text("tell me a story")
    expect(page.locator("#conv-meta")).to_contain_text("2 turns")

    page.get_by_role("button", name="+ New conversation").click()
    expect(page.locator(".turn")).to_have_count(0)
    expect(page.locator("#conv-title")).to_have_text("New conversation")
    send(page, "a fresh start")
    expect(last_reply(page).locator(".content")).to_have_text("echo: a fresh start")
    expect(page.locator(".turn")).to_have_count(1)
    expect(page.locator("#conv-list li.conv")).to_have_count(2)
    fresh_id = local_storage(page)["cm.conversation"]
    assert fresh_id != conversation_id
    fresh = served.fake.requests_for("a fresh start")[0]
    assert "tell me a story" not in fresh.all_text()

    page.reload()
    expect(page.locator(".msg.user .bubble")).to_have_text(["a fresh start"])
    # Switch back to the first conversation from the side list.
    page.locator("#conv-list li.conv", has_text="tell me a story").locator(".conv-open").click()
    expect(page.locator(".turn")).to_have_count(2)
    expect(page.locator("#conv-list .conv-open[aria-current=true]")).to_contain_text(
        "tell me a story"
    )


EVIL = (
    'Look: <img src=x onerror="window.__pwned=1;alert(1)"> and '
    "<script>window.__pwned=2;alert(2)</script> then "
    '[click me](javascript:alert(3)) <a href="javascript:alert(4)">raw link</a> '
    '<svg onload="alert(5)"></svg> [safe](https://example.com/safe)\n\n'
    "```html\n<script>alert(6)</script>\n```"
)


def _assert_nothing_ran(page: Page) -> None:
    assert page.evaluate("typeof window.__pwned") == "undefined"
    messages = page.locator("#messages")
    for selector in ("img", "script", "svg", "iframe", "a[href^='javascript' i]", "[onerror]"):
        expect(messages.locator(selector)).to_have_count(0)
    reply = last_reply(page).locator(".content")
    expect(reply).to_contain_text('<img src=x onerror="window.__pwned=1;alert(1)">')
    expect(reply).to_contain_text("<script>window.__pwned=2;alert(2)</script>")
    expect(reply.locator("a")).to_have_count(1)
    expect(reply.locator("a")).to_have_attribute("href", "https://example.com/safe")
    expect(reply.locator("a")).to_have_attribute("rel", "noopener noreferrer")
    expect(reply.locator(".codeblock code")).to_have_text("<script>alert(6)</script>")


def test_model_markup_is_shown_as_text_and_never_runs(page: Page, served: Served) -> None:
    served.fake.on("show me html", text(EVIL, chunks=7, chunk_delay=0.05))
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    open_app(page, served.url)
    send(page, "show me html")
    expect(page.locator("#send")).to_be_visible()
    expect(last_reply(page)).not_to_have_class("msg assistant error")
    _assert_nothing_ran(page)
    # The code block's copy button copies the code exactly.
    last_reply(page).locator(".copy-btn").click()
    expect(last_reply(page).locator(".copy-btn")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == "<script>alert(6)</script>"
    # The same reply rendered from the stored history.
    page.reload()
    expect(page.locator(".turn")).to_have_count(1)
    _assert_nothing_ran(page)


# (markdown, what must be true of the result) for the renderer itself, run in the page.
SAFE_ATTRIBUTES = {"href", "rel", "target", "class", "type", "aria-label", "start"}
HOSTILE = [
    "<script>window.__pwned=1</script>",
    "<img src=x onerror=window.__pwned=1>",
    "[x](javascript:window.__pwned=1)",
    "[x](JaVaScRiPt:window.__pwned=1)",
    "[x]( javascript:window.__pwned=1 )",
    "[x](java\tscript:window.__pwned=1)",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[x](vbscript:msgbox)",
    "[x](//evil.example/path)",
    "[x](/relative/path)",
    "![tracker](https://evil.example/pixel.png)",
    '<a href="javascript:window.__pwned=1">x</a>',
    "**<i onmouseover=window.__pwned=1>bold</i>**",
    '[a](https://ok.example/"onmouseover="window.__pwned=1)',
    "| a | b |\n|---|---|\n| <img src=x onerror=window.__pwned=1> | [x](javascript:1) |",
    '> <iframe src="https://evil.example"></iframe>',
    "- <style>body{display:none}</style>\n- <form action=https://evil.example><input></form>",
    "https://ok.example/a?b=<script>x</script>",
    "`<b>code</b>` and <b>bold?</b>",
    "*" * 2000 + "_" * 2000 + "[" * 500,
]


def test_markdown_renderer_builds_only_whitelisted_markup(page: Page, served: Served) -> None:
    open_app(page, served.url)
    results = page.evaluate(
        """async (cases) => {
            const md = await import('/static/js/markdown.js');
            return {
                allowed: [...md.ALLOWED_TAGS],
                out: cases.map((source) => {
                    const box = document.createElement('div');
                    box.append(md.renderMarkdown(source));
                    return {
                        text: box.textContent,
                        elements: [...box.querySelectorAll('*')].map((el) => ({
                            tag: el.tagName.toLowerCase(),
                            attrs: [...el.attributes].map((a) => [a.name, a.value]),
                        })),
                    };
                }),
            };
        }""",
        HOSTILE,
    )
    allowed = set(results["allowed"])
    for source, out in zip(HOSTILE, results["out"], strict=True):
        for element in out["elements"]:
            assert element["tag"] in allowed, (source, element)
            for name, value in element["attrs"]:
                assert name in SAFE_ATTRIBUTES, (source, element)
                if name == "href":
                    assert value.startswith(("https://", "http://", "mailto:")), (source, value)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert "<script>window.__pwned=1</script>" in results["out"][0]["text"]
    assert "tracker" in results["out"][10]["text"]  # an image shows as its alt text

    shapes = page.evaluate(
        """async () => {
            const md = await import('/static/js/markdown.js');
            const render = (s) => {
                const box = document.createElement('div');
                box.append(md.renderMarkdown(s));
                return box;
            };
            const doc = render('# Title\\n\\n- a\\n- b\\n  - nested\\n\\n1. x\\n2. y\\n\\n'
                + '**b** *i* ~~s~~ `c` snake_case_name 中文**粗体**\\n\\n'
                + '```py\\nprint("hi")\\n```\\n\\n[ok](https://example.com) see https://example.org.');
            return {
                h1: doc.querySelector('h1')?.textContent,
                bullets: doc.querySelectorAll('ul > li').length,
                nested: doc.querySelector('ul ul li')?.textContent,
                numbers: doc.querySelectorAll('ol > li').length,
                strong: [...doc.querySelectorAll('strong')].map((e) => e.textContent),
                em: [...doc.querySelectorAll('em')].map((e) => e.textContent),
                del: doc.querySelector('del')?.textContent,
                code: doc.querySelector('p code')?.textContent,
                block: doc.querySelector('.codeblock pre code')?.textContent,
                lang: doc.querySelector('.codeblock .code-lang')?.textContent,
                copy: doc.querySelector('.codeblock button.copy-btn')?.textContent,
                links: [...doc.querySelectorAll('a')].map((a) => a.getAttribute('href')),
            };
        }"""
    )
    assert shapes == {
        "h1": "Title",
        "bullets": 3,
        "nested": "nested",
        "numbers": 2,
        "strong": ["b", "粗体"],
        "em": ["i"],
        "del": "s",
        "code": "c",
        "block": 'print("hi")',
        "lang": "py",
        "copy": "Copy",
        "links": ["https://example.com/", "https://example.org/"],
    }


def test_enter_while_an_input_method_is_composing_does_not_send(page: Page, served: Served) -> None:
    open_app(page, served.url)
    box = page.locator("#input")
    box.fill("ni hao")
    box.dispatch_event("compositionstart", {"data": ""})
    box.press("Enter")  # picks a candidate in the IME: must not send
    # What a browser sends for Enter inside a composition: isComposing, keyCode 229.
    page.evaluate(
        """() => document.querySelector('#input').dispatchEvent(new KeyboardEvent('keydown', {
            key: 'Enter', code: 'Enter', keyCode: 229, isComposing: true,
            bubbles: true, cancelable: true}))"""
    )
    box.dispatch_event("compositionend", {"data": "你好"})
    box.fill("你好")
    box.press("Shift+Enter")  # a new line, not a send
    box.type("世界")
    expect(page.locator(".turn")).to_have_count(0)
    expect(box).to_have_value("你好\n世界")
    assert served.fake.turn_requests() == []

    box.press("Enter")
    expect(page.locator(".msg.user .bubble")).to_have_text(["你好\n世界"])
    expect(last_reply(page).locator(".content")).to_have_text("echo: 你好世界")  # <br> between
    expect(last_reply(page).locator(".content br")).to_have_count(1)
    expect(box).to_have_value("")


def test_stop_interrupts_a_slow_reply(page: Page, served: Served) -> None:
    served.fake.on("long story", text("word " * 60, chunks=60, chunk_delay=0.4))  # ~24 s
    open_app(page, served.url)
    send(page, "long story please")
    reply = last_reply(page)
    expect(reply.locator(".content")).to_contain_text("word word")
    started = time.monotonic()
    page.get_by_role("button", name="Stop").click()
    # Stopping is not a failure: a neutral "Stopped" that keeps the partial text.
    expect(reply).to_have_class("msg assistant stopped", timeout=15_000)
    elapsed = time.monotonic() - started
    expect(reply.locator(".content")).to_contain_text("word word")
    expect(reply.locator(".content")).to_contain_text("Stopped.")
    expect(reply.locator(".badge-stopped")).to_have_text("Stopped")
    expect(reply.locator(".badge-error")).to_have_count(0)
    assert elapsed < 12, elapsed
    expect(page.locator("#send")).to_be_visible()
    expect(page.locator("#stop")).to_be_hidden()
    # The conversation is still usable.
    send(page, "still there?")
    expect(last_reply(page).locator(".content")).to_have_text("echo: still there?")


def test_tool_steps_show_outcome_and_refusals_clearly(page: Page, served: Served) -> None:
    missing = served.settings.workspace_dir / "no-such-file.txt"
    served.fake.on(
        "check the files",
        tool("Bash", {"command": "echo hello-tools"}),
        tool("Read", {"file_path": str(missing)}),
        tool("Bash", {"command": "curl http://example.com"}),
        text("Checked."),
    )
    open_app(page, served.url)
    send(page, "check the files")
    reply = last_reply(page)
    # The model's words, then what did not happen, in plain words.
    expect(reply.locator(".content")).to_contain_text("Checked.")
    expect(reply.locator(".content")).to_contain_text("Refused (not run):")
    rows = reply.locator(".tool")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_have_attribute("data-status", "ok")
    expect(rows.nth(0).locator(".tool-name")).to_have_text("Bash")
    expect(rows.nth(0).locator(".tool-input")).to_have_text("echo hello-tools")
    expect(rows.nth(0).locator(".tool-status")).to_have_text("done")
    expect(rows.nth(1)).to_have_attribute("data-status", "error")
    expect(rows.nth(1).locator(".tool-status")).to_have_text("failed")
    expect(rows.nth(2)).to_have_attribute("data-status", "denied")
    expect(rows.nth(2).locator(".tool-status")).to_have_text("refused")
    expect(rows.nth(2).locator(".tool-reason")).to_contain_text("curl")
    # Collapsed by default; opening a row shows the tool's output.
    expect(rows.nth(0).locator(".tool-detail")).to_be_hidden()
    rows.nth(0).locator("summary").click()
    expect(rows.nth(0).locator(".tool-detail")).to_have_text("hello-tools")
    # The steps are kept with the conversation: after a reload the refused row is still there.
    page.reload()
    saved = last_reply(page).locator(".tool")
    expect(saved).to_have_count(3)
    expect(saved.nth(2)).to_have_attribute("data-status", "denied")
    expect(saved.nth(2).locator(".tool-input")).to_have_text("curl http://example.com")
    expect(saved.nth(2).locator(".tool-reason")).to_contain_text("curl")
    expect(saved.nth(1)).to_have_attribute("data-status", "error")
    expect(last_reply(page).locator(".content")).to_contain_text("Refused (not run):")


def test_a_failed_turn_reads_as_an_error(page: Page, served: Served) -> None:
    served.fake.on("break it", *([error(529, "overloaded_error", "Overloaded")] * 8))
    open_app(page, served.url)
    send(page, "break it")
    reply = last_reply(page)
    expect(reply).to_have_class("msg assistant error")
    expect(reply.locator(".content")).to_contain_text("overloaded (529)")
    expect(reply.locator(".badge-error")).to_be_visible()
    page.reload()
    expect(last_reply(page)).to_have_class("msg assistant error")


def test_memory_used_by_a_turn_is_listed_and_opens_the_note(page: Page, served: Served) -> None:
    with served.api() as api:
        saved = api.post(
            "/api/memories",
            json={"content": "项目 atlas 部署在 fra-2，用 docker compose。", "title": "Atlas 部署"},
        ).json()
    open_app(page, served.url)
    send(page, "atlas 部署在哪里？")
    reply = last_reply(page)
    expect(reply.locator(".content")).to_have_text("echo: atlas 部署在哪里？")
    used = reply.locator(".memory-used")
    expect(used).to_be_visible()
    expect(used.locator(".count")).to_have_text("1")
    used.locator("summary").click()
    expect(used.locator(".memory-notes li")).to_contain_text("Atlas 部署")
    # Reloaded from history, the row is still there.
    page.reload()
    used = last_reply(page).locator(".memory-used")
    expect(used.locator(".count")).to_have_text("1")
    used.locator("summary").click()
    used.get_by_role("button", name="Atlas 部署").click()
    expect(page.locator("#memory-view")).to_be_visible()
    expect(page.locator("#mem-title")).to_have_value("Atlas 部署")
    expect(page.locator("#mem-meta")).to_contain_text(saved["id"])


def test_delete_a_conversation_after_confirming(page: Page, served: Served) -> None:
    open_app(page, served.url)
    send(page, "short lived")
    expect(last_reply(page).locator(".content")).to_have_text("echo: short lived")
    item = page.locator("#conv-list li.conv", has_text="short lived")
    item.locator(".conv-delete").click()
    dialog = page.locator("#confirm-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("short lived")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    expect(item).to_have_count(1)
    item.locator(".conv-delete").click()
    dialog.get_by_role("button", name="Delete").click()
    expect(item).to_have_count(0)
    expect(page.locator("#conv-title")).to_have_text("New conversation")
    expect(page.locator(".turn")).to_have_count(0)
    with served.api() as api:
        assert api.get("/api/conversations").json()["conversations"] == []


def test_reload_during_a_reply_shows_it_once_it_is_done(page: Page, served: Served) -> None:
    served.fake.on("take your time", text("Finished in the end.", delay=3))
    open_app(page, served.url)
    send(page, "take your time")
    expect(page.locator("#stop")).to_be_visible()
    # A function, not an expression string: the page's CSP forbids eval.
    page.wait_for_function("() => localStorage.getItem('cm.conversation') !== null")
    page.reload()
    expect(page.locator(".notice")).to_have_text("A reply is still being written…")
    expect(last_reply(page).locator(".content")).to_have_text("Finished in the end.")
    expect(page.locator(".notice")).to_have_count(0)
    expect(page.locator(".turn")).to_have_count(1)
