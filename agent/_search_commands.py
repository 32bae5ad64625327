"""How `grep`, `rg` and `find` read their arguments: which words are paths and which are not.

The policy reads every argument of a Bash command as a path, which keeps one rule for every
program. For the search programs that rule would refuse everyday searches (`grep -rn '\\bfoo'
.`, `find . -name '*.md'`, `find . -mtime -1`), so each has a table of its options and a
parser that follows the program's own rules. A parser answers with the texts the policy must
still check as paths (file operands, file-valued options, every option word as written) or a
refusal; only patterns and plain values (numbers, types, formats) go unchecked.

The tables are fail-closed: an option or `find` primary they do not know is refused, since
guessing whether it takes a value could shift which word is the pattern and let a file name
through unchecked. An unquoted pattern the shell would expand (`find . -name *.md`) is still
checked as a glob, because its expansion lists files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agent._shell import Word

# (text to check as a path, whether the shell globs it, the word it came from)
PathText = tuple[str, bool, str]


@dataclass(frozen=True, slots=True)
class Refused:
    """The command uses an option the policy refuses; `reason` is one sentence for the model."""

    reason: str


_FOLLOWS = "follows symbolic links wherever they lead, which the policy cannot check"
_RUNS = "runs another program, which the policy cannot check"
_READS_NAMES = "reads file names from a file, which the policy cannot check"
_WRITES = "writes to a file named in its expression, which the policy cannot check"
_DELETES = "deletes what it finds, which the policy cannot check"


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass(frozen=True, slots=True)
class _Options:
    """One GNU-style program's options, by name: `e` for `-e`, `regexp` for `--regexp`."""

    short_flags: str
    short_values: str
    long_flags: frozenset[str]
    long_values: frozenset[str]
    # Options whose value is a pattern, and options that give patterns some other way (so the
    # first operand is a file); `--files` and friends take no pattern at all.
    patterns: frozenset[str]
    pattern_sources: frozenset[str]
    no_pattern: frozenset[str] = frozenset()
    long_optional: frozenset[str] = frozenset()  # a value only after `=` (`--color=always`)
    refused: Mapping[str, str] = field(default_factory=dict)
    same: Mapping[str, str] = field(default_factory=dict)  # two long names of one option
    abbreviations: bool = True  # GNU getopt takes any unambiguous prefix of a long option
    digit_flags: bool = False  # grep's `-5` means `-C 5`


_GREP = _Options(
    short_flags="EFGHILPRTUVZabchilnoqrsuvwxyz",
    short_values="ABCDXdefm",
    long_flags=_names(
        "basic-regexp extended-regexp fixed-regexp fixed-strings perl-regexp byte-offset count "
        "dereference-recursive files-with-matches files-without-match help ignore-case "
        "no-ignore-case initial-tab line-buffered line-number line-regexp no-filename "
        "no-group-separator no-messages null null-data only-matching quiet recursive "
        "invert-match silent text binary unix-byte-offsets version with-filename "
        "word-regexp"
    ),
    long_values=_names(
        "after-context before-context binary-files context devices directories exclude "
        "exclude-from exclude-dir file group-separator include label max-count regexp"
    ),
    long_optional=frozenset({"color", "colour"}),
    patterns=frozenset({"e", "regexp"}),
    pattern_sources=frozenset({"f", "file"}),
    refused={"R": _FOLLOWS, "dereference-recursive": _FOLLOWS},
    same={"colour": "color", "fixed-regexp": "fixed-strings", "silent": "quiet"},
    digit_flags=True,
)

# ripgrep 14-15, from its flag definitions. Its parser matches long names exactly.
_RG = _Options(
    short_flags=".0FHILNPSUVabchilnopqsuvwxz",
    short_values="ABCEMTdefgjmrt",
    long_flags=_names(
        "auto-hybrid-regex binary block-buffered byte-offset case-sensitive column count "
        "count-matches crlf debug files files-with-matches files-without-match fixed-strings "
        "follow glob-case-insensitive heading help hidden ignore ignore-case ignore-dot "
        "ignore-exclude ignore-file-case-insensitive ignore-files ignore-global ignore-messages "
        "ignore-parent ignore-vcs include-zero invert-match json line-buffered line-number "
        "line-regexp max-columns-preview messages mmap multiline multiline-dotall no-config "
        "no-filename no-heading no-ignore no-ignore-dot no-ignore-exclude no-ignore-files "
        "no-ignore-global no-ignore-messages no-ignore-parent no-ignore-vcs no-line-number "
        "no-messages no-mmap no-require-git no-unicode null null-data one-file-system "
        "only-matching passthrough passthru pcre2 pcre2-unicode pcre2-version pretty quiet "
        "require-git search-zip smart-case sort-files stats stop-on-nonmatch text trace trim "
        "type-list unicode unrestricted version vimgrep with-filename word-regexp "
        "no-auto-hybrid-regex no-binary no-block-buffered no-byte-offset no-column "
        "no-context-separator no-crlf no-encoding no-fixed-strings no-follow "
        "no-glob-case-insensitive no-hidden no-ignore-file-case-insensitive no-include-zero "
        "no-invert-match no-json no-line-buffered no-max-columns-preview no-multiline "
        "no-multiline-dotall no-one-file-system no-pcre2 no-pcre2-unicode no-pre "
        "no-search-zip no-sort-files no-stats no-text no-trim"
    ),
    long_values=_names(
        "after-context before-context color colors context context-separator dfa-size-limit "
        "encoding engine field-context-separator field-match-separator file generate glob "
        "hostname-bin hyperlink-format iglob ignore-file max-columns max-count max-depth "
        "maxdepth max-filesize path-separator pre pre-glob regex-size-limit regexp replace "
        "sort sortr threads type type-add type-clear type-not"
    ),
    patterns=frozenset({"e", "regexp"}),
    pattern_sources=frozenset({"f", "file"}),
    no_pattern=frozenset(
        {"files", "type-list", "h", "help", "V", "version", "pcre2-version", "generate"}
    ),
    refused={
        "L": _FOLLOWS,
        "follow": _FOLLOWS,
        "pre": _RUNS,
        "hostname-bin": _RUNS,
        "z": "runs decompression programs, which the policy cannot check",
        "search-zip": "runs decompression programs, which the policy cannot check",
    },
    abbreviations=False,
)

_GNU_STYLE: Mapping[str, _Options] = {"grep": _GREP, "egrep": _GREP, "fgrep": _GREP, "rg": _RG}

# GNU find's expression: primaries without a value, with a pattern or plain value, with a path.
_FIND_FLAGS = _names(
    "-daystart -depth -d -ignore_readdir_race -noignore_readdir_race -mount -noleaf -nowarn "
    "-warn -xdev -help -version -empty -executable -false -true -nogroup -nouser -readable "
    "-writable -ls -print -print0 -prune -quit -not -a -and -o -or ( ) ! ,"
)
_FIND_VALUES = _names(
    "-name -iname -path -ipath -wholename -iwholename -regex -iregex -lname -ilname -maxdepth "
    "-mindepth -regextype -amin -atime -cmin -ctime -mmin -mtime -used -gid -uid -inum -links "
    "-group -user -fstype -perm -size -type -xtype -context -printf"
)
_FIND_PATH_VALUES = frozenset({"-anewer", "-cnewer", "-newer", "-samefile"})
_FIND_NEWER = re.compile(r"-newer[aBcm]([aBcmt])")  # `-newermt DATE`, `-newerma FILE`
_FIND_REFUSED: Mapping[str, str] = {
    "-exec": _RUNS,
    "-execdir": _RUNS,
    "-ok": _RUNS,
    "-okdir": _RUNS,
    "-delete": _DELETES,
    "-fprint": _WRITES,
    "-fprint0": _WRITES,
    "-fprintf": _WRITES,
    "-fls": _WRITES,
    "-follow": _FOLLOWS,
    "-L": _FOLLOWS,
    "-H": _FOLLOWS,
    "-files0-from": _READS_NAMES,
}


def read_search_command(program: str, words: Sequence[Word]) -> list[PathText] | Refused | None:
    """The texts to check as paths for a search program, a refusal, or None for other programs."""
    if program == "find":
        return _read_find(words)
    options = _GNU_STYLE.get(program)
    return None if options is None else _GnuReader(program, options, words).read()


def _texts(word: Word) -> list[str]:
    return list(dict.fromkeys((word.value, word.raw)))


def _whole(word: Word) -> list[PathText]:
    return [(text, True, text) for text in _texts(word)]


def _unless_plain(word: Word) -> list[PathText]:
    """A pattern or plain value is not a path; only what the shell would glob is checked."""
    return [(word.value, True, word.value)] if word.globbed else []


# --- grep, egrep, fgrep, rg ----------------------------------------------------------------------


class _GnuReader:
    """Reads a GNU-style command line the way the program does, and lists what to check.

    GNU getopt moves options after operands forward (`grep foo . -n`), but not when
    POSIXLY_CORRECT is set, where everything after the first operand is an operand. A word is
    treated as a pattern only if it is one either way: an `-e` value before the first operand,
    or the first operand when no `-e`/`-f` appears anywhere. Every option word is also checked
    as a path as written, for the second reading.
    """

    def __init__(self, program: str, options: _Options, words: Sequence[Word]) -> None:
        self.program = program
        self.options = options
        self.words = words
        self.checks: list[PathText] = []
        self.operands: list[Word] = []
        self.has_pattern_option = False
        self.no_pattern = False

    def read(self) -> list[PathText] | Refused:
        index = 0
        ended = False
        while index < len(self.words):
            word = self.words[index]
            text = word.value
            index += 1
            if ended or text == "-" or not text.startswith("-"):
                self.operands.append(word)
            elif text == "--":
                ended = True
            else:
                self.checks.extend(_whole(word))
                reading = (
                    self._long(word, index) if text.startswith("--") else self._short(word, index)
                )
                if isinstance(reading, Refused):
                    return reading
                index = reading
        pattern_operand = not self.has_pattern_option and not self.no_pattern
        for position, operand in enumerate(self.operands):
            is_pattern = pattern_operand and position == 0
            self.checks.extend(_unless_plain(operand) if is_pattern else _whole(operand))
        return self.checks

    def _long(self, word: Word, index: int) -> int | Refused:
        given, equals, attached = word.value[2:].partition("=")
        name = self._long_name(given)
        if name is None:
            return self._unknown(f"--{given}")
        if name in self.options.refused:
            return self._refuse(f"--{given}", self.options.refused[name])
        self._note(name)
        if name in self.options.long_values:
            if equals:
                return self._attached(name, word, len(given) + 3, index)
            return self._separate(name, index)
        if name in self.options.long_optional or not equals:
            if equals:
                self.checks.append((attached, True, word.value))
            return index
        return Refused(
            f"`{self.program} --{name}` takes no value; drop the `={attached}` or use a "
            "different option."
        )

    def _long_name(self, given: str) -> str | None:
        known = self.options.long_flags | self.options.long_values | self.options.long_optional
        if given in known or given in self.options.refused:
            return given
        if not self.options.abbreviations or not given:
            return None
        everything = known | self.options.refused.keys()
        same = self.options.same
        candidates = {same.get(name, name) for name in everything if name.startswith(given)}
        # An abbreviation of two different options (`--fil`) is refused by the program too.
        return candidates.pop() if len(candidates) == 1 else None

    def _short(self, word: Word, index: int) -> int | Refused:
        text = word.value
        for position in range(1, len(text)):
            letter = text[position]
            if self.options.digit_flags and letter in "0123456789":
                continue
            if letter in self.options.refused:
                return self._refuse(f"-{letter}", self.options.refused[letter])
            if letter in self.options.short_values:
                self._note(letter)
                if position + 1 < len(text):
                    return self._attached(letter, word, position + 1, index)
                return self._separate(letter, index)
            if letter not in self.options.short_flags:
                return self._unknown(f"-{letter}")
            self._note(letter)
        return index

    def _note(self, name: str) -> None:
        if name in self.options.patterns or name in self.options.pattern_sources:
            self.has_pattern_option = True
        if name in self.options.no_pattern:
            self.no_pattern = True

    def _is_pattern(self, name: str) -> bool:
        # An `-e` after the first operand is a file for a POSIXLY_CORRECT getopt.
        return name in self.options.patterns and not self.operands

    def _attached(self, name: str, word: Word, start: int, index: int) -> int:
        """A value in the same word as its option (`-e'x'`, `--file=list`)."""
        if not self._is_pattern(name):
            value = word.value[start:]
            self.checks.append((value, False, word.value))
            prefix = word.value[:start]
            if word.raw.startswith(prefix) and word.raw[start:] != value:
                self.checks.append((word.raw[start:], False, word.raw))
        return index

    def _separate(self, name: str, index: int) -> int:
        """A value in the next word (`-e x`, `--file list`); missing, the program stops."""
        if index >= len(self.words):
            return index
        value = self.words[index]
        self.checks.extend(_unless_plain(value) if self._is_pattern(name) else _whole(value))
        return index + 1

    def _refuse(self, option: str, why: str) -> Refused:
        return Refused(f"`{self.program} {option}` {why}; drop that option.")

    def _unknown(self, option: str) -> Refused:
        return Refused(
            f"`{self.program} {option}` is not an option the permission policy knows, so it "
            "cannot tell which words are file names; use the common options "
            f"(`{self.program} -rn PATTERN DIR`) or spell long options out in full."
        )


# --- find ----------------------------------------------------------------------------------------


def _read_find(words: Sequence[Word]) -> list[PathText] | Refused:
    """GNU find: `-P` and `--` first, then starting points (paths), then the expression.

    The expression is read primary by primary: an unknown one is refused, a value is checked
    as a path when the primary opens it (`-newer FILE`), and is otherwise a pattern or a plain
    value. A stray word in the expression is refused too; find itself would stop on it.
    """
    checks: list[PathText] = []
    index = 0
    while index < len(words) and words[index].value in ("-P", "-H", "-L", "--"):
        text = words[index].value
        index += 1
        if text in _FIND_REFUSED:
            return _find_refusal(text)
        if text == "--":
            break
    while index < len(words) and not _starts_expression(words[index].value):
        checks.extend(_whole(words[index]))
        index += 1
    while index < len(words):
        text = words[index].value
        index += 1
        if text in _FIND_REFUSED:
            return _find_refusal(text)
        if text in _FIND_FLAGS:
            continue
        newer = _FIND_NEWER.fullmatch(text)
        opens_value = text in _FIND_PATH_VALUES or (newer is not None and newer.group(1) != "t")
        if not opens_value and newer is None and text not in _FIND_VALUES:
            return Refused(
                f"`find {text}` is not a primary the permission policy knows; name the starting "
                "points first, then tests such as `-name`, `-type`, `-mtime` and actions such as "
                "`-print`."
            )
        if index >= len(words):
            break  # find stops: the primary is missing its value
        value = words[index]
        index += 1
        checks.extend(_whole(value) if opens_value else _unless_plain(value))
    return checks


def _starts_expression(text: str) -> bool:
    """As findutils decides it: `-x`, `(` or `!` end the starting points."""
    return (text.startswith("-") and len(text) > 1) or text in ("(", "!")


def _find_refusal(primary: str) -> Refused:
    return Refused(
        f"`find {primary}` {_FIND_REFUSED[primary]}; search with tests such as `-name` and "
        "`-print` the results, then act on them in separate commands."
    )
