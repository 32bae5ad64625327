"""Which files an answer names, and which of them may leave the workspace for the chat."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.outputs import (
    FILE_BYTES,
    Named,
    Outgoing,
    Refused,
    named_files,
    read_checked,
    resolve,
)


def test_an_answer_names_workspace_paths_but_not_web_addresses_anchors_or_code() -> None:
    answer = (
        "See ![chart](out/chart.png), [data](out/data.csv) and [again](out/data.csv).\n"
        "[web](https://x.y/a.png) [mail](mailto:a@b.c) [top](#top)\n"
        "```\n![in code](out/code.png)\n```\n"
    )
    assert named_files(answer) == [
        Named("chart", "out/chart.png", as_image=True),
        Named("data", "out/data.csv", as_image=False),
    ]


def test_only_regular_files_inside_the_workspace_may_go(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "out").mkdir(parents=True)
    (workspace / "out" / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (workspace / "out" / "data.csv").write_text("a,b\n")
    (workspace / "out" / "empty.txt").write_text("")
    (tmp_path / "secret.txt").write_text("secret")
    (workspace / "out" / "link.txt").symlink_to(tmp_path / "secret.txt")
    (workspace / "out" / "inner.txt").symlink_to(workspace / "out" / "data.csv")

    def why(target: str) -> str:
        found = resolve(workspace, Named(target, target, as_image=False))
        return found.why if isinstance(found, Refused) else found.kind

    assert why("out/chart.png") == "image"
    assert why("out/data.csv") == "file"
    assert why(str(workspace / "out" / "data.csv")) == "file"  # absolute, inside
    assert why("out/inner.txt") == "file"  # a symlink that stays inside
    assert why("../secret.txt") == "outside"
    assert why("out/../out/data.csv") == "outside"  # any `..` is refused
    assert why(str(tmp_path / "secret.txt")) == "outside"
    assert why("out/link.txt") == "outside"  # a symlink out
    assert why("out") == "not a file"
    assert why("out/empty.txt") == "empty"
    assert why("out/nothing.txt") == "missing"


def test_a_big_image_goes_as_a_file_and_a_file_over_30_mb_not_at_all(tmp_path: Path) -> None:
    (tmp_path / "big.png").write_bytes(b"\x89PNG" + b"\0" * (11 * 1024 * 1024))
    (tmp_path / "huge.bin").write_bytes(b"\0" * (FILE_BYTES + 1))
    (tmp_path / "report.pdf").write_bytes(b"%PDF-1.4")
    big = resolve(tmp_path, Named("big", "big.png", as_image=True))
    assert isinstance(big, Outgoing) and (big.kind, big.file_type) == ("file", "stream")
    report = resolve(tmp_path, Named("r", "report.pdf", as_image=False))
    assert isinstance(report, Outgoing) and report.file_type == "pdf"
    huge = resolve(tmp_path, Named("h", "huge.bin", as_image=False))
    assert isinstance(huge, Refused) and huge.why == "too large"


def test_a_file_swapped_for_another_after_the_check_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "data.csv").write_text("a,b\n")
    (tmp_path / "secret.txt").write_text("secret")
    found = resolve(tmp_path, Named("data", "data.csv", as_image=False))
    assert isinstance(found, Outgoing) and read_checked(found) == b"a,b\n"
    (tmp_path / "data.csv").unlink()
    (tmp_path / "data.csv").symlink_to(tmp_path / "secret.txt")  # swapped after the check
    with pytest.raises(OSError):
        read_checked(found)
