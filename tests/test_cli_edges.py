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
    with subprocess.Popen(
        [*command, "install", "claude-code", "--dry-run"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # before the command has written anything
        err = process.stderr.read().decode("utf-8", "replace")
        code = process.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert code == 141
