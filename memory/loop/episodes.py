"""Episodes: one per conversation (chat) or CLI session, with cleaned messages and a summary.

An episode is `active` while its conversation runs and `completed` when it ends; only completed
episodes and saved notes are retrieved, never the live one. Closing an episode that had real work
(`should_summarize`) writes a session summary note into `sessions/` (at most 300 characters); at
most `MAX_SUMMARIES_PER_SCOPE` summary files are kept per scope, the oldest going first (their text
stays in the episode record).
"""

from __future__ import annotations

import builtins
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Literal

from errors import InvalidInputError, NotFoundError
from memory import _text
from memory._patterns import lazy_pattern
from memory._record import record
from memory.loop.titles import KINDS_IN_ENGLISH
from memory.loop.windows import StateWindows, WindowStore
from memory.model import NoteDraft
from memory.notes.capture import clean_message, sanitize
from memory.search.keyword import STOPWORDS
from memory.search.ranking import text_relevance

if TYPE_CHECKING:
    from memory.backend import MemoryBackend, StateBackend

SUMMARY_LIMIT = 300
MAX_SUMMARIES_PER_SCOPE = 20
MIN_TURNS_FOR_SUMMARY = 3
COMPACTION_KIND: Final = "compaction"
"""The kind of the observation that holds a compaction's summary of the conversation."""

EpisodeStatus = Literal["active", "completed"]
Role = Literal["user", "assistant", "observation"]


@record
class Episode:
    """One conversation or CLI session: its place, state, counts and summary."""

    id: str
    key: str
    project: str
    scope: str
    title: str
    source: str
    status: EpisodeStatus
    started: float
    ended: float | None
    turns: int
    file_changes: int
    summary: str
    summary_note_id: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "key": self.key,
            "project": self.project,
            "scope": self.scope,
            "title": self.title,
            "source": self.source,
            "status": self.status,
            "started": self.started,
            "ended": self.ended,
            "turns": self.turns,
            "file_changes": self.file_changes,
            "summary": self.summary,
            "summary_note_id": self.summary_note_id,
        }


@record
class EpisodeMessage:
    """A cleaned message or observation of an episode."""

    id: int
    role: str
    kind: str
    title: str
    content: str
    created: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "role": self.role,
            "kind": self.kind,
            "title": self.title,
            "content": self.content,
            "created": self.created,
        }


def episode_title(place: str, when: float, *, kind: str = "会话") -> str:
    """ "{project or channel} 会话 {MM-DD HH:MM}" (CLI sessions use kind "开发会话")."""
    return f"{place} {kind} {datetime.fromtimestamp(when):%m-%d %H:%M}"


def should_summarize(episode: Episode) -> bool:
    """Trivial episodes (at most 2 turns, no file changes) get no summary."""
    return episode.turns >= MIN_TURNS_FOR_SUMMARY or episode.file_changes > 0


_DECISION = lazy_pattern(
    r"决定|选定|选择了|采用|改用|确定|定为|decid|chose|choos|agreed|settled on|going with"
    r"|we will|we'll|switch(?:ed)? to|instead of",
    re.IGNORECASE,
)
_AGREED = lazy_pattern(
    r"决定|选定|采用|改用|确定|定为|\bdecided\b|\bagreed\b|settled on"
    r"|\bwe(?: will|'ll| chose| are going with)\b",
    re.IGNORECASE,
)
"""A decision in the assistant's words: one stated as made or agreed ("we decided", "我们采用"),
not the narration of its own next step ("I'll switch to …", "instead of …"), which the
general pattern above took for the session's decisions (issue #32)."""
_OPEN = lazy_pattern(
    r"待办|下一步|还需要|还要|尚未|未完成|没完成|以后再|稍后|TODO|next step|remaining|follow[- ]?up"
    r"|still need|not yet|later|open question|left to do",
    re.IGNORECASE,
)
_ACKNOWLEDGEMENT = lazy_pattern(
    r"(?:谢谢|多谢|好的?|嗯+|收到|可以|行|ok(?:ay)?|thanks?(?: you)?|great|cool|got it|nice|yes|no)"
    r"[\s。！!.,，~～]*",
    re.IGNORECASE,
)
"""A user message that asks nothing ("谢谢", "ok"): not what the session did."""
_LABELS: dict[bool, tuple[str, str, str, str, str]] = {
    # chinese -> (done, decisions, open, separator, item joiner)
    True: ("完成：", "决定：", "待办：", "｜", "；"),
    False: ("Done: ", "Decisions: ", "Open: ", " | ", "; "),
}


def conversation_is_chinese(messages: Sequence[EpisodeMessage]) -> bool:
    """The conversation's language, from what the user wrote (the assistant's replies quote
    code and names); no user text: from everything."""
    users = " ".join(m.content for m in messages if m.role == "user")
    return _text.is_mostly_chinese(users or " ".join(m.content for m in messages))


def rule_based_summary(messages: Sequence[EpisodeMessage], limit: int = SUMMARY_LIMIT) -> str:
    """A summary without a model, in the conversation's language: what was done (the first
    request, and the last one when there were several), the decisions and the open items
    found sentence by sentence in what was said (and in a compaction's summary of it); at
    most `limit` characters."""
    chinese = conversation_is_chinese(messages)
    done_label, decided_label, open_label, separator, joiner = _LABELS[chinese]
    requests = [
        first[0]
        for m in messages
        if m.role == "user"
        and (first := _text.sentences(m.content))
        and not _ACKNOWLEDGEMENT().fullmatch(first[0])
    ]
    # a compaction's summary (Claude Code's PostCompact) stands for the turns it replaced
    said = [
        (m.role, s)
        for m in messages
        if m.role in ("user", "assistant") or m.kind == COMPACTION_KIND
        for s in _text.sentences(m.content)
    ]
    decisions = _unique(
        s for role, s in said if (_AGREED if role == "assistant" else _DECISION)().search(s)
    )[:2]
    open_items = _unique(s for _, s in said if _OPEN().search(s) and not _DECISION().search(s))[:2]
    rest = []
    if decisions:
        rest.append(decided_label + joiner.join(_text.shorten(s, 70) for s in decisions))
    if open_items:
        rest.append(open_label + joiner.join(_text.shorten(s, 60) for s in open_items))
    # what was asked gets the room the decisions and open items leave (at least 90 characters,
    # at most 200): requests were cut at 60 whatever the room, and read as clipped logs (#32)
    room = limit - len(done_label) - sum(len(separator) + len(part) for part in rest)
    room = max(90, min(200, room))
    if not requests:
        done = "对话" if chinese else "a conversation"
    elif len(requests) == 1 or requests[-1] == requests[0]:
        done = _text.shorten(requests[0], room)
    else:
        half = (room - len(joiner)) // 2
        done = f"{_text.shorten(requests[0], half)}{joiner}{_text.shorten(requests[-1], half)}"
    return _text.shorten(separator.join([done_label + done, *rest]), limit)


def files_summary(messages: Sequence[EpisodeMessage]) -> str:
    """`rule_based_summary`, plus the files the session changed when there is room, labelled
    in the same language (`｜文件：` or ` | Files: `; an English label ended Chinese summaries)."""
    base = rule_based_summary(messages)
    files: list[str] = []
    for message in messages:
        if message.role != "observation" or message.kind != "change":
            continue
        for line in message.content.splitlines():
            if line.startswith("files: "):
                for name in line[7:].split(", "):
                    if name and name not in files:
                        files.append(name)
    if files:
        chinese = conversation_is_chinese(messages)
        label = "｜文件：" if chinese else " | Files: "
        extra = label + ("、" if chinese else ", ").join(files[:6])
        if len(base) + len(extra) <= SUMMARY_LIMIT:
            base += extra
    return base


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def summary_path(key: str) -> str:
    """`sessions/<session id>.md`: a client session's key is `<client>:<session id>`, a chat
    conversation's key its id; the file name keeps only characters safe in a path."""
    session = key.split(":", 1)[1] if ":" in key else key
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", session).strip(".-")[:80] or "session"
    return f"sessions/{safe}.md"


def summary_title(episode_title: str, *, chinese: bool) -> str:
    """The summary note's title in the summary's language: "<place> 会话 <time> 摘要" or
    "<place> session <time> summary"."""
    if chinese:
        return f"{episode_title} 摘要"
    for zh, en in KINDS_IN_ENGLISH:
        if f" {zh} " in episode_title:
            return episode_title.replace(f" {zh} ", f" {en} ", 1) + " summary"
    return f"{episode_title} summary"


def transcript(messages: Sequence[EpisodeMessage], limit: int = 12_000) -> str:
    """The episode as plain text for a summarizer (newest part kept when too long)."""
    lines = [f"{m.role}: {m.title or m.content}" for m in messages]
    text = "\n".join(lines)
    return text if len(text) <= limit else "…" + text[-limit:]


class EpisodeStore:
    """Every front door's episodes (chat conversations, Claude Code and Codex sessions, the MCP
    server's), one active episode per session key at most.

    The notes (`store`, or `open_store` to open them on first use) are needed only to close an
    episode with a summary: the hooks' light events record messages without opening them.
    Closing an episode also clears its session's injection window (`windows`, in the same
    database by default).
    """

    def __init__(
        self,
        db: StateBackend,
        store: MemoryBackend | None = None,
        *,
        open_store: Callable[[], MemoryBackend] | None = None,
        windows: WindowStore | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self._store = store
        self._open_store = open_store
        self.windows: WindowStore = windows if windows is not None else StateWindows(db)
        self.clock = clock

    @property
    def store(self) -> MemoryBackend:
        """The notes (opened on first use when given as `open_store`)."""
        if self._store is None:
            if self._open_store is None:
                raise RuntimeError("this EpisodeStore was opened without the notes store")
            self._store = self._open_store()
        return self._store

    # --- lifecycle -------------------------------------------------------------------------
    def start(
        self, key: str, *, title: str, project: str = "", scope: str = "user", source: str = ""
    ) -> Episode:
        episode_id = _new_id(self.clock())
        with self.db.write() as db:
            db.execute(
                "INSERT INTO mem_episodes(id, key, project, scope, title, source, started)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (episode_id, key, project, scope, title, source, self.clock()),
            )
        return self.get(episode_id)

    def ensure(
        self, key: str, *, title: str, project: str = "", scope: str = "user", source: str = ""
    ) -> tuple[str, bool]:
        """The active episode of this session key, started now if there is none:
        (id, created). A session that ended and goes on (Claude Code `--resume`, `codex exec
        resume`: the same session id) reopens its episode: one episode per client session, its
        turns counted together for the summary rule (three resumed one-prompt runs were three
        episodes, none worth a summary, and a brief listed the session twice). One write
        transaction, so two processes never start two; a session that has one (every prompt but
        its first) only reads, and waits for no writer."""
        rows = self.db.read(
            "SELECT id FROM mem_episodes WHERE key = ? AND status = 'active'"
            " ORDER BY started DESC LIMIT 1",
            (key,),
        )
        if rows:
            return str(rows[0]["id"]), False
        with self.db.write() as db:
            row = db.execute(
                "SELECT id FROM mem_episodes WHERE key = ? AND status = 'active'"
                " ORDER BY started DESC LIMIT 1",
                (key,),
            ).fetchone()
            if row is not None:
                return str(row["id"]), False
            ended = db.execute(
                "SELECT id FROM mem_episodes WHERE key = ? AND status = 'completed'"
                " ORDER BY started DESC LIMIT 1",
                (key,),
            ).fetchone()
            if ended is not None:
                db.execute(
                    "UPDATE mem_episodes SET status = 'active', ended = NULL WHERE id = ?",
                    (ended["id"],),
                )
                return str(ended["id"]), False
            now = self.clock()
            episode_id = _new_id(now)
            db.execute(
                "INSERT INTO mem_episodes(id, key, project, scope, title, source, started)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (episode_id, key, project, scope, title, source, now),
            )
            return episode_id, True

    def active(self, key: str) -> Episode | None:
        rows = self.db.read(
            "SELECT * FROM mem_episodes WHERE key = ? AND status = 'active'"
            " ORDER BY started DESC LIMIT 1",
            (key,),
        )
        return _episode(rows[0]) if rows else None

    def active_for_project(self, project: str) -> list[Episode]:
        rows = self.db.read(
            "SELECT * FROM mem_episodes WHERE project = ? AND status = 'active' ORDER BY started",
            (project,),
        )
        return [_episode(r) for r in rows]

    def idle(self, project: str, *, since: float) -> builtins.list[Episode]:
        """Active episodes of a project with nothing recorded since `since` (their terminal
        closed without a session end, or was left alone that long)."""
        rows = self.db.read(
            "SELECT * FROM mem_episodes e WHERE project = ? AND status = 'active'"
            " AND started < ? AND NOT EXISTS (SELECT 1 FROM mem_episode_messages m"
            " WHERE m.episode_id = e.id AND m.created >= ?) ORDER BY started",
            (project, since, since),
        )
        return [_episode(r) for r in rows]

    def latest_active_key(self, project: str, prefix: str, *, since: float) -> str | None:
        """The key of the project's newest active episode whose key starts with `prefix` and
        that started after `since` (a client without session ids reuses its session)."""
        rows = self.db.read(
            "SELECT key FROM mem_episodes WHERE project = ? AND status = 'active'"
            " AND substr(key, 1, ?) = ? AND started > ? ORDER BY started DESC LIMIT 1",
            (project, len(prefix), prefix, since),
        )
        return str(rows[0]["key"]) if rows else None

    def summaries(
        self, *, project: str | None = None, key: str | None = None, limit: int = 2
    ) -> builtins.list[Episode]:
        """Episodes with a summary, newest end first: the completed ones of one project (chat
        conversations have project ""), or those of one session key, the one a resumed session
        has reopened included."""
        if key is not None:
            where, value = "key = ?", key
        else:
            where, value = "project = ? AND status = 'completed'", project or ""
        rows = self.db.read(
            f"SELECT * FROM mem_episodes WHERE {where}"
            " AND summary != '' ORDER BY COALESCE(ended, started) DESC LIMIT ?",
            (value, limit),
        )
        return [_episode(r) for r in rows]

    def wants_summary(self, episode: Episode) -> bool:
        """Whether closing `episode` writes its session's summary: a session worth one
        (`should_summarize`), or one that has a summary already (a trigger point wrote it, or an
        earlier episode of the same key: a resumed session), which is brought up to date even
        when the part since is short."""
        return (
            should_summarize(episode)
            or bool(episode.summary)
            or bool(self.summaries(key=episode.key, limit=1))
        )

    def get(self, episode_id: str) -> Episode:
        rows = self.db.read("SELECT * FROM mem_episodes WHERE id = ?", (episode_id,))
        if not rows:
            raise NotFoundError("episode", episode_id)
        return _episode(rows[0])

    def list(self, *, limit: int = 50, status: EpisodeStatus | None = None) -> list[Episode]:
        if status is None:
            rows = self.db.read(
                "SELECT * FROM mem_episodes ORDER BY started DESC LIMIT ?", (limit,)
            )
        else:
            rows = self.db.read(
                "SELECT * FROM mem_episodes WHERE status = ? ORDER BY started DESC LIMIT ?",
                (status, limit),
            )
        return [_episode(r) for r in rows]

    def record(
        self,
        episode_id: str,
        role: Role,
        content: str,
        *,
        kind: str = "message",
        title: str = "",
        turn: bool = False,
        file_changes: int = 0,
    ) -> int:
        """Add a cleaned message (code blocks and long text cut, secrets redacted); its id."""
        cleaned = clean_message(content)
        with self.db.write() as db:
            # RETURNING rather than lastrowid: PostgreSQL cursors have no lastrowid.
            row = db.execute(
                "INSERT INTO mem_episode_messages(episode_id, role, kind, title, content, created)"
                " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (episode_id, role, kind, title, cleaned, self.clock()),
            ).fetchone()
            db.execute(
                "UPDATE mem_episodes SET turns = turns + ?, file_changes = file_changes + ?"
                " WHERE id = ?",
                (1 if turn else 0, file_changes, episode_id),
            )
            return int(row["id"])

    def last_message(self, episode_id: str, role: Role) -> EpisodeMessage | None:
        rows = self.db.read(
            "SELECT * FROM mem_episode_messages WHERE episode_id = ? AND role = ?"
            " ORDER BY id DESC LIMIT 1",
            (episode_id, role),
        )
        return _message(rows[0]) if rows else None

    def messages(self, episode_id: str, *, limit: int = 500) -> builtins.list[EpisodeMessage]:
        rows = self.db.read(
            "SELECT * FROM mem_episode_messages WHERE episode_id = ? ORDER BY id LIMIT ?",
            (episode_id, limit),
        )
        return [_message(r) for r in rows]

    def session_messages(self, key: str, *, limit: int = 1000) -> builtins.list[EpisodeMessage]:
        """The messages of every episode of one session key, in order: a resumed session is a
        new episode under the same key, and its summary file speaks for the whole session."""
        rows = self.db.read(
            "SELECT m.* FROM mem_episode_messages m JOIN mem_episodes e ON e.id = m.episode_id"
            " WHERE e.key = ? ORDER BY m.id LIMIT ?",
            (key, limit),
        )
        return [_message(r) for r in rows]

    def observations(self, ids: Sequence[int]) -> builtins.list[EpisodeMessage]:
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self.db.read(
            f"SELECT * FROM mem_episode_messages WHERE id IN ({marks}) ORDER BY id",
            tuple(int(i) for i in ids),
        )
        return [_message(r) for r in rows]

    def recent_observations(
        self, project: str, limit: int = 20
    ) -> builtins.list[tuple[Episode, EpisodeMessage]]:
        rows = self.db.read(
            f"SELECT {_JOINED} WHERE e.project = ? AND m.role = 'observation'"
            " ORDER BY m.id DESC LIMIT ?",
            (project, limit),
        )
        return [(_episode(r), _joined_message(r)) for r in rows]

    def search_observations(
        self, query: str, *, project: str | None = None, limit: int = 20
    ) -> builtins.list[ObservationHit]:
        """Tool observations whose title or text holds the query's words (seed 004's first
        step: search, then `timeline` around a hit, then `observations` for the details).

        Words are matched as substrings (Chinese by character pairs, so 连接池 finds 连接池满了),
        on both databases alike; a hit must hold at least half of the words (all of them when
        there are two or fewer). Best match first, then newest."""
        terms = observation_terms(query)
        if not terms:
            raise InvalidInputError("the query has no word to look for")
        like = "lower(m.title || ' ' || m.content) LIKE ? ESCAPE '\\'"
        where = " OR ".join([like] * len(terms))
        params: list[object] = [f"%{_like_escape(term)}%" for term in terms]
        scope = ""
        if project is not None:
            scope, params = " AND e.project = ?", [*params, project]
        rows = self.db.read(
            f"SELECT {_JOINED} WHERE m.role = 'observation' AND ({where}){scope}"
            " ORDER BY m.id DESC LIMIT ?",
            (*params, OBSERVATION_CANDIDATES),
        )
        need = len(terms) if len(terms) <= 2 else (len(terms) + 1) // 2
        hits = []
        for row in rows:
            message = _joined_message(row)
            text = f"{message.title} {message.content}".lower()
            matched = sum(1 for term in terms if term in text)
            if matched >= need:
                hits.append(ObservationHit(_episode(row), message, matched / len(terms)))
        hits.sort(key=lambda h: (-h.score, -h.message.id))
        return hits[:limit]

    def timeline(
        self, message_id: int, *, before: int = 3, after: int = 3
    ) -> tuple[Episode, builtins.list[EpisodeMessage]]:
        """The messages of the same session around one (prompts, replies and observations,
        in order): what happened just before and after an observation."""
        anchor = self.db.read(
            "SELECT episode_id FROM mem_episode_messages WHERE id = ?", (int(message_id),)
        )
        if not anchor:
            raise NotFoundError("observation", str(message_id))
        episode_id = anchor[0]["episode_id"]
        earlier = self.db.read(
            "SELECT * FROM mem_episode_messages WHERE episode_id = ? AND id < ?"
            " ORDER BY id DESC LIMIT ?",
            (episode_id, int(message_id), before),
        )
        later = self.db.read(
            "SELECT * FROM mem_episode_messages WHERE episode_id = ? AND id >= ?"
            " ORDER BY id LIMIT ?",
            (episode_id, int(message_id), after + 1),
        )
        return self.get(episode_id), [_message(r) for r in [*reversed(earlier), *later]]

    def close(self, episode_id: str, summary: str | None) -> Episode:
        """Complete the episode; with a summary, also write the session summary note. Its
        session's injection window ends with it."""
        episode = self.get(episode_id)
        if episode.status == "completed":
            return episode
        text, note_id = self.write_summary(episode_id, summary)
        with self.db.write() as db:
            db.execute(
                "UPDATE mem_episodes SET status = 'completed', ended = ?, summary = ?,"
                " summary_note_id = COALESCE(?, summary_note_id) WHERE id = ?",
                (self.clock(), text, note_id, episode_id),
            )
        self.windows.clear(episode.key)
        return self.get(episode_id)

    def write_summary(self, episode_id: str, summary: str | None) -> tuple[str, str | None]:
        """Create or overwrite the session's summary note, `sessions/<session id>.md` (seed
        001's L2 summary: one file per client session, rewritten at each trigger point: the
        user asks to remember, a commit, a new conversation, compaction, the session's end).
        A resumed session (its episode reopened, `ensure`) rewrites the same file. Returns
        the stored text (secrets redacted, at most 300 characters) and the note id."""
        episode = self.get(episode_id)
        # a model-written summary may quote a secret: the episode row is stored text too
        text = _text.shorten(" ".join(sanitize(summary or "").split()), SUMMARY_LIMIT)
        if not text:
            return "", None
        path = summary_path(episode.key)
        title = summary_title(episode.title, chinese=_text.is_mostly_chinese(text))
        existing = self._summary_note(episode, path)
        if existing is not None:
            self.store.update(existing, content=text, summary=text, title=title)
            note_id = existing
        else:
            note_id = self.store.save(
                NoteDraft(
                    content=text,
                    title=title,
                    summary=text,
                    type="conversation",
                    scope=episode.scope,
                    tags=("session",),
                    importance=0.4,
                    source=f"episode:{episode.key}",
                    path=path,
                )
            ).id
            self._prune_summaries(episode.scope)
        with self.db.write() as db:
            db.execute(
                "UPDATE mem_episodes SET summary = ?, summary_note_id = ? WHERE id = ?",
                (text, note_id, episode_id),
            )
        return text, note_id

    def _summary_note(self, episode: Episode, path: str) -> str | None:
        """The id of this session's summary note if it still exists: the one an earlier episode
        of the same key (or this one, at an earlier trigger) wrote."""
        rows = self.db.read(
            "SELECT summary_note_id FROM mem_episodes WHERE key = ? AND summary_note_id IS NOT"
            " NULL ORDER BY started DESC",
            (episode.key,),
        )
        for row in rows:
            try:
                note = self.store.get(row["summary_note_id"])
            except NotFoundError:
                continue
            if note.path == path:
                return note.id
        return None

    def cleanup_messages(self, older_than_days: float) -> int:
        """Delete messages of completed episodes older than N days (summaries stay)."""
        cutoff = self.clock() - older_than_days * 86400
        with self.db.write() as db:
            cur = db.execute(
                "DELETE FROM mem_episode_messages WHERE created < ? AND episode_id IN"
                " (SELECT id FROM mem_episodes WHERE status = 'completed')",
                (cutoff,),
            )
        return cur.rowcount

    def search(self, query: str, limit: int = 5, *, floor: float = 0.0) -> builtins.list[Episode]:
        """Completed episodes whose title or summary mentions a query word, most relevant first
        (`memory.search.ranking.text_relevance`, then newest), those below `floor` left out:
        a prompt's recall asks with the inject floor, a search with the search floor, so a
        session sharing only "the" with a prompt is neither injected nor listed."""
        # a word longer than any title holds is cut: a 200 KB message without spaces was one
        # LIKE pattern over SQLite's limit ("LIKE or GLOB pattern too complex"), and the turn
        # lost its memory (issue #33)
        words = [w[:WORD_CHARS] for w in re.split(r"\s+", query.strip()) if len(w) >= 2]
        # a stopword matches nearly every summary: it brings no candidate worth scoring
        words = ([w for w in words if w.casefold() not in STOPWORDS] or words)[:8]
        if not words:
            return []
        # lower() on both sides: SQLite's LIKE folds ASCII case, PostgreSQL's folds none. The
        # explicit escape makes a backslash in a word literal on both (PostgreSQL's LIKE would
        # otherwise read it as an escape); % and _ in a word stay wildcards, as they were.
        like = "lower({}) LIKE lower(?) ESCAPE '\\'"
        clause = " OR ".join(f"({like.format('summary')} OR {like.format('title')})" for _ in words)
        params: list[object] = []
        for word in words:
            pattern = "%" + word.replace("\\", "\\\\") + "%"
            params += [pattern, pattern]
        # more candidates than asked for: the newest matching a common word must not crowd
        # out an older session that is about the query
        rows = self.db.read(
            f"SELECT * FROM mem_episodes WHERE status = 'completed' AND ({clause})"
            " ORDER BY started DESC LIMIT ?",
            (*params, max(limit * 10, EPISODE_CANDIDATES)),
        )
        relevance = text_relevance(query)
        scored = [
            (relevance(e.title, e.summary or ""), n, e)
            for n, e in enumerate(_episode(r) for r in rows)
        ]
        scored = [item for item in scored if item[0] >= floor]
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [e for _, _, e in scored[:limit]]

    def _prune_summaries(self, scope: str) -> None:
        notes = [
            n
            for n in self.store.list(type="conversation", scope=scope, limit=500, sort="created")
            if n.path.startswith("sessions/")
        ]
        notes.sort(key=lambda n: n.created, reverse=True)
        for old in notes[MAX_SUMMARIES_PER_SCOPE:]:
            # The text lives on in the episode record (summary column).
            self.store.delete(old.id)


# The message's columns get their own names: `title` is in both tables, and a PostgreSQL
# dict row keeps only one of two equal names (SQLite's Row, the first).
_JOINED: Final = (
    "m.id AS m_id, m.role AS m_role, m.kind AS m_kind, m.title AS m_title,"
    " m.content AS m_content, m.created AS m_created, e.*"
    " FROM mem_episode_messages m JOIN mem_episodes e ON e.id = m.episode_id"
)
WORD_CHARS: Final = 64
"""The longest word an episode or observation search looks for (SQLite refuses a LIKE pattern
over 50,000 bytes)."""
EPISODE_CANDIDATES: Final = 100
"""Newest sessions matching any query word that an episode search ranks."""
OBSERVATION_CANDIDATES: Final = 2000
"""Newest matching observations an observation search ranks (a personal history's worth)."""


def _joined_message(row: Any) -> EpisodeMessage:
    return EpisodeMessage(
        row["m_id"],
        row["m_role"],
        row["m_kind"],
        row["m_title"],
        row["m_content"],
        row["m_created"],
    )


@record
class ObservationHit:
    """An observation an observation search found, with its episode."""

    episode: Episode
    message: EpisodeMessage
    score: float
    """The share of the query's words the observation holds."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.message.id,
            "kind": self.message.kind,
            "title": self.message.title,
            "snippet": _text.shorten(" ".join(self.message.content.split()), 160),
            "created": self.message.created,
            "score": round(self.score, 3),
            "episode": {"id": self.episode.id, "title": self.episode.title},
            "project": self.episode.project,
        }


_LATIN_WORD = re.compile(r"[a-z0-9_][a-z0-9_.\-/]*[a-z0-9_]|[a-z0-9_]", re.IGNORECASE)


def observation_terms(query: str, limit: int = 12) -> list[str]:
    """The words an observation search looks for, lower-cased: Latin words of two characters or
    more, and Chinese runs as character pairs (a single character stays itself)."""
    terms: list[str] = []
    text = query.lower()
    for word in _LATIN_WORD.findall(text):
        if len(word) >= 2:
            terms.append(word[:WORD_CHARS])
    for run in _text.cjk_runs(text):
        terms += [run] if len(run) <= 2 else [run[i : i + 2] for i in range(len(run) - 1)]
    return list(dict.fromkeys(terms))[:limit]


def _like_escape(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _new_id(now: float) -> str:
    # `os.urandom(n).hex()` is what `secrets.token_hex` does; `secrets` imports `random` and
    # `hmac`, milliseconds of every hook process
    return f"ep_{int(now * 1000):x}{os.urandom(3).hex()}"


def _message(row: Any) -> EpisodeMessage:
    return EpisodeMessage(
        row["id"], row["role"], row["kind"], row["title"], row["content"], row["created"]
    )


def _episode(row: Any) -> Episode:
    return Episode(
        id=row["id"],
        key=row["key"],
        project=row["project"],
        scope=row["scope"],
        title=row["title"],
        source=row["source"],
        status=row["status"],
        started=row["started"],
        ended=row["ended"],
        turns=row["turns"],
        file_changes=row["file_changes"],
        summary=row["summary"],
        summary_note_id=row["summary_note_id"],
    )
