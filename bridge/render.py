"""Markdown -> Feishu message content (text, post, card), and byte-aware splitting (pure).

Feishu limits the *request body* of a send: 150 KB for text, 30 KB for post and card messages
(error 230025). `content` is itself a JSON string inside the JSON body, so every character is
escaped twice; `body_cost` measures exactly that, and `split_markdown` packs whole paragraphs
into chunks under a budget. A code fence is never broken: a fence too big for one chunk is
closed at the end of a chunk and reopened (same info string) at the start of the next.

Cards have more limits than bytes (tables per markdown element and per card, components per
card, nesting, image keys): `answer_cards` packs an answer into as many cards as they need and
`card_breaches` checks a card against them before it is sent ("documented card limits" below).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from bridge.strings import Locale, t

MsgType = Literal["text", "post", "interactive", "file"]

# Request-body limits (docs say 150 KB / 30 KB; we stay under the decimal reading). A file
# message's body is a key: the text limit, the page names no other.
BODY_LIMITS: dict[str, int] = {
    "text": 150_000,
    "post": 30_000,
    "interactive": 30_000,
    "file": 150_000,
}
# Room kept for the rest of the request body (msg_type, uuid, card skeleton, notes).
_ENVELOPE_RESERVE = 1_500

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<marks>`{3,}|~{3,})(?P<info>[^`]*)$")


# --- measuring ----------------------------------------------------------------------------------
@lru_cache(maxsize=4096)
def _char_cost(ch: str) -> int:
    inner = json.dumps(ch, ensure_ascii=False)[1:-1]
    return len(json.dumps(inner, ensure_ascii=False).encode("utf-8")) - 2


def body_cost(text: str) -> int:
    """Bytes `text` adds to a request body once escaped as content JSON inside body JSON."""
    if text.isascii() and not any(c in text for c in '"\\\n\r\t') and text.isprintable():
        return len(text)
    return sum(_char_cost(c) for c in text)


def request_body_size(body: dict[str, Any]) -> int:
    """Exact size of a request body as lark-oapi serialises it (ensure_ascii=False)."""
    return len(json.dumps(body, ensure_ascii=False).encode("utf-8"))


def chunk_budget(msg_type: MsgType) -> int:
    return BODY_LIMITS[msg_type] - _ENVELOPE_RESERVE


# --- markdown structure ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Block:
    lines: tuple[str, ...]
    fence: str | None = None  # the opening fence line when this block is fenced code
    closing: str | None = None  # the closing fence line

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _blocks(markdown: str) -> list[_Block]:
    """Paragraphs (split on blank lines) and fenced code blocks (kept whole)."""
    blocks: list[_Block] = []
    para: list[str] = []
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0

    def flush() -> None:
        if para:
            blocks.append(_Block(tuple(para)))
            para.clear()

    while i < len(lines):
        line = lines[i]
        opening = _FENCE.match(line)
        if opening is not None:
            flush()
            marks = opening.group("marks")
            body: list[str] = []
            i += 1
            closing: str | None = None
            while i < len(lines):
                candidate = lines[i].strip()
                if candidate.startswith(marks[0] * len(marks)) and set(candidate) == {marks[0]}:
                    closing = lines[i]
                    break
                body.append(lines[i])
                i += 1
            # An unclosed fence (a truncated answer) is closed so chunks stay balanced.
            closing = closing if closing is not None else opening.group("indent") + marks
            blocks.append(_Block((line, *body, closing), fence=line, closing=closing))
            i += 1
            continue
        if line.strip() == "":
            flush()
        else:
            para.append(line)
        i += 1
    flush()
    return blocks


# --- splitting ------------------------------------------------------------------------------------
def split_markdown(
    markdown: str, budget: int, *, measure: Callable[[str], int] = body_cost
) -> list[str]:
    """Split into chunks whose `measure` is <= budget, on paragraph or code-fence boundaries.

    Every chunk has balanced code fences. Text never splits mid-character; a single line longer
    than the budget is cut at a space when there is one in its second half.
    """
    if budget < 64:
        raise ValueError("budget too small to split markdown")
    text = markdown.strip("\n")
    if not text.strip():
        return []
    pieces: list[str] = []
    for block in _blocks(text):
        pieces.extend(_fit_block(block, budget, measure))
    return _pack(pieces, budget, measure)


def _pack(pieces: list[str], budget: int, measure: Callable[[str], int]) -> list[str]:
    sep = measure("\n\n")
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for piece in pieces:
        cost = measure(piece)
        if current and size + sep + cost > budget:
            chunks.append("\n\n".join(current))
            current, size = [], 0
        size += (sep if current else 0) + cost
        current.append(piece)
    if current:
        chunks.append("\n\n".join(current))
    return chunks


def _fit_block(block: _Block, budget: int, measure: Callable[[str], int]) -> list[str]:
    if measure(block.text) <= budget:
        return [block.text]
    if block.fence is None:
        return _split_lines(list(block.lines), budget, measure)
    assert block.closing is not None
    # Reopen the fence in every piece; lines of code never merge or reflow.
    overhead = measure(block.fence + "\n") + measure("\n" + block.closing)
    room = budget - overhead
    code_lines: list[str] = []
    for line in block.lines[1:-1]:
        code_lines.extend(_cut_line(line, room, measure) if measure(line) > room else [line])
    out: list[str] = []
    current: list[str] = []
    size = 0
    newline = measure("\n")
    for line in code_lines:
        cost = measure(line)
        if current and size + newline + cost > room:
            out.append("\n".join([block.fence, *current, block.closing]))
            current, size = [], 0
        size += (newline if current else 0) + cost
        current.append(line)
    if current or not out:
        out.append("\n".join([block.fence, *current, block.closing]))
    return out


def _split_lines(lines: list[str], budget: int, measure: Callable[[str], int]) -> list[str]:
    out: list[str] = []
    current: list[str] = []
    size = 0
    newline = measure("\n")
    for raw in lines:
        for line in _cut_line(raw, budget, measure) if measure(raw) > budget else [raw]:
            cost = measure(line)
            if current and size + newline + cost > budget:
                out.append("\n".join(current))
                current, size = [], 0
            size += (newline if current else 0) + cost
            current.append(line)
    if current:
        out.append("\n".join(current))
    return out


def _cut_line(line: str, budget: int, measure: Callable[[str], int]) -> list[str]:
    """Cut one over-long line into pieces under budget, preferring a space as the cut point."""
    pieces: list[str] = []
    start = 0
    while start < len(line):
        size = 0
        end = start
        while end < len(line):
            cost = measure(line[end])
            if size + cost > budget:
                break
            size += cost
            end += 1
        if end < len(line):
            space = line.rfind(" ", start, end)
            if space > start + (end - start) // 2:
                end = space + 1
            else:
                end = _outside_entity(line, start, end)
        pieces.append(line[start:end])
        start = end
    return pieces


_ENTITY = re.compile(r"&#?[0-9A-Za-z]{1,8};")


def _outside_entity(line: str, start: int, end: int) -> int:
    """Move a cut at `end` back before an escape entity (`&#60;`) it would split."""
    amp = line.rfind("&", max(start + 1, end - 10), end)
    if amp != -1:
        entity = _ENTITY.match(line, amp)
        if entity is not None and entity.end() > end:
            return amp
    return end


# --- what Feishu reads as markup (chat text cannot act) ------------------------------------------
# Model and user text reaches Feishu in three message types, and each reads markup of its own. The
# one rule: text we did not write never becomes a tag: no mention (`<at ...>`), link, font or
# person tag. Bridge code that ever needs a real mention must build it after escaping.
#
# * Card markdown (JSON 2.0 `markdown` elements) reads CommonMark plus HTML-like tags:
#   `<at id=all>`, `<at id=ou_x>`, `<at ids=a,b>`, `<at email=a@b.c>`, `<a>`, `<link>`, `<font>`,
#   `<text_tag>`, `<person>`, `<local_datetime>`, `<number_tag>`, `<raw>`, `<audio>`, `<br>`,
#   `<hr>`. Characters that are markup are shown by HTML entity, in the documented form `&#NN;`
#   (`<` is `&#60;`).
#   Docs: "富文本（Markdown）" (card JSON 2.0), https://open.feishu.cn/document/feishu-cards/
#   card-json-v2-components/content-components/rich-text, sections "支持的 Markdown 语法" and
#   "特殊字符转义说明"; the same table in the JSON 1.0 page (.../message-cards-content/
#   using-markdown-tags). Code (fenced or inline) is shown verbatim by CommonMark, where entities
#   are not decoded, so code is left as written.
# * Text messages read `<at user_id="ou_x">Name</at>`, `<at user_id="all"></at>`, `**bold**`,
#   `<i> <u> <s>` and `[text](url)`; no escape exists. Docs: "发送消息内容结构" (text),
#   https://open.feishu.cn/document/uAjLw4CM/ukTMukTMukTM/im-v1/message/create_json, and the IM
#   FAQ "怎么实现机器人@人" (.../reference/im-v1/guide/faq).
# * Posts mention through `{"tag": "at"}` elements, and an `md` element reads the text-message
#   `<at user_id=...>` syntax; a `text` element is literal text (same create_json page, "富文本
#   post"). The bridge sends only `md` (prose) and `code_block` elements.
#
# Where no escape exists (text, post `md`), a ZERO WIDTH JOINER after every `<` keeps any tag from
# forming while the text reads the same (`<\u200dat user_id="all">` is not `<at`). No document
# says the server strips it, and emoji sequences depend on it. Inside code, where the card
# documentation says nothing is parsed, the joiner also breaks `<at`-shaped tags, and only those:
# a defence should a client ever read mentions there, at the price of one invisible character in
# code that spells a mention tag.
ZWJ = "\u200d"
_INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_MENTION_TAG = re.compile(r"<(?=\s*/?\s*at\b)", re.IGNORECASE)


def escape_card_markdown(markdown: str) -> str:
    """Model or user text as card markdown that shows exactly that text and forms no tag.

    `&` and `<` outside code become `&#38;` and `&#60;` (the documented escape form); code is
    verbatim except that mention-shaped tags get a zero width joiner.
    """
    return _escape_prose(markdown, _card_prose)


def escape_text(text: str) -> str:
    """Text for a `text` message (or a post `md` element) that forms no tag: `<` + ZWJ."""
    return text.replace("<", "<" + ZWJ)


def _card_prose(text: str) -> str:
    return text.replace("&", "&#38;").replace("<", "&#60;")


def _neutralise_code(code: str) -> str:
    return _MENTION_TAG.sub("<" + ZWJ, code)


def _escape_prose(
    markdown: str, prose: Callable[[str], str], code: Callable[[str], str] = _neutralise_code
) -> str:
    out: list[str] = []
    for block_text, is_code in _code_and_prose(markdown):
        if is_code:
            out.append(code(block_text))
            continue
        pos = 0
        parts: list[str] = []
        for m in _INLINE_CODE.finditer(block_text):
            parts.append(prose(block_text[pos : m.start()]))
            parts.append(code(m.group(0)))
            pos = m.end()
        parts.append(prose(block_text[pos:]))
        out.append("".join(parts))
    return "\n".join(out)


def _code_and_prose(markdown: str) -> list[tuple[str, bool]]:
    """Runs of lines, each flagged as fenced code or prose, in order."""
    runs: list[tuple[str, bool]] = []
    prose: list[str] = []
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            prose.append(lines[i])
            i += 1
            continue
        if prose:
            runs.append(("\n".join(prose), False))
            prose = []
        marks = opening.group("marks")
        code = [lines[i]]
        i += 1
        while i < len(lines):
            code.append(lines[i])
            candidate = lines[i].strip()
            i += 1
            if candidate.startswith(marks[0] * len(marks)) and set(candidate) == {marks[0]}:
                break
        runs.append(("\n".join(code), True))
    if prose:
        runs.append(("\n".join(prose), False))
    return runs


code_and_prose = _code_and_prose  # for readers of answers outside rendering (bridge/outputs.py)


# --- content builders -----------------------------------------------------------------------------
def text_content(text: str) -> dict[str, Any]:
    """A `text` message showing `text` as written: no mention or style tag can form."""
    return {"text": escape_text(text)}


STOP_ELEMENT = "stop"


def stop_button(value: Mapping[str, Any], locale: Locale = "zh") -> dict[str, Any]:
    """The red 停止 / Stop button of a turn's card (streaming or progress); `value` carries the
    bridge's nonce for that turn."""
    return {
        "tag": "button",
        "element_id": STOP_ELEMENT,
        "type": "danger",
        "size": "small",
        "text": {"tag": "plain_text", "content": t("stop_button", locale)},
        "behaviors": [{"type": "callback", "value": dict(value)}],
    }


def card_content(
    markdown: str,
    *,
    title: str | None = None,
    template: str = "blue",
    note: str | None = None,
) -> dict[str, Any]:
    """A card (JSON 2.0) showing markdown, optionally a header and a grey note.

    `markdown` must already be escaped with `escape_card_markdown` (the split into cards happens
    after escaping, so sizes are measured on what is sent); the note is the bridge's own text.
    The header title is a `plain_text` element, which reads no markup.
    """
    return _answer_card([markdown], title=title, template=template, tail=(), note=note)


def post_content(markdown: str, *, title: str = "") -> dict[str, Any]:
    """A post: one `md` paragraph per markdown block, fenced code as `code_block`.

    Model text is escaped here: `md` prose with `escape_text`, code with mention tags broken.
    A post's `md` reads no tables, headings or images ("发送消息内容结构", 富文本 post, the `md`
    syntax table): tables become aligned text in a code block, headings bold lines, images links.
    """
    paragraphs: list[list[dict[str, Any]]] = []
    markdown = _tables_as_code(_escape_prose(images_as_links(markdown), _bold_headings, str))
    for block in _blocks(markdown):
        if block.fence is not None:
            info = block.fence.strip().lstrip("`~").strip()
            language = info.split()[0].upper() if info else "PLAIN_TEXT"
            code = _neutralise_code("\n".join(block.lines[1:-1]))
            paragraphs.append([{"tag": "code_block", "language": language, "text": code}])
        else:
            paragraphs.append([{"tag": "md", "text": escape_text(block.text)}])
    return {"zh_cn": {"title": title, "content": paragraphs}}


_EMPHASIS = re.compile(r"(\*\*|__)(.+?)\1")
_HEADING = re.compile(r"^#{1,6}\s+", re.MULTILINE)
_LINK = re.compile(r"\[([^\]]+)\]\((\S+?)\)")


def plain_text(markdown: str) -> str:
    """Markdown as readable plain text for `text` messages (code is kept verbatim).

    Not escaped: `text_content` escapes what it sends.
    """
    out: list[str] = []
    for run, is_code in _code_and_prose(markdown):
        if is_code:
            out.append(run)
            continue
        run = _tables_as_lines(run)
        run = _HEADING.sub("", run)
        run = _EMPHASIS.sub(r"\2", run)
        run = _IMAGE.sub(_image_as_text, run)
        run = _IMAGE_REF.sub(r"\1", run)
        run = _LINK.sub(r"\1 (\2)", run)
        out.append(run)
    return "\n".join(out)


# --- tables and images in text ----------------------------------------------------------------
# A GFM table: a header row and a delimiter row (`| --- | :-: |`), then body rows; all with pipes.
_TABLE_DELIMITER = re.compile(r"^ {0,3}\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
# `![alt](url "title")` and `![alt][ref]`: an image in CommonMark.
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\(\s*<?([^)\s>]*)>?(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\s*\)")
_IMAGE_REF = re.compile(r"!(\[[^\]\n]*\]\[[^\]\n]*\])")
_HEADING_LINE = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def _is_delimiter(line: str) -> bool:
    return "|" in line and "-" in line and _TABLE_DELIMITER.match(line) is not None


def _table_spans(lines: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) line ranges of the tables in prose lines: header, delimiter, pipe rows."""
    spans: list[tuple[int, int]] = []
    i = 1
    while i < len(lines):
        if _is_delimiter(lines[i]) and "|" in lines[i - 1] and not _is_delimiter(lines[i - 1]):
            end = i + 1
            while end < len(lines) and "|" in lines[end] and lines[end].strip():
                end += 1
            spans.append((i - 1, end))
            i = end + 1
        else:
            i += 1
    return spans


def count_tables(markdown: str) -> int:
    """How many tables a markdown text shows (tables in fenced code are code)."""
    return sum(
        len(_table_spans(run.split("\n")))
        for run, is_code in _code_and_prose(markdown)
        if not is_code
    )


def _cells(row: str) -> list[str]:
    row = row.strip()
    row = row.removeprefix("|")
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", row)]


def _rewrite_tables(prose: str, table: Callable[[list[list[str]]], str]) -> str:
    lines = prose.split("\n")
    spans = _table_spans(lines)
    if not spans:
        return prose
    out: list[str] = []
    pos = 0
    for start, end in spans:
        out.extend(lines[pos:start])
        rows = [_cells(lines[start]), *(_cells(line) for line in lines[start + 2 : end])]
        out.append(table(rows))
        pos = end
    out.extend(lines[pos:])
    return "\n".join(out)


def _aligned(rows: list[list[str]]) -> str:
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    sizes = [max(len(r[c]) for r in rows) for c in range(width)]
    lines = [" | ".join(cell.ljust(sizes[c]) for c, cell in enumerate(r)).rstrip() for r in rows]
    lines.insert(1, "-+-".join("-" * size for size in sizes))
    return "```\n" + "\n".join(lines) + "\n```"


def _as_lines(rows: list[list[str]]) -> str:
    header, body = rows[0], rows[1:]
    out: list[str] = []
    for row in body:
        if len(header) == 1:
            out.append(f"• {row[0] if row else ''}")
            continue
        pairs = [
            f"{name}: {value}" if name else value
            for name, value in zip(header, row, strict=False)
            if value
        ]
        out.append("• " + "; ".join(pairs))
    return "\n".join(out) if out else " | ".join(header)


def _tables_as_code(markdown: str) -> str:
    """Tables as aligned text in code blocks (for posts, which read no tables)."""
    return "\n".join(
        run if is_code else _rewrite_tables(run, _aligned)
        for run, is_code in _code_and_prose(markdown)
    )


def _tables_as_lines(prose: str) -> str:
    """Each table row as one readable line, `• Header: value; Header: value`."""
    return _rewrite_tables(prose, _as_lines)


def _bold_headings(prose: str) -> str:
    return _HEADING_LINE.sub(r"**\1**", prose)


def _image_as_link(m: re.Match[str]) -> str:
    alt, url = m.group(1).strip(), m.group(2)
    if url.startswith(("https://", "http://")):
        return f"[{alt or 'image'}]({url})"
    return alt or url  # an image key or a relative path: nothing a reader could open


def _image_as_text(m: re.Match[str]) -> str:
    alt, url = m.group(1).strip(), m.group(2)
    return f"{alt} ({url})" if alt and url else alt or url


def images_as_links(markdown: str) -> str:
    """Markdown images as links: `![alt](https://x)` -> `[alt](https://x)`, no stray `!`.

    A card image needs an `image_key` from the image upload API, and a URL in its place is
    refused (230099 / 200570, see the limits below). The bridge uploads nothing (a model's
    image URL may be private, huge or slow; an upload per answer costs a call and a quota),
    so an image reads as a link the user can open. Code is left as written.
    """

    def prose(text: str) -> str:
        return _IMAGE_REF.sub(r"\1", _IMAGE.sub(_image_as_link, text))

    return _escape_prose(markdown, prose, str)


# --- documented card limits --------------------------------------------------------------------
# Every rule is checked before a card is sent (`card_breaches`) and respected when an answer is
# packed into cards (`answer_cards`). Pages under https://open.feishu.cn/document/ (mirrored in
# wxkingstar/doc-hub-mcp, feishu/):
# * body_bytes: "发送消息" (server-docs/im-v1/message/create), `content`: a card or post request
#   body is at most 30 KB, a text 150 KB (error 230025); the same 30 KB for "更新已发送的消息卡片"
#   (server-docs/im-v1/message-card/patch). Both add: style tags make the real body larger than
#   the one sent, so cards are packed `margin` bytes under the limit.
# * tables_per_element: "富文本（Markdown）" JSON 2.0 (feishu-cards/card-json-v2-components/
#   content-components/rich-text), the table syntax: "单个富文本组件中，最多可放置四个表格".
# * tables_per_card: "表格" JSON 2.0 (feishu-cards/card-json-v2-components/content-components/
#   table): "单张卡片最多支持放置五个表格组件". The page does not say whether markdown tables count;
#   we count them with table components (issue 17 saw 230099 / 11310 for an answer with more).
# * elements_per_card: "卡片 JSON 2.0 结构" (feishu-cards/card-json-v2-structure): "一张卡片最多
#   支持 200 个元素（如 tag 为 plain_text 的文本元素）或组件"; the create page's "230099 子错误码"
#   lists 11310 "element exceeds the limit". Counted here: every object with a `tag`, at any depth.
# * depth: "折叠面板" JSON 2.0 (feishu-cards/card-json-v2-components/containers/
#   collapsible-panel): "容器类组件最多支持嵌套五层组件".
# * image: rich-text page, image syntax `![hover_text](image_key)` with a key from "上传图片"
#   (server-docs/im-v1/image/create); anything else is refused with 230099 / 200570 "card
#   contains invalid image keys" (create page). The bridge sends no images (`images_as_links`).
BreachRule = Literal[
    "body_bytes", "tables_per_element", "tables_per_card", "elements_per_card", "depth", "image"
]


@dataclass(frozen=True, slots=True)
class CardLimits:
    body_bytes: int = 30_000
    tables_per_element: int = 4
    tables_per_card: int = 5
    elements_per_card: int = 200
    depth: int = 5
    margin: int = 1_500
    """Bytes kept free under `body_bytes` when packing (style tags grow the real body)."""


CARD_LIMITS = CardLimits()
# After a refusal the answer is packed again well inside every limit: if the server counts
# differently than its pages say, a smaller card, fewer tables and fewer components still pass.
STRICT_CARD_LIMITS = CardLimits(
    tables_per_element=1, tables_per_card=2, elements_per_card=50, margin=12_000
)


@dataclass(frozen=True, slots=True)
class Breach:
    """One documented limit a card exceeds: `found` against `limit`."""

    rule: BreachRule
    found: int
    limit: int


def card_body_size(card: Mapping[str, Any]) -> int:
    """The largest request body that carries `card` (a create, with receive_id and uuid)."""
    return request_body_size(
        {
            "receive_id": "x" * 64,
            "msg_type": "interactive",
            "content": json.dumps(card, ensure_ascii=False),
            "uuid": "x" * 50,
        }
    )


def _count_tags(value: Any) -> int:
    if isinstance(value, dict):
        own = 1 if "tag" in value else 0
        return own + sum(_count_tags(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count_tags(v) for v in value)
    return 0


def _components(elements: Sequence[Any], depth: int = 1) -> list[tuple[dict[str, Any], int]]:
    """Every component under `elements` with its nesting depth (top level is 1)."""
    found: list[tuple[dict[str, Any], int]] = []
    for element in elements:
        if not isinstance(element, dict):
            continue
        found.append((element, depth))
        found.extend(_components(element.get("elements") or [], depth + 1))
        for column in element.get("columns") or []:
            if isinstance(column, dict):
                found.extend(_components(column.get("elements") or [], depth + 1))
    return found


def _markdown_images(markdown: str) -> int:
    count = 0
    for run, is_code in _code_and_prose(markdown):
        if not is_code:
            prose = _INLINE_CODE.sub("", run)
            count += len(_IMAGE.findall(prose)) + len(_IMAGE_REF.findall(prose))
    return count


def card_breaches(card: Mapping[str, Any], limits: CardLimits = CARD_LIMITS) -> tuple[Breach, ...]:
    """The documented limits `card` exceeds (none: it may be sent)."""
    found: list[Breach] = []
    size = card_body_size(card)
    if size > limits.body_bytes:
        found.append(Breach("body_bytes", size, limits.body_bytes))
    body = card.get("body") or {}
    components = _components(body.get("elements") or card.get("elements") or [])
    markdowns = [str(c.get("content", "")) for c, _ in components if c.get("tag") == "markdown"]
    tables = [count_tables(m) for m in markdowns]
    if max(tables, default=0) > limits.tables_per_element:
        found.append(Breach("tables_per_element", max(tables), limits.tables_per_element))
    in_card = sum(tables) + sum(1 for c, _ in components if c.get("tag") == "table")
    if in_card > limits.tables_per_card:
        found.append(Breach("tables_per_card", in_card, limits.tables_per_card))
    tags = _count_tags(dict(card))
    if tags > limits.elements_per_card:
        found.append(Breach("elements_per_card", tags, limits.elements_per_card))
    depth = max((d for _, d in components), default=0)
    if depth > limits.depth:
        found.append(Breach("depth", depth, limits.depth))
    images = sum(_markdown_images(m) for m in markdowns)
    if images:
        found.append(Breach("image", images, 0))
    return tuple(found)


# --- an answer in as many cards as the limits need ------------------------------------------------
@dataclass(frozen=True, slots=True)
class AnswerCard:
    card: dict[str, Any]
    source: str
    """The markdown this card shows, as written (to render it again if the card is refused)."""


def _split_tables(block: _Block) -> list[tuple[str, bool]]:
    """A paragraph block as text and table parts, in order: (text, is_table)."""
    lines = list(block.lines)
    parts: list[tuple[str, bool]] = []
    pos = 0
    for start, end in _table_spans(lines):
        if start > pos:
            parts.append(("\n".join(lines[pos:start]), False))
        parts.append(("\n".join(lines[start:end]), True))
        pos = end
    if pos < len(lines):
        parts.append(("\n".join(lines[pos:]), False))
    return parts


def _fit_table(table: str, budget: int, measure: Callable[[str], int]) -> list[str]:
    """A table too big for one piece as several tables, each repeating the header rows."""
    if measure(table) <= budget:
        return [table]
    header, rows = table.split("\n")[:2], table.split("\n")[2:]
    room = budget - measure("\n".join(header)) - measure("\n")
    if room < 64:  # a header this wide cannot carry rows: show the table as lines of text
        return _split_lines(table.split("\n"), budget, measure)
    # The rows packed as lines within the room the header leaves, each part under the header.
    parts = _split_lines(rows, room, measure)
    return ["\n".join([*header, part]) for part in parts] or ["\n".join(header)]


def _escaped_cost(text: str) -> int:
    """Bytes of `text` once escaped for a card, reading all of it as prose (never less)."""
    return body_cost(_card_prose(text))


_HEADING = re.compile(r"^ {0,3}#{1,6}(?:\s|$)")


def _take_heading(pieces: list[str]) -> str | None:
    """The heading that ends the last piece, taken off it (the piece goes if nothing is left)."""
    if not pieces:
        return None
    lines = pieces[-1].rstrip("\n").split("\n")
    if not _HEADING.match(lines[-1]):
        return None
    rest = "\n".join(lines[:-1]).rstrip("\n")
    if rest.strip():
        pieces[-1] = rest
    else:
        pieces.pop()
    return lines[-1]


def _answer_pieces(markdown: str, budget: int) -> list[str]:
    """Paragraphs, code blocks and tables, each small enough for one card on its own. A heading
    right above a table travels with the table's first part: a card split between them left the
    heading at the end of one card and its table at the top of the next (issue #33)."""
    pieces: list[str] = []
    for block in _blocks(markdown):
        if block.fence is not None:
            pieces.extend(_fit_block(block, budget, _escaped_cost))
            continue
        for text, is_table in _split_tables(block):
            if not is_table:
                part = _Block(tuple(text.split("\n")))
                pieces.extend(_fit_block(part, budget, _escaped_cost))
                continue
            heading = _take_heading(pieces)
            room = budget
            if heading is not None:
                room -= _escaped_cost(heading) + _escaped_cost("\n\n")
                if room < 256:  # no room beside it: the heading stays where it was
                    pieces.append(heading)
                    heading, room = None, budget
            parts = _fit_table(text, room, _escaped_cost)
            if heading is not None:
                parts[0] = f"{heading}\n\n{parts[0]}"
            pieces.extend(parts)
    return pieces


def _answer_card(
    contents: Sequence[str],
    *,
    title: str | None,
    template: str,
    tail: Sequence[Mapping[str, Any]],
    note: str | None,
) -> dict[str, Any]:
    elements: list[dict[str, Any]] = [{"tag": "markdown", "content": c} for c in contents]
    elements.extend(dict(e) for e in tail)
    if note:
        elements.append({"tag": "markdown", "content": note, "text_size": "notation"})
    card: dict[str, Any] = {
        "schema": "2.0",
        "config": {"update_multi": True},
        "body": {"elements": elements},
    }
    if title:
        card["header"] = {"title": {"tag": "plain_text", "content": title}, "template": template}
    return card


def answer_cards(
    markdown: str,
    *,
    title: str | None = None,
    template: str = "blue",
    tail: Sequence[Mapping[str, Any]] = (),
    limits: CardLimits = CARD_LIMITS,
    locale: Locale = "zh",
) -> list[AnswerCard]:
    """An answer as cards within `limits`: markdown elements of at most `tables_per_element`
    tables, cards of at most `tables_per_card` tables, `elements_per_card` components and
    `body_bytes - margin` bytes. `title` heads the first card, `tail` (the bridge's own elements:
    the tool trace, the footer) ends the last; "第 i/n 部分" ("part i/n" in English) notes mark a
    split answer.

    `markdown` is model text, escaped here (`escape_card_markdown`), images shown as links.
    """
    text = images_as_links(markdown)

    def skeleton(contents: Sequence[str]) -> dict[str, Any]:
        return _answer_card(
            contents,
            title=title,
            template=template,
            tail=tail,
            note=t("part_of", locale, index=99, total=99),
        )

    base = card_body_size(skeleton([]))
    element_cost = card_body_size(skeleton(["", ""])) - card_body_size(skeleton([""]))
    room = limits.body_bytes - limits.margin - base
    element_room = limits.elements_per_card - _count_tags(skeleton([]))
    if room - element_cost < 256 or element_room < 1:
        raise ValueError("the card's own elements leave no room for the answer")
    separator = body_cost("\n\n")

    raw = _answer_pieces(text, room - element_cost) or ["(no text)"]
    cards: list[list[list[tuple[str, str]]]] = [[]]  # card -> element -> (raw, escaped) pieces
    used = card_tables = element_tables = 0
    for piece in raw:
        escaped = escape_card_markdown(piece)
        cost, tables = body_cost(escaped), count_tables(piece)
        card = cards[-1]
        joins = bool(card) and element_tables + tables <= limits.tables_per_element
        grow = separator + cost if joins else element_cost + cost
        full = (
            used + grow > room
            or card_tables + tables > limits.tables_per_card
            or (not joins and len(card) + 1 > element_room)
        )
        if card and full:
            cards.append([])
            card, used, card_tables, joins, grow = cards[-1], 0, 0, False, element_cost + cost
        if joins:
            card[-1].append((piece, escaped))
            element_tables += tables
        else:
            card.append([(piece, escaped)])
            element_tables = tables
        used += grow
        card_tables += tables

    out: list[AnswerCard] = []
    for index, elements in enumerate(cards):
        last = index == len(cards) - 1
        built = _answer_card(
            ["\n\n".join(e for _, e in element) for element in elements],
            title=title if index == 0 else None,
            template=template,
            tail=tail if last else (),
            note=t("part_of", locale, index=index + 1, total=len(cards))
            if len(cards) > 1
            else None,
        )
        source = "\n\n".join(r for element in elements for r, _ in element)
        out.append(AnswerCard(built, source))
    return out


def post_contents(markdown: str, *, title: str = "") -> list[dict[str, Any]]:
    """An answer as posts (rich text), each request body within the documented 30 KB."""
    budget = chunk_budget("post")
    posts: list[dict[str, Any]] = []
    pending = split_markdown(markdown, budget)
    while pending:
        chunk = pending.pop(0)
        post = post_content(chunk, title=title if not posts else "")
        size = request_body_size(
            {
                "receive_id": "x" * 64,
                "msg_type": "post",
                "content": json.dumps(post, ensure_ascii=False),
                "uuid": "x" * 50,
            }
        )
        if size > BODY_LIMITS["post"] - 500 and len(chunk) > 256:
            # Paragraph overhead (one element per block) made it too big: halve and try again.
            pending[:0] = split_markdown(chunk, max(budget // 2, 64))
            budget = max(budget // 2, 64)
            continue
        posts.append(post)
    return posts


# --- the bridge's own card parts: the tool trace and the footer ---------------------------------
STEP_ICONS = {"started": "⏳", "ok": "✅", "error": "❌", "denied": "🚫"}
TRACE_STEPS_SHOWN = 20


def step_label(name: str, summary: str, *, limit: int = 120) -> str:
    """`Name `summary`` for one tool step, on one line (escaped for a card)."""
    summary = " ".join(summary.replace("`", "'").split())
    if len(summary) > limit:
        summary = summary[: limit - 1] + "…"
    label = name if summary in ("", name) else f"{name} `{summary}`"
    return escape_card_markdown(label)


def trace_panel(steps: Sequence[Mapping[str, str]], locale: Locale = "zh") -> dict[str, Any] | None:
    """The turn's tool steps in a collapsible panel ("折叠面板", JSON 2.0), refused and failed
    steps marked with their reason; open when one was refused or failed. None without steps.

    `steps` are `{name, summary, status, detail}` (agent TurnResult.steps). The reason is the
    policy's or the tool's text: server paths are cut by the caller's `without_paths`.
    """
    if not steps:
        return None
    refused = sum(1 for s in steps if s.get("status") == "denied")
    failed = sum(1 for s in steps if s.get("status") == "error")
    title = t("trace_title", locale, count=len(steps))
    title += t("trace_refused_count", locale, count=refused) if refused else ""
    title += t("trace_failed_count", locale, count=failed) if failed else ""
    lines: list[str] = []
    shown = list(steps)[-TRACE_STEPS_SHOWN:]
    if len(steps) > len(shown):
        lines.append(t("earlier_steps", locale, count=len(steps) - len(shown)))
    for s in shown:
        status = s.get("status", "")
        label = step_label(s.get("name", ""), s.get("summary", ""))
        line = f"- {STEP_ICONS.get(status, '•')} {label}"
        detail = " ".join(str(s.get("detail", "")).split())[:160]
        if status == "denied":
            line += t("trace_refused", locale) + (
                f": {escape_card_markdown(detail)}" if detail else ""
            )
        elif status == "error":
            line += t("trace_failed", locale) + (
                f": {escape_card_markdown(detail)}" if detail else ""
            )
        lines.append(line)
    return {
        "tag": "collapsible_panel",
        "expanded": bool(refused or failed),
        "header": {"title": {"tag": "plain_text", "content": title}},
        "elements": [{"tag": "markdown", "content": "\n".join(lines)}],
    }


def footer_element(seconds: float, cost_usd: float | None) -> dict[str, Any]:
    """A grey line under the answer: time taken and this turn's cost."""
    if seconds < 60:
        took = f"{seconds:.1f} s"
    else:
        minutes, rest = divmod(round(seconds), 60)
        took = f"{minutes} min {rest:02d} s"
    parts = [f"⏱ {took}"]
    if cost_usd is not None:
        parts.append(f"${cost_usd:.4f}")
    return {"tag": "markdown", "content": " · ".join(parts), "text_size": "notation"}
