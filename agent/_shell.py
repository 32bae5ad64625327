"""A small POSIX-shell lexer that understands only what the permission policy allows.

The policy must know exactly which words a shell would pass to a program, so it cannot use
substring checks or `shlex` (which happily accepts `$HOME`, `a;b` and `{a,b}` as plain text).
This lexer follows bash's quoting rules for the three quoting forms it accepts (single quotes,
double quotes, backslash) and refuses, with a reason the model can act on, every construct that
would make the shell do more than run one program with literal arguments: operators,
redirections, expansions of any kind, comments, grouping and control characters.

Only ASCII characters are shell syntax here, exactly as in bash: a fullwidth `；` or `｜` is an
ordinary letter of a word. The policy checks such words as paths like any other.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# Linux refuses a single argv string longer than MAX_ARG_STRLEN (32 pages = 128 KiB), and Claude
# Code hands the whole command to the shell as one such string, so nothing longer could run.
MAX_COMMAND_CHARS = 128 * 1024

# Unicode categories refused anywhere: controls (newline, carriage return, NUL, escape...),
# invisible format characters (bidi overrides, zero-width joiners: the command shown to a person
# could read differently from what runs), line/paragraph separators and lone surrogates.
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})

# Longest first, so `&&` wins over `&` and `<<<` over `<<`.
_OPERATORS = (
    "&>>", "<<<", "<<-", ";;&",
    "&&", "||", ";;", ";&", "|&", ">>", "<<", "<>", ">|", ">&", "<&", "&>", "<(", ">(",
    "&", "|", ";", "<", ">", "(", ")",
)  # fmt: skip
_OPERATOR_START = frozenset("&|;<>()")
_UNQUOTED_SPECIAL = _OPERATOR_START | frozenset("$`{}~#!^=")
_SEQUENCING = frozenset({"&&", "||", ";", ";;", ";&", ";;&", "|", "|&"})
_HERE_DOCS = frozenset({"<<", "<<-", "<<<"})
_GLOB_CHARS = frozenset("*?[")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]")


@dataclass(frozen=True, slots=True)
class Word:
    """One word as the shell passes it to the program.

    `value` is what bash hands over after quote removal. `raw` is the same text with every
    backslash kept: a Windows program (cmd, PowerShell, an MSYS tool) treats `\\` as a path
    separator, so the policy checks that reading too. `globbed` says whether the word has an
    unquoted `*`, `?` or `[`, so that the shell may replace it with matching file names.
    """

    value: str
    raw: str
    globbed: bool = False


@dataclass(frozen=True, slots=True)
class Rejected:
    """The command uses shell syntax the policy does not allow (or cannot understand)."""

    reason: str


class _Reject(Exception):
    """Internal: unwinds the lexer; `split_words` turns it into `Rejected`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def split_words(command: str) -> tuple[Word, ...] | Rejected:
    """The words of `command`, or why the command is refused before any word is looked at."""
    try:
        _check_characters(command)
        return _Lexer(command).words()
    except _Reject as exc:
        return Rejected(exc.reason)


def _check_characters(command: str) -> None:
    if len(command) > MAX_COMMAND_CHARS:
        raise _Reject(
            f"The command is {len(command)} characters long; the limit is {MAX_COMMAND_CHARS}. "
            "Split the work into shorter commands."
        )
    for char in command:
        if char in " \t" or unicodedata.category(char) not in _FORBIDDEN_CATEGORIES:
            continue
        if char in "\n\r":
            raise _Reject(
                "Newlines are not allowed in a command: run one command per call, "
                "without shell operators."
            )
        raise _Reject(
            f"The control or invisible character U+{ord(char):04X} is not allowed in a command; "
            "remove it."
        )


class _Lexer:
    """Splits one command into words; every method raises `_Reject` on refused syntax."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.value: list[str] = []
        self.raw: list[str] = []
        self.in_word = False
        self.globbed = False

    def words(self) -> tuple[Word, ...]:
        text = self.text
        words: list[Word] = []
        index = 0
        while index < len(text):
            char = text[index]
            if char in " \t":
                if self.in_word:
                    words.append(self._word())
                    self.value, self.raw, self.in_word, self.globbed = [], [], False, False
                index += 1
            elif char == "'":
                index = self._single_quoted(index)
            elif char == '"':
                index = self._double_quoted(index)
            elif char == "\\":
                if index + 1 >= len(text):
                    raise _Reject("The command ends with a lone `\\`; remove it or quote it.")
                self._add(text[index + 1], text[index : index + 2])
                index += 2
            else:
                if char in _UNQUOTED_SPECIAL:
                    self._check_unquoted(index)
                self.globbed = self.globbed or char in _GLOB_CHARS
                self._add(char, char)
                index += 1
        if self.in_word:
            words.append(self._word())
        return tuple(words)

    def _word(self) -> Word:
        return Word("".join(self.value), "".join(self.raw), self.globbed)

    def _add(self, value: str, raw: str) -> None:
        self.value.append(value)
        self.raw.append(raw)
        self.in_word = True

    def _single_quoted(self, start: int) -> int:
        # Inside single quotes every character is literal, `$` and `\` included.
        end = self.text.find("'", start + 1)
        if end < 0:
            raise _Reject("The command has an unbalanced `'` quote; close it.")
        chunk = self.text[start + 1 : end]
        self._add(chunk, chunk)
        return end + 1

    def _double_quoted(self, start: int) -> int:
        text = self.text
        self.in_word = True  # `""` is an empty word, not nothing
        index = start + 1
        while index < len(text):
            char = text[index]
            if char == '"':
                return index + 1
            if char == "\\" and index + 1 < len(text) and text[index + 1] in '$`"\\':
                # The only escapes bash honours inside double quotes.
                self._add(text[index + 1], text[index : index + 2])
                index += 2
                continue
            if char == "$":
                raise _Reject(self._dollar_reason(index, quoted=True))
            if char == "`":
                raise _Reject(_SUBSTITUTION_REASON.format(token="with a backtick"))
            self._add(char, char)
            index += 1
        raise _Reject('The command has an unbalanced `"` quote; close it.')

    def _check_unquoted(self, index: int) -> None:
        """Refuse the characters that mean something to bash (or zsh) outside quotes."""
        char = self.text[index]
        if char == "$":
            raise _Reject(self._dollar_reason(index, quoted=False))
        if char == "`":
            raise _Reject(_SUBSTITUTION_REASON.format(token="with a backtick"))
        if char in _OPERATOR_START:
            raise _Reject(self._operator_reason(index))
        if char in "{}":
            raise _Reject(
                f"`{char}` is not allowed unquoted (grouping or brace expansion); "
                "put names that contain it in single quotes."
            )
        if char == "~":
            raise _Reject(
                "Tilde expansion `~` is not allowed: it names a home directory outside the "
                "workspace; use paths relative to the workspace."
            )
        if char == "#":
            # At a word's start bash reads a comment; inside a word zsh may read a pattern.
            raise _Reject(
                "`#` is not allowed unquoted (it starts a comment); "
                "put names that contain it in single quotes."
            )
        if char in "!^":
            raise _Reject(
                f"`{char}` is not allowed unquoted (history expansion, negation or a zsh "
                "pattern); put names that contain it in single quotes."
            )
        if char == "=" and not self.in_word:
            # zsh replaces a word starting with `=cmd` by the path of `cmd`.
            raise _Reject(
                "A word starting with `=` is not allowed unquoted (zsh expands it to a "
                "program's path); put it in single quotes."
            )

    def _dollar_reason(self, index: int, *, quoted: bool) -> str:
        rest = self.text[index + 1 :]
        if rest.startswith("(("):
            return "Arithmetic expansion `$((` is not allowed; compute the value yourself."
        if rest.startswith("("):
            return _SUBSTITUTION_REASON.format(token="`$(`")
        if not quoted and rest.startswith("'"):
            return (
                "ANSI-C quoting `$'...'` is not allowed; write the characters out "
                "in plain single quotes."
            )
        if not quoted and rest.startswith('"'):
            return 'Locale quoting `$"..."` is not allowed; use plain quotes.'
        if rest.startswith("{"):
            return (
                "Variable expansion `${...}` is not allowed: write the value out, "
                "with paths relative to the workspace."
            )
        name = _VARIABLE.match(rest)
        if name:
            return (
                f"Variable expansion `${name.group()}` is not allowed: write the value out, "
                "with paths relative to the workspace."
            )
        return "`$` is not allowed outside single quotes; put it in single quotes."

    def _operator_reason(self, index: int) -> str:
        op = next(op for op in _OPERATORS if self.text.startswith(op, index))
        if op in ("<(", ">("):
            return f"Process substitution `{op}` is not allowed: run one command per call."
        if op in _SEQUENCING:
            return f"`{op}` is not allowed: run one command per call, without shell operators."
        if op == "&":
            return (
                "`&` (run in the background) is not allowed: run one command per call, "
                "without shell operators."
            )
        if op in ("(", ")"):
            return f"Subshells and grouping with `{op}` are not allowed: run one command per call."
        if op in _HERE_DOCS:
            return (
                f"Here-documents and here-strings (`{op}`) are not allowed; "
                "use the Write tool to create files."
            )
        # A file-descriptor number written right before the operator (`2>`) is part of it.
        digits = "".join(self.value)
        if self.in_word and digits.isdigit() and digits.isascii() and self.raw == self.value:
            op = digits + op
        return (
            f"Redirection `{op}` is not allowed: use the Write or Edit tool to change files "
            "and the Read tool to read them."
        )


_SUBSTITUTION_REASON = (
    "Command substitution {token} is not allowed: run one command per call "
    "and use its output in the next."
)
