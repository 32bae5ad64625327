"""Markdown rendering and byte-aware splitting (pure, table-driven)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.render import (
    BODY_LIMITS,
    CARD_LIMITS,
    STRICT_CARD_LIMITS,
    CardLimits,
    answer_cards,
    body_cost,
    card_breaches,
    card_content,
    chunk_budget,
    count_tables,
    escape_card_markdown,
    footer_element,
    images_as_links,
    plain_text,
    post_content,
    post_contents,
    request_body_size,
    split_markdown,
    text_content,
    trace_panel,
)
from bridge.strings import Locale

FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def fences_balanced(chunk: str) -> bool:
    opened: str | None = None
    for line in chunk.split("\n"):
        m = FENCE_LINE.match(line)
        if m is None:
            continue
        marks = m.group(1)
        if opened is None:
            opened = marks
        elif line.strip() and set(line.strip()) == {opened[0]} and len(line.strip()) >= len(opened):
            opened = None
    return opened is None


@pytest.mark.parametrize(
    "text",
    ["plain", 'quote " and back\\slash', "line\nbreak\ttab", "中文字符", "emoji 😀", "\x01ctl"],
)
def test_body_cost_is_the_exact_growth_of_a_request_body(text: str) -> None:
    empty = request_body_size({"content": json.dumps({"text": ""}, ensure_ascii=False)})
    full = request_body_size({"content": json.dumps({"text": text}, ensure_ascii=False)})
    assert full - empty == body_cost(text)


@pytest.mark.parametrize(
    ("markdown", "budget", "expected"),
    [
        ("short answer", 100, ["short answer"]),
        ("", 100, []),
        ("\n\n  \n", 100, []),
        ("para one\n\npara two", 1000, ["para one\n\npara two"]),
        # Paragraph boundaries are preferred: each paragraph fits, both together do not.
        ("a" * 60 + "\n\n" + "b" * 60, 100, ["a" * 60, "b" * 60]),
        # Three small paragraphs pack greedily.
        (
            "x" * 40 + "\n\n" + "y" * 40 + "\n\n" + "z" * 40,
            100,
            ["x" * 40 + "\n\n" + "y" * 40, "z" * 40],
        ),
        # A fence too big for one chunk is closed and reopened with its info string.
        (
            "```python\n" + "\n".join(f"print({i})" for i in range(12)) + "\n```",
            90,
            [
                "```python\n" + "\n".join(f"print({i})" for i in range(0, 6)) + "\n```",
                "```python\n" + "\n".join(f"print({i})" for i in range(6, 12)) + "\n```",
            ],
        ),
        # An unclosed fence (a truncated answer) is closed.
        ("text\n\n```\ncode", 1000, ["text\n\n```\ncode\n```"]),
        # Windows line endings and runs of blank lines are normalised.
        ("a\r\nb\r\n\r\n\r\nc", 1000, ["a\nb\n\nc"]),
    ],
)
def test_split_markdown_table(markdown: str, budget: int, expected: list[str]) -> None:
    assert split_markdown(markdown, budget) == expected


def test_unclosed_fence_is_closed_when_splitting() -> None:
    chunks = split_markdown("intro " * 20 + "\n\n```sh\n" + "echo hi\n" * 30, 120)
    assert len(chunks) > 1
    assert all(fences_balanced(c) for c in chunks)
    assert chunks[-1].endswith("```")


def test_long_line_is_cut_at_a_space_and_keeps_every_character() -> None:
    words = " ".join(f"word{i}" for i in range(200))
    chunks = split_markdown(words, 100)
    assert all(body_cost(c) <= 100 for c in chunks)
    assert "".join(chunks) == words
    assert all(c.endswith(" ") for c in chunks[:-1])


def test_cjk_is_measured_in_bytes_and_never_cut_mid_character() -> None:
    text = "记忆" * 500  # 1000 characters, 3000 bytes
    chunks = split_markdown(text, 300)
    assert all(body_cost(c) <= 300 for c in chunks)
    assert "".join(chunks) == text
    assert len(chunks) == 10


def test_sixty_kb_answer_fits_cards_with_fences_intact() -> None:
    code = "\n".join(f"    value_{i} = compute({i})  # 中文注释" for i in range(450))
    answer = "\n\n".join(
        [
            f"## Part {n}\n\n" + "Some explanation. " * 40 + f"\n\n```python\n{code}\n```"
            for n in range(3)
        ]
    )
    assert len(answer.encode()) > 60_000
    chunks = split_markdown(escape_card_markdown(answer), chunk_budget("interactive"))
    assert len(chunks) >= 3
    for chunk in chunks:
        assert fences_balanced(chunk)
        card = card_content(chunk, note="part 1/9")
        body = {"content": json.dumps(card, ensure_ascii=False), "msg_type": "interactive"}
        body["uuid"] = "0" * 36
        assert request_body_size(body) <= BODY_LIMITS["interactive"]
    code_lines = [line for c in chunks for line in c.split("\n") if "compute(" in line]
    assert len(code_lines) == 1350  # no line of code lost or duplicated


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=300),
            st.builds(lambda body: f"```js\n{body}\n```", st.text(max_size=400)),
        ),
        max_size=8,
    ),
    st.integers(min_value=64, max_value=600),
)
def test_every_chunk_is_within_budget_with_balanced_fences(parts: list[str], budget: int) -> None:
    markdown = "\n\n".join(parts)
    for chunk in split_markdown(markdown, budget):
        assert body_cost(chunk) <= budget
        assert fences_balanced(chunk)


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        # the documented escape form (card rich-text page, "特殊字符转义说明"): `<` is `&#60;`
        ("hi <at id=all></at>", "hi &#60;at id=all>&#60;/at>"),
        ("1 < 2", "1 &#60; 2"),
        ("AT&T &#60;b&#62;", "AT&#38;T &#38;#60;b&#38;#62;"),
        ("`a<b` and c<d", "`a<b` and c&#60;d"),
        ("```html\n<div>\n```\n<b>", "```html\n<div>\n```\n&#60;b>"),
        # code is verbatim except for mention-shaped tags
        ("`<at id=all></at>`", "`<\u200dat id=all><\u200d/at>`"),
        (
            "```\n< AT user_id=all>\nList<String>\n```",
            "```\n<\u200d AT user_id=all>\nList<String>\n```",
        ),
        ("no tags, 中文 > quote", "no tags, 中文 > quote"),
    ],
)
def test_escape_card_markdown(markdown: str, expected: str) -> None:
    assert escape_card_markdown(markdown) == expected


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("# Title\n\n**bold** and __strong__", "Title\n\nbold and strong"),
        ("see [docs](https://x.y/z)", "see docs (https://x.y/z)"),
        ("```\n**kept**\n```", "```\n**kept**\n```"),
    ],
)
def test_plain_text(markdown: str, expected: str) -> None:
    assert plain_text(markdown) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('<at user_id="all"></at>', '<\u200dat user_id="all"><\u200d/at>'),
        ("a < b & c", "a <\u200d b & c"),
        ("中文", "中文"),
    ],
)
def test_text_content_never_forms_a_tag(text: str, expected: str) -> None:
    assert text_content(text) == {"text": expected}


def test_a_long_line_is_never_cut_inside_an_escape_entity() -> None:
    escaped = escape_card_markdown("<" * 200)
    for budget in range(64, 90):
        chunks = split_markdown(escaped, budget)
        assert all(re.fullmatch(r"(&#60;)+", c) for c in chunks), budget


def test_post_content_uses_md_paragraphs_and_code_blocks() -> None:
    post = post_content("Hello **there**\n\n```python\nx = 1\n```", title="T")
    assert post == {
        "zh_cn": {
            "title": "T",
            "content": [
                [{"tag": "md", "text": "Hello **there**"}],
                [{"tag": "code_block", "language": "PYTHON", "text": "x = 1"}],
            ],
        }
    }


def test_card_content_shape() -> None:
    card = card_content("body", title="Error", template="red", note="part 1/2")
    assert card["schema"] == "2.0"
    assert card["config"] == {"update_multi": True}
    assert card["header"]["template"] == "red"
    assert [e["content"] for e in card["body"]["elements"]] == ["body", "part 1/2"]
    assert "header" not in card_content("body")


# --- cards within the documented limits ---------------------------------------------------------
def _table(i: int, rows: int = 1) -> str:
    body = "\n".join(f"| r{i}.{j} | {j} |" for j in range(rows))
    return f"| name | n |\n|---|--:|\n{body}"


def _md(content: str) -> dict[str, object]:
    return {"tag": "markdown", "content": content}


def _card(*elements: dict[str, object]) -> dict[str, object]:
    return {"schema": "2.0", "config": {"update_multi": True}, "body": {"elements": list(elements)}}


def _nest(depth: int) -> dict[str, object]:
    element: dict[str, object] = _md("deep")
    for _ in range(depth - 1):
        element = {"tag": "collapsible_panel", "header": {}, "elements": [element]}
    return element


@pytest.mark.parametrize(
    ("card", "rules"),
    [
        (_card(_md("plain")), []),
        (_card(_md("\n\n".join(_table(i) for i in range(4)))), []),
        (_card(_md("\n\n".join(_table(i) for i in range(5)))), ["tables_per_element"]),
        (
            _card(_md("\n\n".join(_table(i) for i in range(4))), _md(_table(9)), _md(_table(8))),
            ["tables_per_card"],
        ),
        (_card(_md("```\n" + _table(1) + "\n```")), []),  # a table in code is code
        (_card(*[_md("x")] * 200), []),
        (_card(*[_md("x")] * 201), ["elements_per_card"]),
        (_card(_md("see ![x](https://a.b/c.png)")), ["image"]),
        (_card(_md("code `![x](https://a.b/c.png)` stays")), []),
        (_card(_md("x" * 31_000)), ["body_bytes"]),
        (_card(_nest(5)), []),
        (_card(_nest(6)), ["depth"]),
    ],
)
def test_card_breaches(card: dict[str, object], rules: list[str]) -> None:
    assert [b.rule for b in card_breaches(card)] == rules


@pytest.mark.parametrize(
    ("markdown", "tables"),
    [
        ("no table | here", 0),
        (_table(1), 1),
        ("text\n" + _table(1) + "\n\n" + _table(2, rows=30), 2),
        ("```\n" + _table(1) + "\n```", 0),
        ("a | b\n--- | ---\n1 | 2", 1),
        ("---\n\ntitle\n---", 0),
    ],
)
def test_count_tables(markdown: str, tables: int) -> None:
    assert count_tables(markdown) == tables


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("![chart](https://x.y/c.png)", "[chart](https://x.y/c.png)"),
        ('![](https://x.y/c.png "t")', "[image](https://x.y/c.png)"),
        ("![logo](img_v2_abc)", "logo"),
        ("![a][ref]", "[a][ref]"),
        ("wow! [link](https://x)", "wow! [link](https://x)"),
        ("```\n![kept](https://x)\n```", "```\n![kept](https://x)\n```"),
        ("`![kept](https://x)`", "`![kept](https://x)`"),
    ],
)
def test_images_as_links(markdown: str, expected: str) -> None:
    assert images_as_links(markdown) == expected


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("![chart](https://x.y/c.png)", "chart (https://x.y/c.png)"),
        ("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | |", "• a: 1; b: 2\n• a: 3"),
        ("| only |\n|---|\n| x |", "• x"),
        ("## Heading\n\n| k | v |\n|:-|-:|\n| `c` | **d** |", "Heading\n\n• k: `c`; v: d"),
    ],
)
def test_plain_text_reads_tables_and_images(markdown: str, expected: str) -> None:
    assert plain_text(markdown) == expected


ANSWER_CASES = {
    "eight tables, nine code blocks, two images": "\n\n".join(
        [
            *(f"### T{i}\n\n{_table(i, rows=3)}" for i in range(8)),
            *(f"```sh\necho {i} <at id=all></at>\n```" for i in range(9)),
            "![a](https://x.y/a.png) ![](https://x.y/b.png)",
        ]
    ),
    "one table of 2000 rows": _table(0, rows=2000),
    "many small paragraphs": "\n\n".join(f"para {i} {'中' * 30}" for i in range(3000)),
    "a huge code block": "```\n" + "\n".join(f"x{i} < y & z" for i in range(6000)) + "\n```",
    "twelve tables in one paragraph": "\n".join(_table(i) for i in range(12)),
}


@pytest.mark.parametrize("limits", [CARD_LIMITS, STRICT_CARD_LIMITS], ids=["default", "strict"])
@pytest.mark.parametrize("markdown", ANSWER_CASES.values(), ids=ANSWER_CASES.keys())
def test_answer_cards_stay_within_every_limit_and_keep_every_table(
    markdown: str, limits: CardLimits
) -> None:
    panel = trace_panel([{"name": "Bash", "summary": "ls", "status": "ok"}] * 30)
    assert panel is not None
    tail = [panel, footer_element(12.3, 0.5)]
    cards = answer_cards(markdown, title="Stopped", template="grey", tail=tail, limits=limits)
    for item in cards:
        assert card_breaches(item.card, limits) == ()
        assert card_breaches(item.card) == ()
    sources = "\n\n".join(c.source for c in cards)
    assert count_tables(sources) >= count_tables(markdown)  # a split table repeats its header
    shown = [
        e["content"] for c in cards for e in c.card["body"]["elements"] if e["tag"] == "markdown"
    ]
    assert sum(count_tables(m) for m in shown) == count_tables(sources)
    assert all(fences_balanced(m) for m in shown)
    assert "![" not in json.dumps([c.card for c in cards], ensure_ascii=False)
    assert cards[0].card["header"]["title"]["content"] == "Stopped"
    assert all("header" not in c.card for c in cards[1:])
    assert (
        cards[-1]
        .card["body"]["elements"][-1]["content"]
        .startswith("第" if len(cards) > 1 else "⏱")
    )


@pytest.mark.parametrize("gap", ["\n\n", "\n"], ids=["blank line", "no blank line"])
def test_a_heading_stays_with_its_table_when_the_answer_is_split(gap: str) -> None:
    # issue #33: five tables fill a card, so the sixth section's heading ended card 1 and its
    # table began card 2
    markdown = "\n\n".join(f"## Section {i}{gap}{_table(i, rows=3)}" for i in range(12))
    cards = answer_cards(markdown)
    assert len(cards) >= 3
    for i in range(12):
        [card] = [c for c in cards if f"## Section {i}\n" in c.source]
        assert f"| r{i}.0 |" in card.source  # its table is in the same card
    assert not any(c.source.rstrip().split("\n")[-1].startswith("##") for c in cards)


def test_answer_cards_keep_every_line_of_a_split_table() -> None:
    cards = answer_cards(_table(0, rows=2000))
    assert len(cards) > 1
    text = "\n".join(c.source for c in cards)
    assert all(f"| r0.{j} | {j} |" in text for j in range(2000))


@pytest.mark.parametrize(
    ("locale", "notes"), [("zh", ["第 1/2 部分", "第 2/2 部分"]), ("en", ["part 1/2", "part 2/2"])]
)
def test_a_split_answer_says_which_part_in_the_chat_language(
    locale: Locale, notes: list[str]
) -> None:
    cards = answer_cards(_table(0, rows=2000), locale=locale)
    assert len(cards) == 2
    assert [c.card["body"]["elements"][-1]["content"] for c in cards] == notes


def test_a_short_answer_is_one_card_with_trace_and_footer_last() -> None:
    panel = trace_panel([{"name": "Read", "summary": "a.md", "status": "ok"}])
    assert panel is not None
    [item] = answer_cards("Hi **there**", tail=[panel, footer_element(1.25, None)])
    assert item.card["body"]["elements"] == [
        {"tag": "markdown", "content": "Hi **there**"},
        panel,
        {"tag": "markdown", "content": "⏱ 1.2 s", "text_size": "notation"},
    ]


@pytest.mark.parametrize(
    ("steps", "title", "expanded", "lines"),
    [
        ([], None, None, None),
        (
            [{"name": "Bash", "summary": "ls -la", "status": "ok"}],
            "Tool steps: 1",
            False,
            ["- ✅ Bash `ls -la`"],
        ),
        (
            [
                {"name": "Bash", "summary": "rm -rf /", "status": "denied", "detail": "outside"},
                {"name": "Read", "summary": "x`y\nz", "status": "error", "detail": "<at id=all>"},
            ],
            "Tool steps: 2 · 1 refused · 1 failed",
            True,
            [
                "- 🚫 Bash `rm -rf /` — refused: outside",
                "- ❌ Read `x'y z` — failed: &#60;at id=all>",
            ],
        ),
    ],
)
def test_trace_panel(
    steps: list[dict[str, str]], title: str | None, expanded: bool | None, lines: list[str] | None
) -> None:
    panel = trace_panel(steps, "en")
    if title is None:
        assert panel is None
        return
    assert panel is not None
    assert panel["header"]["title"] == {"tag": "plain_text", "content": title}
    assert panel["expanded"] is expanded
    assert panel["elements"][0]["content"].split("\n") == lines


@pytest.mark.parametrize(
    ("seconds", "cost", "expected"),
    [
        (3.21, 0.01234, "⏱ 3.2 s · $0.0123"),
        (125, None, "⏱ 2 min 05 s"),
        (0, 0.0, "⏱ 0.0 s · $0.0000"),
    ],
)
def test_footer_element(seconds: float, cost: float | None, expected: str) -> None:
    assert footer_element(seconds, cost)["content"] == expected


def test_post_contents_stay_within_the_body_limit() -> None:
    markdown = "\n\n".join(f"para {i}" for i in range(6000))
    posts = post_contents(markdown)
    assert len(posts) > 1
    for post in posts:
        body = {"msg_type": "post", "content": json.dumps(post, ensure_ascii=False), "uuid": "u"}
        assert request_body_size(body) <= BODY_LIMITS["post"]


def test_the_trace_panel_reads_chinese_by_default() -> None:
    panel = trace_panel([{"name": "Bash", "summary": "ls", "status": "denied", "detail": "no"}])
    assert panel is not None
    assert panel["header"]["title"]["content"] == "工具步骤：1 · 1 个被拒绝"
    assert panel["elements"][0]["content"] == "- 🚫 Bash `ls` — 被拒绝: no"
