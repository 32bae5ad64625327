"""The policy's "ask" tier: a call the rules would allow, of a tool named in `ask_tools`, waits
for a person; a refusal always wins over asking, and nothing else is asked about."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.policy import Allowed, Ask, Denied, PolicyConfig, evaluate_tool_call

ASK_TOOLS = ("WebFetch", "mcp__github__*", "Write", "Bash")


def config(workspace: Path, *, denied: tuple[str, ...] = ()) -> PolicyConfig:
    return PolicyConfig(
        workspace=workspace,
        bash_allowlist=frozenset({"ls"}),
        allowed_tools=("WebFetch", "WebSearch", "mcp__github__*"),
        denied_tools=denied,
        ask_tools=ASK_TOOLS,
    )


@pytest.mark.parametrize(
    ("tool", "tool_input", "denied", "expected"),
    [
        # allowed and named in ask_tools: asked
        ("WebFetch", {"url": "https://example.com"}, (), "ask"),
        ("mcp__github__create_issue", {"title": "x"}, (), "ask"),
        ("Write", {"file_path": "@WS@/a.txt", "content": "x"}, (), "ask"),
        ("Bash", {"command": "ls"}, (), "ask"),
        # allowed and not named: allowed as before
        ("WebSearch", {"query": "x"}, (), "allow"),
        ("Read", {"file_path": "@WS@/a.txt"}, (), "allow"),
        # refused by the rules: refused, never asked (asking cannot widen the fence)
        ("Write", {"file_path": "/etc/passwd", "content": "x"}, (), "deny"),
        ("Bash", {"command": "curl http://example.com"}, (), "deny"),
        ("Bash", {"command": "ls; rm -rf @WS@"}, (), "deny"),
        ("mcp__other__x", {}, (), "deny"),
        # turned off: refused even though named in ask_tools
        ("WebFetch", {"url": "https://example.com"}, ("WebFetch",), "deny"),
        ("mcp__github__create_issue", {}, ("mcp__github__*",), "deny"),
    ],
)
def test_ask_tier(
    tmp_path: Path, tool: str, tool_input: dict[str, str], denied: tuple[str, ...], expected: str
) -> None:
    workspace = tmp_path.resolve()
    (workspace / "a.txt").write_text("x", encoding="utf-8")
    filled = {k: v.replace("@WS@", str(workspace)) for k, v in tool_input.items()}
    decision = evaluate_tool_call(tool, filled, config(workspace, denied=denied))
    match decision:
        case Ask(reason=reason):
            assert expected == "ask", reason
            assert f"`{tool}`" in reason and reason.endswith(".")
        case Allowed():
            assert expected == "allow"
        case Denied(reason=reason):
            assert expected == "deny", reason


def test_without_ask_tools_nothing_is_asked(tmp_path: Path) -> None:
    plain = PolicyConfig(
        workspace=tmp_path.resolve(),
        bash_allowlist=frozenset({"ls"}),
        allowed_tools=("WebFetch",),
        denied_tools=(),
    )
    assert evaluate_tool_call("WebFetch", {"url": "https://example.com"}, plain) == Allowed()
