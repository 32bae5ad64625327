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
    pytest.param("find . -delete", NEVER, id="find"),
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


def test_reason_lists_the_allowlist(workspace: Path) -> None:
    decision = evaluate_tool_call("Bash", {"command": "curl x"}, make_config(workspace))
    assert isinstance(decision, Denied)
    assert decision.reason.startswith("`curl` is not on the Bash allowlist (")
    assert "ls" in decision.reason and "Remove-Item" in decision.reason
