"""Pure rules for recalling memories into a prompt, shared by the chat agent and the hooks.

* a memory injected in the last `WINDOW_TURNS` turns of a conversation is not injected again;
* the first turn (and the first after a compaction) carries at most 10 retrieved memories, later
  turns at most 5;
* when more than half of the retrieved memories are new compared with the previous turn, the
  topic changed;
* acknowledgements ("ok", "好的", "thanks") retrieve nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from memory import _text
from memory._record import record
from memory._text import estimate_tokens

if TYPE_CHECKING:
    from memory.loop.personal import Reading
    from memory.model import Note, Reader

# "I", "my", "we", 我, 我们 speak of the person; "tell me", "give us", 给我讲, 帮我写 only ask
_FIRST_PERSON_RE = re.compile(
    r"(?<![给帮让教叫诉])我|咱|俺|本人"
    r"|(?<![a-z'])(?:i|i'm|i've|i'd|i'll|my|mine|myself|we|we're|we've|our|ours)(?![a-z'])"
)

WINDOW_TURNS = 5
FIRST_TURN_LIMIT = 10
LATER_TURN_LIMIT = 5

_ACKS = frozenset(
    {
        *("ok", "okay", "k", "kk", "yes", "yep", "yeah", "no", "nope", "sure", "thanks"),
        *("thank you", "thx", "ty", "cool", "great", "nice", "good", "fine", "got it", "done"),
        *("lol", "hi", "hello", "hey", "bye", "ok thanks", "sounds good", "go ahead"),
        *("好", "好的", "好滴", "嗯", "嗯嗯", "哦", "哦哦", "对", "对的", "是", "是的", "行"),
        *("可以", "谢谢", "多谢", "谢了", "收到", "明白", "了解", "知道了", "没问题", "不用了"),
        *("好吧", "ok了", "嗯呢", "在吗", "你好", "再见", "继续", "好的谢谢"),
    }
)
_PUNCT = re.compile(r"[\s\W_]+", re.UNICODE)


def is_trivial_prompt(prompt: str) -> bool:
    """Acknowledgements and near-empty prompts retrieve nothing."""
    text = unicodedata.normalize("NFKC", prompt).strip().lower()
    if text in _ACKS:
        return True
    core = _PUNCT.sub(" ", text).strip()
    if not core:
        return True
    if core in _ACKS or " ".join(core.split()) in _ACKS:
        return True
    return len(core.replace(" ", "")) <= 1


def own_world(
    prompt: str, place_scope: str | None, personal: Reading | None = None
) -> Callable[[str, str], bool]:
    """A test of hits for one prompt, `(note_text, note_scope) -> bool`: whether the prompt
    gives evidence that it is about the person's own world, so the note may be put into its
    context unasked. The prompt is read once for all its hits (`about_own_world`).

    `personal`: what `memory.loop.personal.read_prompt` read of the prompt (None: no probe can
    tell, its files missing). When it can tell, it decides, with a lower bar for the notes of the
    session's own project (its prompts are its work); the text probe alone decides only in a
    project session. Otherwise a project session (Claude Code, Codex) lets every hit in, and a
    chat keeps the word rules below."""
    folded = unicodedata.normalize("NFKC", prompt).casefold()
    first_person = _FIRST_PERSON_RE.search(folded) is not None
    said = _text.names(prompt)

    in_project = (place_scope or "").startswith("project:")

    # the text probe stands in for the vector one in a project session only (the hooks working
    # directly, where the alternative is letting every hit in); a chat without vectors keeps
    # the word rules, which miss fewer short questions ("what tea do I like": 0.40 to the words)
    decides = personal is not None and (personal.by_meaning or in_project)

    def test(note_text: str, note_scope: str) -> bool:
        own_project = note_scope.startswith("project:") and note_scope == place_scope
        if decides and personal is not None:
            return personal.lets_in(own_project=own_project, in_project=in_project)
        if in_project:  # no probe at all (a broken install): a session's prompt is its work
            return True
        if first_person:
            return True
        if note_scope.startswith("project:") and note_scope.split(":", 1)[1].casefold() in folded:
            return True
        # names as the prompt writes them: in English "kafka" matches a note's "Kafka" only
        # when the prompt writes it as a name too (lower-case matches let in 7 % more unrelated
        # prompts of the life set for 1 % more related ones); in a Chinese prompt any Latin
        # word is one
        return bool(said) and bool(said & _text.names(note_text))

    return test


def about_own_world(
    prompt: str,
    note_text: str,
    note_scope: str,
    place_scope: str | None,
) -> bool:
    """Whether a prompt gives evidence that it is about the person's own world, so a note may be
    put into its context unasked (issue #29: "Can cats eat chocolate?", the history of Kunlun
    mountain or a festival's origin share a word with a note about the user's cat, a project
    named Kunlun or a team outing, at relevance up to 0.98, and injected it). Evidence: the
    session runs in the note's project; the prompt speaks in the first person (我, 我们, my, we,
    I); it names what the note names (a name the note writes with a capital, in capitals, with
    digits or code-like: "Zhou Ning", "payments-gw", "Kafka", written so in the prompt too), or the
    note's project. The hit's relevance is no evidence: the life set's unrelated prompts reach
    0.5-1.0 (a bypass from 0.95 let 41 % of them in, from 0.65 55 %). A search the person asks
    for is not gated: it shows weak matches with their relevance."""
    return own_world(prompt, place_scope)(note_text, note_scope)


def topic_changed(current: Sequence[str], previous: Sequence[str]) -> bool:
    """More than half of this turn's retrieved memories were not retrieved last turn."""
    if not current or not previous:
        return False
    new = [note_id for note_id in current if note_id not in set(previous)]
    return len(new) * 2 > len(current)


@record
class InjectionPlan:
    inject: tuple[str, ...]
    topic_changed: bool


def plan_injection(
    retrieved: Sequence[str],
    *,
    recent: set[str],
    previous: Sequence[str],
    first_turn: bool,
) -> InjectionPlan:
    """Choose which retrieved ids to inject this turn (pure)."""
    limit = FIRST_TURN_LIMIT if first_turn else LATER_TURN_LIMIT
    fresh = [note_id for note_id in retrieved if note_id not in recent][:limit]
    return InjectionPlan(tuple(fresh), topic_changed(retrieved, previous))


_SKELETON_LINE = re.compile(r"(?m)^\s*(#.*|[-*]\s*|<!--.*-->)?\s*$")


def is_profile_skeleton(note: Note) -> bool:
    """The untouched `profile.md` skeleton (headings only) says nothing about the user."""
    return not _SKELETON_LINE.sub("", note.body).strip()


def user_notes(notes: Sequence[Note]) -> list[Note]:
    """What the brief says about the user: their own files (`user/`: the profile and what they
    wrote themselves), minus empty ones and the untouched skeleton. What the system learned
    about them (`learned/`) is not in the brief: a memory of a year holds dozens of such
    preferences, and a new conversation about the weather started with ten of them (issue #29);
    they come with the prompts they are relevant to, and a person who wants one in every
    session pins it or writes it into the profile (docs/memory-loop.md, "The brief")."""
    return [
        n
        for n in notes
        if n.path.startswith(PROFILE_FOLDER) and n.body.strip() and not is_profile_skeleton(n)
    ]


PROFILE_FOLDER = "user/"
"""The person's own files: the only notes the brief holds besides the pins."""
PIN_TAG = "pinned"
"""The tag a user gives a note that is always relevant: every session starts with it."""


def pinned_notes(
    notes: Sequence[Note], scope: str | None, reader: Reader | None = None
) -> list[Note]:
    """Active notes the user pinned, of the user's scope or the place's (and of the scopes a
    chat member's `reader` reads: their own, their group's team), minus the user's own files
    (those are in the brief already)."""
    extra = reader.scopes if reader is not None else ()
    return [
        n
        for n in notes
        if PIN_TAG in n.tags
        and n.status == "active"
        and not n.path.startswith(PROFILE_FOLDER)
        and (n.scope in ("user", scope or "user") or n.scope in extra)
        and (reader is None or reader.reads(n.scope))
    ]


def render_notes(header: str, notes: Sequence[Note], budget: int) -> tuple[str, list[Note]]:
    """Notes in full under `header` within `budget` tokens. A note that does not fit in full
    keeps as many of its lines as fit, in order (headings and empty placeholders dropped), so a
    long profile is cut, never collapsed to its skeleton; with not even one line room, its
    summary; with no room for that either, it is left out."""
    lines = [header]
    used: list[Note] = []
    spent = estimate_tokens(header)
    for note in notes:
        head = f"- [{note.id}] {note.type} · {note.title}: "
        text = head + " ".join(note.body.split())
        cost = estimate_tokens(text)
        if spent + cost > budget:
            text = head + _fitting_lines(note, budget - spent - estimate_tokens(head))
            cost = estimate_tokens(text)
            if text == head or spent + cost > budget:
                text = head + note.summary
                cost = estimate_tokens(text)
                if spent + cost > budget:
                    continue
        lines.append(text)
        used.append(note)
        spent += cost
    return ("\n".join(lines), used) if used else ("", [])


_MORE = " …"


def _fitting_lines(note: Note, budget: int) -> str:
    """The note's content lines, in order, as many as fit in `budget` tokens, joined with " / "
    and marked as cut ("…")."""
    kept: list[str] = []
    spent = estimate_tokens(_MORE)
    for raw in note.body.splitlines():
        if _SKELETON_LINE.fullmatch(raw):
            continue
        line = " ".join(raw.split()).lstrip("-* ").strip()
        cost = estimate_tokens(line + " / ")
        if spent + cost > budget:
            break
        kept.append(line)
        spent += cost
    return " / ".join(kept) + _MORE if kept else ""
