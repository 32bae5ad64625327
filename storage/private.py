"""The home is private on disk: folders 0700, files 0600.

Conversations, memories and logs live under the home, so nobody but its owner may read them.
Two mechanisms, both cheap enough for every start:

* `private_process()` sets the umask to 0o077 for the whole process, so everything the process
  (and the Claude CLI and hooks it starts, which inherit the umask) creates from now on is
  private. Every entry point calls it first: `cli.run` and the app's lifespan.
* `tighten_home(home)` narrows a home created before this rule (or by hand): the home and its
  direct entries, nothing deeper, so a start never walks 100k note files. Once the home is 0700
  nobody else can reach what is inside, whatever its mode; `claude-memory doctor` lists the
  deeper entries that are still wider (`too_wide`) and prints the `chmod` that fixes them.

Standard library only: the hook process imports this on every prompt.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077
DIR_MODE = 0o700
FILE_MODE = 0o600


def private_process() -> None:
    """From now on this process and its children create files 0600 and folders 0700."""
    os.umask(PRIVATE_UMASK)


def tighten_home(home: Path) -> list[Path]:
    """Narrow `home` and its direct entries to 0700/0600 where wider; returns what changed.

    Symbolic links are left alone (their target may be anything, anywhere). A missing home is
    not an error: it is created later, already private.
    """
    changed: list[Path] = []
    if not home.is_dir():
        return changed
    for path in (home, *_entries(home)):
        if _tighten(path):
            changed.append(path)
    return changed


def too_wide(root: Path, *, limit: int = 20) -> tuple[list[Path], int]:
    """Entries under `root` (itself included) that others may read or enter.

    Returns the first `limit` of them and the total count. Walks the whole tree: for
    `doctor`, not for every start.
    """
    found: list[Path] = []
    total = 0
    if not root.is_dir():
        return found, 0
    for folder, dirs, files in os.walk(root):
        base = Path(folder)
        for path in (base, *(base / name for name in files)):
            if _wider(path):
                total += 1
                if len(found) < limit:
                    found.append(path)
        dirs[:] = [d for d in dirs if not (base / d).is_symlink()]
    return found, total


def fix_command(root: Path) -> str:
    """The shell command that makes `root` private (what `doctor` tells the user to run)."""
    quoted = "'" + str(root).replace("'", "'\\''") + "'"
    return f"chmod -R go-rwx {quoted}"  # removes group/other bits and never adds any


def _entries(home: Path) -> list[Path]:
    try:
        return list(home.iterdir())
    except OSError:
        return []


def _wider(path: Path) -> bool:
    try:
        mode = path.lstat().st_mode
    except OSError:
        return False
    return not stat.S_ISLNK(mode) and bool(stat.S_IMODE(mode) & 0o077)


def _tighten(path: Path) -> bool:
    try:
        st = path.lstat()
    except OSError:
        return False
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode) or not mode & 0o077 or st.st_uid != os.geteuid():
        return False
    try:
        path.chmod(mode & ~0o077)
    except OSError:
        return False
    return True
