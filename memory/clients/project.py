"""Project identity for CLI sessions: which project a working directory belongs to.

Two checkouts of the same repository share one identity (the normalized git remote URL), and
two unrelated folders that happen to share a name never do (without a remote the identity is
the folder's real path, hashed). The key is used in memory scopes (`project:<key>`); the name
is only for display ("app 开发会话 05-21 14:02").

Pure standard library and no subprocess: the hooks call this on every event, so it reads
`.git/config` itself instead of running `git`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

from memory._digest import sha256
from memory._record import record

KEY_LIMIT: Final = 100
"""Scope keys allow at most 100 characters of `[A-Za-z0-9_.-]` (see memory.model)."""

_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/\s]+)@)?(?P<host>[^:/\s]+):(?!//)(?P<path>.+)$")
_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://(?P<rest>.+)$")
_REMOTE_SECTION = re.compile(r'^\s*\[\s*remote\s+"(?P<name>[^"]+)"\s*\]\s*$')
_SECTION = re.compile(r"^\s*\[")
_URL_KEY = re.compile(r"^\s*url\s*=\s*(?P<value>.*?)\s*$", re.IGNORECASE)
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9.\-]+")


@record
class ProjectIdentity:
    """Who a working directory belongs to."""

    key: str
    """Stable, scope-safe key: the normalized remote (`github.com_acme_app`) or, without a
    remote, the first 16 hex digits of the sha256 of the real path."""
    name: str
    """Readable name for titles: the repository name or the folder name."""
    root: str
    """The repository top level (or the working directory outside git), real path."""
    remote: str | None = None
    """The normalized remote URL (`github.com/acme/app`), if any."""

    @property
    def scope(self) -> str:
        return f"project:{self.key}"

    def to_dict(self) -> dict[str, str | None]:
        return {"key": self.key, "name": self.name, "root": self.root, "remote": self.remote}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> ProjectIdentity:
        remote = data.get("remote")
        return cls(
            key=str(data["key"]),
            name=str(data["name"]),
            root=str(data["root"]),
            remote=str(remote) if remote else None,
        )


def normalize_remote(url: str) -> str | None:
    """`git@github.com:a/b.git`, `https://user:tok@github.com/a/b` and `ssh://git@github.com:22/a/b`
    all become `github.com/a/b`: no scheme, no credentials, no port, no `.git`, lower case.
    Local remotes (`/srv/git/b.git`, `file:///srv/git/b`) keep their path. None for junk."""
    text = url.strip()
    if not text:
        return None
    match = _URL.match(text)
    if match:
        scheme = match["scheme"].lower()
        rest = match["rest"]
        if scheme == "file":
            return _clean_path(rest)
        host_part, _, path = rest.partition("/")
        host = host_part.rsplit("@", 1)[-1]  # drop user:password@
        host = host.split(":", 1)[0]  # drop the port
        normalized = f"{host}/{path}" if path else host
    elif text.startswith(("/", "./", "../", "~")) or re.match(r"^[A-Za-z]:[\\/]", text):
        return _clean_path(text)
    else:
        scp = _SCP_LIKE.match(text)
        if not scp:
            return None
        normalized = f"{scp['host']}/{scp['path']}"
    normalized = normalized.strip().strip("/").lower()
    if normalized.endswith(".git"):
        normalized = normalized[:-4].rstrip("/")
    normalized = re.sub(r"/{2,}", "/", normalized)
    return normalized or None


def _clean_path(path: str) -> str:
    cleaned = path.replace("\\", "/").rstrip("/")
    if cleaned.lower().endswith(".git"):
        cleaned = cleaned[:-4].rstrip("/")
    return cleaned or "/"


def find_git_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` that holds `.git` (a folder, or a file for
    worktrees and submodules)."""
    current = start
    while True:
        if (current / ".git").exists():
            return current
        if current.parent == current:
            return None
        current = current.parent


def _git_dir(root: Path) -> Path | None:
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    try:
        text = dot_git.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("gitdir:"):
            target = Path(line.split(":", 1)[1].strip())
            return target if target.is_absolute() else (root / target)
    return None


def read_git_remote(root: Path) -> str | None:
    """The raw URL of `origin` (or the first remote) from the repository's config file."""
    git_dir = _git_dir(root)
    if git_dir is None:
        return None
    config = git_dir / "config"
    commondir = git_dir / "commondir"  # linked worktrees keep the config in the main repo
    if not config.is_file() and commondir.is_file():
        try:
            common = Path(commondir.read_text(encoding="utf-8").strip())
        except OSError:
            return None
        config = (common if common.is_absolute() else git_dir / common) / "config"
    try:
        lines = config.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    remotes: dict[str, str] = {}
    section: str | None = None
    for line in lines:
        header = _REMOTE_SECTION.match(line)
        if header:
            section = header["name"]
            continue
        if _SECTION.match(line):
            section = None
            continue
        if section is not None and section not in remotes:
            value = _URL_KEY.match(line)
            if value:
                remotes[section] = value["value"].strip('"')
    if "origin" in remotes:
        return remotes["origin"]
    return next(iter(remotes.values()), None)


def path_key(path: str) -> str:
    return str(sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:16])


def remote_key(remote: str) -> str:
    """A scope-safe form of a normalized remote; long ones end in a hash so they stay unique."""
    key = _KEY_UNSAFE.sub("_", remote).strip("_.-") or path_key(remote)
    if len(key) > KEY_LIMIT:
        key = f"{key[: KEY_LIMIT - 17]}-{path_key(remote)}"
    return key


def identify(cwd: str | os.PathLike[str]) -> ProjectIdentity:
    """The project a working directory belongs to (never raises for a missing folder)."""
    real = Path(os.path.realpath(os.path.expanduser(os.fspath(cwd))))
    root = find_git_root(real) if real.exists() else None
    base = root or real
    remote = normalize_remote(read_git_remote(root) or "") if root is not None else None
    if remote:
        name = remote.rstrip("/").rsplit("/", 1)[-1] or base.name
        return ProjectIdentity(remote_key(remote), name or "project", str(base), remote)
    return ProjectIdentity(path_key(str(base)), base.name or "project", str(base), None)
