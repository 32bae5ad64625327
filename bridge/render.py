"""Markdown -> Feishu message content (text, post, card), and byte-aware splitting (pure).

Feishu limits the *request body* of a send: 150 KB for text, 30 KB for post and card messages
(error 230025). `content` is itself a JSON string inside the JSON body, so every character is
escaped twice; `body_cost` measures exactly that, and `split_markdown` packs whole paragraphs
into chunks under a budget. A code fence is never broken: a fence too big for one chunk is
closed at the end of a chunk and reopened (same info string) at the start of the next.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

MsgType = Literal["text", "post", "interactive"]

# Request-body limits (docs say 150 KB / 30 KB; we stay under the decimal reading).
BODY_LIMITS: dict[str, int] = {"text": 150_000, "post": 30_000, "interactive": 30_000}
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


def _escape_prose(markdown: str, prose: Callable[[str], str]) -> str:
    out: list[str] = []
    for block_text, is_code in _code_and_prose(markdown):
        if is_code:
            out.append(_neutralise_code(block_text))
            continue
        pos = 0
        parts: list[str] = []
        for m in _INLINE_CODE.finditer(block_text):
            parts.append(prose(block_text[pos : m.start()]))
            parts.append(_neutralise_code(m.group(0)))
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


# --- content builders -----------------------------------------------------------------------------
def text_content(text: str) -> dict[str, Any]:
    """A `text` message showing `text` as written: no mention or style tag can form."""
    return {"text": escape_text(text)}


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
    elements: list[dict[str, Any]] = [{"tag": "markdown", "content": markdown}]
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


def post_content(markdown: str, *, title: str = "") -> dict[str, Any]:
    """A post: one `md` paragraph per markdown block, fenced code as `code_block`.

    Model text is escaped here: `md` prose with `escape_text`, code with mention tags broken.
    """
    paragraphs: list[list[dict[str, Any]]] = []
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
        run = _HEADING.sub("", run)
        run = _EMPHASIS.sub(r"\2", run)
        run = _LINK.sub(r"\1 (\2)", run)
        out.append(run)
    return "\n".join(out)
