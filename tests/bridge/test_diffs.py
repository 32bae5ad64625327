"""What an Edit, MultiEdit or Write approval card shows: the change, as a capped diff."""

from __future__ import annotations

from bridge.diffs import DIFF_LINES, diff_markdown, file_to_read, tool_diff
from bridge.feishu.cards import approval_card
from bridge.render import card_breaches


def test_an_edit_shows_the_lines_it_removes_and_adds() -> None:
    diff = tool_diff(
        "Edit",
        {"file_path": "/w/app.py", "old_string": "a = 1\nb = 2\n", "new_string": "a = 1\nb = 3\n"},
    )
    assert diff is not None
    assert diff.splitlines()[:2] == ["--- /w/app.py", "+++ /w/app.py"]
    assert "-b = 2" in diff and "+b = 3" in diff and " a = 1" in diff


def test_a_multiedit_shows_every_edit_under_one_file_header() -> None:
    edits = [{"old_string": "x", "new_string": "y"}, {"old_string": "p", "new_string": "q"}]
    diff = tool_diff("MultiEdit", {"file_path": "f.txt", "edits": edits})
    assert diff is not None
    assert diff.count("--- f.txt") == 1
    assert all(line in diff.splitlines() for line in ("-x", "+y", "-p", "+q"))


def test_a_write_over_a_file_diffs_against_what_is_there_and_a_new_file_against_nothing() -> None:
    assert file_to_read("Write", {"file_path": "notes.md"}) == "notes.md"
    assert file_to_read("Edit", {"file_path": "notes.md"}) is None
    over = tool_diff("Write", {"file_path": "notes.md", "content": "one\ntwo\n"}, "one\n")
    assert over is not None and "+two" in over and "+one" not in over
    new = tool_diff("Write", {"file_path": "notes.md", "content": "one\n"})
    assert new is not None and new.startswith("--- /dev/null") and "+one" in new


def test_a_huge_write_is_capped_and_its_card_stays_within_the_limits() -> None:
    content = "".join(f"line {i} {'字' * 30} ```\n" for i in range(5000))
    diff = tool_diff("Write", {"file_path": "big.txt", "content": content})
    assert diff is not None
    assert len(diff.splitlines()) <= DIFF_LINES + 1 and diff.splitlines()[-1].startswith("… (+")
    card = approval_card("zh", "Write", "Write `big.txt`", 2, "nonce", diff)
    assert card_breaches(card) == ()
    fenced = diff_markdown(diff)
    assert fenced.startswith("````diff\n")  # longer than the backticks inside


def test_other_tools_have_no_diff() -> None:
    assert tool_diff("Bash", {"command": "ls"}) is None
