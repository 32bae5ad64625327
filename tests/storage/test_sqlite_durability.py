"""State databases (storage/sqlite.py) keep every commit when the process dies right after it:
WAL with `synchronous=NORMAL` syncs at checkpoints, and a process crash cannot undo a commit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from storage.sqlite import SQLiteDB

REPO = Path(__file__).resolve().parents[2]


def test_commits_survive_a_process_killed_right_after_them(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    child = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from storage.sqlite import SQLiteDB
        db = SQLiteDB(Path({str(path)!r}))
        with db.write() as conn:
            conn.execute("CREATE TABLE t (n INTEGER)")
        for n in range(50):
            with db.write() as conn:
                conn.execute("INSERT INTO t VALUES (?)", (n,))
        os.kill(os.getpid(), signal.SIGKILL)  # no close, no checkpoint, no exit handler
        """
    )
    done = subprocess.run([sys.executable, "-c", child], cwd=REPO, check=False)
    assert done.returncode == -9
    assert Path(f"{path}-wal").exists()  # the commits were still in the WAL, not checkpointed
    db = SQLiteDB(path)
    try:
        assert [r[0] for r in db.read("SELECT n FROM t ORDER BY n")] == list(range(50))
    finally:
        db.close()
