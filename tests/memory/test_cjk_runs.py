"""The CJK helpers of `memory._text`: one compiled pattern answers what three spellings of the
CJK character class did (each costs `re` 1.2-2 ms to compile in every hook process)."""

from __future__ import annotations

import pytest

from memory import _text


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("", [""]),
        ("login rate limit", ["login rate limit"]),
        ("连接池", ["", "连接池", ""]),
        ("auth 连接池 timeout", ["auth ", "连接池", " timeout"]),
        ("a中b文c", ["a", "中", "b", "文", "c"]),
        ("カタカナと漢字𠀀x", ["", "カタカナと漢字𠀀", "x"]),
        ("全角，标点。", ["", "全角", "，", "标点", "。"]),
    ],
)
def test_a_text_splits_into_the_text_between_cjk_runs_and_the_runs(
    text: str, parts: list[str]
) -> None:
    assert _text.split_cjk_runs(text) == parts


@pytest.mark.parametrize(
    ("text", "count", "starts", "holds"),
    [
        ("", 0, False, False),
        ("deploy", 0, False, False),
        ("部署 deploy", 2, True, True),
        ("deploy 部署", 2, False, True),
        ("，。！", 0, False, False),
        ("漢字𠀀カナ", 5, True, True),
    ],
)
def test_cjk_characters_are_counted_and_found(
    text: str, count: int, starts: bool, holds: bool
) -> None:
    assert _text.cjk_count(text) == count == len(_text.HAS_CJK_RE.findall(text))
    assert bool(_text.CJK_RUN_RE.match(text)) is starts
    assert bool(_text.CJK_RUN_RE.search(text)) is holds
    assert _text.estimate_tokens(text) == count + (len(text) - count + 3) // 4
