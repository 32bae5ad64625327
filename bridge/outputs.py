"""Files the agent names in its answer, to be sent to the chat (docs/feishu.md, "Files and images
the agent sends").

The model names a file it made with a markdown image or link whose target is a path in its
workspace: `![chart](out/chart.png)`, `[the data](out/data.csv)`. Only files inside the
workspace go out: a target with `..`, an absolute path outside it, a symlink leading out of it,
a missing or special file is refused with its reason. Web addresses are links, not files.

`named_files` is pure (markdown in, names out); `resolve` reads the file system and belongs in a
thread.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from bridge.render import code_and_prose

# Feishu's "上传图片" takes these (server-docs/im-v1/image/create); larger than IMAGE_BYTES, or
# another format, goes as a file ("上传文件", at most FILE_BYTES, never empty).
IMAGE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".ico", ".tiff", ".tif", ".heic"}
)
IMAGE_BYTES = 10 * 1024 * 1024
FILE_BYTES = 30 * 1024 * 1024
MAX_FILES = 9  # files sent for one answer, at most (a chat is not a file share)
# "上传文件" `file_type`: these by suffix, anything else as `stream`
FILE_TYPES = {
    ".opus": "opus",
    ".mp4": "mp4",
    ".pdf": "pdf",
    ".doc": "doc",
    ".docx": "doc",
    ".xls": "xls",
    ".xlsx": "xls",
    ".ppt": "ppt",
    ".pptx": "ppt",
}

FILES_INSTRUCTIONS = f"""\
# Sending files to the Feishu chat
You answer in a Feishu chat. To send the person a file or an image you made, save it inside your \
workspace (your current directory) and name it in your answer with a markdown link whose target \
is its path relative to the workspace: `![chart](out/chart.png)` for an image (shown in the \
chat), `[the data](out/data.csv)` for any other file (sent as a file message). Only files inside \
the workspace go; at most {MAX_FILES} per answer; an image up to {IMAGE_BYTES // 2**20} MB, any \
file up to {FILE_BYTES // 2**20} MB, never empty. Draw a chart or a table as an image file (for \
example with matplotlib) when the person should see it. A web address stays a link."""
"""What the model is told in a Feishu chat (the system prompt, `run_agent(instructions=)`):
the convention `named_files` reads, and the limits `resolve` applies."""

_TARGET = re.compile(r"(!?)\[([^\]\n]*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"\n]*\")?\s*\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")

Why = Literal["outside", "missing", "not a file", "empty", "too large"]


@dataclass(frozen=True, slots=True)
class Named:
    """A file the answer names: its label and the target as written."""

    label: str
    target: str
    as_image: bool  # named as an image (`![…](…)`)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A named file that may go to the chat: as an image (shown in a card) or a file message."""

    named: Named
    path: Path
    kind: Literal["image", "file"]
    file_type: str  # the "上传文件" file_type for a file
    size: int
    identity: tuple[int, int] = (0, 0)  # (st_dev, st_ino) when it was checked


@dataclass(frozen=True, slots=True)
class Refused:
    """A named file that does not go: why (its path is never echoed beyond what was written)."""

    named: Named
    why: Why


def named_files(markdown: str) -> list[Named]:
    """The workspace paths the answer names as images or links, in order, each once; code and
    web addresses (`https:`, `mailto:`, `#anchor`) are not files."""
    found: dict[str, Named] = {}
    for run, is_code in code_and_prose(markdown):
        if is_code:
            continue
        for m in _TARGET.finditer(run):
            bang, label, target = m.group(1), m.group(2).strip(), m.group(3)
            if _SCHEME.match(target) or target.startswith(("#", "//")) or target in found:
                continue
            found[target] = Named(label or PurePosixPath(target).name, target, bang == "!")
    return list(found.values())[:MAX_FILES]


def resolve(workspace: Path, named: Named) -> Outgoing | Refused:
    """Where `named` is, if it may go: inside `workspace` (after following symlinks), no `..`,
    an existing regular file within the upload limits. Reads the file system: call in a thread."""
    target = named.target
    if ".." in PurePosixPath(target).parts or ".." in Path(target).parts:
        return Refused(named, "outside")
    root = workspace.resolve()
    candidate = Path(target) if Path(target).is_absolute() else root / target
    try:
        real = candidate.resolve(strict=True)
    except (OSError, RuntimeError):
        return Refused(named, "missing")
    if not real.is_relative_to(root):
        return Refused(named, "outside")  # an absolute path elsewhere, or a symlink out
    if not real.is_file():
        return Refused(named, "not a file")
    stat = real.stat()
    size, identity = stat.st_size, (stat.st_dev, stat.st_ino)
    if size == 0:
        return Refused(named, "empty")
    suffix = real.suffix.lower()
    if suffix in IMAGE_SUFFIXES and size <= IMAGE_BYTES:
        return Outgoing(named, real, "image", "", size, identity)
    if size > FILE_BYTES:
        return Refused(named, "too large")
    return Outgoing(named, real, "file", FILE_TYPES.get(suffix, "stream"), size, identity)


def read_checked(item: Outgoing) -> bytes:
    """The file's bytes, only if it is still the file `resolve` checked: opened without
    following a final symlink and compared by device and inode, so a path swapped for a symlink
    (or a file moved in) between the check and the read is refused (OSError). In a thread."""
    fd = os.open(item.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        stat = os.fstat(f.fileno())
        if (stat.st_dev, stat.st_ino) != item.identity or stat.st_size > FILE_BYTES:
            raise OSError(f"{item.named.target} changed after it was checked")
        return f.read(FILE_BYTES + 1)
