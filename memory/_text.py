"""Text helpers shared by the index, search and dedup: CJK spacing, normalisation, shingles.

Index-side segmentation needs no dictionary: every CJK character becomes its own token
(spaces are inserted around it before the text reaches SQLite's `unicode61` tokenizer), so a
query word of any length matches as a phrase of characters. The dictionary segmenter (rjieba)
is only used on the query side, to decide which characters form a word.
"""

from __future__ import annotations

import re
import struct
import unicodedata
import zlib
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from memory._patterns import lazy_pattern

# Han (incl. extensions and compatibility ideographs), kana, CJK punctuation is left alone.
CJK_CHAR = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf"  # Han extension A
    "\u4e00-\u9fff"  # Han
    "\uf900-\ufaff"  # compatibility ideographs
    "\U00020000-\U0003134f"  # Han extensions B-G
)
CJK_RUN_RE = re.compile(f"[{CJK_CHAR}]+")
"""The one CJK pattern compiled at import: `re` walks each of the class's ~28,000 characters
to compile a pattern with it (1.2-2 ms each), and a prompt hook compiled three. Its `match` and
`search` say whether a text starts with or holds a CJK character; `cjk_count` counts them."""
if TYPE_CHECKING:
    HAS_CJK_RE: re.Pattern[str]
    """One CJK character; compiled on first use (`__getattr__`)."""
_WS_RE = re.compile(r"\s+")
_NON_WORD_RE = re.compile(r"[\W_]+")
_LATIN_TOKEN_RE = lazy_pattern(r"[A-Za-z0-9_][A-Za-z0-9_.\-$]*[A-Za-z0-9_]|[A-Za-z0-9_]")

SHINGLE_SIZE = 3
SIMILARITY_CHARS = 20_000
MINHASH_BUCKETS = 16
BAND_ROWS = 4
BAND_COUNT = MINHASH_BUCKETS // BAND_ROWS


def __getattr__(name: str) -> re.Pattern[str]:
    # `HAS_CJK_RE` (one CJK character), for the modules that count with it: compiled when first
    # asked for, then a module attribute like any other.
    if name == "HAS_CJK_RE":
        pattern = globals()[name] = re.compile(f"[{CJK_CHAR}]")
        return pattern
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _space_run(match: re.Match[str]) -> str:
    return " " + " ".join(match.group()) + " "


def space_cjk(text: str) -> str:
    """Put spaces around every CJK character so `unicode61` indexes each as one token."""
    return CJK_RUN_RE.sub(_space_run, text)


def cjk_runs(text: str) -> list[str]:
    """The runs of CJK characters of a text, in order."""
    return CJK_RUN_RE.findall(text)


def cjk_count(text: str) -> int:
    """How many CJK characters a text holds."""
    return sum(map(len, CJK_RUN_RE.findall(text)))


def split_cjk_runs(text: str) -> list[str]:
    """`re.split(f"([{CJK_CHAR}]+)", text)`: the text between CJK runs and the runs, in turn
    (first and last the text around them, possibly empty), through `CJK_RUN_RE`."""
    parts: list[str] = []
    last = 0
    for match in CJK_RUN_RE.finditer(text):
        parts += (text[last : match.start()], match.group())
        last = match.end()
    parts.append(text[last:])
    return parts


_CODE_LIKE_RE = lazy_pattern(r"[_\d.$\-]|[a-z][A-Z]|[A-Z]{2}[a-z]")


def latin_tokens(text: str) -> str:
    """Unique code-like tokens of a text (`getConnPoolSize`, `auth_timeout`, `OAuth2`), for
    the substring (trigram) index. Plain words are left to the word index: a substring of a
    plain word is rarely what a user means (`PR` in `prefers`)."""
    seen: dict[str, None] = {}
    for match in _LATIN_TOKEN_RE().finditer(text):
        token = match.group(0)
        if len(token) >= 3 and _CODE_LIKE_RE().search(token):
            seen.setdefault(token.lower(), None)
    return " ".join(seen)


def normalize_content(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed: the form whose hash finds exact duplicates."""
    return _WS_RE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def content_hash(text: str) -> str:
    import hashlib  # here: its OpenSSL load is ~2 ms of a hook that hashes nothing

    return hashlib.sha256(normalize_content(text).encode("utf-8")).hexdigest()


def file_hash(data: bytes) -> str:
    import hashlib

    return hashlib.blake2b(data, digest_size=16).hexdigest()


def similarity_text(text: str) -> str:
    """Normalised text with punctuation and spaces folded, capped: the input of shingling."""
    return _NON_WORD_RE.sub(" ", normalize_content(text[: SIMILARITY_CHARS * 2]))[
        :SIMILARITY_CHARS
    ].strip()


def shingles(text: str) -> set[str]:
    """Character 3-grams of `similarity_text(text)` (the whole text if shorter)."""
    norm = similarity_text(text)
    if len(norm) <= SHINGLE_SIZE:
        return {norm} if norm else set()
    return {norm[i : i + SHINGLE_SIZE] for i in range(len(norm) - SHINGLE_SIZE + 1)}


def jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def minhash_bands(grams: Iterable[str]) -> list[int]:
    """Locality-sensitive band keys (one-permutation MinHash, 16 buckets, 4 bands of 4).

    Two texts with Jaccard similarity 0.92 share at least one band with probability > 0.99;
    unrelated texts almost never do. Bands with an empty bucket are skipped (short texts rely
    on the exact hash).
    """
    import hashlib

    mins = [0xFFFFFFFF] * MINHASH_BUCKETS
    missing = MINHASH_BUCKETS
    # smallest hashes first: each bucket's minimum is the first hash seen for it
    for h in sorted({zlib.crc32(g.encode("utf-8")) for g in grams}):
        bucket = h % MINHASH_BUCKETS
        if mins[bucket] == 0xFFFFFFFF:
            mins[bucket] = h // MINHASH_BUCKETS
            missing -= 1
            if not missing:
                break
    keys: list[int] = []
    for band in range(BAND_COUNT):
        rows = mins[band * BAND_ROWS : (band + 1) * BAND_ROWS]
        if 0xFFFFFFFF in rows:
            continue
        digest = hashlib.blake2b(struct.pack("<5I", band, *rows), digest_size=8).digest()
        keys.append(struct.unpack("<q", digest)[0])
    return keys


def estimate_tokens(text: str) -> int:
    """Token estimate: each CJK character ~1 token, other text ~4 characters per token."""
    cjk = cjk_count(text)
    other = len(text) - cjk
    return cjk + (other + 3) // 4


_HEADING_RE = lazy_pattern(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_MD_NOISE_RE = lazy_pattern(r"^[\s>#*+\-]+|[*`]+|\[(?=[^\]]*\]\()|\]\([^)]*\)")


def derive_title(body: str, fallback: str = "Untitled", limit: int = 80) -> str:
    """The first heading, else the first non-empty line, shortened."""
    for line in body.splitlines():
        match = _HEADING_RE().match(line)
        if match and match.group(1).strip():
            return shorten(match.group(1), limit)
    for line in body.splitlines():
        clean = _MD_NOISE_RE().sub("", line).strip(" -\t")
        if clean:
            return shorten(clean, limit)
    return fallback


def derive_summary(body: str, limit: int = 160) -> str:
    """The first non-heading paragraph line, shortened to one line."""
    for line in body.splitlines():
        if _HEADING_RE().match(line):
            continue
        clean = _MD_NOISE_RE().sub("", line).strip(" -\t")
        if clean:
            return shorten(clean, limit)
    return ""


def shorten(text: str, limit: int) -> str:
    one_line = _WS_RE.sub(" ", text).strip()
    if len(one_line) <= limit:
        return one_line
    return one_line[: max(limit - 1, 1)].rstrip() + "…"


def slugify(text: str, limit: int = 40) -> str:
    """A file-name friendly slug; keeps CJK and other letters, drops punctuation."""
    slug = _NON_WORD_RE.sub("-", unicodedata.normalize("NFKC", text).lower()).strip("-")
    return slug[:limit].strip("-") or "note"


def one_line(text: str, limit: int) -> str:
    """Whitespace collapsed, cut to `limit` characters with an ellipsis."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: max(limit - 1, 1)].rstrip() + "…"


# A sentence ends at 。！？ (and their run), at .!? followed by a space or the end (so "3.5",
# "app.py" and "e.g.x" stay whole), at a line break, and at a list bullet. English
# abbreviations that end in a period before a space ("e.g. ", "i.e. ", "etc. ", "vs. ") are
# re-joined after the split.
_SENTENCE_END_RE = lazy_pattern(r"(?<=[。！？；])|(?<=[.!?;])(?=\s)")
_BULLET_RE = lazy_pattern(r"^\s*(?:[-*•·]|\d+[.)、])\s+")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "Mr.", "Ms.", "Dr.", "No.")
_FENCE_RE = lazy_pattern(r"```.*?(?:```|$)", re.DOTALL)


def sentences(text: str) -> list[str]:
    """The sentences of a Chinese, English or mixed text, code blocks left out, each stripped
    of list bullets and surrounding space; empty ones dropped."""
    out: list[str] = []
    for line in _FENCE_RE().sub("\n", text).splitlines():
        for piece in _SENTENCE_END_RE().split(_BULLET_RE().sub("", line)):
            piece = piece.strip()
            if not piece:
                continue
            if out and out[-1].endswith(_ABBREVIATIONS):
                out[-1] = f"{out[-1]} {piece}"
            else:
                out.append(piece)
    return out


def is_mostly_chinese(text: str) -> bool:
    """Whether a text reads as Chinese: at least a third of its words are CJK characters (a
    Chinese character counts as a word, so a Chinese sentence with English names is Chinese)."""
    cjk = cjk_count(text)
    latin = len(re.findall(r"[A-Za-z]+", text))
    return cjk > 0 and cjk >= (cjk + latin) / 3


# --- near duplicates and conflicts -------------------------------------------------------------
# Two notes say the same when they differ only in width, case, spaces, punctuation, a particle
# such as 的 or a filler word such as "the" (issue #19: "数据库 用 PostgreSQL。" saved again as
# "数据库用的PostgreSQL" became a second note). They never say the same when a negation or a
# number differs: "部署前不跑迁移" and "部署前跑迁移", "port 5432" and "port 5433" stay apart
# however similar. Such a pair, on the same subject, is a *conflict*: the newer note may
# contradict or update the older one (`contradicts`), which the user resolves.

_PARTICLES = frozenset("的地得了着过呢吧啊呀嘛")
_FILLER_WORDS = frozenset({"the", "a", "an"})
_NEGATION_WORDS = frozenset(
    {"not", "no", "never", "none", "nothing", "without", "cannot", "neither", "nor", "avoid"}
)
_NEGATION_CHARS = frozenset("不没别非无未勿莫禁")
# Words holding a negation character that negate nothing: "非常" (very), "未来" (future).
_NOT_NEGATIONS_RE = lazy_pattern("非常|无论|未来|别人|别的|不仅|不过|不但|不断|无锡")
# What a claim is about, for finding the note a new one contradicts: negations, numbers and
# the words that carry them ("does" in "doesn't like", "有" in "没有") are left out.
_AUXILIARIES = frozenset(
    {"do", "does", "did", "can", "could", "will", "would", "should", "is", "are", "was", "with"}
)
_FILLER_RE = lazy_pattern(r"(?<![a-z0-9'])(?:the|an|a)(?![a-z0-9'])")
_DROP_PARTICLES = str.maketrans("", "", "".join(_PARTICLES) + "'")
_NEGATION_CHAR_RE = lazy_pattern(f"[{''.join(sorted(_NEGATION_CHARS))}]")
_NAMING_WORDS = frozenset(
    {"#", "no", "issue", "pr", "task", "ticket", "bug", "step", "case", "号", "第", "版"}
)
# Words saying a claim changed ("现在监听 8081", "standup is now at 9:45"): left out of a claim's
# subject, so an update finds the note it updates (`memory.notes.facts`).
CHANGE_WORDS_ZH: Final = (
    "现在", "目前", "如今", "改成", "改为", "改用", "改到", "换成", "换到", "换了", "换用",
    "迁移到", "迁到", "搬到", "不再", "已经不", "以后", "今后", "从今天起", "开始用", "转用",
    "调整为", "调整到", "调成", "变成", "升级到", "改回", "挪到",
)  # fmt: skip
CHANGE_WORDS_EN: Final = (
    "now", "no longer", "anymore", "any more", "switched to", "switched", "switch to",
    "moved to", "moved off", "changed to", "instead", "from now on", "these days", "nowadays",
    "migrated to", "migrated", "going forward", "not anymore",
)  # fmt: skip
_CHANGE_EN_RE = lazy_pattern(
    r"(?<![a-z])(?:" + "|".join(re.escape(w) for w in CHANGE_WORDS_EN) + r")(?![a-z])"
)
_CHANGE_ZH_RE = lazy_pattern("|".join(CHANGE_WORDS_ZH))


def change_words(text: str) -> frozenset[str]:
    """The words of change a text holds (Chinese and English), case-folded."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    found = {m.group(0) for m in _CHANGE_ZH_RE().finditer(folded)}
    found |= {m.group(0) for m in _CHANGE_EN_RE().finditer(folded)}
    return frozenset(found)


def without_change_words(text: str) -> str:
    """The text with its words of change left out (the subject of an update is the old
    claim's)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _CHANGE_EN_RE().sub(" ", _CHANGE_ZH_RE().sub("", folded))


_NUMBER_RE = lazy_pattern(r"\d+(?:[.,:]\d+)*")
_EN_WORD_RE = lazy_pattern(r"[a-z]+(?:'[a-z]+)?")
_WORD_OR_CHAR_RE = lazy_pattern(r"[a-z0-9]+(?:'[a-z]+)?|\S")


def _words(text: str) -> list[str]:
    """Latin words (with their apostrophe) and every other character but spaces, NFKC and
    case-folded."""
    return _WORD_OR_CHAR_RE().findall(unicodedata.normalize("NFKC", text).casefold())


def _is_form(token: str) -> bool:
    """Punctuation, symbols, controls, spaces: what never changes a note's meaning."""
    return len(token) == 1 and unicodedata.category(token)[0] in "PZSC"


def skeleton(text: str) -> str:
    """What is left of a text for comparing meaning: NFKC, case-folded, without spaces,
    punctuation, symbols, Chinese particles and filler words ("the", "a")."""
    folded = _FILLER_RE().sub(" ", _fold(text)).translate(_DROP_PARTICLES)
    return _NON_WORD_RE.sub("", folded)


def subject(text: str) -> str:
    """The skeleton without negations, numbers and auxiliaries, plural `s` dropped: two notes
    that make opposite or different-numbered claims about one thing share it ("部署前跑迁移"
    and "部署前不跑迁移", "the user likes dark mode" and "the user doesn't like dark mode")."""
    out = []
    # "非常" and the like are words, not negations: kept whole
    for piece in re.split(f"({_NOT_NEGATIONS_RE().pattern})", _fold(without_change_words(text))):
        if _NOT_NEGATIONS_RE().fullmatch(piece):
            out.append(piece)
            continue
        previous = ""
        for token in _words(piece):
            # "#12", "issue 12", "编号 12", "第 3": a number that names the thing is its subject
            naming = token.isdigit() and previous in _NAMING_WORDS
            if not _is_form(token) or token == "#":
                previous = token
            if _is_form(token) or token in _PARTICLES or token in _FILLER_WORDS:
                continue
            if token in _NEGATION_WORDS or token.endswith("n't") or token in _AUXILIARIES:
                continue
            if token in _NEGATION_CHARS or token == "有" or (token.isdigit() and not naming):
                continue
            if len(token) > 3 and token.endswith("s") and token.isascii():
                token = token[:-1]
            out.append(token.replace("'", ""))
    return "".join(out)


def _fold(text: str) -> str:
    """NFKC, case-folded, and Chinese numerals that count or date something written in
    digits ("三点" -> "3点", "周五" -> "周5", "二十个" -> "20个"), so "三点" and "五点" differ
    as numbers do and "三点" and "3点" are one note."""
    return _CN_NUMBER_RE().sub(_arabic, unicodedata.normalize("NFKC", text).casefold())


_CN_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5,
              "六": 6, "七": 7, "八": 8, "九": 9}  # fmt: skip
_CN_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10_000}
# A numeral counts something only beside a unit or after 周/星期/礼拜/第: "一起", "统一", "万一"
# and "三明治" stay words. After 周/星期/礼拜 only one character is a day: "周五一律" is Friday,
# then 一律 ("always"), not 51.
_CN_NUMERAL = "[零〇一二两三四五六七八九十百千万]+"
_CN_NUMBER_RE = lazy_pattern(
    f"(?<=第)({_CN_NUMERAL})|(?:(?<=周)|(?<=星期)|(?<=礼拜))([一二三四五六七])"
    f"|({_CN_NUMERAL})(?=点|个|天|次|号|月|年|岁|元|块|人|小时|分钟|分|秒|倍|页|条|位|台|遍|周|公里|米|斤)"
)


def _arabic(match: re.Match[str]) -> str:
    """A Chinese numeral's value in digits (up to the ten thousands; 日/天 are not numerals)."""
    numeral = next(g for g in match.groups() if g)
    total = section = digit = 0
    for char in numeral:
        if char in _CN_DIGITS:
            digit = digit * 10 + _CN_DIGITS[char] if char in "零〇" or digit else _CN_DIGITS[char]
        elif char == "万":
            total += (section + digit) * 10_000
            section = digit = 0
        else:  # 十 百 千: "十五" is 15
            section += (digit or 1) * _CN_UNITS[char]
            digit = 0
    return str(total + section + digit)


def _polarity(text: str) -> tuple[int, tuple[str, ...]]:
    """How many negations a text holds, and its numbers in order."""
    folded = _fold(text)
    words = _EN_WORD_RE().findall(folded)
    negations = sum(1 for w in words if w in _NEGATION_WORDS or w.endswith("n't"))
    negations += len(_NEGATION_CHAR_RE().findall(_NOT_NEGATIONS_RE().sub("", folded)))
    return negations, tuple(_NUMBER_RE().findall(folded))


def meaning_differs(a: str, b: str) -> bool:
    """Whether two texts differ in a negation or a number (then they are never duplicates)."""
    return _polarity(a) != _polarity(b)


def how_meaning_differs(old: str, new: str, *, loose: bool = False) -> str:
    """Why two texts say different things, for a person: the negation or the numbers.

    `loose`: for two notes that may be written in two languages or worded apart
    (`memory.notes.facts`): a negation differs only when one side has none ("不喝" /
    "别给我推荐…我不喝" are one refusal), and a number only when one stands where another stood
    ("3pm" / "three in the afternoon", "周五" / "Fridays": one side spells it in words; numbers
    only dropped are less detail)."""
    (neg_old, num_old), (neg_new, num_new) = _polarity(old), _polarity(new)
    reasons = []
    if (neg_old == 0) != (neg_new == 0) if loose else neg_old != neg_new:
        reasons.append("one says the opposite (a negation differs)")
    # only the numbers that changed: "周一上午 10 点" -> "周一上午 11 点" is "10 -> 11"
    was, now = _only_in(num_old, num_new), _only_in(num_new, num_old)
    if (was and now) if loose else num_old != num_new:
        reasons.append(
            f"a number changed ({', '.join(was) or 'none'} -> {', '.join(now) or 'none'})"
        )
    return "; ".join(reasons)


def _only_in(numbers: tuple[str, ...], other: tuple[str, ...]) -> list[str]:
    """`numbers` without those `other` also has (each occurrence once), in order."""
    spare = Counter(other)
    out = []
    for n in numbers:
        if spare[n]:
            spare[n] -= 1
        else:
            out.append(n)
    return out


def _pairs(text: str) -> set[str]:
    return {text[i : i + 2] for i in range(max(len(text) - 1, 1))}


def skeleton_similarity(a: str, b: str) -> float:
    """Jaccard of the character pairs of two skeletons (1.0 when equal, 0.0 when one is
    empty): a one-word change in a long sentence stays high, in a short one it does not."""
    if not a or not b:
        return 0.0
    if a == b:
        return 1.0
    return jaccard(_pairs(a), _pairs(b))


class Fingerprint:
    """A text made ready for comparison: its skeleton and its negations and numbers, computed
    once (the note being saved is compared with up to ten others)."""

    __slots__ = ("_pairs", "polarity", "skeleton", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.skeleton = skeleton(text)
        self.polarity = _polarity(text)
        self._pairs: set[str] | None = None

    def pairs(self) -> set[str]:
        if self._pairs is None:
            self._pairs = _pairs(self.skeleton)
        return self._pairs

    def similarity(self, other: Fingerprint) -> float:
        """`skeleton_similarity` of the two."""
        if not self.skeleton or not other.skeleton:
            return 0.0
        if self.skeleton == other.skeleton:
            return 1.0
        return jaccard(self.pairs(), other.pairs())


def says_the_same(old: Fingerprint, new: Fingerprint, threshold: float) -> bool:
    """`near_duplicate` of two fingerprints."""
    if old.polarity != new.polarity or not old.skeleton or not new.skeleton:
        return False
    if old.skeleton == new.skeleton:
        return True
    return (
        threshold < 1.0
        and old.similarity(new) >= threshold
        and not swapped(old.text, new.text)
        and not reordered(old.text, new.text)
    )


def near_duplicate(a: str, b: str, threshold: float = 0.9) -> bool:
    """Whether `b` says what `a` says: the same skeleton, or (with `threshold` < 1) skeletons
    whose character pairs overlap at least `threshold` with no English word swapped for
    another (`swapped`); and no negation or number differs."""
    return says_the_same(Fingerprint(a), Fingerprint(b), threshold)


def swapped(a: str, b: str) -> bool:
    """Whether a word of one text stands where another word stands in the other: "owned by
    Alice" / "owned by Bob" is another claim however long the sentence. A word added or
    dropped is not a swap, nor a spelling fix ("recieve" / "receive")."""
    import difflib  # only comparing two notes needs it

    only_a, only_b = _latin_words(a) - _latin_words(b), _latin_words(b) - _latin_words(a)
    return any(difflib.SequenceMatcher(None, x, y).ratio() < 0.75 for x in only_a for y in only_b)


_NAME_RE = lazy_pattern(r"[A-Za-z][A-Za-z0-9_.\-+#]*")
_SENTENCE_START = ".!?。！？：:\n"


def names(text: str) -> set[str]:
    """The names a text holds: English words written with a capital inside a sentence
    ("React", "PostgreSQL", "Jenkins"), in capitals ("VPN"), with digits or code-like
    ("order-service", "py3.12"), and any Latin word of a text holding Chinese; case-folded.
    Ordinary words of an English text ("prefers", "likes") are not."""
    found = set()
    # a Latin word in Chinese text is a name or a term whatever its case ("项目 atlas 部署在 fra-2")
    among_cjk = CJK_RUN_RE.search(text) is not None
    for match in _NAME_RE().finditer(text):
        word = match.group(0).rstrip(".-")
        i = match.start() - 1
        while i >= 0 and text[i] in " \t":  # the character before the word, spaces skipped
            i -= 1
        starts = i < 0 or text[i] in _SENTENCE_START
        capital = any(c.isupper() for c in word[1:]) or (word[0].isupper() and not starts)
        term = among_cjk and len(word) > 1
        if term or capital or any(c.isdigit() for c in word) or _CODE_LIKE_RE().search(word[1:]):
            found.add(word.casefold())
    return found


def renamed(a: str, b: str) -> bool:
    """Whether a name of one text stands where another name stands in the other ("React" /
    "Vue", "Jenkins" / "GitHub Actions"): another claim, never the same fact. A name added
    or dropped is not a change of one, nor a name written longer ("Postgres" / "PostgreSQL",
    "payments-gw" / "payments")."""
    first, second = names(a), names(b)
    only_first = [x for x in first - second if not any(_one_name(x, y) for y in second)]
    only_second = [y for y in second - first if not any(_one_name(x, y) for x in first)]
    return bool(only_first) and bool(only_second)


def _one_name(x: str, y: str) -> bool:
    short, long = sorted((x, y), key=len)
    return len(short) >= 4 and long.startswith(short)


def reordered(a: str, b: str) -> bool:
    """Whether two texts hold the same words in another order ("React, not Vue" / "Vue, not
    React", "parser 用 pandas，match 用 polars" / "parser 用 polars，match 用 pandas"): another
    claim, never the same one."""
    first, second = _claim_words(a), _claim_words(b)
    return first != second and sorted(first) == sorted(second)


def _claim_words(text: str) -> list[str]:
    return [
        w
        for w in _words(text)
        if not _is_form(w) and w not in _FILLER_WORDS and w not in _PARTICLES
    ]


def _latin_words(text: str) -> set[str]:
    return {w for w in _EN_WORD_RE().findall(_fold(text)) if w not in _FILLER_WORDS}


def makes_another_claim(old: Fingerprint, new: Fingerprint, threshold: float) -> bool:
    """`contradicts` of two fingerprints."""
    if old.polarity == new.polarity:
        return False
    left, right = subject(old.text), subject(new.text)
    return bool(left) and skeleton_similarity(left, right) >= threshold


def contradicts(old: str, new: str, threshold: float = 0.9) -> bool:
    """Whether `new` makes a different claim about what `old` is about: their subjects (the
    skeletons without negations and numbers) are the same or overlap at least `threshold`,
    and a negation or a number differs."""
    return makes_another_claim(Fingerprint(old), Fingerprint(new), threshold)


def _key(kind: str, text: str) -> int:
    import hashlib

    digest = hashlib.blake2b(f"{kind}\x00{text}".encode(), digest_size=8).digest()
    return int(struct.unpack("<q", digest)[0])


def dedup_bands(text: str) -> list[int]:
    """The keys a note is found by when another one is saved (stored with the note): its
    skeleton (a near duplicate in form), its subject (a possible conflict), and MinHash bands
    of its skeleton's 3-grams (a small edit in a long text). Short texts have no MinHash
    bands (an empty bucket); the first two keys find them."""
    skel = skeleton(text[: SIMILARITY_CHARS * 2])[:SIMILARITY_CHARS]
    keys = []
    if skel:
        keys.append(_key("skeleton", skel))
    about = subject(text[: SIMILARITY_CHARS * 2])[:SIMILARITY_CHARS]
    if about:
        keys.append(_key("subject", about))
    grams = {skel[i : i + SHINGLE_SIZE] for i in range(len(skel) - SHINGLE_SIZE + 1)}
    keys.extend(minhash_bands(grams))
    return keys
