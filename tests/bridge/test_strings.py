"""The strings table: Chinese by default, English for clients that say so; every key in both."""

from __future__ import annotations

import string

import pytest

from bridge.strings import STRINGS, both, locale_of, t


@pytest.mark.parametrize(
    ("user_agent", "locale"),
    [
        ("Mozilla/5.0 Chrome/101 Safari/537.36 Lark/6.7.5 LarkLocale/en_US ttnet", "en"),
        ("Lark/7.30 LarkLocale/en-GB", "en"),
        ("Feishu/7.30 LarkLocale/zh_CN", "zh"),
        ("Feishu/7.30 LarkLocale/ja_JP", "zh"),  # no Japanese table: the default
        ("Mozilla/5.0", "zh"),
        ("", "zh"),
        (None, "zh"),
    ],
)
def test_locale_comes_from_the_clients_user_agent(user_agent: str | None, locale: str) -> None:
    assert locale_of(user_agent) == locale


def test_every_string_exists_in_both_languages_with_the_same_placeholders() -> None:
    for key, entry in STRINGS.items():
        assert set(entry) == {"zh", "en"}, key
        fields = [
            {f for _, f, _, _ in string.Formatter().parse(entry[lang]) if f} for lang in entry
        ]
        assert fields[0] == fields[1], key


def test_t_fills_values_and_both_gives_feishus_i18n_keys() -> None:
    assert t("queue_full", "en", limit=3).startswith("The queue is full (3 messages")
    assert t("queue_full", limit=3).startswith("排队的消息已满（最多 3 条）")
    assert both("stopping") == {"zh_cn": "正在停止这个回答。", "en_us": "Stopping this answer."}
