"""Properties of the permission policy over generated commands.

Paths are built from segments whose effect is known without asking the file system the way the
policy does: a name goes one level down, `..` one level up, `link` (only at the top) leaves
through a symbolic link, and an absolute, drive, network or home start is outside from the
beginning. `\\` counts as a separator, as it does for Windows programs. None of the segments
is the workspace's own name, so once a path has left the workspace it cannot come back.

`grep` and `rg` read their first operand as a pattern, not a path, so the generated commands
give them one first; `diff` of a directory needs `--no-dereference`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.policy import Allowed, Decision, Denied, PolicyConfig, evaluate_tool_call
from settings import DEFAULT_BASH_ALLOWLIST

# Modest, so the suite stays fast; the workspace fixture is module-scoped and shared by examples.
PROPERTY_SETTINGS = settings(max_examples=300, deadline=None)

NAMES = ("a.txt", "sub", "deep", "new", "笔记.md", "x y", "b-1")
STEPS = (*NAMES, ".", "..", "link")
OUTSIDE_STARTS = ("/", "/etc", "/tmp", "C:\\", "C:/", "\\\\server\\share", "//server/x", "~")
SEPARATORS = ("/", "\\")
FLAGS = ("-r", "-f", "-v", "-la", "--verbose", "--")
# Patterns that would fail as paths (absolute, climbing, backslashes): still only patterns.
PATTERNS = ("needle", "/etc/passwd", "..", "../..", "\\bword\\b", "^/usr", "a|b", "~", "C:\\x")
PATTERN_FIRST = frozenset({"grep", "rg"})
FIND_TESTS = (
    ("-name", "*.md"), ("-iname", "/etc"), ("-path", "../*"), ("-regex", ".*/\\.\\./.*"),
    ("-type", "f"), ("-mtime", "-1"), ("-maxdepth", "2"), ("-printf", "\\n%p"), ("-print",),
)  # fmt: skip
OPERATORS = (
    ";", "&&", "||", "|", "|&", "&", ">", ">>", "<", "2>", "&>", "<<", "<<<", "<(", ">(",
    "$(", "`", "$X", "${X}", "$'x'", '$"x"', "(", ")", "{", "}", "\n", "\r", "\x00", "~", "#",
)  # fmt: skip


@dataclass(frozen=True)
class GeneratedPath:
    text: str
    outside: bool


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> PolicyConfig:
    root = tmp_path_factory.mktemp("policy-properties")
    ws = root / "ws"
    (ws / "sub" / "deep").mkdir(parents=True)
    (ws / "a.txt").write_text("a", encoding="utf-8")
    (root / "outside").mkdir()
    (ws / "link").symlink_to(root / "outside", target_is_directory=True)
    return PolicyConfig(
        workspace=ws.resolve(),
        bash_allowlist=frozenset(DEFAULT_BASH_ALLOWLIST),
        allowed_tools=(),
        denied_tools=(),
    )


def lands_outside(steps: list[str]) -> bool:
    """Whether walking `steps` from the workspace ever leaves it (and so ends outside)."""
    depth = 0
    for step in steps:
        if step == "..":
            depth -= 1
        elif step == "link" and depth == 0:
            return True
        elif step != ".":
            depth += 1
        if depth < 0:
            return True
    return False


@st.composite
def paths(draw: st.DrawFn) -> GeneratedPath:
    steps = draw(st.lists(st.sampled_from(STEPS), min_size=1, max_size=5))
    separator = draw(st.sampled_from(SEPARATORS))
    start = draw(st.sampled_from(("relative", "workspace", "outside")))
    body = separator.join(steps)
    if start == "outside":
        prefix = draw(st.sampled_from(OUTSIDE_STARTS))
        joiner = "" if prefix.endswith(("/", "\\")) else separator
        return GeneratedPath(prefix + joiner + body, outside=True)
    if start == "workspace":
        return GeneratedPath("@WS@/" + body, outside=lands_outside(steps))
    return GeneratedPath(body, outside=lands_outside(steps))


simple_inside_paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join)


def quoted(text: str, config: PolicyConfig) -> str:
    return shlex.quote(text.replace("@WS@", str(config.workspace)))


def bash(command: str, config: PolicyConfig) -> Decision:
    return evaluate_tool_call("Bash", {"command": command}, config)


def with_values(program: str, flags: list[str]) -> list[str]:
    """The flags as the program reads them: rg's `-r` is `--replace` and takes the next word."""
    if program != "rg":
        return flags
    return [f"{flag} X" if flag == "-r" else flag for flag in flags]


def operands(program: str, pattern: str = "needle") -> list[str]:
    """What comes before the paths: a pattern for grep and rg, an option for diff."""
    if program in PATTERN_FIRST:
        return [shlex.quote(pattern)]
    return ["--no-dereference"] if program == "diff" else []


@PROPERTY_SETTINGS
@given(
    program=st.sampled_from(DEFAULT_BASH_ALLOWLIST),
    flags=st.lists(st.sampled_from(FLAGS), max_size=2),
    others=st.lists(paths(), max_size=3),
    escaping=paths().filter(lambda p: p.outside),
    position=st.integers(min_value=0, max_value=3),
)
def test_a_path_that_resolves_outside_is_never_allowed(
    config: PolicyConfig,
    program: str,
    flags: list[str],
    others: list[GeneratedPath],
    escaping: GeneratedPath,
    position: int,
) -> None:
    arguments = [quoted(p.text, config) for p in others]
    arguments.insert(min(position, len(arguments)), quoted(escaping.text, config))
    command = " ".join([program, *with_values(program, flags), *operands(program), *arguments])
    assert isinstance(bash(command, config), Denied), command


@PROPERTY_SETTINGS
@given(
    program=st.sampled_from(DEFAULT_BASH_ALLOWLIST),
    arguments=st.lists(simple_inside_paths, max_size=3),
    operator=st.sampled_from(OPERATORS),
    position=st.integers(min_value=0, max_value=4),
    left=st.sampled_from(("", " ")),
    right=st.sampled_from(("", " ")),
    tail=st.sampled_from(("", "rm -rf /", "cat /etc/passwd", "ls")),
)
def test_a_shell_operator_is_never_allowed(
    config: PolicyConfig,
    program: str,
    arguments: list[str],
    operator: str,
    position: int,
    left: str,
    right: str,
    tail: str,
) -> None:
    words = [program, *(shlex.quote(a) for a in arguments)]
    cut = min(position, len(words))
    command = " ".join(words[:cut]) + left + operator + right + " ".join(words[cut:])
    if tail:
        command += " " + tail
    assert isinstance(bash(command, config), Denied), command


@PROPERTY_SETTINGS
@given(
    program=st.sampled_from(DEFAULT_BASH_ALLOWLIST),
    arguments=st.lists(simple_inside_paths, max_size=4),
    absolute=st.booleans(),
)
def test_one_allowlisted_command_with_inside_paths_is_allowed(
    config: PolicyConfig, program: str, arguments: list[str], absolute: bool
) -> None:
    prefix = f"{config.workspace}/" if absolute else ""
    command = " ".join([program, *operands(program), *(shlex.quote(prefix + a) for a in arguments)])
    assert bash(command, config) == Allowed(), command


@PROPERTY_SETTINGS
@given(
    program=st.sampled_from(sorted(PATTERN_FIRST)),
    pattern=st.sampled_from(PATTERNS),
    flags=st.lists(st.sampled_from(("-n", "-i", "-l", "-w", "-c")), max_size=2),  # rg -r: --replace
    inside=st.lists(simple_inside_paths, max_size=2),
    escaping=st.one_of(st.none(), paths().filter(lambda p: p.outside)),
    as_option=st.booleans(),
)
def test_a_search_pattern_is_never_a_path_and_never_hides_one(
    config: PolicyConfig,
    program: str,
    pattern: str,
    flags: list[str],
    inside: list[str],
    escaping: GeneratedPath | None,
    as_option: bool,
) -> None:
    given_pattern = ["-e", shlex.quote(pattern)] if as_option else [shlex.quote(pattern)]
    arguments = [shlex.quote(a) for a in inside]
    if escaping is not None:
        arguments.append(quoted(escaping.text, config))
    command = " ".join([program, *with_values(program, flags), *given_pattern, *arguments])
    decision = bash(command, config)
    if escaping is None:
        assert decision == Allowed(), command
    else:
        assert isinstance(decision, Denied), command


@PROPERTY_SETTINGS
@given(
    starts=st.lists(simple_inside_paths, max_size=2),
    tests=st.lists(st.sampled_from(FIND_TESTS), max_size=3),
    escaping=st.one_of(st.none(), paths().filter(lambda p: p.outside)),
    where=st.sampled_from(("start", "-newer", "-samefile", "-anewer")),
)
def test_find_checks_its_starting_points_and_reference_files(
    config: PolicyConfig,
    starts: list[str],
    tests: list[tuple[str, ...]],
    escaping: GeneratedPath | None,
    where: str,
) -> None:
    start_words = [shlex.quote(s) for s in starts]
    expression = [shlex.quote(word) for test in tests for word in test]
    if escaping is not None:
        text = quoted(escaping.text, config)
        if where == "start":
            start_words.append(text)
        else:
            expression += [where, text]
    command = " ".join(["find", *start_words, *expression])
    decision = bash(command, config)
    if escaping is None:
        assert decision == Allowed(), command
    else:
        assert isinstance(decision, Denied), command
