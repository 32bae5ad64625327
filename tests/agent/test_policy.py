"""The permission policy, case by case: what the agent may run and touch, and what it may not.

Commands are written with two placeholders, `@WS@` (the workspace) and `@OUT@` (a directory
next to it), replaced before evaluation; `str.format` would trip over the shell braces.
Expected outcomes are `None` (allowed) or a fragment the denial reason must contain, so the
tests also pin down that every refusal tells the model why.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.policy import (
    Allowed,
    Decision,
    Denied,
    PolicyConfig,
    evaluate_tool_call,
)
from errors import ConfigurationError
from settings import DEFAULT_BASH_ALLOWLIST, Settings

DEFAULT_ALLOWED_TOOLS = ("WebFetch", "WebSearch", "TodoWrite", "Skill", "Task", "mcp__memory__*")

OUTSIDE = "outside the workspace"
ROOT = "workspace `"  # "... would remove the workspace `/x` itself"
SYMLINK = "symbolic link"
ONE_COMMAND = "run one command per call"
REDIRECT = "Redirection"
NOT_LISTED = "not on the Bash allowlist"
NEVER = "never allowed"
RUNS = "runs another program"
FOLLOWS = "follows symbolic links"
UNKNOWN_OPTION = "not an option the permission policy knows"
UNKNOWN_PRIMARY = "not a primary the permission policy knows"
NO_DEREFERENCE = "add `--no-dereference`"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace with files, a sub-tree, links pointing in and out, and a secret next door.

    ws/a.txt  ws/b.txt  ws/x y.txt  ws/笔记.md  ws/-rf  ws/sub/c.txt  ws/sub/deep/
    ws/link -> ../outside   ws/filelink -> ../outside/secret.txt   ws/inlink -> sub
    outside/secret.txt
    """
    ws = tmp_path / "ws"
    (ws / "sub" / "deep").mkdir(parents=True)
    for name in ("a.txt", "b.txt", "x y.txt", "笔记.md", "-rf", "sub/c.txt"):
        (ws / name).write_text("note\n", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n", encoding="utf-8")
    (ws / "link").symlink_to(outside, target_is_directory=True)
    (ws / "filelink").symlink_to(outside / "secret.txt")
    (ws / "inlink").symlink_to(ws / "sub", target_is_directory=True)
    return ws.resolve()


def make_config(
    workspace: Path,
    *,
    allowlist: tuple[str, ...] = DEFAULT_BASH_ALLOWLIST,
    allowed_tools: tuple[str, ...] = DEFAULT_ALLOWED_TOOLS,
    denied_tools: tuple[str, ...] = (),
) -> PolicyConfig:
    return PolicyConfig(
        workspace=workspace,
        bash_allowlist=frozenset(allowlist),
        allowed_tools=allowed_tools,
        denied_tools=denied_tools,
    )


def fill(text: str, workspace: Path) -> str:
    return text.replace("@WS@", str(workspace)).replace("@OUT@", str(workspace.parent / "outside"))


def assert_decision(decision: Decision, expected: str | None) -> None:
    match decision:
        case Allowed():
            assert expected is None, f"allowed, but expected a denial mentioning {expected!r}"
        case Denied(reason=reason):
            assert expected is not None, f"denied, but expected allowed: {reason}"
            assert expected in reason
            # One sentence the model can act on: no line breaks, a full stop at the end.
            assert "\n" not in reason
            assert reason.endswith(".")


LONG_ALLOWED = "echo " + "word " * 20_000  # 100 KB of harmless words
LONG_CHAINED = "echo " + "word " * 20_000 + "; rm -rf /"

BASH_CASES = [
    # --- allowed: plain commands inside the workspace ------------------------------------------
    pytest.param("ls", None, id="ls"),
    pytest.param("ls -la", None, id="ls-flags"),
    pytest.param("ls sub", None, id="ls-dir"),
    pytest.param("ls -la sub/deep", None, id="ls-deep"),
    pytest.param("ls .", None, id="ls-root-is-fine"),
    pytest.param("ls @WS@", None, id="ls-absolute-root"),
    pytest.param("ls @WS@/sub", None, id="ls-absolute-inside"),
    pytest.param("ls -- sub", None, id="ls-double-dash"),
    pytest.param("ls\tsub", None, id="tab-separated"),
    pytest.param("   ls   sub   ", None, id="surrounding-spaces"),
    pytest.param("ls ''", None, id="empty-argument"),
    pytest.param("cat a.txt", None, id="cat"),
    pytest.param("cat ./a.txt", None, id="cat-dot-slash"),
    pytest.param("cat sub/../a.txt", None, id="cat-dotdot-stays-inside"),
    pytest.param("cat sub/./c.txt", None, id="cat-dot-segment"),
    pytest.param("cat \"a\"'.txt'", None, id="adjacent-quotes"),
    pytest.param('cat "x y.txt"', None, id="double-quoted-space"),
    pytest.param("cat 'x y.txt'", None, id="single-quoted-space"),
    pytest.param("cat x\\ y.txt", None, id="escaped-space"),
    pytest.param("cat 'it'\"'\"'s'", None, id="quote-in-quotes"),
    pytest.param("cat 笔记.md", None, id="chinese-name"),
    pytest.param("cat inlink/c.txt", None, id="link-pointing-inside"),
    pytest.param("head -n 5 a.txt", None, id="head-n"),
    pytest.param("head -n5 a.txt", None, id="head-n-attached"),
    pytest.param("tail -n +2 a.txt", None, id="tail-plus"),
    pytest.param("wc -l a.txt b.txt", None, id="wc"),
    pytest.param("wc -L a.txt", None, id="wc-max-line-length"),
    pytest.param("cp -H a.txt b.txt", None, id="cp-command-line-links-are-checked"),
    pytest.param("touch new.txt", None, id="touch-new"),
    pytest.param("touch sub/new.txt", None, id="touch-new-in-dir"),
    pytest.param("touch -r a.txt b.txt", None, id="touch-reference-inside"),
    pytest.param("mkdir -p new/dir/tree", None, id="mkdir-p"),
    pytest.param("mkdir -m 755 newdir", None, id="mkdir-mode"),
    pytest.param("mkdir -- -weird", None, id="mkdir-dash-name"),
    pytest.param("cp a.txt b.txt", None, id="cp"),
    pytest.param("cp -r sub sub2", None, id="cp-r"),
    pytest.param("cp -t sub a.txt b.txt", None, id="cp-t-inside"),
    pytest.param("cp -rt sub a.txt", None, id="cp-cluster-inside"),
    pytest.param("cp --target-directory=sub a.txt", None, id="cp-long-target-inside"),
    pytest.param("mv a.txt sub/", None, id="mv"),
    pytest.param("mv -- a.txt c.txt", None, id="mv-double-dash"),
    pytest.param("mv a.txt .", None, id="mv-into-root"),
    pytest.param("rm a.txt", None, id="rm"),
    pytest.param("rm -rf sub", None, id="rm-rf-dir"),
    pytest.param("rm -rf ./sub", None, id="rm-rf-dot-dir"),
    pytest.param("rm -r sub/deep/..", None, id="rm-dotdot-to-dir"),
    pytest.param("rm -rf sub/*", None, id="rm-glob-in-dir"),
    pytest.param("rm -f @WS@/a.txt", None, id="rm-absolute-inside"),
    pytest.param("rm -rf @WS@/sub", None, id="rm-absolute-dir"),
    pytest.param("rm -- -rf", None, id="rm-file-named-rf"),
    pytest.param("pwd", None, id="pwd"),
    pytest.param("echo hello world", None, id="echo"),
    pytest.param("echo 'hi; there && | > $HOME'", None, id="operators-single-quoted"),
    pytest.param('echo "hi > there | now"', None, id="operators-double-quoted"),
    pytest.param("ls *.txt", None, id="glob-star"),
    pytest.param("ls sub/*.txt", None, id="glob-in-dir"),
    pytest.param("ls ?.txt", None, id="glob-question"),
    pytest.param("ls [ab].txt", None, id="glob-bracket"),
    pytest.param("ls .git*", None, id="glob-dot-name"),
    pytest.param("ls sub/../*.txt", None, id="glob-after-inside-dotdot"),
    pytest.param("cat a；rm", None, id="fullwidth-semicolon-is-a-letter"),
    pytest.param("cat a＆b", None, id="fullwidth-ampersand-is-a-letter"),
    pytest.param("cat a｜b", None, id="fullwidth-bar-is-a-letter"),
    pytest.param("ls a\u3000b", None, id="ideographic-space-is-a-letter"),
    pytest.param(LONG_ALLOWED, None, id="long-100kb"),
    # --- allowed: Windows and PowerShell forms ---------------------------------------------------
    pytest.param("del a.txt", None, id="del"),
    pytest.param("del /Q a.txt", None, id="del-switch"),
    pytest.param("DEL a.txt", None, id="del-any-case"),
    pytest.param("copy a.txt b.txt", None, id="copy"),
    pytest.param("move a.txt sub", None, id="move"),
    pytest.param("ren a.txt c.txt", None, id="ren"),
    pytest.param("Remove-Item a.txt", None, id="remove-item"),
    pytest.param("remove-item a.txt", None, id="remove-item-lowercase"),
    pytest.param("REMOVE-ITEM a.txt", None, id="remove-item-uppercase"),
    pytest.param("Remove-Item -Path .\\a.txt", None, id="remove-item-dot-backslash"),
    pytest.param("Remove-Item -Path 'sub\\c.txt'", None, id="remove-item-backslash-inside"),
    pytest.param("Remove-Item -Recurse -Force sub", None, id="remove-item-recurse"),
    pytest.param("Remove-Item -Path:sub", None, id="remove-item-colon-value"),
    pytest.param("Copy-Item a.txt -Destination sub", None, id="copy-item"),
    pytest.param("Move-Item -Path a.txt -Destination sub", None, id="move-item"),
    pytest.param("New-Item -ItemType Directory -Path newdir", None, id="new-item"),
    pytest.param("Get-ChildItem -Recurse sub", None, id="get-childitem"),
    # --- allowed: searching the workspace -------------------------------------------------------
    pytest.param("grep -rn foo .", None, id="grep-rn"),
    pytest.param("grep foo a.txt", None, id="grep-file"),
    pytest.param("grep -rn 'TODO|FIXME' .", None, id="grep-alternation"),
    pytest.param("grep -e '^/usr' .", None, id="grep-e-absolute-looking-pattern"),
    pytest.param("grep --regexp=/etc/passwd a.txt", None, id="grep-regexp-long"),
    pytest.param("grep --reg=/etc a.txt", None, id="grep-regexp-abbreviated"),
    pytest.param("grep -e/etc a.txt", None, id="grep-e-attached"),
    pytest.param("grep -rn '\\bword\\b' sub", None, id="grep-backslash-pattern"),
    pytest.param("grep -E '(a|b)+' a.txt", None, id="grep-quoted-parentheses"),
    pytest.param("grep '..' a.txt", None, id="grep-dots-pattern"),
    pytest.param("grep '../../etc' a.txt", None, id="grep-climbing-pattern"),
    pytest.param("grep '~' a.txt", None, id="grep-tilde-pattern"),
    pytest.param("grep -e foo -e bar sub", None, id="grep-two-patterns"),
    pytest.param("grep -f sub/c.txt a.txt", None, id="grep-pattern-file-inside"),
    pytest.param("grep -- -rf a.txt", None, id="grep-dash-pattern-after-double-dash"),
    pytest.param("grep foo . -rn", None, id="grep-options-after-operands"),
    pytest.param("grep -rn --include='*.md' foo .", None, id="grep-include-quoted"),
    pytest.param("grep -rn --include=*.md foo .", None, id="grep-include-unquoted"),
    pytest.param("grep -rl --exclude-dir=.git foo .", None, id="grep-exclude-dir"),
    pytest.param("grep -C3 foo a.txt", None, id="grep-context-attached"),
    pytest.param("grep -A 2 -B2 foo a.txt", None, id="grep-context-separate"),
    pytest.param("grep -5 foo a.txt", None, id="grep-digit-context"),
    pytest.param("grep --color=always foo a.txt", None, id="grep-color-value"),
    pytest.param("grep --colo --fix foo a.txt", None, id="grep-abbreviations-of-one-option"),
    pytest.param("grep -c '' a.txt", None, id="grep-empty-pattern"),
    pytest.param("grep -r foo inlink", None, id="grep-inward-link"),
    pytest.param("grep －R foo .", None, id="grep-fullwidth-dash-is-a-pattern"),
    pytest.param("rg foo", None, id="rg"),
    pytest.param("rg -n 'TODO|FIXME' sub", None, id="rg-alternation"),
    pytest.param("rg -e '\\d+' .", None, id="rg-e-backslash"),
    pytest.param("rg -g '*.md' foo", None, id="rg-glob"),
    pytest.param("rg -t py -i --hidden foo .", None, id="rg-type-and-flags"),
    pytest.param("rg -uu -C2 '^/etc' sub", None, id="rg-unrestricted"),
    pytest.param("rg --files sub", None, id="rg-files"),
    pytest.param("rg --type-list", None, id="rg-type-list"),
    pytest.param("find . -name x", None, id="find-name"),
    pytest.param("find -name x", None, id="find-no-start"),
    pytest.param("find . -name '*.md' -type f", None, id="find-name-glob-quoted"),
    pytest.param("find . -name *.txt", None, id="find-name-glob-unquoted-inside"),
    pytest.param("find sub @WS@/sub -maxdepth 2 -type d", None, id="find-two-starts"),
    pytest.param("find . -iname '/etc' -print0", None, id="find-pattern-not-a-path"),
    pytest.param("find . -path '../*' -o -regex '.*/\\.\\./.*'", None, id="find-odd-patterns"),
    pytest.param("find . '(' -name a -o -name b ')' -print", None, id="find-grouping-quoted"),
    pytest.param("find . \\! -name a", None, id="find-not-escaped"),
    pytest.param("find . -not -empty -mtime -1 -size +1k", None, id="find-numbers"),
    pytest.param("find . -newer a.txt", None, id="find-newer-inside"),
    pytest.param("find . -newermt 2024-01-01", None, id="find-newer-time"),
    pytest.param("find . -path ./sub -prune -o -print", None, id="find-prune"),
    pytest.param("find . -printf '\\n%p %s'", None, id="find-printf"),
    pytest.param("find . -empty -ls", None, id="find-ls"),
    pytest.param("find inlink", None, id="find-inward-link"),
    pytest.param("find -P . -name x", None, id="find-no-follow"),
    pytest.param("find -- sub -name c.txt", None, id="find-double-dash"),
    pytest.param("find . －exec", None, id="find-fullwidth-dash-is-a-start"),
    pytest.param("head -n 5 a.txt", None, id="head"),
    pytest.param("tail -n 5 a.txt", None, id="tail"),
    pytest.param("wc -l a.txt b.txt", None, id="wc"),
    pytest.param("sort -r a.txt", None, id="sort"),
    pytest.param("sort -o sorted.txt a.txt", None, id="sort-output-inside"),
    pytest.param("sort -t, -k2,2n a.txt", None, id="sort-keys"),
    pytest.param("uniq -c a.txt", None, id="uniq"),
    pytest.param("uniq a.txt out.txt", None, id="uniq-output-inside"),
    pytest.param("cut -d: -f1 a.txt", None, id="cut"),
    pytest.param("diff a.txt b.txt", None, id="diff"),
    pytest.param("diff -u a.txt sub/c.txt", None, id="diff-unified"),
    pytest.param("diff -r --no-dereference sub inlink", None, id="diff-dirs-no-dereference"),
    pytest.param("diff -r --no-d sub inlink", None, id="diff-no-dereference-abbreviated"),
    pytest.param("stat a.txt", None, id="stat"),
    pytest.param("stat -c '%s %n' a.txt", None, id="stat-format"),
    pytest.param("file a.txt", None, id="file"),
    pytest.param("du -sh sub", None, id="du"),
    pytest.param("du -h --max-depth=1 .", None, id="du-max-depth"),
    pytest.param("tree", None, id="tree"),
    pytest.param("tree -L 2 sub", None, id="tree-level"),
    # --- denied: searching outside, or searches that run or write things -----------------------
    pytest.param("find / -name x", OUTSIDE, id="find-root"),
    pytest.param("find .. -name x", OUTSIDE, id="find-parent"),
    pytest.param("find ../ -name x", OUTSIDE, id="find-parent-slash"),
    pytest.param("find @OUT@ -name x", OUTSIDE, id="find-sibling"),
    pytest.param("find . ../outside -name x", OUTSIDE, id="find-second-start-outside"),
    pytest.param("find ․․/ -name x", OUTSIDE, id="find-lookalike-parent"),
    pytest.param("find link -name x", SYMLINK, id="find-outward-link"),
    pytest.param("find link/ -name x", SYMLINK, id="find-outward-link-slash"),
    pytest.param("find . -exec rm '{}' ';'", RUNS, id="find-exec"),
    pytest.param("find . -execdir ls ';'", RUNS, id="find-execdir"),
    pytest.param("find . -ok rm '{}' ';'", RUNS, id="find-ok"),
    pytest.param("find . -okdir rm '{}' +", RUNS, id="find-okdir"),
    pytest.param("find . -delete", "deletes what it finds", id="find-delete"),
    pytest.param("find . -name x -o -delete", "deletes", id="find-delete-after-or"),
    pytest.param("find . -fprint /tmp/x", "writes to a file", id="find-fprint"),
    pytest.param("find . -fprint0 out", "writes to a file", id="find-fprint0"),
    pytest.param("find . -fprintf out '%p'", "writes to a file", id="find-fprintf"),
    pytest.param("find . -fls out", "writes to a file", id="find-fls"),
    pytest.param("find -L . -name x", FOLLOWS, id="find-L"),
    pytest.param("find -H . -name x", FOLLOWS, id="find-H"),
    pytest.param("find . -follow -name x", FOLLOWS, id="find-follow"),
    pytest.param("find -files0-from list", "reads file names", id="find-files0-from"),
    pytest.param("find . -newer /etc/shadow", OUTSIDE, id="find-newer-outside"),
    pytest.param("find . -anewer ../outside/secret.txt", OUTSIDE, id="find-anewer-outside"),
    pytest.param("find . -cnewer filelink", SYMLINK, id="find-cnewer-link"),
    pytest.param("find . -samefile @OUT@/secret.txt", OUTSIDE, id="find-samefile-outside"),
    pytest.param("find . -newerma /etc/passwd", OUTSIDE, id="find-newerxy-outside"),
    pytest.param("find . -name /e*", OUTSIDE, id="find-unquoted-glob-outside"),
    pytest.param("find . -name x -exec\\;", UNKNOWN_PRIMARY, id="find-exec-glued"),
    pytest.param("find . -EXEC ls", UNKNOWN_PRIMARY, id="find-exec-uppercase"),
    pytest.param("find . -exe ls", UNKNOWN_PRIMARY, id="find-exec-abbreviated"),
    pytest.param("find . -name x －delete", UNKNOWN_PRIMARY, id="find-fullwidth-dash-primary"),
    pytest.param("find . -name x /etc", UNKNOWN_PRIMARY, id="find-stray-path-after-expression"),
    pytest.param("find -D tree .", UNKNOWN_PRIMARY, id="find-debug"),
    pytest.param("grep -r x /etc", OUTSIDE, id="grep-etc"),
    pytest.param("grep -r x ../", OUTSIDE, id="grep-parent"),
    pytest.param("grep -rn x ․․", OUTSIDE, id="grep-lookalike-parent"),
    pytest.param("grep x -- ../y", OUTSIDE, id="grep-after-double-dash"),
    pytest.param("grep -f /etc/passwd .", OUTSIDE, id="grep-pattern-file-outside"),
    pytest.param("grep -f/etc/passwd .", OUTSIDE, id="grep-pattern-file-attached"),
    pytest.param("grep --file=/etc/passwd .", OUTSIDE, id="grep-pattern-file-long"),
    pytest.param("grep --fil /etc/passwd .", UNKNOWN_OPTION, id="grep-ambiguous-abbreviation"),
    pytest.param("grep --exclude-from=/etc/passwd x .", OUTSIDE, id="grep-exclude-from-outside"),
    pytest.param("grep --exclude-f /etc/passwd x .", OUTSIDE, id="grep-exclude-from-abbreviated"),
    pytest.param("grep -e x /etc/passwd", OUTSIDE, id="grep-e-then-file-outside"),
    pytest.param("grep x -e /etc/passwd", OUTSIDE, id="grep-e-after-operand"),
    pytest.param("grep -R x .", FOLLOWS, id="grep-R"),
    pytest.param("grep -rR x .", FOLLOWS, id="grep-R-in-cluster"),
    pytest.param("grep --dereference-recursive x .", FOLLOWS, id="grep-dereference-recursive"),
    pytest.param("grep --deref x .", FOLLOWS, id="grep-dereference-abbreviated"),
    pytest.param("grep -r x link", SYMLINK, id="grep-outward-link"),
    pytest.param("grep x filelink", SYMLINK, id="grep-file-link"),
    pytest.param("grep x */secret.txt", "matches `link/secret.txt`", id="grep-glob-through-link"),
    pytest.param("grep /e* a.txt", OUTSIDE, id="grep-unquoted-glob-pattern-outside"),
    pytest.param("grep -k x .", UNKNOWN_OPTION, id="grep-unknown-short"),
    pytest.param("grep --frobnicate x .", UNKNOWN_OPTION, id="grep-unknown-long"),
    pytest.param("grep --count=3 x .", "takes no value", id="grep-flag-with-value"),
    pytest.param("GREP x .", NOT_LISTED, id="grep-uppercase"),
    pytest.param("rg foo /etc", OUTSIDE, id="rg-etc"),
    pytest.param("rg foo ../", OUTSIDE, id="rg-parent"),
    pytest.param("rg --files /etc", OUTSIDE, id="rg-files-outside"),
    pytest.param("rg --files ..", OUTSIDE, id="rg-files-parent"),
    pytest.param("rg -f /etc/passwd .", OUTSIDE, id="rg-pattern-file-outside"),
    pytest.param("rg --ignore-file=/etc/x foo", OUTSIDE, id="rg-ignore-file-outside"),
    pytest.param("rg -g '../*' foo", OUTSIDE, id="rg-glob-climbs"),
    pytest.param("rg -r /etc foo", OUTSIDE, id="rg-replace-is-a-value"),
    pytest.param("rg foo link", SYMLINK, id="rg-outward-link"),
    pytest.param("rg --pre ./evil.sh x", RUNS, id="rg-pre"),
    pytest.param("rg --pre=cat x", RUNS, id="rg-pre-attached"),
    pytest.param("rg --hostname-bin=./x --hyperlink-format=default x", RUNS, id="rg-hostname"),
    pytest.param("rg -z foo", "decompression programs", id="rg-search-zip"),
    pytest.param("rg -L foo", FOLLOWS, id="rg-L"),
    pytest.param("rg -iL foo", FOLLOWS, id="rg-L-in-cluster"),
    pytest.param("rg --follow foo", FOLLOWS, id="rg-follow"),
    pytest.param("rg --fol foo", UNKNOWN_OPTION, id="rg-takes-no-abbreviations"),
    pytest.param("rg --PRE cat foo", UNKNOWN_OPTION, id="rg-uppercase-option"),
    pytest.param("head -n 1 /etc/passwd", OUTSIDE, id="head-outside"),
    pytest.param("tail ../outside/secret.txt", OUTSIDE, id="tail-outside"),
    pytest.param("wc -l link/secret.txt", SYMLINK, id="wc-through-link"),
    pytest.param("sort -o /tmp/x a.txt", OUTSIDE, id="sort-output-outside"),
    pytest.param("sort -o/tmp/x a.txt", OUTSIDE, id="sort-output-attached"),
    pytest.param("sort --output=../x a.txt", OUTSIDE, id="sort-output-long"),
    pytest.param("sort --compress-program=sh a.txt", RUNS, id="sort-compress-program"),
    pytest.param("sort --compress=sh a.txt", RUNS, id="sort-compress-abbreviated"),
    pytest.param("sort --files0-from=list", "reads file names", id="sort-files0-from"),
    pytest.param("uniq a.txt /tmp/out", OUTSIDE, id="uniq-output-outside"),
    pytest.param("cut -f1 /etc/passwd", OUTSIDE, id="cut-outside"),
    pytest.param("diff a.txt /etc/passwd", OUTSIDE, id="diff-outside"),
    pytest.param("diff sub inlink", NO_DEREFERENCE, id="diff-directories"),
    pytest.param("diff -r sub sub", NO_DEREFERENCE, id="diff-recursive"),
    pytest.param("diff --from-file=sub a.txt", NO_DEREFERENCE, id="diff-from-directory"),
    pytest.param("diff -l a.txt b.txt", RUNS, id="diff-paginate-short"),
    pytest.param("diff --pag a.txt b.txt", RUNS, id="diff-paginate"),
    pytest.param("stat /etc/shadow", OUTSIDE, id="stat-outside"),
    pytest.param("stat filelink", SYMLINK, id="stat-file-link"),
    pytest.param("file /etc/passwd", OUTSIDE, id="file-outside"),
    pytest.param("file -f list", "reads file names", id="file-names-from-file"),
    pytest.param("file -z a.txt", "decompression programs", id="file-uncompress"),
    pytest.param("du -sh /", OUTSIDE, id="du-root"),
    pytest.param("du -L sub", FOLLOWS, id="du-dereference"),
    pytest.param("du --dereference sub", FOLLOWS, id="du-dereference-long"),
    pytest.param("tree /", OUTSIDE, id="tree-root"),
    pytest.param("tree -o /tmp/x", OUTSIDE, id="tree-output-outside"),
    pytest.param("tree -l", FOLLOWS, id="tree-follow"),
    pytest.param("tree -R -H x", "runs `tree` again", id="tree-recursive-html"),
    pytest.param("egrep x .", NOT_LISTED, id="egrep-not-by-default"),
    pytest.param("tr a b", NOT_LISTED, id="tr-reads-stdin-only"),
    # --- denied: empty and unknown programs ------------------------------------------------------
    pytest.param("", "empty", id="empty"),
    pytest.param("   ", "empty", id="spaces"),
    pytest.param("\t \t", "empty", id="tabs"),
    pytest.param("curl http://example.com", NOT_LISTED, id="curl"),
    pytest.param("CAT a.txt", NOT_LISTED, id="posix-names-are-case-sensitive"),
    pytest.param("/bin/ls", NOT_LISTED, id="path-to-program"),
    pytest.param("./ls", NOT_LISTED, id="relative-program"),
    pytest.param("ｌｓ", NOT_LISTED, id="fullwidth-program-name"),
    pytest.param("''", NOT_LISTED, id="empty-program-name"),
    pytest.param("git status", NOT_LISTED, id="git"),
    pytest.param("eval ls", NEVER, id="eval"),
    pytest.param("exec ls", NEVER, id="exec"),
    pytest.param("source x.sh", NEVER, id="source"),
    pytest.param(". x.sh", NEVER, id="dot-source"),
    pytest.param("bash -c ls", NEVER, id="bash-c"),
    pytest.param("env ls", NEVER, id="env"),
    pytest.param("sudo ls", NEVER, id="sudo"),
    pytest.param("xargs rm", NEVER, id="xargs"),
    pytest.param("cd ..", NEVER, id="cd"),
    pytest.param("python3 -c 1", NEVER, id="python"),
    pytest.param("Invoke-Expression ls", NEVER, id="invoke-expression"),
    pytest.param("FOO=1 ls", "Environment assignments", id="env-prefix"),
    pytest.param("PATH=/tmp ls", "Environment assignments", id="env-prefix-path"),
    pytest.param("A[1]=x ls", "Environment assignments", id="env-prefix-array"),
    pytest.param("X+=1 ls", "Environment assignments", id="env-prefix-append"),
    # --- denied: sequencing, pipes, background --------------------------------------------------
    pytest.param("ls && rm a.txt", "`&&`", id="and"),
    pytest.param("ls || rm a.txt", "`||`", id="or"),
    pytest.param("ls; rm a.txt", "`;`", id="semicolon"),
    pytest.param("ls ;rm a.txt", "`;`", id="semicolon-attached"),
    pytest.param("ls;;", "`;;`", id="double-semicolon"),
    pytest.param("ls | wc", "`|`", id="pipe"),
    pytest.param("ls|wc", "`|`", id="pipe-attached"),
    pytest.param("ls |& wc", "`|&`", id="pipe-stderr"),
    pytest.param("ls &", "`&` (run in the background)", id="background"),
    pytest.param("ls&rm a.txt", "`&`", id="background-attached"),
    pytest.param(LONG_CHAINED, "`;`", id="long-with-operator-at-end"),
    # --- denied: redirection and here-documents --------------------------------------------------
    pytest.param("echo hi > file", "Redirection `>`", id="redirect-out"),
    pytest.param("echo hi >file", "Redirection `>`", id="redirect-attached"),
    pytest.param("echo hi >> file", "Redirection `>>`", id="redirect-append"),
    pytest.param("cat < a.txt", "Redirection `<`", id="redirect-in"),
    pytest.param("ls 2> err", "Redirection `2>`", id="redirect-stderr"),
    pytest.param("ls 2>&1", "Redirection `2>&`", id="redirect-dup"),
    pytest.param("ls >&2", "Redirection `>&`", id="redirect-dup-out"),
    pytest.param("ls &> out", "Redirection `&>`", id="redirect-both"),
    pytest.param("ls &>> out", "Redirection `&>>`", id="redirect-both-append"),
    pytest.param("ls >| out", "Redirection `>|`", id="redirect-clobber"),
    pytest.param("cat <> a.txt", "Redirection `<>`", id="redirect-read-write"),
    pytest.param("cat <<EOF", "Here-documents", id="heredoc"),
    pytest.param("cat <<-EOF", "Here-documents", id="heredoc-dash"),
    pytest.param("cat <<< hi", "Here-documents", id="herestring"),
    # --- denied: substitutions and expansions ----------------------------------------------------
    pytest.param("cat <(ls)", "Process substitution `<(`", id="process-substitution-in"),
    pytest.param("ls >(cat)", "Process substitution `>(`", id="process-substitution-out"),
    pytest.param("echo $(id)", "Command substitution `$(`", id="command-substitution"),
    pytest.param("echo `id`", "backtick", id="backticks"),
    pytest.param('echo "$(id)"', "Command substitution `$(`", id="substitution-in-quotes"),
    pytest.param('echo "`id`"', "backtick", id="backticks-in-quotes"),
    pytest.param("echo $((1+1))", "Arithmetic", id="arithmetic"),
    pytest.param("cat $HOME/x", "`$HOME`", id="variable"),
    pytest.param("cat ${HOME}/x", "`${...}`", id="variable-braces"),
    pytest.param('cat "$HOME"', "`$HOME`", id="variable-in-double-quotes"),
    pytest.param('rm -rf "$WS"', "`$WS`", id="rm-variable-workspace"),
    pytest.param("cat a$1", "`$1`", id="positional-parameter"),
    pytest.param("ls $", "`$`", id="lone-dollar"),
    pytest.param("cat $'..\\x2f'x", "ANSI-C", id="ansi-c-quoting"),
    pytest.param('cat $"x"', "Locale quoting", id="locale-quoting"),
    pytest.param("ls ~", "Tilde", id="tilde"),
    pytest.param("ls ~/x", "Tilde", id="tilde-path"),
    pytest.param("cat ~root/x", "Tilde", id="tilde-user"),
    pytest.param("ls a~b", "Tilde", id="tilde-inside-word"),
    pytest.param("cat =ls", "`=`", id="zsh-equals-expansion"),
    # --- denied: grouping, comments, history ------------------------------------------------------
    pytest.param("(ls)", "Subshells", id="subshell"),
    pytest.param("ls )", "Subshells", id="close-paren"),
    pytest.param("{ ls; }", "`{`", id="group"),
    pytest.param("ls {a,b}.txt", "`{`", id="brace-expansion"),
    pytest.param("ls a}", "`}`", id="close-brace"),
    pytest.param("ls # rm -rf /", "`#`", id="comment"),
    pytest.param("ls a#b", "`#`", id="hash-in-word"),
    pytest.param("! ls", "`!`", id="bang"),
    pytest.param("ls ^a", "`^`", id="caret"),
    # --- denied: control characters and syntax the lexer does not understand ---------------------
    pytest.param("ls\nrm -rf /", "Newlines", id="newline"),
    pytest.param("ls\rrm", "Newlines", id="carriage-return"),
    pytest.param("ls\x00", "U+0000", id="nul"),
    pytest.param("ls \x1b[31m", "U+001B", id="escape"),
    pytest.param("ls \x0b", "U+000B", id="vertical-tab"),
    pytest.param("ls a\u202eb", "U+202E", id="bidi-override"),
    pytest.param("ls a\u200bb", "U+200B", id="zero-width-space"),
    pytest.param("ls \u2028", "U+2028", id="line-separator"),
    pytest.param("cat 'a", "unbalanced `'`", id="unbalanced-single"),
    pytest.param('cat "a', 'unbalanced `"`', id="unbalanced-double"),
    pytest.param('cat "a\\"', 'unbalanced `"`', id="escaped-closing-quote"),
    pytest.param("cat a\\", "lone `\\`", id="trailing-backslash"),
    pytest.param("x" * 200_000, "the limit is", id="too-long"),
    pytest.param("cat " + "a" * 5_000, "longer than 4096", id="word-too-long"),
    pytest.param("ls -" + "a" * 300, "longer than 256", id="option-too-long"),
    pytest.param("wc --files0-from=list", "reads file names", id="files0-from"),
    pytest.param("wc --files0=list", "reads file names", id="files0-from-abbreviated"),
    pytest.param("cp -rL sub copy", "follows symbolic links", id="cp-dereference-short"),
    pytest.param("cp -r --dereference sub copy", "follows symbolic links", id="cp-dereference"),
    pytest.param("ls -RL", "follows symbolic links", id="ls-dereference"),
    pytest.param(
        "Get-ChildItem -Recurse -FollowSymlink", "follows symbolic links", id="follow-symlink"
    ),
    pytest.param("Get-ChildItem -fol", "follows symbolic links", id="follow-symlink-prefix"),
    # --- denied: paths outside the workspace ----------------------------------------------------
    pytest.param("ls /", OUTSIDE, id="ls-root-of-disk"),
    pytest.param("ls ..", OUTSIDE, id="ls-parent"),
    pytest.param("ls ../", OUTSIDE, id="ls-parent-slash"),
    pytest.param("cat /etc/passwd", OUTSIDE, id="etc-passwd"),
    pytest.param("cat ../outside/secret.txt", OUTSIDE, id="sibling"),
    pytest.param('rm "../x"', OUTSIDE, id="rm-quoted-parent"),
    pytest.param("rm ./a/../../x", OUTSIDE, id="rm-climb-through-name"),
    pytest.param("cat sub/../../x", OUTSIDE, id="climb-through-dir"),
    pytest.param("cat @OUT@/secret.txt", OUTSIDE, id="absolute-outside"),
    pytest.param("cat @WS@/../outside/secret.txt", OUTSIDE, id="absolute-climb"),
    pytest.param("cat @WS@/sub/../../outside/secret.txt", OUTSIDE, id="absolute-deep-climb"),
    pytest.param("cat @WS@-evil/x", OUTSIDE, id="workspace-name-prefix"),
    pytest.param("rm -rf /", OUTSIDE, id="rm-rf-root-of-disk"),
    pytest.param("cp a.txt /tmp", OUTSIDE, id="cp-to-tmp"),
    pytest.param("mv a.txt ..", OUTSIDE, id="mv-to-parent"),
    pytest.param("echo /etc/passwd", OUTSIDE, id="echo-arguments-are-paths-too"),
    pytest.param("rm -- ../x", OUTSIDE, id="after-double-dash"),
    pytest.param("rm -- -rf/../../x", OUTSIDE, id="dash-name-after-double-dash"),
    pytest.param(
        "cp --target-directory=/tmp a.txt", "(in `--target-directory=/tmp`)", id="cp-long"
    ),
    pytest.param("cp -t /tmp a.txt", OUTSIDE, id="cp-t-separate"),
    pytest.param("cp -t/tmp a.txt", "(in `-t/tmp`)", id="cp-t-attached"),
    pytest.param("cp -rt/tmp a.txt", OUTSIDE, id="cp-cluster-attached"),
    pytest.param("mv --target-directory=.. a.txt", OUTSIDE, id="mv-long-parent"),
    pytest.param("touch --reference=/etc/passwd a.txt", OUTSIDE, id="touch-reference-outside"),
    pytest.param("touch -r/etc/passwd a.txt", OUTSIDE, id="touch-r-attached"),
    # --- denied: removing the workspace itself ---------------------------------------------------
    pytest.param("rm -rf .", ROOT, id="rm-rf-dot"),
    pytest.param("rm -r ./", ROOT, id="rm-r-dot-slash"),
    pytest.param("rm -rf ./.", ROOT, id="rm-dot-dot-slash-dot"),
    pytest.param("rm -rf @WS@", ROOT, id="rm-absolute-workspace"),
    pytest.param("rm -rf @WS@/", ROOT, id="rm-absolute-workspace-slash"),
    pytest.param("rm -rf sub/..", ROOT, id="rm-dir-dotdot"),
    pytest.param("rm -rf ''", ROOT, id="rm-empty-name"),
    pytest.param("rm -rf -- .", ROOT, id="rm-after-double-dash"),
    pytest.param("del .", ROOT, id="del-dot"),
    pytest.param("Remove-Item .", ROOT, id="remove-item-dot"),
    pytest.param("Remove-Item -Path . -Recurse", ROOT, id="remove-item-path-dot"),
    pytest.param("Remove-Item -Path:.", ROOT, id="remove-item-colon-dot"),
    # --- denied: globs ---------------------------------------------------------------------------
    pytest.param("ls ../*", OUTSIDE, id="glob-parent"),
    pytest.param("ls /*", OUTSIDE, id="glob-disk-root"),
    pytest.param("ls /e*", OUTSIDE, id="glob-absolute"),
    pytest.param("ls .*", "can reach `..`", id="glob-dot-star"),
    pytest.param("ls .?", "can reach `..`", id="glob-dot-question"),
    pytest.param("ls ..*", "can reach `..`", id="glob-dotdot-star"),
    pytest.param("ls sub/.*", "can reach `..`", id="glob-dot-star-in-dir"),
    pytest.param("ls [.]*", "can reach `..`", id="glob-bracket-dot"),
    pytest.param("ls */..", "can reach `..`", id="glob-then-dotdot"),
    pytest.param("ls */../..", "can reach `..`", id="glob-then-climb"),
    pytest.param("ls link/*", SYMLINK, id="glob-under-link"),
    pytest.param("cat */secret.txt", "matches `link/secret.txt`", id="glob-through-link"),
    pytest.param("rm -rf *", "link`, which leads to", id="rm-star-with-outward-link"),
    pytest.param("ls ～/x", "starts with `~`", id="fullwidth-tilde"),
    # --- denied: symbolic links ------------------------------------------------------------------
    pytest.param("cat link/secret.txt", SYMLINK, id="cat-through-link"),
    pytest.param("cat filelink", SYMLINK, id="cat-file-link"),
    pytest.param("rm link/x", SYMLINK, id="rm-through-link"),
    pytest.param("rm link", SYMLINK, id="rm-outward-link-itself"),
    pytest.param("cp a.txt link/", SYMLINK, id="cp-into-link"),
    pytest.param("cp -tlink a.txt", SYMLINK, id="cp-attached-link-target"),
    pytest.param("cat @WS@/link/secret.txt", SYMLINK, id="absolute-through-link"),
    # --- denied: Windows paths -------------------------------------------------------------------
    pytest.param("cat C:\\Windows\\win.ini", "Windows drive", id="drive-unquoted"),
    pytest.param("cat 'C:\\Windows\\win.ini'", "Windows drive", id="drive-quoted"),
    pytest.param("cat C:/Windows/win.ini", "Windows drive", id="drive-forward-slashes"),
    pytest.param("ls C:", "Windows drive", id="drive-relative"),
    pytest.param("del 'C:\\Users\\x'", "Windows drive", id="del-drive"),
    pytest.param("ls '..\\..'", "(read as `../..`)", id="backslash-climb-quoted"),
    pytest.param("ls ..\\..", "`..`", id="backslash-climb-unquoted"),
    pytest.param("cat '..\\outside\\secret.txt'", OUTSIDE, id="backslash-sibling"),
    pytest.param("cat sub\\..\\..\\x", OUTSIDE, id="backslash-climb-through-dir"),
    pytest.param("cat 'sub\\..\\..\\outside\\secret.txt'", OUTSIDE, id="backslash-quoted-deep"),
    pytest.param("cat '\\\\server\\share\\x'", "network (UNC)", id="unc-quoted"),
    pytest.param("cat //server/share", "network (UNC)", id="unc-forward"),
    pytest.param("move a.txt '\\\\server\\share'", "network (UNC)", id="move-to-unc"),
    pytest.param("copy a.txt ..\\b.txt", OUTSIDE, id="copy-backslash-parent"),
    pytest.param("ls ...", "only dots and spaces", id="three-dots"),
    pytest.param("ls '.. '", "only dots and spaces", id="dots-and-space"),
    pytest.param("Remove-Item -Path ..\\x", OUTSIDE, id="remove-item-backslash-parent"),
    pytest.param("Remove-Item -Path:..\\x", OUTSIDE, id="remove-item-colon-parent"),
    pytest.param("Remove-Item -Recurse -Force C:\\", "lone `\\`", id="remove-item-drive-root"),
    pytest.param("Remove-Item -Recurse -Force 'C:\\'", "Windows drive", id="remove-item-c"),
    pytest.param("Remove-Item -Path:C:\\x", "Windows drive", id="remove-item-colon-drive"),
    pytest.param("Remove-Item -LiteralPath '~\\x'", "starts with `~`", id="remove-item-tilde"),
    pytest.param("Get-ChildItem Env:", "PowerShell drive `Env:`", id="powershell-env-drive"),
    pytest.param("Remove-Item HKLM:\\Software", "PowerShell drive", id="powershell-registry"),
    pytest.param("Copy-Item a.txt -Destination ..\\x", OUTSIDE, id="copy-item-parent"),
    # --- denied: Unicode look-alikes of `.` and `/` ----------------------------------------------
    pytest.param("cat ․․/outside/secret.txt", "(read as `../outside", id="one-dot-leaders"),
    pytest.param("cat ‥/x", "(read as `../x`)", id="two-dot-leader"),
    pytest.param("cat ..∕outside∕secret.txt", "(read as `../outside", id="division-slash"),
    pytest.param("cat ..⁄x", "(read as `../x`)", id="fraction-slash"),
    pytest.param("cat ．．/x", "(read as `../x`)", id="fullwidth-full-stops"),
    pytest.param("cat ..／x", "(read as `../x`)", id="fullwidth-solidus"),
    pytest.param("cat ..＼x", OUTSIDE, id="fullwidth-reverse-solidus"),
    pytest.param("ls a；rm -rf ／", OUTSIDE, id="fullwidth-root"),
]


@pytest.mark.parametrize(("command", "expected"), BASH_CASES)
def test_bash_command(workspace: Path, command: str, expected: str | None) -> None:
    decision = evaluate_tool_call(
        "Bash", {"command": fill(command, workspace)}, make_config(workspace)
    )
    assert_decision(decision, expected)


TOOL_CASES = [
    # --- allowed ---------------------------------------------------------------------------------
    pytest.param("Read", {"file_path": "a.txt"}, None, id="read-relative"),
    pytest.param("Read", {"file_path": "@WS@/a.txt"}, None, id="read-absolute"),
    pytest.param("Read", {"file_path": "@WS@/sub/c.txt"}, None, id="read-nested"),
    pytest.param("Read", {"file_path": "@WS@/inlink/c.txt"}, None, id="read-inward-link"),
    pytest.param("Read", {"file_path": "@WS@/sub/../a.txt"}, None, id="read-dotdot-inside"),
    pytest.param("Write", {"file_path": "@WS@/new/deep/f.md"}, None, id="write-new-tree"),
    pytest.param("Write", {"file_path": "@WS@/笔记.md"}, None, id="write-chinese"),
    pytest.param("Edit", {"file_path": "@WS@/a.txt"}, None, id="edit"),
    pytest.param("MultiEdit", {"file_path": "@WS@/a.txt"}, None, id="multi-edit"),
    pytest.param("NotebookEdit", {"notebook_path": "@WS@/nb.ipynb"}, None, id="notebook-edit"),
    pytest.param("Grep", {"pattern": "x"}, None, id="grep-default-path"),
    pytest.param("Grep", {"pattern": "x", "path": "@WS@/sub"}, None, id="grep-subdir"),
    pytest.param("LS", {"path": "@WS@"}, None, id="ls-tool"),
    pytest.param("Glob", {"pattern": "**/*.md"}, None, id="glob-tool"),
    pytest.param("Glob", {"pattern": "*.txt", "path": "@WS@/sub"}, None, id="glob-tool-path"),
    pytest.param("Glob", {"pattern": "@WS@/**/*.txt"}, None, id="glob-tool-absolute-inside"),
    pytest.param("Glob", {"pattern": ".*"}, None, id="glob-tool-dotfiles"),
    pytest.param("Glob", {"pattern": "{sub,inlink}/*.txt"}, None, id="glob-tool-braces"),
    pytest.param("mcp__memory__search", {"query": "x"}, None, id="mcp-prefix"),
    pytest.param("mcp__memory__remember", {}, None, id="mcp-prefix-other"),
    pytest.param("WebFetch", {"url": "https://example.com"}, None, id="webfetch"),
    pytest.param("TodoWrite", {"todos": []}, None, id="todowrite"),
    # --- denied ----------------------------------------------------------------------------------
    pytest.param("Read", {"file_path": "/etc/passwd"}, OUTSIDE, id="read-etc"),
    pytest.param("Read", {"file_path": "../outside/secret.txt"}, OUTSIDE, id="read-relative-out"),
    pytest.param("Read", {"file_path": "@OUT@/secret.txt"}, OUTSIDE, id="read-sibling"),
    pytest.param("Read", {"file_path": "@WS@/../outside/secret.txt"}, OUTSIDE, id="read-climb"),
    pytest.param("Read", {"file_path": "@WS@/link/secret.txt"}, SYMLINK, id="read-through-link"),
    pytest.param("Read", {"file_path": "@WS@/filelink"}, SYMLINK, id="read-file-link"),
    pytest.param("Read", {"file_path": "~/.ssh/id_rsa"}, "starts with `~`", id="read-tilde"),
    pytest.param("Read", {"file_path": "C:\\Windows\\x"}, "Windows drive", id="read-drive"),
    pytest.param("Read", {"file_path": "..\\outside\\secret.txt"}, OUTSIDE, id="read-backslash"),
    pytest.param("Read", {"file_path": "․․/outside/secret.txt"}, OUTSIDE, id="read-lookalike"),
    pytest.param("Read", {}, "needs a `file_path`", id="read-missing-path"),
    pytest.param("Read", {"file_path": 3}, "needs a `file_path`", id="read-path-not-string"),
    pytest.param("Read", {"file_path": ""}, "needs a `file_path`", id="read-empty-path"),
    pytest.param("Write", {"file_path": "@WS@/link/new.txt"}, SYMLINK, id="write-through-link"),
    pytest.param("Write", {"file_path": "@WS@/../x.txt"}, OUTSIDE, id="write-climb"),
    pytest.param("Edit", {"file_path": "@WS@/link/secret.txt"}, SYMLINK, id="edit-through-link"),
    pytest.param("MultiEdit", {"file_path": "/etc/hosts"}, OUTSIDE, id="multi-edit-out"),
    pytest.param("NotebookEdit", {"notebook_path": "../nb.ipynb"}, OUTSIDE, id="notebook-out"),
    pytest.param("Grep", {"pattern": "x", "path": "/etc"}, OUTSIDE, id="grep-etc"),
    pytest.param("Grep", {"pattern": "x", "path": "@WS@/link"}, SYMLINK, id="grep-link"),
    pytest.param("LS", {"path": ".."}, OUTSIDE, id="ls-tool-parent"),
    pytest.param("Glob", {"pattern": "../**"}, "climbs out", id="glob-tool-parent"),
    pytest.param("Glob", {"pattern": "**/../../x"}, "climbs out", id="glob-tool-climb"),
    pytest.param("Glob", {"pattern": "{..,sub}/*"}, "climbs out", id="glob-tool-brace-climb"),
    pytest.param("Glob", {"pattern": "..\\*"}, "climbs out", id="glob-tool-backslash"),
    pytest.param("Glob", {"pattern": "․․/*"}, "climbs out", id="glob-tool-lookalike"),
    pytest.param("Glob", {"pattern": "/etc/*"}, OUTSIDE, id="glob-tool-absolute-out"),
    pytest.param("Glob", {"pattern": "link/**"}, SYMLINK, id="glob-tool-link"),
    pytest.param("Glob", {"pattern": "~/*"}, "starts with `~`", id="glob-tool-tilde"),
    pytest.param("Glob", {"pattern": "*", "path": "/etc"}, OUTSIDE, id="glob-tool-path-out"),
    pytest.param("Glob", {"path": "@WS@"}, "needs a `pattern`", id="glob-tool-no-pattern"),
    pytest.param("Bash", {}, "needs a `command`", id="bash-missing-command"),
    pytest.param("Bash", {"command": ["ls"]}, "needs a `command`", id="bash-command-list"),
    pytest.param("WebHack", {}, "CLAUDE_MEMORY_ALLOWED_TOOLS", id="unknown-tool"),
    pytest.param("mcp__other__x", {}, "CLAUDE_MEMORY_ALLOWED_TOOLS", id="other-mcp-server"),
    pytest.param("mcp__memoryX", {}, "CLAUDE_MEMORY_ALLOWED_TOOLS", id="mcp-prefix-is-exact"),
    pytest.param("webfetch", {}, "CLAUDE_MEMORY_ALLOWED_TOOLS", id="tool-names-are-exact"),
    pytest.param("KillShell", {}, "CLAUDE_MEMORY_ALLOWED_TOOLS", id="killshell"),
]


@pytest.mark.parametrize(("tool", "tool_input", "expected"), TOOL_CASES)
def test_tool_call(
    workspace: Path, tool: str, tool_input: dict[str, object], expected: str | None
) -> None:
    filled = {k: fill(v, workspace) if isinstance(v, str) else v for k, v in tool_input.items()}
    assert_decision(evaluate_tool_call(tool, filled, make_config(workspace)), expected)


DENIED_TOOLS_CASES = [
    pytest.param(("mcp__memory__forget",), "mcp__memory__forget", id="exact-beats-allowed-prefix"),
    pytest.param(("mcp__memory__*",), "mcp__memory__search", id="prefix-beats-allowed-prefix"),
    pytest.param(("WebFetch",), "WebFetch", id="exact-beats-exact"),
    pytest.param(("*",), "TodoWrite", id="star-denies-everything"),
    pytest.param(("Bash",), "Bash", id="bash-can-be-turned-off"),
    pytest.param(("Read",), "Read", id="file-tools-can-be-turned-off"),
]


@pytest.mark.parametrize(("denied", "tool"), DENIED_TOOLS_CASES)
def test_denied_tools_win_over_allowed_tools(
    workspace: Path, denied: tuple[str, ...], tool: str
) -> None:
    config = make_config(
        workspace, allowed_tools=(*DEFAULT_ALLOWED_TOOLS, tool), denied_tools=denied
    )
    tool_input = {"command": "ls", "file_path": "a.txt"}
    assert_decision(evaluate_tool_call(tool, tool_input, config), "CLAUDE_MEMORY_DENIED_TOOLS")


SYMLINK_ESCAPES = [
    pytest.param("Read", {"file_path": "link/secret.txt"}, id="read"),
    pytest.param("Write", {"file_path": "link/new.txt"}, id="write"),
    pytest.param("Edit", {"file_path": "filelink"}, id="edit"),
    pytest.param("Bash", {"command": "cat link/secret.txt"}, id="bash-cat"),
    pytest.param("Bash", {"command": "rm link/x"}, id="bash-rm"),
    pytest.param("Bash", {"command": "cat sub/../link/secret.txt"}, id="bash-cat-roundabout"),
]


@pytest.mark.parametrize(("tool", "tool_input"), SYMLINK_ESCAPES)
def test_link_inside_workspace_pointing_outside_is_refused(
    workspace: Path, tool: str, tool_input: dict[str, str]
) -> None:
    decision = evaluate_tool_call(tool, tool_input, make_config(workspace))
    assert isinstance(decision, Denied)
    assert str(workspace.parent / "outside") in decision.reason


def test_rm_star_is_allowed_when_every_child_is_inside(tmp_path: Path) -> None:
    ws = tmp_path / "clean"
    (ws / "sub").mkdir(parents=True)
    (ws / "a.txt").write_text("a", encoding="utf-8")
    (ws / "inlink").symlink_to(ws / "sub", target_is_directory=True)
    config = make_config(ws.resolve())
    assert evaluate_tool_call("Bash", {"command": "rm -rf *"}, config) == Allowed()
    assert evaluate_tool_call("Bash", {"command": "rm -rf ./*"}, config) == Allowed()


def test_allowlist_comes_from_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_MEMORY_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("CLAUDE_MEMORY_BASH_ALLOWLIST", "ls,cat")
    monkeypatch.setenv("CLAUDE_MEMORY_ALLOWED_TOOLS", "mcp__memory__*")
    monkeypatch.setenv("CLAUDE_MEMORY_DENIED_TOOLS", "mcp__memory__forget")
    config = PolicyConfig.from_settings(Settings())

    assert config.workspace == (tmp_path / "ws").resolve()
    assert config.bash_allowlist == frozenset({"ls", "cat"})
    assert evaluate_tool_call("Bash", {"command": "ls"}, config) == Allowed()
    assert_decision(evaluate_tool_call("Bash", {"command": "rm a"}, config), "(cat, ls)")
    assert evaluate_tool_call("mcp__memory__search", {}, config) == Allowed()
    assert_decision(evaluate_tool_call("WebFetch", {}, config), "CLAUDE_MEMORY_ALLOWED_TOOLS")
    assert_decision(
        evaluate_tool_call("mcp__memory__forget", {}, config), "CLAUDE_MEMORY_DENIED_TOOLS"
    )


def test_default_settings_give_the_documented_lists(tmp_path: Path) -> None:
    config = PolicyConfig.from_settings(Settings(home=tmp_path / "home"))
    assert config.bash_allowlist == frozenset(DEFAULT_BASH_ALLOWLIST)
    assert config.allowed_tools == DEFAULT_ALLOWED_TOOLS
    assert config.denied_tools == ()
    assert config.workspace == (tmp_path / "home" / "workspace").resolve()


def test_relative_workspace_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="not absolute"):
        make_config(Path("relative/ws"))


def test_workspace_reached_through_a_link_is_the_same_workspace(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    config = make_config(tmp_path / "alias")
    assert evaluate_tool_call("Read", {"file_path": str(real / "a.txt")}, config) == Allowed()
    command = f"cat {tmp_path / 'alias' / 'a.txt'}"
    assert evaluate_tool_call("Bash", {"command": command}, config) == Allowed()


SEARCH_ALIAS_CASES = [
    pytest.param("egrep -rn 'a|b' .", None, id="egrep"),
    pytest.param("fgrep -e '/etc' a.txt", None, id="fgrep"),
    pytest.param("egrep -r x /etc", OUTSIDE, id="egrep-outside"),
    pytest.param("fgrep -R x .", FOLLOWS, id="fgrep-dereference"),
]


@pytest.mark.parametrize(("command", "expected"), SEARCH_ALIAS_CASES)
def test_egrep_and_fgrep_read_arguments_like_grep_when_allowlisted(
    workspace: Path, command: str, expected: str | None
) -> None:
    config = make_config(workspace, allowlist=("egrep", "fgrep"))
    assert_decision(evaluate_tool_call("Bash", {"command": command}, config), expected)


def test_find_stays_read_only_even_with_a_later_allowlist_entry(workspace: Path) -> None:
    # `find` left the never-allowed set for its own parser; `xargs` (which would run what find
    # prints) stays there even when someone adds it.
    config = make_config(workspace, allowlist=(*DEFAULT_BASH_ALLOWLIST, "xargs"))
    assert_decision(evaluate_tool_call("Bash", {"command": "xargs rm"}, config), NEVER)
    assert_decision(evaluate_tool_call("Bash", {"command": "find . -type f"}, config), None)


def test_reason_lists_the_allowlist(workspace: Path) -> None:
    decision = evaluate_tool_call("Bash", {"command": "curl x"}, make_config(workspace))
    assert isinstance(decision, Denied)
    assert decision.reason.startswith("`curl` is not on the Bash allowlist (")
    assert "ls" in decision.reason and "Remove-Item" in decision.reason
