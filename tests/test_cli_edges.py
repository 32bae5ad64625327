"""The `claude-memory` command at its edges: how it ends when its reader goes away."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path: Path) -> None:
    # `claude-memory install claude-code --dry-run | head -5` ended in a BrokenPipeError
    # traceback; now it ends quietly with 141, as a shell tool killed by SIGPIPE would.
    command = [str(Path(sys.executable).parent / "claude-memory"), "--home", str(tmp_path)]
    env = {**os.environ, "HOME": str(tmp_path / "user")}
    # the reader is gone before the command has written anything: its read end is closed
    # before it starts (closing it after the start lost the race on a loaded machine, where
    # the whole answer fitted in the pipe and the command ended with 0)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        with subprocess.Popen(
            [*command, "install", "claude-code", "--dry-run"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=env,
        ) as process:
            os.close(write_end)
            write_end = -1
            assert process.stderr is not None
            err = process.stderr.read().decode("utf-8", "replace")
            code = process.wait(timeout=60)
    finally:
        if write_end >= 0:
            os.close(write_end)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert code == 141
