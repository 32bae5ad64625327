"""Markdown rendering and byte-aware splitting (pure, table-driven)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.render import (
    BODY_LIMITS,
    body_cost,
    card_content,
    chunk_budget,
    escape_card_markdown,
    plain_text,
    post_content,
    request_body_size,
    split_markdown,
    text_content,
)

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
            st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300),
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
