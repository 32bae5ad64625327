"""One contract for the memory state (episodes, pending entities, the hooks' dedup windows), run
against SQLite (`StateDB`) and PostgreSQL (`PostgresStateDB`) alike.

On PostgreSQL every `open_state()` is another instance: its own `PostgresDatabase` (own pool) on
the test's database, as two app processes would have. The notes live in a SQLite `MemoryStore`
in the test's temp dir either way: only the state is under test here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from errors import NotFoundError
from memory.backend import StateBackend
from memory.clients.hooks import HookRequest, HookService
from memory.clients.project import ProjectIdentity
from memory.config import MemoryConfig
from memory.loop.entities import EntityCandidate, PendingStore
from memory.loop.episodes import MAX_SUMMARIES_PER_SCOPE, EpisodeStore
from memory.loop.recall import WINDOW_TURNS
from memory.loop.windows import StateWindows
from memory.postgres.state import PostgresStateDB
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore
from storage.postgres import PostgresDatabase

Open = Callable[[], StateBackend]


@pytest.fixture(params=["sqlite", "postgresql"])
def open_state(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Open]:
    """Opens another state on the same storage each call (another process or instance)."""
    closers: list[Callable[[], None]] = []
    if request.param == "sqlite":

        def make() -> StateBackend:
            state = StateDB(tmp_path / "state.db")
            closers.append(state.close)
            return state

    else:
        url = request.getfixturevalue("database_url")

        def make() -> StateBackend:
            db = PostgresDatabase(url, min_size=1, max_size=4)
            db.open()
            closers.append(db.close)
            state = PostgresStateDB(db)
            closers.append(state.close)
            return state

    yield make
    for close in reversed(closers):
        close()


@pytest.fixture
def state(open_state: Open) -> StateBackend:
    return open_state()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(MemoryConfig.for_home(tmp_path / "home", fsync=False)) as opened:
        yield opened


@pytest.fixture
def episodes(state: StateBackend, store: MemoryStore) -> EpisodeStore:
    return EpisodeStore(state, store)


PROJECT = ProjectIdentity("github.com_acme_app", "app", "/work/app", "github.com/acme/app")


def _candidate(content: str, confidence: float = 0.6) -> EntityCandidate:
    return EntityCandidate("preference", content, confidence, content[:60])


# --- episodes --------------------------------------------------------------------------------


def test_a_started_episode_is_the_active_one_of_its_key_and_project(
    episodes: EpisodeStore,
) -> None:
    assert episodes.active("web:c1") is None
    started = episodes.start("web:c1", title="Web 会话 01-02 03:04", project="p", source="web")
    assert episodes.active("web:c1") == started == episodes.get(started.id)
    assert (started.status, started.turns, started.file_changes) == ("active", 0, 0)
    assert (started.scope, started.summary, started.ended) == ("user", "", None)
    assert [e.id for e in episodes.active_for_project("p")] == [started.id]
    assert episodes.active_for_project("other") == []
    with pytest.raises(NotFoundError):
        episodes.get("ep_missing")


def test_recorded_messages_count_turns_and_file_changes_and_keep_their_order(
    episodes: EpisodeStore,
) -> None:
    ep = episodes.start("k", title="t")
    episodes.record(ep.id, "user", "first\n```\nsecret code\n```", turn=True)
    episodes.record(ep.id, "assistant", "second")
    episodes.record(ep.id, "observation", "ran make", kind="command", title="make", file_changes=2)
    episodes.record(ep.id, "user", "a\x00b", turn=True)
    after = episodes.get(ep.id)
    assert (after.turns, after.file_changes) == (2, 2)
    messages = episodes.messages(ep.id)
    assert [m.role for m in messages] == ["user", "assistant", "observation", "user"]
    assert messages[0].content == "first\n[代码块已省略]"
    assert (messages[2].kind, messages[2].title) == ("command", "make")
    # PostgreSQL text cannot hold NUL: it is stored as U+FFFD there, as is on SQLite.
    assert messages[3].content.replace("\x00", "\ufffd") == "a\ufffdb"
    assert [m.id for m in messages] == sorted(m.id for m in messages)
    assert [m.content for m in episodes.messages(ep.id, limit=2)] == [
        messages[0].content,
        "second",
    ]


def test_observations_are_found_by_id_and_newest_first_per_project(
    state: StateBackend, episodes: EpisodeStore
) -> None:
    ep = episodes.start("claude-code:s1", title="app 开发会话 01-02 03:04", project=PROJECT.key)
    other = episodes.start("claude-code:s2", title="elsewhere", project="other")
    first = episodes.record(ep.id, "observation", "ran tests", kind="command", title="pytest")
    second = episodes.record(
        ep.id,
        "observation",
        "edited",
        kind="change",
        title="编辑 a.py",
        file_changes=1,
    )
    episodes.record(ep.id, "user", "not an observation", turn=True)
    episodes.record(other.id, "observation", "elsewhere", title="other")
    assert 0 < first < second
    assert [m.title for m in episodes.observations([second, first])] == ["pytest", "编辑 a.py"]
    assert episodes.observations([]) == []
    recent = episodes.recent_observations(PROJECT.key)
    assert [(m.id, m.kind, m.title) for _, m in recent] == [
        (second, "change", "编辑 a.py"),
        (first, "command", "pytest"),
    ]
    # The episode beside each message is the episode, not a mix with the message's columns.
    assert {(e.id, e.title) for e, _ in recent} == {(ep.id, "app 开发会话 01-02 03:04")}
    assert episodes.get(ep.id).file_changes == 1


def test_observations_are_searched_then_seen_in_their_timeline(episodes: EpisodeStore) -> None:
    # Seed 004's progressive disclosure: search -> timeline -> observations by id.
    ep = episodes.start("claude-code:s1", title="app 开发会话", project=PROJECT.key)
    other = episodes.start("codex:s2", title="elsewhere", project="other")
    episodes.record(ep.id, "user", "why does the pool run out?", turn=True)
    before = episodes.record(
        ep.id, "observation", "grep -rn pool src", kind="discovery", title="grep"
    )
    hit = episodes.record(
        ep.id, "observation", "数据库连接池满了: PoolTimeout after 30s", kind="bug", title="pytest"
    )
    after = episodes.record(ep.id, "assistant", "The pool size is 5; raising it to 20.")
    episodes.record(other.id, "observation", "连接池 settings in another project", title="cat")
    episodes.record(ep.id, "observation", "100%_done \\ literal", title="echo")

    found = episodes.search_observations("连接池")
    assert hit in [h.message.id for h in found]
    assert {h.episode.id for h in found} == {ep.id, other.id}
    here = episodes.search_observations("连接池 PoolTimeout", project=PROJECT.key)
    assert [h.message.id for h in here] == [hit]
    assert here[0].to_dict()["episode"] == {"id": ep.id, "title": "app 开发会话"}
    assert episodes.search_observations("pooltimeout")[0].message.id == hit  # any case
    # LIKE's wildcards are literal text, on both databases.
    assert [h.message.title for h in episodes.search_observations("100%_done")] == ["echo"]
    assert episodes.search_observations("90%_done") == []
    assert episodes.search_observations("kubernetes ingress") == []  # nothing meaningful
    # User and assistant messages are not observations.
    assert episodes.search_observations("raising") == []

    episode, around = episodes.timeline(hit, before=2, after=1)
    assert episode.id == ep.id
    assert [m.id for m in around][-3:] == [before, hit, after]
    assert around[0].role == "user"
    with pytest.raises(NotFoundError):
        episodes.timeline(10**9)


def test_ensure_starts_one_episode_per_session_key(state: StateBackend) -> None:
    episodes = EpisodeStore(state, clock=lambda: 1_000.0)
    a, created_a = episodes.ensure("claude-code:a", title="app 开发会话", project=PROJECT.key)
    again, created_again = episodes.ensure("claude-code:a", title="ignored", project="x")
    b, created_b = episodes.ensure("codex:b", title="app 开发会话", project=PROJECT.key)
    assert (created_a, created_again, created_b) == (True, False, True)
    assert again == a != b
    assert {e.key for e in episodes.active_for_project(PROJECT.key)} == {
        "claude-code:a",
        "codex:b",
    }
    assert episodes.get(a).started == 1_000.0


def test_idle_episodes_are_those_with_nothing_recorded_since(state: StateBackend) -> None:
    now = [1_000.0]
    episodes = EpisodeStore(state, clock=lambda: now[0])
    quiet = episodes.start("k:quiet", title="t", project="p")
    busy = episodes.start("k:busy", title="t", project="p")
    episodes.start("k:elsewhere", title="t", project="q")
    now[0] = 2_000.0
    episodes.record(busy.id, "user", "still here", turn=True)
    assert [e.id for e in episodes.idle("p", since=1_500.0)] == [quiet.id]
    assert episodes.idle("p", since=900.0) == []  # both started after the cut-off
    now[0] = 3_000.0
    newcomer = episodes.start("k:new", title="t", project="p")
    assert newcomer.id not in [e.id for e in episodes.idle("p", since=2_500.0)]


def test_the_latest_active_key_with_a_prefix_is_found_within_its_time(
    state: StateBackend,
) -> None:
    now = [1_000.0]
    episodes = EpisodeStore(state, clock=lambda: now[0])
    episodes.start("codex:gen-old", title="t", project="p")
    now[0] = 2_000.0
    episodes.start("codex:gen-new", title="t", project="p")
    episodes.start("claude-code:gen-x", title="t", project="p")
    episodes.start("codex:gen_100%", title="t", project="other")
    assert episodes.latest_active_key("p", "codex:gen-", since=0) == "codex:gen-new"
    assert episodes.latest_active_key("p", "codex:gen-", since=2_500.0) is None
    assert episodes.latest_active_key("other", "codex:gen_", since=0) == "codex:gen_100%"
    assert episodes.latest_active_key("p", "codex:gen_", since=0) is None  # `_` is literal


def test_summaries_are_per_project_or_per_session_newest_end_first(
    episodes: EpisodeStore,
) -> None:
    made = []
    for key, project in (("a", "p"), ("b", "p"), ("c", ""), ("d", "p")):
        ep = episodes.start(key, title=f"title {key}", project=project)
        made.append(episodes.close(ep.id, f"summary {key}" if key != "d" else None))
        time.sleep(0.01)
    assert [e.key for e in episodes.summaries(project="p", limit=5)] == ["b", "a"]
    assert [e.key for e in episodes.summaries(project="p", limit=1)] == ["b"]
    assert [e.key for e in episodes.summaries(project="", limit=5)] == ["c"]
    assert [e.key for e in episodes.summaries(key="a")] == ["a"]
    assert episodes.summaries(key="d") == []  # no summary, nothing to show


def test_the_last_message_of_a_role_is_the_newest(episodes: EpisodeStore) -> None:
    ep = episodes.start("k", title="t")
    assert episodes.last_message(ep.id, "assistant") is None
    episodes.record(ep.id, "assistant", "one")
    episodes.record(ep.id, "user", "two", turn=True)
    episodes.record(ep.id, "assistant", "three")
    last = episodes.last_message(ep.id, "assistant")
    assert last is not None and last.content == "three"


def test_closing_an_episode_ends_its_sessions_window_only(
    state: StateBackend, episodes: EpisodeStore
) -> None:
    windows = StateWindows(state)
    one = episodes.start("claude-code:one", title="t", project="p")
    episodes.start("claude-code:two", title="t", project="p")
    windows.save("claude-code:one", 3, ["x"], ["x"])
    windows.save("claude-code:two", 2, ["y"], ["y"])
    episodes.close(one.id, None)
    assert windows.load("claude-code:one").started is False
    assert windows.load("claude-code:one").recent == frozenset()
    assert windows.load("claude-code:two").recent == frozenset({"y"})


def test_closing_with_a_summary_writes_the_summary_note_once(
    episodes: EpisodeStore, store: MemoryStore
) -> None:
    ep = episodes.start("web:c1", title="Web 会话 01-02 03:04", scope="project:x")
    closed = episodes.close(ep.id, "Done: moved the   cache\nto redis.")
    assert closed.status == "completed" and closed.ended is not None
    assert closed.summary == "Done: moved the cache to redis."
    note = store.get(closed.summary_note_id or "")
    assert (note.type, note.scope, note.path.startswith("sessions/")) == (
        "conversation",
        "project:x",
        True,
    )
    assert episodes.close(ep.id, "again") == closed, "closing twice changes nothing"
    trivial = episodes.close(episodes.start("web:c2", title="t").id, None)
    assert (trivial.status, trivial.summary, trivial.summary_note_id) == ("completed", "", None)
    assert episodes.active("web:c1") is None


def test_list_and_search_see_completed_episodes_by_title_or_summary(
    episodes: EpisodeStore,
) -> None:
    done = episodes.start("k1", title="Atlas migration")
    episodes.close(done.id, "Moved the atlas cluster to Kubernetes.")
    slashed = episodes.start("k2", title="paths")
    episodes.close(slashed.id, r"Fixed C:\temp handling.")
    live = episodes.start("k3", title="Atlas live")
    assert [e.id for e in episodes.list()] == [live.id, slashed.id, done.id]
    assert [e.id for e in episodes.list(status="active")] == [live.id]
    assert [e.id for e in episodes.list(limit=1)] == [live.id]
    # ASCII case never matters, on either database; the live episode is never found.
    assert [e.id for e in episodes.search("ATLAS")] == [done.id]
    assert [e.id for e in episodes.search("kubernetes nothing")] == [done.id]
    assert [e.id for e in episodes.search(r"C:\temp")] == [slashed.id]
    assert episodes.search(r"C:\\temp") == []
    assert episodes.search("a") == [], "words shorter than two characters are ignored"


def test_cleanup_deletes_only_old_messages_of_completed_episodes(
    episodes: EpisodeStore,
) -> None:
    done = episodes.start("k1", title="done")
    live = episodes.start("k2", title="live")
    for ep in (done, live):
        episodes.record(ep.id, "user", "one", turn=True)
        episodes.record(ep.id, "assistant", "two")
    episodes.close(done.id, "Done: two messages.")
    assert episodes.cleanup_messages(older_than_days=1) == 0
    time.sleep(0.01)
    assert episodes.cleanup_messages(older_than_days=0) == 2
    assert episodes.messages(done.id) == []
    assert len(episodes.messages(live.id)) == 2
    assert episodes.get(done.id).summary == "Done: two messages.", "the summary stays"


def test_summary_files_are_pruned_to_the_limit_but_their_text_stays(
    episodes: EpisodeStore, tmp_path: Path
) -> None:
    for i in range(MAX_SUMMARIES_PER_SCOPE + 2):
        ep = episodes.start(f"conv-{i}", title=f"Web 会话 {i}")
        assert episodes.close(ep.id, f"Done: topic number {i} handled.").summary_note_id
    files = list((tmp_path / "home" / "memory" / "sessions").glob("*.md"))
    assert len(files) == MAX_SUMMARIES_PER_SCOPE
    found = {e.summary for e in episodes.search("number", limit=50)}
    assert "Done: topic number 0 handled." in found
    assert len(found) == MAX_SUMMARIES_PER_SCOPE + 2


# --- pending entities ------------------------------------------------------------------------


def test_pending_entities_are_queued_once_listed_and_resolved(state: StateBackend) -> None:
    pending = PendingStore(state)
    first = pending.add(_candidate("maybe we should use redis"), scope="project:x", source="t")
    assert pending.add(_candidate("maybe we should use redis")).id == first.id
    second = pending.add(_candidate("I usually write tests first", 0.7))
    assert pending.get(first.id) == first
    assert (first.status, first.scope, first.source, first.note_id) == (
        "pending",
        "project:x",
        "t",
        None,
    )
    assert {p.id for p in pending.list()} == {first.id, second.id}
    confirmed = pending.resolve(first.id, "confirmed", note_id="n_1")
    assert (confirmed.status, confirmed.note_id) == ("confirmed", "n_1")
    assert [p.id for p in pending.list()] == [second.id]
    assert [p.id for p in pending.list(status="confirmed")] == [first.id]
    assert {p.id for p in pending.list(status=None)} == {first.id, second.id}
    assert len(pending.list(status=None, limit=1)) == 1
    # Once resolved, the same text may be queued again as a new candidate.
    assert pending.add(_candidate("maybe we should use redis")).id != first.id


def test_unknown_pending_ids_are_not_found(state: StateBackend) -> None:
    pending = PendingStore(state)
    with pytest.raises(NotFoundError):
        pending.get("pend_missing")
    with pytest.raises(NotFoundError):
        pending.resolve("pend_missing", "rejected")


# --- the hooks' dedup windows ----------------------------------------------------------------


def test_an_unknown_session_has_an_empty_window(state: StateBackend) -> None:
    assert StateWindows(state).load("claude-code:nope") == StateWindows(state).load(
        "claude-code:nope"
    )
    window = StateWindows(state).load("claude-code:nope")
    assert (window.turn, window.previous, window.recent, window.started) == (
        0,
        (),
        frozenset(),
        False,
    )


def test_a_window_saved_by_one_instance_is_seen_and_cleared_by_another(open_state: Open) -> None:
    one, two = open_state(), open_state()
    StateWindows(one).save("k", 1, ["a", "b"], ["a"])
    StateWindows(one).save("other", 1, ["z"], ["z"])
    window = StateWindows(two).load("k")
    assert (window.turn, window.previous, window.recent) == (1, ("a", "b"), frozenset({"a"}))
    StateWindows(two).save("k", 2, ["c"], ["c", "a"])  # "a" again: its turn moves forward
    window = StateWindows(one).load("k")
    assert (window.turn, window.previous, window.recent) == (2, ("c",), frozenset({"a", "c"}))
    StateWindows(one).clear("k")
    assert (
        StateWindows(two).load("k").turn == 0 and StateWindows(two).load("k").recent == frozenset()
    )
    assert StateWindows(two).load("other").recent == frozenset({"z"}), "other sessions keep theirs"


def test_injections_leave_the_window_after_its_turns(state: StateBackend) -> None:
    StateWindows(state).save("k", 1, ["old"], ["old"])
    for turn in range(2, WINDOW_TURNS + 1):
        StateWindows(state).save("k", turn, [], [])
    assert StateWindows(state).load("k").recent == frozenset({"old"})
    StateWindows(state).save("k", WINDOW_TURNS + 1, ["new"], ["new"])
    assert StateWindows(state).load("k").recent == frozenset({"new"})


# --- the SQL subset --------------------------------------------------------------------------


def test_question_marks_and_percents_in_literals_are_not_placeholders(
    episodes: EpisodeStore, state: StateBackend
) -> None:
    episodes.start("k?", title="100% done?")
    rows = state.read(
        "SELECT title, '?' AS mark FROM mem_episodes WHERE title LIKE '%?' AND key = ?", ("k?",)
    )
    assert [(r["title"], r["mark"]) for r in rows] == [("100% done?", "?")]
    with state.write() as db:
        cur = db.execute("UPDATE mem_episodes SET source = '50%?' WHERE key = ?", ("k?",))
        assert cur.rowcount == 1
    assert state.read("SELECT source FROM mem_episodes")[0]["source"] == "50%?"


def test_a_failed_write_transaction_leaves_nothing(episodes: EpisodeStore) -> None:
    ep = episodes.start("k", title="t")
    with pytest.raises(RuntimeError), episodes.db.write() as db:
        db.execute("UPDATE mem_episodes SET turns = 7 WHERE id = ?", (ep.id,))
        raise RuntimeError("boom")
    assert episodes.get(ep.id).turns == 0


# --- the hooks end to end --------------------------------------------------------------------


def test_a_hook_session_runs_on_the_state_and_the_next_one_sees_it(
    state: StateBackend, store: MemoryStore
) -> None:
    service = HookService(state, lambda: store)

    def hook(event: str, session: str | None, **payload: object) -> str:
        return service.handle(HookRequest(event, session, PROJECT, dict(payload)))

    hook("session-start", "s1", source="startup")
    for n in range(3):
        hook("user-prompt-submit", "s1", prompt=f"refactor the billing module step {n}")
    hook(
        "post-tool-use",
        "s1",
        tool_name="Edit",
        tool_input={"file_path": "/work/app/src/billing.py", "old_string": "a", "new_string": "b"},
        tool_response={"filePath": "/work/app/src/billing.py"},
    )
    hook("stop", "s1", last_assistant_message="Refactored billing.")
    hook("stop", "s1", last_assistant_message="Refactored billing.")  # a continued turn
    hook("session-end", "s1", reason="other")
    (closed,) = EpisodeStore(state, store).list()
    assert (closed.status, closed.turns, closed.file_changes) == ("completed", 3, 1)
    assert closed.summary.startswith("Done: refactor the billing module step 0")
    roles = [m.role for m in EpisodeStore(state, store).messages(closed.id)]
    assert roles == ["user"] * 3 + ["observation", "assistant"]

    context = hook("session-start", "s2", source="startup")
    assert "Latest sessions in app:" in context and "refactor the billing module" in context
    assert "| change | Edited src/billing.py |" in context  # stored 编辑, an English session
    # A client without session ids reuses its recent generated session.
    hook("user-prompt-submit", None, prompt="hello there, what next?")
    hook("user-prompt-submit", None, prompt="and then?")
    generated = [e for e in EpisodeStore(state, store).list() if ":gen-" in e.key]
    assert len(generated) == 1 and generated[0].turns == 2


# --- several writers -------------------------------------------------------------------------


def test_concurrent_writers_from_two_instances_lose_nothing(
    open_state: Open, store: MemoryStore
) -> None:
    instances = [open_state(), open_state()]
    ep = EpisodeStore(instances[0], store).start("shared", title="t")
    start = threading.Barrier(4)

    def writer(n: int) -> None:
        episodes = EpisodeStore(instances[n % 2], store)
        pending = PendingStore(instances[n % 2])
        start.wait()
        for i in range(15):
            episodes.record(ep.id, "user", f"w{n}-{i}", turn=True, file_changes=1)
            pending.add(_candidate(f"candidate {n}-{i}"))
            StateWindows(instances[n % 2]).save(f"win-{n}", i + 1, [f"n{n}-{i}"], [f"n{n}-{i}"])

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(writer, range(4)))
    reader = EpisodeStore(instances[1], store)
    after = reader.get(ep.id)
    assert (after.turns, after.file_changes) == (60, 60)
    contents = [m.content for m in reader.messages(ep.id)]
    assert sorted(contents) == sorted(f"w{n}-{i}" for n in range(4) for i in range(15))
    for n in range(4):  # each writer's messages keep their order
        assert [c for c in contents if c.startswith(f"w{n}-")] == [f"w{n}-{i}" for i in range(15)]
    assert len(PendingStore(instances[0]).list(limit=500)) == 60
    for n in range(4):
        window = StateWindows(instances[(n + 1) % 2]).load(f"win-{n}")
        assert window.turn == 15
        assert window.recent == {f"n{n}-{i}" for i in range(15 - WINDOW_TURNS, 15)}


def test_two_instances_starting_one_session_at_once_make_one_episode(open_state: Open) -> None:
    instances = [open_state(), open_state()]
    start = threading.Barrier(8)

    for round_ in range(3):  # a race is a matter of timing: give it a few chances
        key = f"claude-code:s{round_}"

        def ensure_key(n: int, key: str = key) -> tuple[str, bool]:
            start.wait()
            return EpisodeStore(instances[n % 2]).ensure(
                key, title="t", project=PROJECT.key, scope=PROJECT.scope, source="claude-code"
            )

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(ensure_key, range(8)))
        assert len({episode_id for episode_id, _ in results}) == 1
        assert sum(created for _, created in results) == 1
        rows = instances[0].read("SELECT count(*) AS n FROM mem_episodes WHERE key = ?", (key,))
        assert rows[0]["n"] == 1


def test_two_instances_queueing_one_candidate_at_once_queue_it_once(open_state: Open) -> None:
    instances = [open_state(), open_state()]
    start = threading.Barrier(8)

    def add(n: int) -> str:
        start.wait()
        return PendingStore(instances[n % 2]).add(_candidate("we might use kafka")).id

    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(add, range(8)))
    assert len(ids) == 1
    assert [p.id for p in PendingStore(instances[1]).list()] == list(ids)
