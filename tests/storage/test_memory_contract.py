"""One contract for the memory store, run against SQLite (`MemoryStore`) and PostgreSQL
(`PostgresMemoryStore`) alike: what the app relies on, whichever backend holds the notes."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from errors import InvalidInputError, NotFoundError
from memory.backend import MemoryBackend, NoteVectors
from memory.cli.transfer import export_markdown, import_path
from memory.config import MemoryConfig
from memory.core import StoreCore
from memory.encoders.models import HashingEncoder
from memory.model import NoteDraft
from memory.postgres.store import PostgresMemoryStore
from memory.search.engine import SearchQueries
from memory.search.filters import Filters
from memory.search.fusion import SearchMode
from memory.search.keyword import parse_query
from memory.search.plan import QueryVector
from memory.sqlite.store import MemoryStore
from storage.postgres import PostgresDatabase
from tests.memory.corpus import CORPUS
from tests.memory.test_search_bilingual import QUERIES

Open = Callable[..., MemoryBackend]
"""open_store(clock=..., encoder=..., **config overrides): another store on the same
memory each call (another instance, a restart)."""


@pytest.fixture(params=["sqlite", "postgresql"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Open]:
    base = MemoryConfig.for_home(tmp_path / "home", fsync=False)
    opened: list[MemoryBackend] = []
    pools: list[PostgresDatabase] = []

    def make(
        *, clock: Callable[[], datetime] | None = None, encoder: Any = None, **overrides: Any
    ) -> MemoryBackend:
        config = replace(base, **overrides)
        store: MemoryBackend
        if request.param == "sqlite":
            store = MemoryStore.open(config, clock=clock, encoder=encoder)
        else:
            # every store gets a pool of its own, as two app instances would
            db = PostgresDatabase(request.getfixturevalue("database_url"), min_size=1, max_size=4)
            db.open()
            pools.append(db)
            store = PostgresMemoryStore.open(db, config, clock=clock, encoder=encoder)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()
    for db in pools:
        db.close()


@pytest.fixture
def store(open_store: Open) -> MemoryBackend:
    return open_store()


def save(store: MemoryBackend, content: str, **fields: Any) -> str:
    return store.save(NoteDraft(content=content, **fields)).id


def ids(store: MemoryBackend, query: str, **kwargs: Any) -> list[str]:
    return [h.id for h in store.search(query, limit=20, **kwargs)]


def _digest(*parts: object) -> str:
    """Text unlike any other (distinct notes must not count as near duplicates)."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def load_corpus(store: MemoryBackend) -> dict[str, str]:
    out = {}
    for key, draft in CORPUS.items():
        result = store.save(draft)
        assert not result.deduplicated, key
        out[key] = result.id
    return out


# --- the seam --------------------------------------------------------------------------------


def test_the_store_and_its_vectors_satisfy_the_protocols(store: MemoryBackend) -> None:
    assert isinstance(store, MemoryBackend)
    assert isinstance(store.vectors, NoteVectors)


def test_a_new_memory_holds_the_profile_skeleton_only(store: MemoryBackend) -> None:
    assert store.count() == 1
    profile = store.get("mem_user_profile")
    assert (profile.type, profile.scope, profile.path) == ("identity", "user", "user/profile.md")


# --- save / get / update / delete ------------------------------------------------------------


def test_a_saved_note_comes_back_whole(store: MemoryBackend) -> None:
    result = store.save(
        NoteDraft(
            content="# 部署\n\n用 Docker Compose 部署 API，healthcheck 每 10 秒访问 /health。",
            type="Decision",
            scope="project:api",
            tags=["ops", "#部署"],
            importance=0.8,
            source="web",
        )
    )
    assert not result.deduplicated and result.path.endswith(".md")
    note = store.get(result.id)
    assert note.title == "部署" and note.summary.startswith("用 Docker Compose")
    assert (note.type, note.scope, note.tags) == ("decision", "project:api", ("ops", "部署"))
    assert (note.importance, note.status, note.source) == (0.8, "active", "web")
    assert note.body == "# 部署\n\n用 Docker Compose 部署 API，healthcheck 每 10 秒访问 /health。\n"
    assert note.path == result.path and note.created == note.updated
    assert store.count() == 2


def test_update_changes_fields_and_what_search_finds(store: MemoryBackend) -> None:
    note_id = save(store, "The build uses alphaTool for packaging.")
    before = store.get(note_id)
    note = store.update(note_id, content="The build uses omegaTool now.", tags=["build"])
    assert note.body == "The build uses omegaTool now.\n"
    assert note.title == "The build uses omegaTool now."  # a derived title follows the body
    assert note.tags == ("build",) and note.created == before.created
    assert note.updated >= before.updated
    assert store.get(note_id) == note
    assert ids(store, "omegaTool") == [note_id]
    assert ids(store, "alphaTool") == []
    kept = save(store, "body one", title="Kept title")
    assert store.update(kept, content="body two", importance=0.9).title == "Kept title"


def test_unknown_ids_and_bad_changes_are_refused(store: MemoryBackend) -> None:
    note_id = save(store, "some text")
    with pytest.raises(NotFoundError) as info:
        store.get("mem_missing")
    assert "mem_missing" in info.value.message
    for call in (
        lambda: store.update("mem_nope", title="x"),
        lambda: store.delete("mem_nope"),
        lambda: store.deprecate("mem_nope"),
        lambda: store.supersede(note_id, "mem_nope"),
        lambda: store.save(NoteDraft(content="x", supersedes="mem_nope")),
    ):
        with pytest.raises(NotFoundError):
            call()
    with pytest.raises(InvalidInputError, match="updatable fields"):
        store.update(note_id, colour="blue")
    with pytest.raises(InvalidInputError, match="unknown type"):
        store.update(note_id, type="weird")
    with pytest.raises(InvalidInputError):
        store.save(NoteDraft(content="<private>only secret</private>"))
    with pytest.raises(InvalidInputError, match="already exists"):
        store.save(NoteDraft(content="another text", id=note_id))
    assert store.count() == 2


def test_delete_removes_the_note_everywhere(store: MemoryBackend) -> None:
    note_id = save(store, "temporary note about zebras")
    store.delete(note_id)
    assert ids(store, "zebras") == []
    assert store.count() == 1
    with pytest.raises(NotFoundError):
        store.get(note_id)
    with pytest.raises(NotFoundError):
        store.delete(note_id)


def test_secrets_are_redacted_and_private_text_dropped(store: MemoryBackend) -> None:
    key = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 3
    note_id = save(
        store,
        f"Deploy key is {key} for staging. <private>my diary entry</private>Visible end.",
        title=f"creds {key}",
    )
    note = store.get(note_id)
    for text in (note.body, note.title):
        assert key not in text and "[REDACTED:anthropic_key]" in text
    assert "diary" not in note.body and "Visible end." in note.body
    assert ids(store, "diary") == []
    assert ids(store, "A1b2C3d4E5f6G7h8I9j0") == []
    assert store.update(note_id, content=f"rotated: {key}").body == (
        "rotated: [REDACTED:anthropic_key]\n"
    )


def test_a_large_note_is_kept_whole_and_found(store: MemoryBackend) -> None:
    paragraph = "大文件测试 large-file paragraph with words. " * 20 + "\n"
    content = "needle-start 起点\n" + paragraph * 1500 + "needle-end 终点\n"
    note_id = save(store, content, title="Big note")
    assert ids(store, "needle-start") == [note_id]
    assert store.get(note_id).body == content


def test_a_note_of_very_many_distinct_words_is_saved_and_found(store: MemoryBackend) -> None:
    # 100,000 distinct words (Cyrillic letters and a digit) in the indexed 500,000 characters:
    # more than one PostgreSQL tsvector can hold (1 MB), so that backend indexes part of it
    letters = [chr(c) for c in range(0x430, 0x450)]
    words = [f"{a}{b}{n}{c}" for a in letters for b in letters for c in letters for n in range(4)]
    note_id = save(store, "hapax legomena: " + " ".join(words[:100_000]))
    assert ids(store, "legomena") == [note_id]
    assert store.get(note_id).body.endswith(f" {words[99_999]}\n")


def test_a_nul_character_does_not_stop_a_note(store: MemoryBackend) -> None:
    note_id = save(store, "before\x00after the nul byte")
    body = store.get(note_id).body
    assert body.startswith("before") and body.endswith("after the nul byte\n")
    assert ids(store, "nul byte") == [note_id]


# --- search ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("query", "expected"), QUERIES)
def test_chinese_english_mixed_and_identifier_queries_find_the_note(
    store: MemoryBackend, query: str, expected: str
) -> None:
    corpus = load_corpus(store)
    hits = store.search(query, limit=3)
    assert corpus[expected] in [h.id for h in hits], [(h.title, h.score) for h in hits]


def test_search_hits_carry_their_score_parts(store: MemoryBackend) -> None:
    corpus = load_corpus(store)
    [hit, *_] = store.search("连接池泄漏", limit=3)
    assert hit.id == corpus["pool_leak"] and hit.type == "bug" and hit.tags == ("数据库", "db")
    parts = hit.parts
    assert 0 < parts.relevance <= 1 and parts.type_weight == 0.6
    assert 0.99 < parts.recency <= 1 and parts.importance == 0.5
    expected = 0.65 * parts.relevance + 0.2 * 0.6 + 0.1 * parts.recency + 0.05 * 0.5
    assert hit.score == pytest.approx(expected)
    assert "连接池" in hit.snippet


def test_english_words_match_their_other_forms(store: MemoryBackend) -> None:
    note_id = save(store, "The worker leaks file handles when a job is cancelled.")
    assert ids(store, "leak") == [note_id]
    assert ids(store, "cancel*") == [note_id]


def test_excluded_words_and_filters_narrow_a_search(store: MemoryBackend) -> None:
    corpus = load_corpus(store)
    assert corpus["indexer_leak"] not in ids(store, "leak -indexer")
    assert ids(store, "Docker", scope="project:api") == [corpus["deploy"]]
    # a project scope also returns user notes, they apply to every project
    assert corpus["cache"] in ids(store, "缓存", scope="project:api")
    assert ids(store, "缓存", scope="project:other") == [corpus["cache"]]
    assert set(ids(store, "连接", type="bug")) == {corpus["pool_leak"], corpus["timeout"]}
    assert ids(store, "连接池", tag="DB") == [corpus["pool_leak"]]


def test_queries_of_operators_and_punctuation_never_fail(store: MemoryBackend) -> None:
    load_corpus(store)
    for query in ['"', "OR AND", "-", "(连接池 OR 缓存)", "a:b:c", "\x00", "%_\\", "连" * 500]:
        assert isinstance(store.search(query), list)
    assert store.search_detailed("").hits == []


# --- dedup, supersede, deprecate, expiry -----------------------------------------------------


def test_an_exact_duplicate_refreshes_the_existing_note(store: MemoryBackend) -> None:
    first = store.save(NoteDraft(content="User likes  green tea in the morning."))
    before = store.get(first.id)
    again = store.save(NoteDraft(content="user likes green tea\nin the MORNING."))
    assert again.deduplicated and (again.id, again.path) == (first.id, first.path)
    after = store.get(first.id)
    assert after.access_count == before.access_count + 1 and after.updated >= before.updated
    assert store.count() == 2
    other_scope = store.save(NoteDraft(content="User likes green tea.", scope="project:a"))
    assert not other_scope.deduplicated


def test_a_near_duplicate_refreshes_the_existing_note(store: MemoryBackend) -> None:
    text = (
        "部署流程：先在 staging 环境跑集成测试，通过后由 CI 打 tag，再用 Docker Compose "
        "滚动发布到生产环境，最后检查 /health 与告警面板。Rollback uses the previous image tag."
    )
    first = store.save(NoteDraft(content=text))
    near = store.save(NoteDraft(content=text.replace("最后", "然后")))
    assert near.deduplicated and near.id == first.id
    other = store.save(NoteDraft(content="部署流程完全不同：手工上传压缩包并重启服务。"))
    assert not other.deduplicated


def test_superseded_notes_leave_search(store: MemoryBackend) -> None:
    old = save(store, "Deploy target is Heroku.", type="decision")
    new = save(store, "Deploy target is Fly.io.", type="decision")
    note = store.supersede(old, new)
    assert (note.status, note.superseded_by) == ("superseded", new)
    assert ids(store, "deploy target") == [new]
    assert set(ids(store, "deploy target", include_inactive=True)) == {old, new}
    replaced = save(store, "Python 3.10 is the minimum.")
    newer = store.save(NoteDraft(content="Python 3.11 is the minimum.", supersedes=replaced))
    assert not newer.deduplicated
    assert store.get(replaced).status == "superseded"
    assert store.get(replaced).superseded_by == newer.id
    assert ids(store, "minimum") == [newer.id]
    with pytest.raises(InvalidInputError):
        store.supersede(new, new)


def test_deprecated_notes_leave_search_and_keep_the_reason(store: MemoryBackend) -> None:
    note_id = save(store, "Old habit: tabs for indentation.")
    note = store.deprecate(note_id, reason="switched to spaces")
    assert note.status == "deprecated" and note.extra["deprecated_reason"] == "switched to spaces"
    assert store.get(note_id).status == "deprecated"
    assert ids(store, "indentation") == []
    assert ids(store, "indentation", include_inactive=True) == [note_id]


def test_expired_notes_are_left_out_unless_asked_for(store: MemoryBackend) -> None:
    past = datetime.now(UTC) - timedelta(days=1)
    future = datetime.now(UTC) + timedelta(days=1)
    gone = save(store, "Sprint goal: ship search", expires_at=past)
    live = save(store, "Sprint goal: ship context", expires_at=future.isoformat())
    assert ids(store, "sprint goal") == [live]
    assert set(ids(store, "sprint goal", include_inactive=True)) == {gone, live}
    assert store.stats()["expired"] == 1
    assert gone not in [n.id for n, _ in store.top_notes()]


def test_expiry_follows_the_clock(open_store: Open) -> None:
    now = [datetime(2030, 1, 1, tzinfo=UTC)]
    store = open_store(clock=lambda: now[0])
    note_id = save(store, "temporary parking code 4711", expires_at="2030-01-02")
    assert ids(store, "parking") == [note_id]
    now[0] = datetime(2030, 1, 3, tzinfo=UTC)
    assert ids(store, "parking") == []
    # an expired note is no duplicate: saving the text again makes a new note
    assert store.save(NoteDraft(content="temporary parking code 4711")).id != note_id


# --- listing, counting, access, stats, export ------------------------------------------------


def test_list_and_count_filter_sort_and_page(store: MemoryBackend) -> None:
    a = save(store, "alpha note", type="bug", tags=["x"], importance=0.2)
    b = save(store, "beta note", type="bug", scope="project:p", importance=0.9)
    c = save(store, "gamma note", type="decision", tags=["X", "y"])
    assert [n.id for n in store.list(type="bug")] == [b, a]
    assert [n.id for n in store.list(scope="project:p")] == [b]
    assert {n.id for n in store.list(tag="x")} == {a, c}
    assert [n.id for n in store.list(type="bug", sort="importance")] == [b, a]
    assert [n.id for n in store.list(type="bug", sort="created", limit=1, offset=1)] == [a]
    store.search("gamma")
    assert store.list(sort="access")[0].id == c
    store.deprecate(a)
    assert [n.id for n in store.list(status="deprecated")] == [a]
    assert store.count(type="bug") == 2 and store.count(status="active") == 3
    assert store.count(tag="Y") == 1 and store.count(scope="project:p") == 1
    with pytest.raises(InvalidInputError):
        store.list(sort="colour")
    with pytest.raises(InvalidInputError):
        store.list(limit=0)


def test_search_hits_count_as_accesses(open_store: Open) -> None:
    store = open_store(access_flush_batch=1)
    note_id = save(store, "Kubernetes cluster runs on three nodes.")
    other = save(store, "Unrelated note about bread.")
    for _ in range(3):
        assert ids(store, "kubernetes") == [note_id]
    store.search("kubernetes", record_access=False)
    assert store.get(note_id).access_count == 3 and store.get(other).access_count == 0
    store.flush_access_counts()
    store.close()
    assert open_store().get(note_id).access_count == 3


def test_stats_count_by_type_scope_and_status(store: MemoryBackend) -> None:
    load_corpus(store)
    stats = store.stats()
    assert stats["total"] == len(CORPUS) + 1
    assert stats["by_type"]["bug"] == 3 and stats["by_type"]["identity"] == 2
    assert set(stats["by_type"]) >= {"identity", "general", "conversation"}
    assert stats["by_scope"] == {"project:api": 2, "user": len(CORPUS) - 1}
    assert stats["by_status"] == {"active": len(CORPUS) + 1}
    assert stats["expired"] == 0
    assert stats["encoder"]["enabled"] is False and stats["encoder"]["vectors"]["notes"] == 16
    assert stats["index"]["schema_version"] >= 1 and stats["index"]["size_bytes"] > 0


def test_iter_notes_yields_every_note_in_full(store: MemoryBackend) -> None:
    corpus = load_corpus(store)
    notes = list(store.iter_notes())
    assert len(notes) == store.count() == len(CORPUS) + 1
    assert [n.path for n in notes] == sorted(n.path for n in notes)
    by_id = {n.id: n for n in notes}
    assert by_id[corpus["retry"]] == store.get(corpus["retry"])
    assert "max_retries=5" in by_id[corpus["retry"]].body


def test_markdown_export_is_readable_and_imports_into_a_fresh_home(
    store: MemoryBackend, tmp_path: Path
) -> None:
    corpus = load_corpus(store)
    assert export_markdown(store, tmp_path / "export") == len(CORPUS) + 1
    files = sorted((tmp_path / "export").rglob("*.md"))
    assert len(files) == len(CORPUS) + 1
    assert any("max_retries=5" in f.read_text("utf-8") for f in files)
    with MemoryStore.open(MemoryConfig.for_home(tmp_path / "fresh", fsync=False)) as fresh:
        report = import_path(fresh, tmp_path / "export")
        assert not report.errors
        moved = {n.title: n for n in fresh.iter_notes()}
        for note in (store.get(i) for i in corpus.values()):
            assert (moved[note.title].body, moved[note.title].tags) == (note.body, note.tags)
        assert fresh.search("连接池")[0].title == store.search("连接池")[0].title


def test_top_notes_rank_active_notes_without_a_query(store: MemoryBackend) -> None:
    corpus = load_corpus(store)
    store.deprecate(corpus["person"])
    top = store.top_notes(limit=5)
    assert len(top) == 5 and top[0][0].id == "mem_user_profile"  # identity, importance 0.9
    assert [score for _, score in top] == sorted((score for _, score in top), reverse=True)
    assert corpus["person"] not in [n.id for n, _ in store.top_notes(limit=50)]
    assert corpus["jwt"] not in [n.id for n, _ in store.top_notes(limit=50, scope="user")]


def test_a_rebuild_gives_identical_results(open_store: Open) -> None:
    moment = datetime(2030, 1, 1, tzinfo=UTC)
    store = open_store(clock=lambda: moment)  # recency must not move between the searches
    load_corpus(store)
    queries = [q for q, _ in QUERIES]
    before = [
        [(h.id, round(h.score, 9)) for h in store.search(q, record_access=False)] for q in queries
    ]
    report = store.rebuild()
    assert report.added == len(CORPUS) + 1
    after = [
        [(h.id, round(h.score, 9)) for h in store.search(q, record_access=False)] for q in queries
    ]
    assert after == before


def test_a_closed_store_refuses_work(open_store: Open) -> None:
    store = open_store()
    store.close()
    store.close()  # idempotent
    with pytest.raises(Exception, match="closed"):
        store.search("anything")


# --- two instances -----------------------------------------------------------------------------


def test_two_stores_saving_concurrently_lose_nothing(open_store: Open) -> None:
    stores = [open_store(), open_store()]
    start = threading.Barrier(2)

    def writer(n: int) -> list[str]:
        start.wait()
        return [
            stores[n].save(NoteDraft(content=f"token{n}x{i}: {_digest(n, i)}")).id
            for i in range(200)
        ]

    with ThreadPoolExecutor(2) as pool:
        saved = [i for part in pool.map(writer, range(2)) for i in part]
    assert len(set(saved)) == 400
    assert stores[0].count() == stores[1].count() == 401
    assert {n.id for n in stores[1].iter_notes()} >= set(saved)
    assert ids(stores[1], "token0x199") == [saved[199]]
    assert ids(stores[0], "token1x0") == [saved[200]]


def test_the_same_note_saved_by_two_stores_at_once_is_stored_once(open_store: Open) -> None:
    stores = [open_store(), open_store()]
    start = threading.Barrier(8)

    def writer(n: int) -> str:
        start.wait()
        return stores[n % 2].save(NoteDraft(content="Both instances heard: the cat is Tom.")).id

    with ThreadPoolExecutor(8) as pool:
        results = set(pool.map(writer, range(8)))
    assert len(results) == 1
    assert stores[0].count() == 2
    assert stores[1].get(results.pop()).access_count == 7


# --- hybrid search -----------------------------------------------------------------------------


def embed_pending(store: MemoryBackend, encoder: HashingEncoder) -> int:
    """What the app's background embedding (`VectorSync.step`) does, batch by batch."""
    written = 0
    while pending := store.vectors.pending(encoder.name, 4):
        matrix = encoder.encode([c for note in pending for c in note.chunks], "passage")
        items, row = [], 0
        for note in pending:
            items.append((note, matrix[row : row + len(note.chunks)]))
            row += len(note.chunks)
        written += store.vectors.write(encoder.name, items)
    return written


def test_hybrid_search_with_vectors_written_in_the_background(store: MemoryBackend) -> None:
    pytest.importorskip("numpy")
    corpus = load_corpus(store)
    encoder = HashingEncoder()
    store.attach_encoder(encoder)
    outcome = store.search_detailed("连接池")
    assert outcome.mode == "keyword" and "no vectors" in (outcome.notice or "")
    generation = store.generation()
    assert not store.vectors.has_any()
    assert embed_pending(store, encoder) == len(CORPUS) + 1
    assert store.generation() != generation
    assert store.vectors.pending(encoder.name) == []
    assert store.vectors.models() == {encoder.name: len(CORPUS) + 1}
    assert store.stats()["encoder"]["vectors"]["embedded"] == len(CORPUS) + 1
    outcome = store.search_detailed("修复连接池泄漏")
    assert outcome.mode == "hybrid" and outcome.notice is None
    assert outcome.hits[0].id == corpus["pool_leak"]
    vector = store.search_detailed("Docker Compose healthcheck", mode="vector")
    assert vector.mode == "vector" and vector.hits[0].id == corpus["deploy"]
    assert store.search_detailed("连接池", mode="keyword").mode == "keyword"
    # an edit makes the note's vectors stale; a delete takes them away
    store.update(corpus["cache"], content="接口响应慢，改用本地内存缓存。")
    assert [p.id for p in store.vectors.pending(encoder.name)] == [corpus["cache"]]
    store.delete(corpus["deploy"])
    assert corpus["deploy"] not in ids(store, "Docker Compose healthcheck")
    assert store.sync_vectors() == 1 and store.vectors.pending(encoder.name) == []


def test_notes_saved_with_an_encoder_are_embedded_after_the_save(open_store: Open) -> None:
    pytest.importorskip("numpy")
    encoder = HashingEncoder()
    store = open_store(encoder=encoder)
    store.sync_vectors()  # the profile skeleton
    note_id = save(store, "Auth decision: we chose JWT plus Redis for sessions.")
    # a save never waits on the encoder (issue #29): the note waits for background embedding
    assert [p.id for p in store.vectors.pending(encoder.name)] == [note_id]
    assert store.sync_vectors() == 1
    assert store.vectors.pending(encoder.name) == []
    outcome = store.search_detailed("JWT sessions")
    assert outcome.mode == "hybrid" and outcome.hits[0].id == note_id
    other = HashingEncoder(dim=128)
    store.attach_encoder(other)
    assert store.search_detailed("JWT").mode == "keyword"
    assert store.reindex_vectors() == 2
    assert store.vectors.models() == {other.name: 2}
    assert store.reset_vectors() == {"cleared": True, "pending": 2}
    assert not store.vectors.has_any()


def test_a_scoped_hybrid_search_among_many_other_notes_finds_its_own(store: MemoryBackend) -> None:
    # few notes pass the scope: both stores rank only those (docs/search.md, filters first)
    pytest.importorskip("numpy")
    encoder = HashingEncoder()
    store.attach_encoder(encoder)
    words = [
        "cache",
        "pool",
        "leak",
        "timeout",
        "deploy",
        "token",
        "session",
        "queue",
        "缓存",
        "连接池",
        "泄漏",
        "超时",
        "部署",
    ]
    for n in range(120):
        content = " ".join(words[(n + i) % len(words)] for i in range(5)) + f" other{n}"
        save(store, content, scope="project:big")
    target = save(store, "Redis session tokens expire after an hour", scope="project:small")
    pool = save(store, "连接池 大小 设为 二十", scope="project:small")
    embed_pending(store, encoder)
    for mode in ("hybrid", "vector", "keyword"):
        outcome = store.search_detailed("session tokens", scope="project:small", mode=mode)
        assert outcome.mode == mode
        assert outcome.hits[0].id == target
        assert {h.scope for h in outcome.hits} <= {"project:small", "user"}
    assert ids(store, "连接池", scope="project:small")[0] == pool


# --- the seams under the shared algorithm (memory.search.engine, memory.core) ---------------


def _queries(store: MemoryBackend, filters: Filters) -> AbstractContextManager[SearchQueries]:
    assert isinstance(store, StoreCore)
    return store.search_queries(filters)


def test_each_backend_answers_the_search_engine_alike(store: MemoryBackend) -> None:
    # `memory.search.engine.SearchQueries`: the questions one search asks its backend
    pool = save(store, "Pool sizing: set max_pool_size to forty connections.", scope="project:a")
    both = save(store, "Pool warmup before traffic; sizing comes later.", scope="project:b")
    other = save(store, "Noodles need salted water.", scope="project:a")
    now = datetime.now(UTC).timestamp()
    everywhere = Filters.for_search(None, None, None, include_inactive=False, now_ts=now)
    only_b = Filters.for_search(None, "project:b", None, include_inactive=False, now_ts=now)
    with _queries(store, everywhere) as queries:
        found = queries.keyword_candidates(parse_query("pool"), everywhere, 10, require_all=False)
        assert {c.row["id"] for c in found} == {pool, both}
        bm25 = [c.bm25 for c in found if c.bm25 is not None]
        assert len(bm25) == len(found) and bm25 == sorted(
            bm25
        )  # best first: FTS5's bm25, lower is better
        every = queries.keyword_candidates(
            parse_query("pool forty"), everywhere, 10, require_all=True
        )
        assert [c.row["id"] for c in every] == [pool]
        assert [
            r["id"] for r in queries.identifier_rows(parse_query("pool_size"), everywhere, 10)
        ] == [pool]
        assert queries.identifier_rows(parse_query("连接池"), everywhere, 10) == []
        total, freqs = queries.doc_freqs(parse_query("pool noodles"))
        assert (total, freqs) == (store.count(), [2, 1])
        rows = queries.rows_by_id([other, "no-such-note"])
        assert list(rows) == [other]
        assert json.loads(rows[other]["tags"]) == [] and rows[other]["updated_ts"] > 0
    with _queries(store, only_b) as queries:
        found = queries.keyword_candidates(parse_query("pool"), only_b, 10, require_all=False)
        assert [c.row["id"] for c in found] == [both]
        assert queries.identifier_rows(parse_query("pool_size"), only_b, 10) == []


def test_each_backend_answers_the_vector_side_within_the_filters(store: MemoryBackend) -> None:
    pytest.importorskip("numpy")
    encoder = HashingEncoder()
    store.attach_encoder(encoder)
    near = save(store, "Redis session tokens expire after an hour.", scope="project:a")
    far = save(store, "Redis session tokens expire after a day.", scope="project:b")
    embed_pending(store, encoder)
    vector = QueryVector(encoder.encode(["Redis session tokens"], "query")[0], encoder.name)
    now = datetime.now(UTC).timestamp()
    everywhere = Filters.for_search(None, None, None, include_inactive=False, now_ts=now)
    only_a = Filters.of(None, "project:a", None, None, active_at=now)
    with _queries(store, everywhere) as queries:
        nearest = queries.nearest(vector, 5, everywhere)
        assert {near, far} <= {note_id for note_id, _ in nearest}
        cosines = [cosine for _, cosine in nearest]
        assert cosines == sorted(cosines, reverse=True) and -1.0 <= cosines[-1] <= 1.0
    with _queries(store, only_a) as queries:
        assert [note_id for note_id, _ in queries.nearest(vector, 5, only_a)] == [near]


# --- relevance and the floor (docs/retrieval.md, "Relevance and the floor") ------------------

UNRELATED = ("zzzqqq nonsense", "今天天气怎么样？", "what's the weather like today?", "讲个笑话吧")


@pytest.mark.parametrize("with_vectors", [False, True], ids=["keyword", "hybrid"])
def test_a_query_about_nothing_in_the_memory_returns_nothing(
    store: MemoryBackend, with_vectors: bool
) -> None:
    corpus = load_corpus(store)
    if with_vectors:
        pytest.importorskip("numpy")
        encoder = HashingEncoder()
        store.attach_encoder(encoder)
        embed_pending(store, encoder)
    mode: SearchMode = "hybrid" if with_vectors else "keyword"
    inject = store.config.injection_floor
    for query in UNRELATED:
        # nothing is strong enough to be injected into a prompt unasked
        outcome = store.search_detailed(query, mode=mode, floor=inject)
        assert outcome.mode == mode
        assert outcome.hits == [], (query, [(h.title, h.relevance) for h in outcome.hits])
        if not with_vectors:
            # keywords alone: a shared common word is no match, even for a search. (The test
            # encoder's cosines are lexical, not the packaged encoder's: the search floor is
            # calibrated on the latter, tests/embeddings/test_acceptance.py.)
            assert store.search_detailed(query, mode=mode).hits == [], query
    # the right note still comes back, with a relevance strong enough to inject
    (first, *_) = store.search_detailed("连接池泄漏怎么修复的？", mode=mode).hits
    assert first.id == corpus["pool_leak"] and first.relevance >= inject
    (first, *_) = store.search_detailed("how is the API deployed with Docker?", mode=mode).hits
    assert first.id == corpus["deploy"]
    # below the floor, asked for: the ranking alone, relevance low
    weak = store.search_detailed("what's the weather like today?", mode=mode, floor=0).hits
    assert all(h.relevance < inject for h in weak)


def test_relevance_means_the_same_whatever_else_was_found(store: MemoryBackend) -> None:
    corpus = load_corpus(store)
    alone = store.search("JWT", floor=0)
    among = store.search("JWT zzzqqq yyyxxx wwwvvv", floor=0)
    # not divided by the best hit: unknown words lower the only hit's evidence, and it stays
    # below the floor although nothing else was found
    assert alone[0].id == among[0].id == corpus["jwt"]
    assert alone[0].relevance == pytest.approx(1.0)
    assert among[0].relevance < store.config.relevance_floor
    assert store.search("JWT zzzqqq yyyxxx wwwvvv") == []
