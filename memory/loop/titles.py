"""The titles the memory writes, in the reader's language.

Episode titles (`app 开发会话 11-28 09:14`) and the rule-based titles of tool observations
(`执行: pytest -q`, `编辑 src/auth.ts`) are stored as written; a brief or a recall shows them
in the language of the session they belong to (its summary's), so an English user's brief is
not half Chinese (issue #32). Pure and import-light: the hook process's prompt path uses it.
"""

from __future__ import annotations

from typing import Final

from memory._text import is_mostly_chinese

KINDS_IN_ENGLISH: Final = (("开发会话", "coding session"), ("会话", "session"))
"""The kinds of episode titles (`memory.loop.episodes.episode_title`)."""

PREFIXES_IN_ENGLISH: Final = (
    # the rule-based titles of observations (memory/clients/observations.py) and compactions
    ("执行: ", "Ran: "),
    ("写入 ", "Wrote "),
    ("编辑 ", "Edited "),
    ("读取 ", "Read "),
    ("搜索: ", "Searched: "),
    ("查找文件: ", "Found files: "),
    ("列目录: ", "Listed: "),
    ("获取网页: ", "Fetched: "),
    ("搜索网页: ", "Web search: "),
    ("子任务: ", "Subtask: "),
    ("调用 ", "Called "),
    ("上下文压缩 ", "Compaction "),
)


def title_in(title: str, *, chinese: bool) -> str:
    """A title the memory wrote, for a Chinese reader as stored, for an English one with its
    fixed words in English. What the person or a tool wrote inside (a path, a command, a
    project's name) is never changed."""
    if chinese:
        return title
    for zh, en in PREFIXES_IN_ENGLISH:
        if title.startswith(zh):
            return en + title[len(zh) :]
    for zh, en in KINDS_IN_ENGLISH:
        if f" {zh} " in title:
            return title.replace(f" {zh} ", f" {en} ", 1)
    return title


def reads_chinese(*texts: str) -> bool:
    """Whether what a session said (its summary, or else the user's notes) is Chinese; nothing
    said reads as English, the language of the brief's own headings."""
    return is_mostly_chinese(" ".join(t for t in texts if t))
