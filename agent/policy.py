"""Which tool calls the agent may make: a pure, fail-closed permission policy.

`evaluate_tool_call` looks at one tool call and returns `Allowed()` or `Denied(reason)`. It runs
nothing; it reads the file system only to follow symbolic links and expand glob patterns the way
the shell would. The rules (see docs/permissions.md for the user-facing version):

* Bash: one program from the allowlist with literal arguments (`agent/_shell.py` refuses the
  shell syntax), and every argument, read as a path, inside the workspace. The search programs
  (`grep`, `rg`, `find`) are read with their own option tables (`agent/_search_commands.py`),
  so their patterns are not taken for paths.
* File tools: their paths inside the workspace after following symbolic links.
* Any other tool: refused when it matches `denied_tools`, else allowed when it matches
  `allowed_tools`, else refused. `WebFetch` also only to a public host (`agent/_web_address.py`:
  not this machine, whose app answers loopback without a token, nor a private network).
* The "ask" tier sits between the two: a call the rules above would allow, whose tool matches
  `ask_tools`, gets `Ask(reason)`: it runs only if a person approves it (the Feishu bridge shows
  approve/deny buttons); where nobody can be asked, it is refused. A refusal always wins.

When in doubt the answer is `Denied`: a wrong refusal costs the model one retry with the reason
in hand, a wrong permission can cost the user their files. The SDK client must run with the
workspace as its working directory, since relative paths are resolved against it.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import unicodedata
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent._search_commands import Refused, read_search_command
from agent._shell import Rejected, Word, split_words
from agent._web_address import refusal as web_address_refusal
from errors import ConfigurationError

if TYPE_CHECKING:
    from settings import Settings


@dataclass(frozen=True, slots=True)
class Allowed:
    """The tool call may run."""


@dataclass(frozen=True, slots=True)
class Denied:
    """The tool call must not run; `reason` is one sentence the model can act on."""

    reason: str


@dataclass(frozen=True, slots=True)
class Ask:
    """The tool call may run only once a person approves it; `reason` says what is asked."""

    reason: str


Decision = Allowed | Ask | Denied
Approver = Callable[[str, Mapping[str, Any]], Awaitable[Allowed | Denied]]
"""Asks a person about one "ask" call (tool name, input): their answer, or Denied on timeout."""


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """What the policy needs from the settings, frozen for the life of a session.

    Tool patterns are exact names or prefixes ending in `*` (`mcp__memory__*`).
    """

    workspace: Path
    bash_allowlist: frozenset[str]
    allowed_tools: tuple[str, ...]
    denied_tools: tuple[str, ...]
    ask_tools: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # A relative workspace would be resolved against whatever directory the process is in.
        if not self.workspace.is_absolute():
            raise ConfigurationError(
                f"The policy workspace {self.workspace} is not absolute; "
                "build PolicyConfig from settings.workspace_dir"
            )

    @classmethod
    def from_settings(cls, settings: Settings) -> PolicyConfig:
        return cls(
            workspace=settings.workspace_dir,
            bash_allowlist=frozenset(settings.bash_allowlist),
            allowed_tools=tuple(settings.allowed_tools),
            denied_tools=tuple(settings.denied_tools),
            ask_tools=tuple(settings.ask_tools),
        )


# --- limits --------------------------------------------------------------------------------------
MAX_PATH_CHARS = 4096  # PATH_MAX on Linux: a longer word cannot name a file
_MAX_OPTION_CHARS = 256  # every attached option value is checked, so keep clusters short
_MAX_GLOB_MATCHES = 10_000  # beyond this a pattern is refused rather than half-checked

# --- tools ---------------------------------------------------------------------------------------
_FILE_PATH_KEYS: dict[str, str] = {
    "Read": "file_path",
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
    "NotebookRead": "notebook_path",
}
_OPTIONAL_PATH_TOOLS = frozenset({"Grep", "LS"})

# --- Bash programs -------------------------------------------------------------------------------
# Refused even when someone adds them to the allowlist: their arguments are commands or scripts
# (which the policy cannot check), or they move the shell out of the workspace for later calls.
_NEVER_ALLOWED = frozenset(
    {
        "eval", "exec", "source", ".", "command", "builtin", "alias", "trap",
        "env", "sudo", "doas", "su", "xargs", "nohup", "time", "nice", "timeout",
        "watch", "setsid", "stdbuf", "chroot",
        "sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "cmd", "pwsh", "powershell",
        "sed", "awk", "gawk", "perl", "python", "python3", "ruby", "node",
        "cd", "pushd", "popd", "chdir", "set-location", "sl",
        "invoke-expression", "iex", "invoke-command", "icm", "start-process", "saps", "start",
        "invoke-item", "ii",
    }
)  # fmt: skip
# Programs that delete what they are given: the workspace itself must never be one of those.
_REMOVERS = frozenset({"rm", "rmdir", "unlink", "del", "erase", "rd", "remove-item"})
# cmd.exe built-ins: case-insensitive, and `/Q`-style switches are options, not paths.
_CMD_BUILTINS = frozenset({"del", "erase", "move", "copy", "ren", "rename", "rd", "dir", "type"})
_CMDLET = re.compile(r"[A-Za-z]+-[A-Za-z]+")  # PowerShell Verb-Noun, case-insensitive
_CMD_SWITCH = re.compile(r"/-?[A-Za-z?](:[-A-Za-z]+)?")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
# GNU tools accept any unambiguous prefix of a long option (`--files0` for `--files0-from`), and
# PowerShell any unambiguous prefix of a parameter, so these are matched from a minimum length.
_FILE_LIST_OPTION = ("--files0-from", 3)  # wc, du, sort: read the names to open from a file
_FOLLOW_SYMLINK_PARAMETER = ("-followsymlink", 4)  # Get-ChildItem and friends


@dataclass(frozen=True, slots=True)
class _RefusedOption:
    """An option of one program whose effect the path checks cannot see.

    `long` is matched from its `shortest` accepted abbreviation; `short` is refused anywhere in
    a cluster of short options (`-rL`), even where it might be part of a value, which can only
    refuse more. `why` is a clause: "`cp -L` <why>; drop that option."
    """

    long: str | None
    shortest: int
    short: str | None
    why: str


_FOLLOWS_LINKS = "follows symbolic links wherever they lead, which the policy cannot check"
_RUNS_PROGRAM = "runs another program, which the policy cannot check"
_DEREFERENCE = _RefusedOption("--dereference", 5, "L", _FOLLOWS_LINKS)
_PROGRAM_OPTIONS: dict[str, tuple[_RefusedOption, ...]] = {
    "cp": (_DEREFERENCE,),
    "ls": (_DEREFERENCE,),
    "du": (_DEREFERENCE,),
    "sort": (_RefusedOption("--compress-program", 4, None, _RUNS_PROGRAM),),
    "diff": (_RefusedOption("--paginate", 5, "l", _RUNS_PROGRAM),),
    "tree": (
        _RefusedOption(None, 0, "l", _FOLLOWS_LINKS),
        _RefusedOption(None, 0, "R", "runs `tree` again in every directory, writing files"),
    ),
    "file": (
        _RefusedOption("--files-from", 3, "f", "reads file names from a file"),
        _RefusedOption("--uncompress", 3, "z", "may run decompression programs"),
        _RefusedOption("--uncompress-noreport", 14, "Z", "may run decompression programs"),
        _RefusedOption("--compile", 4, "C", "writes a compiled magic file"),
    ),
}
# diff follows links inside a directory it compares (`diff sub other` reads `sub/x` wherever
# it leads) unless told not to.
_NO_DEREFERENCE_OPTION = ("--no-dereference", 6)

# --- paths ---------------------------------------------------------------------------------------
_WINDOWS_HOST = os.name == "nt"
_DRIVE = re.compile(r"[A-Za-z]:")
_PROVIDER = re.compile(r"[A-Za-z][A-Za-z0-9_]+:")  # PowerShell drives: Env:, HKLM:, Cert:
_DOTS_AND_SPACES = re.compile(r"[. ]+")
_GLOB_CHARS = frozenset("*?[")
_GLOB_TOOL_PIECES = re.compile(r"[/\\{},]")
_GLOB_TOOL_MAGIC = re.compile(r"[*?\[{]")
# Slash look-alikes that NFKC leaves alone; fullwidth `／` and `＼` are folded by NFKC itself.
_SLASH_LOOKALIKES = str.maketrans(
    {
        "\u2215": "/",  # division slash
        "\u2044": "/",  # fraction slash
        "\u29f8": "/",  # big solidus
        "\u2216": "\\",  # set minus
        "\u29f5": "\\",  # reverse solidus operator
        "\u29f9": "\\",  # big reverse solidus
        "\ufe68": "\\",  # small reverse solidus
    }
)


def evaluate_tool_call(
    tool_name: str, tool_input: Mapping[str, Any], config: PolicyConfig
) -> Decision:
    """Decide whether the agent may make this tool call: allowed, refused, or to be asked."""
    decision = _evaluate(tool_name, tool_input, config)
    if isinstance(decision, Allowed) and _matches_any(tool_name, config.ask_tools):
        return Ask(f"`{tool_name}` needs the user's approval first (CLAUDE_MEMORY_ASK_TOOLS).")
    return decision


def _evaluate(tool_name: str, tool_input: Mapping[str, Any], config: PolicyConfig) -> Decision:
    if _matches_any(tool_name, config.denied_tools):
        return Denied(
            f"`{tool_name}` is turned off by CLAUDE_MEMORY_DENIED_TOOLS; "
            "do the task without it or ask the user."
        )
    paths = _Paths(config.workspace)
    if tool_name == "Bash":
        return _evaluate_bash(tool_input.get("command"), config.bash_allowlist, paths)
    if tool_name in _FILE_PATH_KEYS:
        key = _FILE_PATH_KEYS[tool_name]
        return _evaluate_tool_path(tool_name, key, tool_input.get(key), paths, required=True)
    if tool_name in _OPTIONAL_PATH_TOOLS:
        return _evaluate_tool_path(tool_name, "path", tool_input.get("path"), paths, required=False)
    if tool_name == "Glob":
        return _evaluate_glob_tool(tool_input, paths)
    if _matches_any(tool_name, config.allowed_tools):
        if tool_name == "WebFetch" and (why := web_address_refusal(tool_input.get("url"))):
            return Denied(
                f"`WebFetch` refused: {why}. Fetch a public web address, or ask the user."
            )
        return Allowed()
    return Denied(
        f"`{tool_name}` is not an allowed tool; do the task without it, or ask the user to add "
        "it to CLAUDE_MEMORY_ALLOWED_TOOLS."
    )


def _matches_any(tool_name: str, patterns: Sequence[str]) -> bool:
    return any(
        tool_name == pattern or (pattern.endswith("*") and tool_name.startswith(pattern[:-1]))
        for pattern in patterns
    )


# --- Bash ----------------------------------------------------------------------------------------


def _evaluate_bash(command: object, allowlist: frozenset[str], paths: _Paths) -> Decision:
    if not isinstance(command, str):
        return Denied("`Bash` needs a `command` string; send one command, such as `ls`.")
    if not command.strip():
        return Denied("The Bash command is empty; send one command, such as `ls`.")
    match split_words(command):
        case Rejected(reason=reason):
            return Denied(reason)
        case (Word(value=name), *arguments):
            pass
        case _:  # pragma: no cover - a non-blank command always has a first word
            return Denied("The Bash command is empty; send one command, such as `ls`.")
    if _ASSIGNMENT.match(name):
        return Denied(
            "Environment assignments before a command (`FOO=1 ls`) are not allowed: "
            "run the command without them."
        )
    if name.lower() in _NEVER_ALLOWED:
        return Denied(
            f"`{_shorten(name)}` runs other commands or leaves the workspace, so it is never "
            "allowed; run the allowed command itself, or use the file tools."
        )
    program = _match_allowlist(name, allowlist)
    if program is None:
        return Denied(
            f"`{_shorten(name)}` is not on the Bash allowlist ({', '.join(sorted(allowlist))}); "
            "use the file tools or ask the user."
        )
    return _check_arguments(program, arguments, paths)


def _is_windows_name(program: str) -> bool:
    return program.lower() in _CMD_BUILTINS or _CMDLET.fullmatch(program) is not None


def _match_allowlist(name: str, allowlist: frozenset[str]) -> str | None:
    """The allowlist entry `name` runs, if any.

    POSIX names match exactly: `LS` on a case-insensitive disk would run `ls`, but the model has
    no reason to write it that way. cmd built-ins and PowerShell cmdlets ignore case themselves,
    so for those entries any ASCII casing matches (`remove-item` for `Remove-Item`).
    """
    if name in allowlist:
        return name
    if not name.isascii():
        return None
    lowered = name.lower()
    return next(
        (e for e in sorted(allowlist) if _is_windows_name(e) and e.lower() == lowered), None
    )


def _check_arguments(program: str, arguments: Sequence[Word], paths: _Paths) -> Decision:
    """Every argument, option values included, must name a place inside the workspace.

    Arguments are read as paths even for programs that do not open them (`echo /` is refused):
    one rule for every program is easier to trust than a model of each program's options.
    """
    for word in arguments:
        if max(len(word.value), len(word.raw)) > MAX_PATH_CHARS:
            return Denied(
                f"An argument of `{program}` is longer than {MAX_PATH_CHARS} characters, "
                "so it cannot be a path; shorten it."
            )
    match read_search_command(program, arguments):
        case Refused(reason=reason):
            return Denied(reason)
        case None:
            pass
        case texts:
            return _check_texts(program, texts, paths) or Allowed()
    windows = _is_windows_name(program)
    cmd_builtin = program.lower() in _CMD_BUILTINS
    remover = program.lower() in _REMOVERS
    options_ended = False
    no_dereference = False
    directories: list[str] = []
    for word in arguments:
        if not options_ended and word.value == "--":
            options_ended = True  # everything after `--` is a path, even `-rf`
            continue
        if not options_ended and cmd_builtin and _CMD_SWITCH.fullmatch(word.value):
            continue  # `del /Q x`: cmd reads `/Q` as a switch
        is_option = not options_ended and len(word.value) > 1 and word.value.startswith("-")
        if is_option:
            refusal = _refuse_option(program, word.value, windows=windows)
            if refusal is not None:
                return refusal
            name = word.value.split("=", 1)[0]
            no_dereference = no_dereference or _abbreviates(name, _NO_DEREFERENCE_OPTION)
        texts = list(_argument_texts(word, is_option=is_option, clusters=not windows))
        denied = _check_texts(program, texts, paths, windows=windows, remover=remover)
        if denied is not None:
            return denied
        if program == "diff":
            directories += (text for text, _, _ in texts if os.path.isdir(paths.resolve(text)))
    if directories and not no_dereference:
        return Denied(
            f"`diff` of the directory `{_shorten(directories[0])}` follows the symbolic links "
            "inside it, which the policy cannot check; add `--no-dereference`."
        )
    return Allowed()


def _check_texts(
    program: str,
    texts: Sequence[tuple[str, bool, str]],
    paths: _Paths,
    *,
    windows: bool = False,
    remover: bool = False,
) -> Denied | None:
    """The first of `texts` (text, shell-globbed, word it came from) that is not inside."""
    for text, glob_expands, origin in texts:
        clause = paths.problem(
            text, expand_globs=glob_expands, windows_command=windows, protect_root=remover
        )
        if clause is not None:
            where = f" (in `{_shorten(origin)}`)" if origin != text else ""
            return Denied(f"`{program}` of `{_shorten(text)}`{where} {clause}")
    return None


def _refuse_option(program: str, option: str, *, windows: bool) -> Denied | None:
    """Options whose effect the path checks cannot see.

    A link named on the command line is checked like any path, but a recursive copy or listing
    that dereferences links (`cp -rL sub x`) follows the ones it meets inside the tree, which
    may lead anywhere; `--files0-from=list` opens whatever names the file `list` holds.
    """
    name = option.split("=", 1)[0]
    if _abbreviates(name, _FILE_LIST_OPTION):
        return Denied(
            f"`{program} {name}` reads file names from a file, which the policy cannot check; "
            "name the files directly."
        )
    if windows and _abbreviates(name.split(":", 1)[0].lower(), _FOLLOW_SYMLINK_PARAMETER):
        return Denied(f"`{program} {name}` {_FOLLOWS_LINKS}; drop that option.")
    for refused in () if windows else _PROGRAM_OPTIONS.get(program, ()):
        long_match = refused.long is not None and _abbreviates(
            name, (refused.long, refused.shortest)
        )
        short_match = refused.short is not None and name[1] != "-" and refused.short in name
        if long_match or short_match:
            return Denied(f"`{program} {name}` {refused.why}; drop that option.")
    if not option.startswith("--") and len(option) > _MAX_OPTION_CHARS:
        return Denied(
            f"An option of `{program}` is longer than {_MAX_OPTION_CHARS} characters; "
            "pass long values as separate words."
        )
    return None


def _abbreviates(name: str, option: tuple[str, int]) -> bool:
    full, shortest = option
    return len(name) >= shortest and full.startswith(name)


def _argument_texts(
    word: Word, *, is_option: bool, clusters: bool
) -> Iterator[tuple[str, bool, str]]:
    """(text to check as a path, whether the shell globs it, the word it came from).

    The whole word is always checked: bash globs it, and a program that stops parsing options
    early (BSD `rm file -x`) takes `-x` as a file. For options the attached values are checked
    too, because the policy cannot know which options take a path: `--target-directory=/x` and
    `-Path:C:\\x` give their value; a POSIX short cluster like `-rt/x` gives every suffix after
    the first letter (`t/x`, `/x`, `x`), so whichever letter takes a value, its value is covered.
    cmd and PowerShell have no clusters (`-Recurse` is one name), so they only give `:` values.
    """
    texts = dict.fromkeys((word.value, word.raw))
    for text in texts:
        yield text, True, text
    if not is_option:
        return
    for text in texts:
        if text.startswith("--"):
            _, equals, value = text.partition("=")
            if equals:
                yield value, True, text
            continue
        _, colon, value = text.partition(":")
        if colon:
            yield value, True, text
        if not clusters:
            continue
        for start in range(2, len(text)):
            # The shell globbed the whole word, not this suffix: the program gets it literally.
            yield text[start:], False, text


# --- file tools ----------------------------------------------------------------------------------


def _evaluate_tool_path(
    tool_name: str, key: str, value: object, paths: _Paths, *, required: bool
) -> Decision:
    if not required and value in (None, ""):
        return Allowed()  # the tool defaults to its working directory, the workspace
    if not isinstance(value, str) or not value:
        return Denied(
            f"`{tool_name}` needs a `{key}` string naming a place inside the workspace "
            f"`{paths.root}`."
        )
    if len(value) > MAX_PATH_CHARS:
        return Denied(f"The `{key}` of `{tool_name}` is longer than {MAX_PATH_CHARS} characters.")
    clause = paths.problem(value, expand_globs=False)
    if clause is not None:
        return Denied(f"`{tool_name}` of `{_shorten(value)}` {clause}")
    return Allowed()


def _evaluate_glob_tool(tool_input: Mapping[str, Any], paths: _Paths) -> Decision:
    """The Glob tool: its `path` inside, and a `pattern` that cannot climb out of it.

    The tool walks directories, so a wildcard never yields `..`; only literal `..` pieces
    (also inside `{a,b}` alternatives) and an absolute or symlinked literal start can escape.
    """
    base = tool_input.get("path")
    decision = _evaluate_tool_path("Glob", "path", base, paths, required=False)
    if isinstance(decision, Denied):
        return decision
    pattern = tool_input.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        return Denied("`Glob` needs a `pattern` string, such as `**/*.md`.")
    if len(pattern) > MAX_PATH_CHARS:
        return Denied(f"The `pattern` of `Glob` is longer than {MAX_PATH_CHARS} characters.")
    for spelling in dict.fromkeys((pattern, _fold_lookalikes(pattern))):
        for piece in _GLOB_TOOL_PIECES.split(spelling):
            if piece == ".." or (piece != "." and _DOTS_AND_SPACES.fullmatch(piece)):
                return Denied(
                    f"The Glob pattern `{_shorten(pattern)}` contains `{piece}`, which climbs "
                    "out of the search directory; search inside the workspace "
                    f"`{paths.root}` with a pattern such as `**/*.md`."
                )
    # The literal start of the pattern (up to the last separator before a wildcard) is a path.
    head = _GLOB_TOOL_MAGIC.split(pattern, maxsplit=1)[0]
    if head != pattern:
        head = head[: max(head.rfind("/"), head.rfind("\\")) + 1]
    start = os.path.join(base, head) if isinstance(base, str) and base else head
    clause = paths.problem(start, expand_globs=False)
    if clause is not None:
        return Denied(f"`Glob` of `{_shorten(pattern)}` {clause}")
    return Allowed()


# --- paths ---------------------------------------------------------------------------------------


class _Paths:
    """Path questions about one workspace; symlink resolutions are cached for one decision."""

    def __init__(self, workspace: Path) -> None:
        self.root = os.path.realpath(workspace)
        self._resolved: dict[str, str] = {}
        self._expanded: dict[str, str | None] = {}

    def resolve(self, path: str) -> str:
        """Where `path` leads: relative to the workspace, `..` applied after following links.

        `realpath` follows every symlink that exists and keeps the not-yet-existing tail as
        written, which is exactly "resolve the deepest existing parent".
        """
        resolved = self._resolved.get(path)
        if resolved is None:
            resolved = os.path.realpath(os.path.join(self.root, path))
            self._resolved[path] = resolved
        return resolved

    def inside(self, resolved: str) -> bool:
        root = os.path.normcase(self.root)
        resolved = os.path.normcase(resolved)
        return resolved == root or resolved.startswith(root.rstrip(os.sep) + os.sep)

    def problem(
        self,
        text: str,
        *,
        expand_globs: bool,
        windows_command: bool = False,
        protect_root: bool = False,
    ) -> str | None:
        """Why `text` may not be used as a path, as a clause after "`rm` of `x`", or None.

        Every reading a program might apply must stay inside: the text as POSIX sees it, with
        `\\` as a separator (Windows programs), and with Unicode look-alikes folded to ASCII
        (`․․∕etc` as `../etc`), in case a tool or file system normalises them.
        """
        for spelling in _spellings(text):
            clause = self._spelling_problem(
                spelling,
                expand_globs=expand_globs,
                windows_command=windows_command,
                protect_root=protect_root,
            )
            if clause is not None:
                return clause if spelling == text else f"(read as `{_shorten(spelling)}`) {clause}"
        return None

    def _spelling_problem(
        self, path: str, *, expand_globs: bool, windows_command: bool, protect_root: bool
    ) -> str | None:
        parts = path.split("/")
        first = parts[0]
        if not _WINDOWS_HOST:
            # On a POSIX host these only make sense as Windows paths, all outside the workspace.
            if path.startswith("//"):
                return (
                    f"is a network (UNC) path, outside the workspace `{self.root}`; {_USE_INSIDE}"
                )
            if _DRIVE.match(first):
                return f"names a Windows drive, outside the workspace `{self.root}`; {_USE_INSIDE}"
        if windows_command and _PROVIDER.match(first):
            return (
                f"names the PowerShell drive `{first.split(':')[0]}:`, outside the workspace "
                f"`{self.root}`; {_USE_INSIDE}"
            )
        if first.startswith("~"):
            return (
                "starts with `~`, which names a home directory outside the workspace "
                f"`{self.root}`; {_USE_INSIDE}"
            )
        for part in parts:
            if part not in (".", "..") and _DOTS_AND_SPACES.fullmatch(part):
                return (
                    f"has the part `{part}`, only dots and spaces, which Windows may read as "
                    "`..`; rename or avoid that name."
                )
        if expand_globs and not _GLOB_CHARS.isdisjoint(path):
            return self._pattern_problem(path, parts)
        resolved = self.resolve(path)
        if not self.inside(resolved):
            return self._outside(path, resolved)
        if protect_root and os.path.normcase(resolved) == os.path.normcase(self.root):
            return (
                f"would remove the workspace `{self.root}` itself; "
                "remove the entries inside it instead."
            )
        return None

    def _outside(self, path: str, resolved: str) -> str:
        lexical = os.path.normpath(os.path.join(self.root, path))
        if self.inside(lexical):
            return (
                f"leads through a symbolic link to `{_shorten(resolved)}`, outside the workspace "
                f"`{self.root}`; {_USE_INSIDE}"
            )
        return f"is outside the workspace `{self.root}`; {_USE_INSIDE}"

    def _pattern_problem(self, path: str, parts: list[str]) -> str | None:
        """A glob: its literal start must be inside and no later part may reach `..`."""
        first_glob = next(i for i, part in enumerate(parts) if not _GLOB_CHARS.isdisjoint(part))
        for part in parts[first_glob:]:
            if part == ".." or (not _GLOB_CHARS.isdisjoint(part) and _could_match_dots(part)):
                return (
                    f"is a pattern whose part `{part}` can reach `..` and climb out of the "
                    f"workspace `{self.root}`; start pattern parts with a name or `*`."
                )
        prefix = "/".join(parts[:first_glob]) or ("/" if path.startswith("/") else "")
        resolved = self.resolve(prefix)
        if not self.inside(resolved):
            return self._outside(prefix or ".", resolved)
        return self._expansion_problem(parts, first_glob)

    def _expansion_problem(self, parts: list[str], first_glob: int) -> str | None:
        """What the shell would expand the pattern to now must be inside too.

        `*/secret` can reach outside through `link -> /home/u`. Python's glob stands in for the
        shell's, widened where they differ: hidden names are included, and each bracket
        expression is matched as `?` (any one character), so the check sees at least
        everything the shell would.
        """
        widened = "/".join(parts[:first_glob] + [_widen_brackets(p) for p in parts[first_glob:]])
        if widened not in self._expanded:
            self._expanded[widened] = self._expand(widened, recursive="**" in parts)
        return self._expanded[widened]

    def _expand(self, widened: str, *, recursive: bool) -> str | None:
        matches = glob.iglob(widened, root_dir=self.root, recursive=recursive, include_hidden=True)
        for count, match in enumerate(matches):
            if count >= _MAX_GLOB_MATCHES:
                return (
                    f"matches more than {_MAX_GLOB_MATCHES} entries, too many to check; "
                    "use a narrower pattern."
                )
            resolved = self.resolve(match)
            if not self.inside(resolved):
                return (
                    f"matches `{_shorten(match)}`, which leads to `{_shorten(resolved)}`, "
                    f"outside the workspace `{self.root}`; {_USE_INSIDE}"
                )
        return None


_USE_INSIDE = "only paths inside it are allowed."


def _could_match_dots(part: str) -> bool:
    """Whether a pattern part could expand to `.` or `..`.

    bash and zsh only match a leading `.` with a literal `.`, so `*x` and `?x` cannot; but
    `.*` does match `..` in bash before 5.2 (macOS ships 3.2). A part starting with a bracket
    is tested as written, without that rule, which can only refuse more.
    """
    if part[0] not in ".[":
        return False
    return fnmatch.fnmatchcase(".", part) or fnmatch.fnmatchcase("..", part)


def _widen_brackets(part: str) -> str:
    """`part` with every bracket expression (`[ab]`, `[!a]`, `[[:alpha:]]`) replaced by `?`.

    A bracket expression matches exactly one character, so `?` matches at least as much; an
    unclosed `[` (a literal for the shell) becomes `?` too, which also matches at least as much.
    """
    out: list[str] = []
    index = 0
    while index < len(part):
        if part[index] != "[":
            out.append(part[index])
            index += 1
            continue
        scan = index + 1
        if scan < len(part) and part[scan] in "!^":
            scan += 1
        if scan < len(part) and part[scan] == "]":
            scan += 1  # a `]` right after the opening is a member, not the end
        while scan < len(part) and part[scan] != "]":
            if part.startswith(("[:", "[.", "[="), scan):
                end = part.find(part[scan + 1] + "]", scan + 2)
                scan = end + 2 if end >= 0 else scan + 1
            else:
                scan += 1
        out.append("?")
        index = scan + 1 if scan < len(part) else index + 1
    return "".join(out)


def _fold_lookalikes(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_SLASH_LOOKALIKES)


def _spellings(text: str) -> list[str]:
    """`text` as POSIX reads it, then the other readings that differ from it."""
    readings = [text]
    for spelling in (text, _fold_lookalikes(text)):
        for reading in (spelling, spelling.replace("\\", "/")):
            if reading not in readings:
                readings.append(reading)
    return readings


def _shorten(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
