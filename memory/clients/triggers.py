"""When a client session's L2 summary (`sessions/<session id>.md`) is written now.

Issue #19's trigger points, decided in one place (`summary_trigger`, pure, table-tested in
tests/hooks/test_summary_triggers.py): the user asks to remember something (says so in so many
words, "记住：…", "remember that …", or the capture rules of `memory.loop.entities` found a
decision or preference in the prompt), a `git commit` ran
through the Bash tool, the context is about to be compacted or was just compacted, the session
ends (for any reason: `/clear` ends the old session with `reason=clear` before the new one
starts, which is how a cleared session gets its summary: the new session's start does not say
which session it replaces). The summary file is per session id, so each trigger overwrites it.

Standard library only: the hook process decides with it before opening anything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from memory._patterns import lazy_pattern

SummaryTrigger = Literal["remember", "commit", "compact", "clear", "end"]

_GIT_COMMIT: Final = lazy_pattern(  # a tool use's, not a prompt's: compiled when first used
    # `git commit`, also with git's own options in between (`git -C repo commit`,
    # `git -c user.name=x commit`), at the start of the command or after a shell separator
    r"(?:^|[;&|(]\s*|\bthen\s+|\bdo\s+)git(?:\s+-[Cc]\s+\S+|\s+--?[\w-]+(?:=\S+)?)*\s+commit(?![\w-])"
)


# A sentence that starts by asking to keep something ("我记不住", "I can't remember the flag"
# and "记住了" do not ask).
_ASKS_TO_REMEMBER: Final = re.compile(
    r"(?:^|[。！？!?.\n]\s*)(?:请你?|帮我|麻烦你?|你)?(?:记住|记一下|记下来?|别忘了|不要忘了)(?![了吗没])"
    r"|(?:^|[.!?\n]\s*)(?:please\s+)?(?:remember|don'?t\s+forget)\b(?!\s+(?:when|if|how|what)\b)",
    re.IGNORECASE,
)


def asks_to_remember(prompt: str) -> bool:
    """The user asks, in so many words, that something be remembered."""
    return bool(_ASKS_TO_REMEMBER.search(prompt.strip()))


def is_git_commit(command: str) -> bool:
    """A shell command that makes a git commit (`git commit ...`, `git -C x commit`, after
    `&&`, `;`, `|`), not one that merely mentions it (`echo "git commit"`, `git log`)."""
    return bool(_GIT_COMMIT().search(_without_quotes(command)))


def _without_quotes(command: str) -> str:
    return re.sub(r"'[^']*'|\"(?:\\.|[^\"\\])*\"", "''", command)


def _failed(response: Any) -> bool:
    """The tool's answer says the command failed (a commit that did not happen)."""
    if not isinstance(response, Mapping):
        return False
    if response.get("interrupted") is True or response.get("is_error") is True:
        return True
    code = response.get("exit_code", response.get("exitCode", response.get("returnCode")))
    return isinstance(code, int) and not isinstance(code, bool) and code != 0


def summary_trigger(
    event: str, payload: Mapping[str, Any], *, captured: bool = False
) -> SummaryTrigger | None:
    """The trigger point this hook call is, or None. `captured`: the capture rules found
    something worth keeping in this prompt (user-prompt-submit only)."""
    match event:
        case "user-prompt-submit":
            prompt = payload.get("prompt")
            asked = isinstance(prompt, str) and asks_to_remember(prompt)
            return "remember" if captured or asked else None
        case "post-tool-use":
            tool_input = payload.get("tool_input")
            if payload.get("tool_name") != "Bash" or not isinstance(tool_input, Mapping):
                return None
            command = tool_input.get("command")
            if not isinstance(command, str) or not is_git_commit(command):
                return None
            return None if _failed(payload.get("tool_response")) else "commit"
        case "pre-compact" | "post-compact":
            return "compact"
        case "session-end":
            return "clear" if payload.get("reason") == "clear" else "end"
    return None
