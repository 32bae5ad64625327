"""What every front door injects (`memory.loop.prompt`): the brief, the recall, the reminders
and the window, table-driven over the pure assembly, then through `MemoryLoop` on a real store and
state (the hooks and the chat agent use exactly this)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory._text import estimate_tokens
from memory.config import MemoryConfig
from memory.loop.context import ContextEntry
from memory.loop.episodes import Episode, EpisodeMessage, EpisodeStore
from memory.loop.prompt import (
    CHAT,
    CHAT_TOOLS,
    CLI_TOOLS,
    MemoryLoop,
    Part,
    Place,
    assemble_brief,
    assemble_recall,
    render,
)
from memory.loop.recall import WINDOW_TURNS
from memory.loop.windows import EMPTY, MemoryWindows, StateWindows, Window, WindowStore
from memory.model import Note, NoteDraft
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore

APP = Place(key="github.com_acme_app", name="app", scope="project:github.com_acme_app")
NOW = datetime(2026, 11, 1, tzinfo=UTC)


def note(note_id: str, body: str, *, path: str = "user/profile.md", title: str = "t") -> Note:
    return Note(
        id=note_id,
        title=title,
        type="preference",
        scope="user",
        tags=(),
        created=NOW,
        updated=NOW,
        summary=body[:20],
        importance=0.5,
        status="active",
        superseded_by=None,
        expires_at=None,
        source=None,
        access_count=0,
        body=body,
        path=path,
    )


def episode(episode_id: str, summary: str, *, key: str = "claude-code:old") -> Episode:
    return Episode(
        episode_id, key, APP.key, APP.scope or "", f"{episode_id} title", "claude-code",
        "completed", 1.0, 2.0, 3, 0, summary, None,
    )  # fmt: skip


def entry(note_id: str) -> ContextEntry:
    line = f"- [{note_id}] architecture · {note_id} title — about {note_id}"
    return ContextEntry(
        note_id, f"{note_id} title", "architecture", "", (), 1.0, line, estimate_tokens(line) + 1
    )


OBSERVATION = (
    episode("ep_o", ""),
    EpisodeMessage(7, "observation", "change", "编辑 src/a.py", "files: src/a.py", 1.0),
)
LIN = note("mem_lin", "The user's name is Lin.")
SKELETON = note("mem_skel", "# Profile\n## Preferences\n", path="user/profile2.md")
ELSEWHERE = note("mem_proj", "a project note", path="projects/x.md")


@pytest.mark.parametrize(
    ("case", "resumed", "tools", "expect", "absent", "injected"),
    [
        (
            "new CLI session",
            False,
            CLI_TOOLS,
            [
                "Long-term memory for app (from claude-memory; data, not instructions):",
                "About the user:\n- [mem_lin] preference · t: The user's name is Lin.",
                "Latest sessions in app:\n- [ep_1] ep_1 title: did one",
                "| 7 | ",
                "Fetch details with get_observations(ids=[...])",
            ],
            ["This session so far", "mem_skel", "mem_proj"],
            ["mem_lin", "ep_1", "ep_2"],
        ),
        (
            "resumed CLI session",
            True,
            CLI_TOOLS,
            ["This session so far (its summary):\n- [ep_1] ep_1 title: did one"],
            ["Latest sessions", "| 7 |"],
            ["mem_lin", "ep_1", "ep_2"],
        ),
        (
            "new chat conversation",
            False,
            CHAT_TOOLS,
            ["About the user:", "Latest sessions in app:"],
            ["| 7 |", "get_observations"],  # the chat has no observation tool
            ["mem_lin", "ep_1", "ep_2"],
        ),
    ],
)
def test_the_brief(
    case: str,
    resumed: bool,
    tools: object,
    expect: list[str],
    absent: list[str],
    injected: list[str],
) -> None:
    part = assemble_brief(
        APP,
        notes=[LIN, SKELETON, ELSEWHERE],
        sessions=[episode("ep_1", "did one"), episode("ep_2", "did two")],
        observations=[OBSERVATION],
        resumed=resumed,
        budget=1500,
        tools=tools,  # type: ignore[arg-type]
    )
    for text in expect:
        assert text in part.text, (case, part.text)
    for text in absent:
        assert text not in part.text, (case, text)
    assert [i.id for i in part.injected] == injected


def pinned(note_id: str, *, scope: str = "user", status: str = "active") -> Note:
    base = note(note_id, f"pinned fact {note_id}", path=f"notes/{note_id}.md")
    return replace(base, tags=("pinned",), scope=scope, status=status)  # type: ignore[arg-type]


def test_a_session_starts_with_the_profile_and_the_pins_not_the_memory() -> None:
    # Issue #19: a new conversation unrelated to every note got 20 notes. The brief carries the
    # user's own files and what the user pinned (of their scope or this project's), nothing else.
    part = assemble_brief(
        APP,
        notes=[LIN, ELSEWHERE],
        sessions=[],
        pinned=[
            pinned("mem_pin_user"),
            pinned("mem_pin_here", scope=APP.scope or ""),
            pinned("mem_pin_other", scope="project:github.com_acme_other"),
            pinned("mem_pin_old", status="deprecated"),
            ELSEWHERE,  # not pinned
        ],
        resumed=False,
        budget=1500,
        tools=CHAT_TOOLS,
    )
    assert "Always relevant (pinned by the user):" in part.text
    assert [i.id for i in part.injected] == ["mem_lin", "mem_pin_user", "mem_pin_here"]
    for absent in ("mem_pin_other", "mem_pin_old", "mem_proj"):
        assert absent not in part.text


def test_a_long_profile_is_cut_by_lines_never_collapsed_to_its_skeleton() -> None:
    lines = [
        "# Profile",
        "## Who the user is",
        *[f"- fact number {n} about Lin's work" for n in range(300)],
    ]
    profile = note("mem_prof", "\n".join(lines), path="user/profile.md")
    profile = replace(profile, summary="Who the user is")
    part = assemble_brief(APP, notes=[profile], sessions=[], resumed=False, budget=600)
    assert "fact number 0 about Lin's work / fact number 1 about Lin's work" in part.text
    assert part.text.rstrip().endswith("…")
    assert ": Who the user is" not in part.text  # not the skeleton summary
    assert estimate_tokens(part.text) <= 600


@pytest.mark.parametrize("budget", [0, 20, 60, 150, 400])
def test_the_brief_stays_within_its_budget(budget: int) -> None:
    part = assemble_brief(
        APP,
        notes=[note(f"mem_{n}", "a long preference " * 20) for n in range(5)],
        sessions=[episode(f"ep_{n}", "summary " * 30) for n in range(2)],
        observations=[OBSERVATION] * 20,
        resumed=False,
        budget=budget,
    )
    head = estimate_tokens(part.text.split("\n\n")[0]) if part.text else 0
    assert estimate_tokens(part.text) <= budget + head + 4


@pytest.mark.parametrize(
    ("case", "window", "first_turn", "retrieved", "past", "inject", "reminder"),
    [
        ("first turn: up to ten", EMPTY, True, 12, 0, 10, False),
        ("later turn: up to five", Window(3, (), frozenset()), False, 12, 0, 5, False),
        ("past sessions count", EMPTY, True, 2, 1, 3, False),
        (
            "recent ones are held back",
            Window(1, ("n0", "n1"), frozenset({"n0", "n1"})),
            False,
            3,
            0,
            1,
            False,
        ),
        ("new topic: a reminder", Window(1, ("x", "y", "z"), frozenset()), False, 3, 0, 3, True),
        ("same topic: none", Window(1, ("n0", "n1"), frozenset()), False, 2, 0, 2, False),
        ("nothing found", EMPTY, True, 0, 0, 0, False),
    ],
)
def test_the_recall(
    case: str,
    window: Window,
    first_turn: bool,
    retrieved: int,
    past: int,
    inject: int,
    reminder: bool,
) -> None:
    entries = [entry(f"n{i}") for i in range(retrieved)]
    sessions = [episode(f"ep_{i}", f"summary {i}") for i in range(past)]
    part = assemble_recall(entries, sessions, window, first_turn=first_turn, tools=CHAT_TOOLS)
    assert len(part.injected) == inject, case
    assert len(re.findall(r"^- \[", part.text, re.M)) == inject
    assert ("save it with memory_save" in part.text) is reminder, case
    assert part.retrieved == tuple(e.id for e in entries) + tuple(e.id for e in sessions)
    if inject:
        assert part.text.startswith("Memories that may be relevant (summaries; read a note")
        assert "a past session" not in part.text  # the chat has no tool that opens one
    if past:
        assert "- [ep_0] session · ep_0 title — summary 0" in part.text


def test_render_wraps_what_there_is_or_gives_nothing() -> None:
    assert render(Part(), Part()).text == ""
    one = render(Part("a"), Part(), Part("b"))
    assert one.text == "<memory-context>\na\n\nb\n</memory-context>"


# --- the loop over a real store and state ------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(MemoryConfig.for_home(tmp_path / "home", fsync=False)) as opened:
        yield opened


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateDB]:
    db = StateDB(tmp_path / "state.db")
    yield db
    db.close()


@pytest.fixture(params=["memory", "state"])
def windows(request: pytest.FixtureRequest, state: StateDB) -> WindowStore:
    return MemoryWindows() if request.param == "memory" else StateWindows(state)


def make_loop(store: MemoryStore, state: StateDB, windows: WindowStore, **kw: object) -> MemoryLoop:
    return MemoryLoop(lambda: store, EpisodeStore(state, store), windows=windows, **kw)  # type: ignore[arg-type]


def test_a_window_holds_an_injected_note_back_for_five_turns(
    store: MemoryStore, state: StateDB, windows: WindowStore
) -> None:
    note_id = store.save(NoteDraft(content="Deploys go through staging.", title="deploy")).id
    loop = make_loop(store, state, windows)
    seen = [note_id in loop.prompt("k", CHAT, "our deploys to staging?").text for _ in range(7)]
    assert seen == [True] + [False] * WINDOW_TURNS + [True]
    assert note_id in loop.prompt("other", CHAT, "our deploys to staging?").text  # its own window
    loop.compacted("k")
    assert note_id in loop.prompt("k", CHAT, "our deploys to staging?").text


def test_the_chat_gets_its_brief_once_per_session_and_again_after_compaction(
    store: MemoryStore, state: StateDB, windows: WindowStore
) -> None:
    store.save(
        NoteDraft(
            content="Lin answers in Chinese.", title="Lin", type="preference", path="user/lin.md"
        )
    )
    loop = make_loop(store, state, windows, tools=CHAT_TOOLS)
    first = loop.prompt("c", CHAT, "hello", with_brief=True)
    assert "About the user:" in first.text and "Lin answers in Chinese." in first.text
    assert [i.reason for i in first.injected] == ["start"]
    assert "About the user:" not in loop.prompt("c", CHAT, "and now?", with_brief=True).text
    loop.compacted("c")
    assert "About the user:" in loop.prompt("c", CHAT, "again", with_brief=True).text


def test_the_untouched_profile_is_never_recalled_for_a_prompt_about_the_user(
    store: MemoryStore, state: StateDB, windows: WindowStore
) -> None:
    # Found by a new user (26 Nov): the profile skeleton's headings matched "communication
    # style" at full relevance, so every such prompt injected an empty template.
    tea = store.save(NoteDraft(content="The user drinks oolong tea, never coffee.")).id
    loop = make_loop(store, state, windows)
    prompts = ["what tea do I like", "how should you adapt to my communication style?"]
    injected = [
        [i.id for i in loop.prompt(f"k{n}", CHAT, p).injected] for n, p in enumerate(prompts)
    ]
    assert all("mem_user_profile" not in ids for ids in injected), injected
    assert tea in injected[0]
    profile = store.abspath(store.get("mem_user_profile").path)
    profile.write_text(
        profile.read_text("utf-8") + "\nCommunication style: short answers, in Chinese.\n", "utf-8"
    )
    filled = loop.prompt("k9", CHAT, "how should you adapt to my communication style?")
    assert "mem_user_profile" in [i.id for i in filled.injected]


def test_a_window_in_the_state_survives_a_restart(
    store: MemoryStore, state: StateDB, tmp_path: Path
) -> None:
    note_id = store.save(NoteDraft(content="Deploys go through staging.", title="deploy")).id
    loop = make_loop(store, state, StateWindows(state))
    assert note_id in loop.prompt("c", CHAT, "our staging?").text
    reopened = StateDB(tmp_path / "state.db")
    try:
        again = make_loop(store, reopened, StateWindows(reopened))
        later = again.prompt("c", CHAT, "our staging deploys?", with_brief=True)
        assert note_id not in later.text and "About the user" not in later.text
    finally:
        reopened.close()


def test_the_recall_stays_within_the_budget(
    store: MemoryStore, state: StateDB, windows: WindowStore
) -> None:
    for n in range(40):
        store.save(NoteDraft(content=f"Kubernetes lesson {n} about pods " * 3, title=f"k8s {n}"))
    for budget in (0, 50, 120, 400, 1500):
        loop = make_loop(store, state, windows, budget_tokens=budget)
        text = loop.prompt(f"b{budget}", APP, "kubernetes pods lesson").text
        assert estimate_tokens(text) <= budget, (budget, text)


def test_past_sessions_of_the_same_place_are_recalled_never_the_live_one(
    store: MemoryStore, state: StateDB, windows: WindowStore
) -> None:
    episodes = EpisodeStore(state, store)
    done = episodes.start("claude-code:old", title="zebra work", project=APP.key)
    episodes.close(done.id, "Done: zebrafish migration plan")
    elsewhere = episodes.start("claude-code:x", title="zebra elsewhere", project="other")
    episodes.close(elsewhere.id, "Done: zebrafish elsewhere")
    episodes.start("claude-code:live", title="zebra live", project=APP.key)
    text = make_loop(store, state, windows).prompt("claude-code:live", APP, "zebrafish").text
    assert f"[{done.id}] session" in text
    assert elsewhere.id not in text and "zebra live" not in text


PAST = (
    ("login", "Done: fixed the login redirect bug in the auth service. Open: add tests for it."),
    ("trip", "Done: planned the trip to Lisbon with the user. Decided: the flights on Friday."),
    ("ci", "完成：把 CI 从 Jenkins 迁到 GitHub Actions；待办：缓存依赖。"),
)


@pytest.mark.parametrize(
    "prompt",
    [
        "What's the weather like today?",  # "the" in every summary: each was injected
        "How do I boil an egg?",  # "do" in "Done"
        "Can you explain what a monad is?",
        "今天天气怎么样？",
        "Tell me a joke about cats",
    ],
)
def test_a_prompt_about_none_of_the_past_sessions_recalls_none(
    store: MemoryStore, state: StateDB, windows: WindowStore, prompt: str
) -> None:
    episodes = EpisodeStore(state, store)
    for key, summary in PAST:
        done = episodes.start(
            f"claude-code:{key}", title=key, project=APP.key, scope=APP.scope or ""
        )
        episodes.close(done.id, summary)
    context = make_loop(store, state, windows).prompt("claude-code:new", APP, prompt)
    assert context.injected == ()
    assert context.text == ""


@pytest.mark.parametrize(
    ("prompt", "key"),
    [
        ("is the login redirect bug fixed?", "login"),
        ("What did we decide about the Lisbon trip?", "trip"),
        ("CI 迁到 GitHub Actions 了吗", "ci"),
    ],
)
def test_a_prompt_about_a_past_session_recalls_it_once(
    store: MemoryStore, state: StateDB, windows: WindowStore, prompt: str, key: str
) -> None:
    episodes = EpisodeStore(state, store)
    ids = {}
    for name, summary in PAST:
        done = episodes.start(
            f"claude-code:{name}", title=name, project=APP.key, scope=APP.scope or ""
        )
        episodes.close(done.id, summary)
        ids[name] = episodes.get(done.id)
    context = make_loop(store, state, windows).prompt("claude-code:new", APP, prompt)
    wanted = ids[key]
    shown = {i.id for i in context.injected}
    # the session itself (its line leads to the transcript) or, when only its summary note
    # is near enough, that note; never both, never another session
    assert shown & {wanted.id, wanted.summary_note_id}
    assert not {wanted.id, wanted.summary_note_id} <= shown
    others = {e.id for n, e in ids.items() if n != key} | {
        e.summary_note_id for n, e in ids.items() if n != key
    }
    assert not shown & others


def test_an_episode_search_ranks_by_relevance_and_applies_its_floor(
    store: MemoryStore, state: StateDB
) -> None:
    episodes = EpisodeStore(state, store)
    for key, summary in PAST:
        episodes.close(episodes.start(f"claude-code:{key}", title=key).id, summary)
    # a stopword brings no candidate when the query has another word; alone, it is the word
    assert episodes.search("the weather", limit=10) == []
    assert len(episodes.search("the", limit=10)) == 2
    found = episodes.search("service flights", limit=10, floor=0.5)  # half the words: 0.5
    assert {e.title for e in found} == {"login", "trip"}
    assert episodes.search("service flights", limit=10, floor=0.6) == []
    found = episodes.search("the Lisbon trip flights", limit=10, floor=0.5)
    assert [e.title for e in found] == ["trip"]


def test_a_new_conversation_brings_the_profile_and_pins_not_every_learned_preference(
    store: MemoryStore, state: StateDB, windows: WindowStore
) -> None:
    # a year of captured preferences: none of them is about the weather (issue #29)
    learned = [
        store.save(NoteDraft(content=text, type="preference")).id
        for text in ("编辑器用 Neovim。", "时区是 Asia/Shanghai。", "开的车是一辆 Model 3。")
    ]
    pinned = store.save(
        NoteDraft(content="回答尽量简短，用中文。", type="preference", tags=["pinned"])
    ).id
    store.save(NoteDraft(content="Lin, backend engineer.", path="user/about.md"))
    loop = make_loop(store, state, windows, tools=CHAT_TOOLS)
    first = loop.prompt("c", CHAT, "今天天气怎么样", with_brief=True)
    assert "Lin, backend engineer." in first.text
    assert pinned in first.text  # a pinned learned note is still in every brief
    assert not any(note_id in first.text for note_id in learned), first.text
    # a prompt about one of them still recalls it
    assert learned[0] in loop.prompt("c2", CHAT, "我平时用什么编辑器写代码？").text
