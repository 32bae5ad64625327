"""A Chinese query's words in English (`memory.search.bilingual`), and what they do for a
search: an English note is found by a Chinese question's words, beside the vectors."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.config import MemoryConfig
from memory.encoders.models import EncoderSpec, load_encoder
from memory.model import NoteDraft
from memory.search.bilingual import Lexicon, chinese_names, english_query
from memory.search.fusion import fuse
from memory.search.keyword import parse_query
from memory.sqlite.store import MemoryStore


def words(query: str) -> set[str]:
    return set(english_query([t.text for t in parse_query(query).terms]).split())


@pytest.mark.parametrize(
    ("query", "wanted"),
    [
        ("订单列表接口为什么慢", {"order", "list", "slow"}),
        ("数据库连接池泄漏", {"database", "leak"}),
        ("昆仑这个名字是谁起的", {"kunlun"}),
        # a name the dictionary lacks is written as English notes write it
        ("许佳负责什么", {"xu", "jia"}),
        ("周宁对什么过敏", {"zhou", "ning"}),
    ],
)
def test_chinese_words_come_with_their_english(query: str, wanted: set[str]) -> None:
    assert wanted <= words(query)


@pytest.mark.parametrize("query", ["how is the login rate limit configured?", "Kafka 3.7", ""])
def test_a_query_without_chinese_words_has_no_translation(query: str) -> None:
    assert words(query) == set()


def test_a_name_is_said_in_pinyin_and_a_word_by_its_meaning() -> None:
    lexicon = Lexicon(
        {"周宁": "zhouning county", "订单": "order"},
        frozenset({"周宁"}),
        {"周": "zhou", "宁": "ning", "订": "ding", "单": "dan"},
    )
    assert lexicon.english("周宁") == ["zhouning", "county", "zhou ning"]
    assert lexicon.english("订单") == ["order"]  # a word the dictionary knows: no pinyin
    assert lexicon.english("许佳") == []  # characters it does not read: nothing made up


def chinese(query: str) -> list[set[str]]:
    parsed = parse_query(query)
    return [set(g) for g in chinese_names([t.text for t in parsed.terms], parsed.phrase)]


@pytest.mark.parametrize(
    ("query", "wanted"),
    [
        # English notes write a Chinese name in pinyin; the Chinese note writes it in characters
        ("What was Liu Chang's thesis about?", "刘畅"),
        ("When did Zhou Ning and I get together?", "周宁"),
        ("Did Wang Lei fix it?", "王磊"),
    ],
)
def test_a_pinyin_name_comes_with_its_chinese_spellings(query: str, wanted: str) -> None:
    assert any(wanted in group for group in chinese(query))


def test_english_words_are_not_put_into_chinese() -> None:
    # tried on 28 Nov: "typhoon" -> 台风 found the life set's Chinese notes, but every-day
    # words found the wrong ones in sets B-D (docs/retrieval.md, "Both languages meet")
    assert chinese("Which typhoon made us work from home?") == []


@pytest.mark.parametrize(
    "query",
    [
        "订单列表接口为什么慢",  # Chinese already: its own words reach Chinese notes
        "payments-gw 的 timeout 改了吗",
        "",
    ],
)
def test_a_query_with_chinese_words_is_not_put_into_chinese(query: str) -> None:
    assert chinese(query) == []


def test_only_capitalised_words_side_by_side_read_as_a_name() -> None:
    lexicon = Lexicon(
        {},
        frozenset(),
        {},
        {"liu": ("刘", "流"), "chang": ("畅", "长")},
    )
    assert lexicon.names_of("Liu", "Chang") == ["刘畅", "刘长"]  # the common surname only
    assert lexicon.names_of("Chang", "Liu") == []  # 畅 and 长 are no surnames
    assert not any("刘畅" in g for g in chinese("liu chang was here"))
    assert not any("刘畅" in g for g in chinese("Liu met Chang"))


def test_translated_hits_are_a_third_list_trusted_by_their_coverage() -> None:
    fused = dict(
        fuse(
            ["zh"],
            ["v1", "v2"],
            keyword_coverage=[0.9],
            vector_scores=[0.3, 0.29],
            translated=["en", "noise"],
            translated_coverage=[0.3, 0.01],
        )
    )
    assert fused["en"] > 0 and fused.get("noise", 0.0) == 0.0
    assert fused["zh"] == 1.0  # the query's own words still lead


@pytest.mark.parametrize(
    ("question", "wanted", "others"),
    [
        (
            "订单列表接口为什么慢",
            "The list orders endpoint was slow until Lu Ming added an index.",
            (
                "Refunds are capped at 50,000 yuan a day per merchant.",
                "The staging cluster runs two replicas of every service.",
                "Weekly sync with the data team is on Wednesdays.",
            ),
        ),
        (
            "What did Liu Chang leave behind for the team?",
            "刘畅的实习今天结束，走之前把 5 个 parser 的文档都补全了。",
            (
                "The team offsite is in Hangzhou this year.",
                "周末去岩舞空间抱石，终于完成了 V3。",
                "订单服务的连接池上限改成 40。",
            ),
        ),
    ],
    ids=["zh-question-en-note", "en-question-zh-note"],
)
def test_a_question_finds_a_note_in_the_other_language_by_its_words(
    tmp_path: Path, question: str, wanted: str, others: tuple[str, ...]
) -> None:
    with MemoryStore.open(MemoryConfig.for_home(tmp_path, fsync=False)) as store:
        store.attach_encoder(load_encoder(EncoderSpec("hashing")))  # vectors that read no meaning
        wanted_id = store.save(NoteDraft(content=wanted)).id
        for text in others:
            store.save(NoteDraft(content=text))
        store.sync_vectors()
        outcome = store.search_detailed(question, floor=0.0)
        assert outcome.mode == "hybrid"
        # first of the notes written (the empty profile note, type-weighted, may lead)
        written = [h.id for h in outcome.hits if h.id != "mem_user_profile"]
        assert written[:1] == [wanted_id]
        # keyword search alone (the hooks working directly) does not translate
        alone = store.search_detailed(question, mode="keyword", floor=0.0)
        assert wanted_id not in [h.id for h in alone.hits]
