"""MemoryStore: files as the truth, the index following, dedup, statuses, access counts."""

from __future__ import annotations

import logging
import random
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from errors import InvalidInputError, NotFoundError
from memory.config import MemoryConfig
from memory.model import NoteDraft
from memory.sqlite.store import MemoryStore
from tests.memory.corpus import load_corpus


def front_matter(path: Path) -> dict[str, object]:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


def search_ids(store: MemoryStore, query: str, **kwargs: object) -> list[str]:
    return [h.id for h in store.search(query, limit=20, **kwargs)]  # type: ignore[arg-type]


# --- save / get / update / delete --------------------------------------------------------------


def test_save_writes_a_markdown_note_with_front_matter(store: MemoryStore) -> None:
    result = store.save(
        NoteDraft(
            content="决定使用 SQLite 作为索引。\n\nFiles stay the source of truth.",
            title="索引选型",
            type="Decision",
            tags=["sqlite", "#索引"],
            importance=0.8,
            source="test",
        )
    )
    assert not result.deduplicated
    path = store.abspath(result.path)
    assert path.is_file() and path.suffix == ".md"
    meta = front_matter(path)
    assert meta["id"] == result.id
    assert meta["title"] == "索引选型"
    assert meta["type"] == "decision"
    assert meta["scope"] == "user"
    assert meta["tags"] == ["sqlite", "索引"]
    assert meta["status"] == "active" and meta["access_count"] == 0
    assert meta["importance"] == 0.8
    assert list(meta)[:14] == [
        "id", "title", "type", "scope", "tags", "created", "updated", "summary",
        "importance", "status", "superseded_by", "expires_at", "source", "access_count",
    ]  # fmt: skip
    assert "Files stay the source of truth." in path.read_text(encoding="utf-8")
    note = store.get(result.id)
    assert note.title == "索引选型" and note.body.startswith("决定使用 SQLite")
    assert note.summary == "决定使用 SQLite 作为索引。"


def test_notes_are_placed_by_scope_and_type(store: MemoryStore) -> None:
    assert store.save(NoteDraft(content="x in project", scope="project:api")).path.startswith(
        "projects/api/"
    )
    # user/ is the person's own: what the system learns goes to learned/ (issue #19)
    assert store.save(NoteDraft(content="likes tea", type="preference")).path.startswith("learned/")
    assert store.save(NoteDraft(content="chat summary", scope="chat:oc_1")).path.startswith(
        "sessions/"
    )
    assert store.save(NoteDraft(content="a new capture")).path.startswith("inbox/")


def test_entity_names_map_to_types(store: MemoryStore) -> None:
    expected = {
        "Decision": "decision",
        "Architecture": "architecture",
        "File": "code",
        "Preference": "preference",
        "Concept": "research",
        "Habit": "preference",
    }
    for entity, note_type in expected.items():
        result = store.save(NoteDraft(content=f"entity {entity} example text", type=entity))
        assert store.get(result.id).type == note_type


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("type", "nonsense"),
        ("scope", "teams:x"),
        ("importance", 1.5),
        ("expires_at", "next tuesday"),
        ("content", "   "),
        ("content", "<private>only secret</private>"),
    ],
)
def test_invalid_drafts_are_refused_with_a_clear_error(
    store: MemoryStore, field: str, value: object
) -> None:
    draft = {"content": "valid text", field: value}
    with pytest.raises(InvalidInputError) as info:
        store.save(NoteDraft(**draft))  # type: ignore[arg-type]
    assert info.value.message
    assert store.count() == 1  # only the profile skeleton


def test_get_unknown_id_raises_not_found(store: MemoryStore) -> None:
    with pytest.raises(NotFoundError) as info:
        store.get("mem_missing")
    assert "mem_missing" in info.value.message


def test_update_rewrites_the_file_and_reindexes(store: MemoryStore) -> None:
    result = store.save(NoteDraft(content="The build uses alphaTool for packaging."))
    before = store.get(result.id)
    note = store.update(
        result.id, content="The build uses omegaTool now.", tags=["build"], importance=0.9
    )
    assert note.body.strip() == "The build uses omegaTool now."
    assert note.tags == ("build",) and note.importance == 0.9
    assert note.updated >= before.updated and note.created == before.created
    assert note.title == "The build uses omegaTool now."  # derived title follows the body
    assert search_ids(store, "omegaTool") == [result.id]
    assert search_ids(store, "alphaTool") == []
    assert front_matter(store.abspath(result.path))["tags"] == ["build"]


def test_update_keeps_explicit_title_and_unknown_front_matter_keys(store: MemoryStore) -> None:
    result = store.save(NoteDraft(content="body one", title="Kept title"))
    path = store.abspath(result.path)
    path.write_text(
        path.read_text(encoding="utf-8").replace("access_count: 0", "access_count: 0\nmood: calm"),
        encoding="utf-8",
    )
    store.update(result.id, content="body two")
    meta = front_matter(path)
    assert meta["title"] == "Kept title" and meta["mood"] == "calm"


def test_update_refuses_unknown_fields_and_bad_values(store: MemoryStore) -> None:
    result = store.save(NoteDraft(content="some text"))
    with pytest.raises(InvalidInputError, match="updatable fields"):
        store.update(result.id, colour="blue")
    with pytest.raises(InvalidInputError, match="unknown type"):
        store.update(result.id, type="weird")
    with pytest.raises(NotFoundError):
        store.update("mem_nope", title="x")


def test_delete_removes_file_and_index_entry(store: MemoryStore) -> None:
    result = store.save(NoteDraft(content="temporary note about zebras"))
    store.delete(result.id)
    assert not store.abspath(result.path).exists()
    assert search_ids(store, "zebras") == []
    with pytest.raises(NotFoundError):
        store.get(result.id)
    with pytest.raises(NotFoundError):
        store.delete(result.id)


def test_list_filters_sorts_and_pages(store: MemoryStore) -> None:
    a = store.save(NoteDraft(content="alpha note", type="bug", tags=["x"], importance=0.2))
    b = store.save(NoteDraft(content="beta note", type="bug", scope="project:p", importance=0.9))
    c = store.save(NoteDraft(content="gamma note", type="decision", tags=["X", "y"]))
    assert [n.id for n in store.list(type="bug")] == [b.id, a.id]
    assert [n.id for n in store.list(scope="project:p")] == [b.id]
    assert {n.id for n in store.list(tag="x")} == {a.id, c.id}
    assert [n.id for n in store.list(type="bug", sort="importance")] == [b.id, a.id]
    assert [n.id for n in store.list(type="bug", sort="created", limit=1, offset=1)] == [a.id]
    store.search("gamma")
    assert store.list(sort="access")[0].id == c.id
    store.deprecate(a.id)
    assert [n.id for n in store.list(status="deprecated")] == [a.id]
    assert store.count(type="bug") == 2
    with pytest.raises(InvalidInputError):
        store.list(sort="colour")


# --- dedup, supersede, status, expiry ------------------------------------------------------------


def test_exact_duplicate_refreshes_the_existing_note(store: MemoryStore) -> None:
    first = store.save(NoteDraft(content="User likes  green tea in the morning."))
    before = store.get(first.id)
    again = store.save(NoteDraft(content="user likes green tea\nin the MORNING."))
    assert again.deduplicated and again.id == first.id and again.path == first.path
    after = store.get(first.id)
    assert after.access_count == before.access_count + 1
    assert after.updated >= before.updated
    assert len(store.list()) == 2  # + profile


def test_near_duplicate_refreshes_the_existing_note(store: MemoryStore) -> None:
    text = (
        "部署流程：先在 staging 环境跑集成测试，通过后由 CI 打 tag，再用 Docker Compose "
        "滚动发布到生产环境，最后检查 /health 与告警面板。Rollback uses the previous image tag."
    )
    first = store.save(NoteDraft(content=text))
    near = store.save(NoteDraft(content=text.replace("最后", "然后")))
    assert near.deduplicated and near.id == first.id
    other = store.save(NoteDraft(content="部署流程完全不同：手工上传压缩包并重启服务。"))
    assert not other.deduplicated


def test_near_duplicate_detection_respects_the_threshold(config: MemoryConfig) -> None:
    text = "The nightly job compacts the event log, rotates keys and mails a short report."
    with MemoryStore.open(MemoryConfig.for_home(config.root.parent, dedup_threshold=1.0)) as s:
        s.save(NoteDraft(content=text))
        assert not s.save(NoteDraft(content=text.replace("short", "brief"))).deduplicated
        assert s.save(NoteDraft(content=text)).deduplicated  # exact still counts


def test_duplicates_in_another_scope_are_separate_notes(store: MemoryStore) -> None:
    first = store.save(NoteDraft(content="Use ruff for linting.", scope="project:a"))
    second = store.save(NoteDraft(content="Use ruff for linting.", scope="project:b"))
    assert not second.deduplicated and second.id != first.id


def test_supersede_marks_the_old_note_and_hides_it(store: MemoryStore) -> None:
    old = store.save(NoteDraft(content="Deploy target is Heroku.", type="decision"))
    new = store.save(NoteDraft(content="Deploy target is Fly.io.", type="decision"))
    note = store.supersede(old.id, new.id)
    assert note.status == "superseded" and note.superseded_by == new.id
    meta = front_matter(store.abspath(old.path))
    assert meta["status"] == "superseded" and meta["superseded_by"] == new.id
    assert old.id not in search_ids(store, "deploy target")
    assert old.id in search_ids(store, "deploy target", include_inactive=True)
    with pytest.raises(NotFoundError):
        store.supersede(new.id, "mem_nope")


def test_save_with_supersedes_replaces_the_old_note(store: MemoryStore) -> None:
    old = store.save(NoteDraft(content="Python 3.10 is the minimum."))
    new = store.save(NoteDraft(content="Python 3.11 is the minimum.", supersedes=old.id))
    assert not new.deduplicated
    assert store.get(old.id).status == "superseded"
    assert store.get(old.id).superseded_by == new.id
    assert search_ids(store, "minimum") == [new.id]


def test_deprecated_notes_are_left_out_of_search(store: MemoryStore) -> None:
    result = store.save(NoteDraft(content="Old habit: tabs for indentation."))
    note = store.deprecate(result.id, reason="switched to spaces")
    assert note.status == "deprecated"
    assert front_matter(store.abspath(result.path))["deprecated_reason"] == "switched to spaces"
    assert search_ids(store, "indentation") == []
    assert search_ids(store, "indentation", include_inactive=True) == [result.id]


def test_expired_notes_are_left_out_unless_asked_for(store: MemoryStore) -> None:
    past = datetime.now(UTC) - timedelta(days=1)
    future = datetime.now(UTC) + timedelta(days=1)
    gone = store.save(NoteDraft(content="Sprint goal: ship search", expires_at=past))
    live = store.save(NoteDraft(content="Sprint goal: ship context", expires_at=future.isoformat()))
    assert search_ids(store, "sprint goal") == [live.id]
    assert set(search_ids(store, "sprint goal", include_inactive=True)) == {gone.id, live.id}
    assert store.stats()["expired"] == 1


def test_expiry_follows_the_clock(config: MemoryConfig) -> None:
    now = [datetime(2030, 1, 1, tzinfo=UTC)]
    with MemoryStore.open(config, clock=lambda: now[0]) as store:
        result = store.save(
            NoteDraft(content="temporary parking code 4711", expires_at="2030-01-02")
        )
        assert search_ids(store, "parking") == [result.id]
        now[0] = datetime(2030, 1, 3, tzinfo=UTC)
        assert search_ids(store, "parking") == []


# --- access counts -------------------------------------------------------------------------------


def test_search_hits_increase_access_count_and_reach_the_file(config: MemoryConfig) -> None:
    eager = MemoryConfig.for_home(config.root.parent, access_flush_batch=1)
    with MemoryStore.open(eager) as store:
        result = store.save(NoteDraft(content="Kubernetes cluster runs on three nodes."))
        other = store.save(NoteDraft(content="Unrelated note about bread."))
        for _ in range(3):
            assert search_ids(store, "kubernetes") == [result.id]
        assert store.get(result.id).access_count == 3
        assert store.get(other.id).access_count == 0
        store.search("kubernetes", record_access=False)
        assert store.get(result.id).access_count == 3
    assert front_matter(config.root / result.path)["access_count"] == 3
    with MemoryStore.open(config) as store:
        assert store.get(result.id).access_count == 3


def test_access_counts_survive_a_rebuild(store: MemoryStore) -> None:
    result = store.save(NoteDraft(content="Grafana dashboards live in the ops repo."))
    store.search("grafana")
    store.search("grafana")
    store.rebuild()
    assert store.get(result.id).access_count == 2


def test_access_counts_of_a_note_whose_front_matter_broke_survive_a_rebuild(
    store: MemoryStore,
) -> None:
    # its file cannot take the count (its front matter is not YAML any more), so the count
    # stays in the index: a rebuild drops the index, and used to drop the count with it
    result = store.save(NoteDraft(content="Grafana dashboards live in the ops repo."))
    path = store.abspath(result.path)
    path.write_text(
        path.read_text(encoding="utf-8").replace("---\n", "---\ntitle: [unclosed\n", 1),
        encoding="utf-8",
    )
    assert search_ids(store, "grafana") == [result.id]
    assert search_ids(store, "grafana") == [result.id]
    store.rebuild()
    assert store.get(result.id).access_count == 2
    store.rebuild()  # carried once, not twice
    assert store.get(result.id).access_count == 2


# --- files are the truth -------------------------------------------------------------------------


def test_hand_edit_shows_up_in_the_next_search(store: MemoryStore) -> None:
    result = store.save(NoteDraft(content="The cache backend is alphacache."))
    path = store.abspath(result.path)
    assert search_ids(store, "alphacache") == [result.id]
    # same size, same second: only the content changes
    path.write_text(path.read_text(encoding="utf-8").replace("alpha", "omega"), encoding="utf-8")
    assert search_ids(store, "omegacache") == [result.id]
    assert search_ids(store, "alphacache") == []
    assert "omegacache" in store.get(result.id).body


def test_hand_deleted_file_disappears_from_search(store: MemoryStore) -> None:
    result = store.save(NoteDraft(content="Staging database is called saturn."))
    store.abspath(result.path).unlink()
    assert search_ids(store, "saturn") == []
    with pytest.raises(NotFoundError):
        store.get(result.id)


def test_hand_deleted_file_is_noticed_on_a_large_store_too(config: MemoryConfig) -> None:
    # a store whose full rescans are throttled still checks the files it returns
    slow = MemoryConfig.for_home(
        config.root.parent, rescan_every_read_below=0, rescan_interval=3600
    )
    with MemoryStore.open(slow) as store:
        result = store.save(NoteDraft(content="Legacy queue is called rabbitmq-old."))
        assert search_ids(store, "rabbitmq") == [result.id]
        store.abspath(result.path).unlink()
        assert search_ids(store, "rabbitmq") == []
        added = config.root / "inbox" / "hand-written.md"
        added.write_text("# Notes\n\nThe new queue is nats-js.\n", encoding="utf-8")
        assert len(search_ids(store, "nats")) == 1  # folder mtime changed


def test_a_project_search_on_a_large_store_sees_new_files_of_its_project_at_once(
    config: MemoryConfig,
) -> None:
    # a read in one project checks its own folders (and the shared ones), not every
    # project's: those wait for an unscoped read or the next full rescan
    slow = MemoryConfig.for_home(
        config.root.parent, rescan_every_read_below=0, rescan_interval=3600
    )
    with MemoryStore.open(slow) as store:
        for key in ("web", "api"):
            store.save(
                NoteDraft(content=f"The {key} service is deployed daily.", scope=f"project:{key}")
            )
        assert search_ids(store, "kafka", scope="project:web") == []
        for key in ("web", "api"):
            (config.root / "projects" / key / "queue.md").write_text(
                f"# Queue\n\nThe {key} queue is kafka.\n", encoding="utf-8"
            )
        (config.root / "inbox" / "shared.md").write_text(
            "# Broker\n\nEvery team runs kafka 3.7.\n", encoding="utf-8"
        )
        web = store.search("kafka", limit=20, scope="project:web")
        assert sorted(h.path for h in web) == ["inbox/shared.md", "projects/web/queue.md"]
        everywhere = store.search("kafka", limit=20)
        assert len(everywhere) == 3


def test_hand_written_note_without_front_matter_is_indexed_not_rewritten(
    store: MemoryStore,
) -> None:
    path = store.root / "projects" / "web" / "ideas.md"
    path.parent.mkdir(parents=True)
    text = "# 前端想法\n\n用 htmx 替换部分 React 页面。\n"
    path.write_text(text, encoding="utf-8")
    hits = store.search("htmx")
    assert len(hits) == 1
    hit = hits[0]
    assert hit.title == "前端想法" and hit.path == "projects/web/ideas.md"
    assert hit.id.startswith("mem_f")
    assert path.read_text(encoding="utf-8") == text  # untouched
    store.rebuild()
    assert [h.id for h in store.search("htmx")] == [hit.id]  # stable id
    # an explicit update writes the id into the file
    store.update(hit.id, tags=["frontend"])
    assert front_matter(path)["id"] == hit.id


def test_moved_note_keeps_its_id(store: MemoryStore) -> None:
    result = store.save(NoteDraft(content="Moving notes keeps ids: quokka."))
    target = store.root / "projects" / "zoo" / "quokka.md"
    target.parent.mkdir(parents=True)
    store.abspath(result.path).rename(target)
    hits = store.search("quokka")
    assert [(h.id, h.path) for h in hits] == [(result.id, "projects/zoo/quokka.md")]


def test_copied_note_gets_its_own_id_with_a_warning(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    result = store.save(NoteDraft(content="Copy me: platypus."))
    copy = store.root / "inbox" / "copy.md"
    copy.write_bytes(store.abspath(result.path).read_bytes())
    with caplog.at_level(logging.WARNING):
        hits = store.search("platypus")
    assert len(hits) == 2 and result.id in {h.id for h in hits}
    assert "reuses id" in caplog.text


def test_reserved_files_are_never_notes(store: MemoryStore) -> None:
    (store.root / "projects" / "x").mkdir(parents=True)
    for rel in ("README.md", "MEMORY_SCHEMA.md", "projects/x/README.md", "_index.yaml"):
        (store.root / rel).write_text("reserved wombat text\n", encoding="utf-8")
    (store.root / "_index.json").write_text('{"wombat": 1}', encoding="utf-8")
    assert store.search("wombat") == []
    assert (store.root / "README.md").read_text(encoding="utf-8") == "reserved wombat text\n"


def test_deleting_index_db_and_reindexing_gives_identical_results(
    config: MemoryConfig,
) -> None:
    queries = ["连接池", "JWT", "缓存 Redis", "leak", "auth_timeout", "飞书"]
    with MemoryStore.open(config) as store:
        load_corpus(store)
        before = {q: [(h.id, round(h.score, 4)) for h in store.search(q)] for q in queries}
    for suffix in ("", "-wal", "-shm"):
        Path(f"{config.index_path}{suffix}").unlink(missing_ok=True)
    with MemoryStore.open(config) as store:
        report = store.rebuild()
        assert report.added == 16
        after = {q: [(h.id, round(h.score, 4)) for h in store.search(q)] for q in queries}
    assert after == before


def test_sync_reports_additions_changes_and_removals(store: MemoryStore) -> None:
    a = store.save(NoteDraft(content="first hand note"))
    b = store.save(NoteDraft(content="second hand note"))
    store.abspath(a.path).unlink()
    path_b = store.abspath(b.path)
    path_b.write_text(path_b.read_text(encoding="utf-8") + "\nmore text\n", encoding="utf-8")
    (store.root / "inbox" / "new.md").write_text("third note\n", encoding="utf-8")
    report = store.sync()
    assert (report.added, report.updated, report.removed) == (1, 1, 1)
    assert store.sync().changed is False


# --- damaged input -------------------------------------------------------------------------------


def test_broken_front_matter_is_searchable_and_warned_about(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    path = store.root / "inbox" / "broken.md"
    text = "---\nid: mem_broken1\ntitle: [unclosed\ntags: {\n---\n\n蓝鲸项目的部署说明 kestrel\n"
    path.write_text(text, encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        hits = store.search("蓝鲸 kestrel")
    assert [h.id for h in hits] == ["mem_broken1"]  # id salvaged from the broken YAML
    assert "not valid YAML" in caplog.text
    with pytest.raises(InvalidInputError, match="fix the file by hand"):
        store.update("mem_broken1", title="x")
    assert path.read_text(encoding="utf-8") == text
    assert store.stats()["broken_front_matter"] == 1


def test_unclosed_front_matter_is_still_found(store: MemoryStore) -> None:
    (store.root / "inbox" / "open.md").write_text("---\ntitle: never closed\nosprey\n")
    assert len(store.search("osprey")) == 1


def test_invalid_utf8_note_is_indexed_and_never_rewritten(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    path = store.root / "inbox" / "latin1.md"
    data = "Café notes: flamingo ".encode() + b"\xff\xfe broken \xe9 bytes\n"
    path.write_bytes(data)
    with caplog.at_level(logging.WARNING):
        hits = store.search("flamingo")
    assert len(hits) == 1 and "UTF-8" in caplog.text
    with pytest.raises(InvalidInputError):
        store.update(hits[0].id, content="replace")
    assert path.read_bytes() == data


def test_front_matter_with_bad_values_falls_back_to_defaults(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    path = store.root / "inbox" / "odd.md"
    path.write_text(
        "---\ntype: wizard\nimportance: high\nscope: galaxy\naccess_count: -3\n---\nnarwhal\n",
        encoding="utf-8",
    )
    with caplog.at_level(logging.WARNING):
        [hit] = store.search("narwhal")
    assert hit.type == "general" and hit.scope == "user"
    assert "unknown type" in caplog.text


def test_a_5_mb_note_is_saved_whole_and_found(store: MemoryStore) -> None:
    paragraph = "大文件测试 large-file paragraph with words. " * 20 + "\n"
    content = "needle-start 起点\n" + paragraph * (5_000_000 // len(paragraph.encode()) + 1)
    content += "needle-end 终点\n"
    result = store.save(NoteDraft(content=content, title="Big note"))
    text = store.abspath(result.path).read_text(encoding="utf-8")
    assert "needle-end" in text and len(text.encode()) > 5_000_000
    assert search_ids(store, "needle-start") == [result.id]
    assert store.get(result.id).body.rstrip().endswith("needle-end 终点")


def test_notes_over_the_size_limit_are_refused(config: MemoryConfig) -> None:
    small = MemoryConfig.for_home(config.root.parent, max_note_bytes=1000)
    with MemoryStore.open(small) as store, pytest.raises(InvalidInputError, match="larger"):
        store.save(NoteDraft(content="x" * 2000))


@pytest.mark.parametrize(
    "query",
    [
        '"', '""', "'", "*", "**", "-", "--", "- -", "OR", "AND", "NOT", "NEAR", "OR AND NOT",
        "(", ")", "()", "((a", "a)", "a OR", "OR b", "a AND NOT", "a NEAR/2 b", "NEAR(a b)",
        "title:x", "^a", "a:b:c", "{title}: x", '"unclosed phrase', "a*b*", "*a", "-*", "+",
        "\x00", "\\", "%", "_", "连接池*", '"连接池"', "-连接池", "(连接池 OR 缓存)",
        "🙂", "e\u0301", "   ", "", "a" * 5000, "连" * 3000,
    ],
)  # fmt: skip
def test_fts_syntax_in_queries_never_errors(store: MemoryStore, query: str) -> None:
    load_corpus(store)
    hits = store.search(query)
    assert isinstance(hits, list)


# --- concurrency within a process ----------------------------------------------------------------


def test_threads_can_save_and_search_at_the_same_time(store: MemoryStore) -> None:
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(25):
                store.save(NoteDraft(content=f"thread {n} note {i} token{n}x{i} {n * 1000 + i}"))
                store.search(f"token{n}x{i}")
        except BaseException as exc:  # collected, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.count() == 1 + 100
    assert len(list((store.root / "inbox").glob("*.md"))) == 100


def test_index_uses_wal_and_numbered_migrations(store: MemoryStore) -> None:
    conn = sqlite3.connect(store.config.index_path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
        assert versions == sorted(versions) and versions[0] == 1
    finally:
        conn.close()


def test_closed_store_refuses_work(config: MemoryConfig) -> None:
    store = MemoryStore.open(config)
    store.close()
    store.close()  # idempotent
    with pytest.raises(Exception, match="closed"):
        store.search("anything")


def test_a_damaged_index_is_set_aside_and_rebuilt(config: MemoryConfig) -> None:
    with MemoryStore.open(config) as store:
        result = store.save(NoteDraft(content="Recovery drill: the index can be rebuilt."))
    for suffix in ("-wal", "-shm"):
        Path(f"{config.index_path}{suffix}").unlink(missing_ok=True)
    config.index_path.write_bytes(b"this is not a database" * 100)
    with MemoryStore.open(config) as store:
        assert search_ids(store, "recovery drill") == [result.id]
    assert list(config.index_path.parent.glob("index.db.damaged-*"))


def test_very_common_words_rank_only_the_most_recent_matches(config: MemoryConfig) -> None:
    capped = MemoryConfig.for_home(config.root.parent, max_ranked_matches=3)
    with MemoryStore.open(capped) as store:
        ids = [store.save(NoteDraft(content=f"common word {i} unique{i}")).id for i in range(6)]
        assert set(search_ids(store, "common")) == set(ids[-3:])
        store.update(ids[0], content="common word changed unique0")  # now among the newest
        assert ids[0] in search_ids(store, "common")
        assert search_ids(store, "unique1") == [ids[1]]  # rare words are not affected


def test_the_match_cap_applies_before_a_scope_filter(config: MemoryConfig) -> None:
    capped = MemoryConfig.for_home(config.root.parent, max_ranked_matches=3)
    with MemoryStore.open(capped) as store:
        ids = [
            store.save(NoteDraft(content=f"common word rare{i}", scope=f"project:p{i % 2}")).id
            for i in range(6)
        ]
        # the newest 3 matches of the whole index are 3, 4 and 5; of those, 4 is in p0
        assert search_ids(store, "common", scope="project:p0") == [ids[4]]
        assert search_ids(store, "rare2", scope="project:p0") == [ids[2]]


def test_open_without_sync_still_checks_returned_files(config: MemoryConfig) -> None:
    with MemoryStore.open(config) as store:
        result = store.save(NoteDraft(content="Hooks open the store quickly: lemur."))
    with MemoryStore.open(config, sync=False) as store:
        assert search_ids(store, "lemur") == [result.id]
        store.abspath(result.path).unlink()
        assert search_ids(store, "lemur") == []


def test_access_counts_wait_in_the_index_until_a_batch_is_pending(
    config: MemoryConfig,
) -> None:
    with MemoryStore.open(config) as store:
        result = store.save(NoteDraft(content="Batching file writes: pangolin."))
        store.search("pangolin")
    assert front_matter(config.root / result.path)["access_count"] == 0
    with MemoryStore.open(config) as store:
        assert store.get(result.id).access_count == 1
        assert store.flush_access_counts() == 1
        assert front_matter(config.root / result.path)["access_count"] == 1
        assert store.get(result.id).access_count == 1


def test_reads_do_not_wait_for_a_long_sync_in_another_thread(store: MemoryStore) -> None:
    result = store.save(NoteDraft(content="Searchable while a rebuild runs: ibis."))
    busy = threading.Event()
    release = threading.Event()

    def long_sync() -> None:
        with store._sync_lock:  # what a rebuild holds for its whole duration
            busy.set()
            release.wait(10)

    worker = threading.Thread(target=long_sync)
    worker.start()
    try:
        busy.wait(5)
        started = time.monotonic()
        assert search_ids(store, "ibis") == [result.id]
        assert time.monotonic() - started < 2
    finally:
        release.set()
        worker.join()


_WORDS = [
    "cache",
    "pool",
    "leak",
    "timeout",
    "deploy",
    "token",
    "session",
    "queue",
    "index",
    "query",
    "retry",
    "lock",
    "thread",
    "缓存",
    "连接池",
    "泄漏",
    "超时",
    "部署",
    "令牌",
    "会话",
    "队列",
    "索引",
    "查询",
    "重试",
]


def _fill_scopes(store: MemoryStore, small: int, big: int) -> None:
    """`small` notes in project:small and `big` in project:big, of varied words."""
    for n in range(small + big):
        words = random.Random(n).sample(_WORDS, 8)
        scope = "project:small" if n < small else "project:big"
        store.save(NoteDraft(content=f"note {n}: {' '.join(words)} pool_size_{n}", scope=scope))


def test_a_narrow_filter_ranks_the_same_keyword_rows_first_or_last(store: MemoryStore) -> None:
    from memory.search.filters import Filters
    from memory.search.keyword import parse_query
    from memory.sqlite.index import fts_rows, narrowed, trigram_rows

    _fill_scopes(store, 12, 150)
    conn = store.index.conn()
    assert trigram_rows(conn, '"size_1"', Filters(), 200)  # pool_size_1, pool_size_10 ... hold it
    for scope, kind in [("project:small", None), ("project:big", None), (None, "bug")]:
        filters = Filters.for_search(kind, scope, None, include_inactive=False, now_ts=time.time())
        for query in ["cache", "连接池 超时", "leak queue -lock", "索引"]:
            match = parse_query(query).fts()
            late = fts_rows(conn, match, filters, 10, 100)
            first = fts_rows(conn, match, filters, 10, 100, first=narrowed(conn, filters))
            assert [(r["id"], r["bm25"]) for r in first] == [(r["id"], r["bm25"]) for r in late]
        late = trigram_rows(conn, '"size_1"', filters, 10, 100)
        first = trigram_rows(conn, '"size_1"', filters, 10, 100, first=narrowed(conn, filters))
        assert [r["id"] for r in first] == [r["id"] for r in late]


def test_a_narrow_filter_scans_only_its_vectors_and_finds_the_same(store: MemoryStore) -> None:
    pytest.importorskip("numpy")
    from memory.encoders.models import HashingEncoder

    encoder = HashingEncoder()
    store.attach_encoder(encoder)
    _fill_scopes(store, 12, 150)
    store.sync_vectors()
    small = {n.id for n in store.iter_notes() if n.scope in ("project:small", "user")}
    asked: list[int] = []

    def subset(most: int) -> list[str]:
        asked.append(most)
        return sorted(small)

    for query in ["cache pool", "连接池 泄漏", "deploy token n3x"]:
        vector = encoder.encode([query], "query")[0]
        k = len(small)
        late = store.vectors.search(encoder.name, vector, k, allowed=lambda ids: small & set(ids))
        first = store.vectors.search(encoder.name, vector, k, subset=subset)
        # equal scores may come in another order (the full scan's partition does not keep
        # the row order; the narrow scan does)
        assert set(first) == set(late) and len(first) == k
        assert [score for _, score in first] == [score for _, score in late]
    assert asked and all(most >= len(small) for most in asked)
    hits = store.search_detailed("cache pool", scope="project:small").hits
    assert hits and {h.scope for h in hits} <= {"project:small", "user"}
