"""MemoryStore with an encoder: hybrid search, fallbacks with a notice, vectors that follow
the notes (edits, rebuilds, deletes, model changes), chunking, cosine near-duplicates."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory.config import MemoryConfig
from memory.model import NoteDraft
from memory.sqlite.store import MemoryStore
from tests.embeddings.fakes import ScriptedEncoder

np = pytest.importorskip("numpy")


@pytest.fixture
def encoder() -> ScriptedEncoder:
    return ScriptedEncoder()


@pytest.fixture
def store(tmp_path: Path, encoder: ScriptedEncoder) -> Iterator[MemoryStore]:
    config = MemoryConfig.for_home(tmp_path / "home", fsync=False)
    with MemoryStore.open(config, encoder=encoder) as opened:
        opened.sync_vectors()  # the profile skeleton every store starts with
        yield opened


def save(store: MemoryStore, content: str, **fields: object) -> str:
    """Save, then embed what is pending, as the app's background embedding soon does."""
    note_id = store.save(NoteDraft(content=content, **fields)).id  # type: ignore[arg-type]
    store.sync_vectors()
    return note_id


def test_without_an_encoder_search_is_keyword_only_and_says_nothing(tmp_path: Path) -> None:
    config = MemoryConfig.for_home(tmp_path / "plain", fsync=False)
    with MemoryStore.open(config) as plain:
        plain.save(NoteDraft(content="连接池泄漏：数据库连接没有归还"))
        outcome = plain.search_detailed("连接池")
    assert outcome.mode == "keyword" and outcome.notice is None
    assert len(outcome.hits) == 1


def test_a_question_with_no_shared_word_finds_its_note_by_vector(
    store: MemoryStore, encoder: ScriptedEncoder
) -> None:
    encoder.directions = {"JWT": encoder.unit(1), "登录": encoder.unit(1, tilt=0.1, towards=2)}
    target = save(store, "Auth decision: we chose JWT plus Redis for sessions.")
    save(store, "用户每天早上喝一杯黑咖啡，不加糖。")
    save(store, "周报每周五下午发到项目群里。")
    assert store.search_detailed("登录功能怎么实现？", mode="keyword").hits == []
    outcome = store.search_detailed("登录功能怎么实现？")
    assert outcome.mode == "hybrid" and outcome.notice is None
    assert outcome.hits[0].id == target


def test_a_save_never_waits_on_the_encoder_and_the_note_is_embedded_once_later(
    store: MemoryStore, encoder: ScriptedEncoder
) -> None:
    encoder.calls.clear()
    note_id = store.save(NoteDraft(content="A short note about the deploy script.")).id
    assert encoder.calls == []  # issue #29: a save took 1-5 s waiting for the model
    assert [p.id for p in store.vectors.pending(encoder.name)] == [note_id]
    store.sync_vectors()
    assert encoder.calls == [("passage", ["A short note about the deploy script."])]
    assert store.vectors.pending(encoder.name) == []


def test_while_the_encoder_loads_search_falls_back_to_keywords_and_says_so(
    store: MemoryStore, encoder: ScriptedEncoder
) -> None:
    save(store, "修复连接池泄漏：数据库连接没有归还")
    encoder.state = "loading"
    outcome = store.search_detailed("连接池")
    assert outcome.mode == "keyword"
    assert outcome.notice is not None and "loading" in outcome.notice
    assert [h.title for h in outcome.hits] == ["修复连接池泄漏：数据库连接没有归还"]


def test_a_note_saved_while_the_encoder_loads_is_embedded_later(
    store: MemoryStore, encoder: ScriptedEncoder
) -> None:
    encoder.state = "loading"
    note_id = store.save(NoteDraft(content="Saved before the model was ready.")).id
    encoder.state = "ready"
    assert [p.id for p in store.vectors.pending(encoder.name)] == [note_id]
    assert store.sync_vectors() == 1
    assert store.vectors.pending(encoder.name) == []


def test_no_vectors_yet_is_reported(tmp_path: Path, encoder: ScriptedEncoder) -> None:
    config = MemoryConfig.for_home(tmp_path / "late", fsync=False)
    with MemoryStore.open(config) as late:
        late.save(NoteDraft(content="keyword only note"))
        late.attach_encoder(encoder)
        outcome = late.search_detailed("keyword")
        assert outcome.mode == "keyword" and "no vectors" in (outcome.notice or "")
        late.sync_vectors()
        assert late.search_detailed("keyword").mode == "hybrid"


def test_keyword_mode_never_touches_the_encoder(
    store: MemoryStore, encoder: ScriptedEncoder
) -> None:
    save(store, "note one")
    encoder.calls.clear()
    outcome = store.search_detailed("note", mode="keyword")
    assert outcome.mode == "keyword" and encoder.calls == []


def test_vectors_survive_a_rebuild_and_follow_edits(
    store: MemoryStore, encoder: ScriptedEncoder
) -> None:
    note_id = save(store, "The first version of a note.")
    store.rebuild()
    assert store.vectors.pending(encoder.name) == []  # same id, same text: nothing to redo
    store.update(note_id, content="The second version says something else.")
    assert [p.id for p in store.vectors.pending(encoder.name)] == [note_id]
    store.sync_vectors()
    assert store.vectors.pending(encoder.name) == []


def test_a_new_encoder_makes_vectors_stale_and_reindex_replaces_them(
    store: MemoryStore, encoder: ScriptedEncoder
) -> None:
    save(store, "note a")
    save(store, "note b")
    other = ScriptedEncoder(name="scripted-v2")
    store.attach_encoder(other)
    stats = store.stats()["encoder"]["vectors"]
    assert stats["embedded"] == 0 and stats["stale"] == stats["notes"]
    assert store.search_detailed("note").mode == "keyword"  # no vectors of this model yet
    done = []
    assert store.reindex_vectors(progress=lambda *a: done.append(a)) == stats["notes"]
    assert done[-1] == ("embed", stats["notes"], stats["notes"])
    assert store.vectors.models() == {"scripted-v2": stats["notes"]}


def test_deleted_notes_are_never_returned_by_vectors(
    store: MemoryStore, encoder: ScriptedEncoder
) -> None:
    # both near "alpha", far enough from each other not to be duplicates
    encoder.directions = {
        "alpha": encoder.unit(3),
        "delete": encoder.unit(10),
        "keep": encoder.unit(11),
    }
    gone = save(store, "alpha note to delete")
    kept = save(store, "alpha note to keep")
    store.delete(gone)
    ids = [h.id for h in store.search_detailed("alpha", mode="vector").hits]
    assert gone not in ids and kept in ids
    assert store.vectors.prune() >= 1


def test_filters_and_status_apply_to_vector_hits(
    store: MemoryStore, encoder: ScriptedEncoder
) -> None:
    encoder.directions = {
        "beta": encoder.unit(4),
        "crash": encoder.unit(10),
        "plan": encoder.unit(11),
        "legacy": encoder.unit(12),
    }
    bug = save(store, "beta crash in the uploader", type="bug")
    other = save(store, "beta plan for the offsite", type="project", scope="project:x")
    old = save(store, "beta legacy decision", type="decision")
    store.deprecate(old)
    hits = store.search_detailed("beta", type="bug", mode="vector").hits
    assert [h.id for h in hits] == [bug]
    ids = {h.id for h in store.search_detailed("beta", mode="vector").hits}
    assert old not in ids and {bug, other} <= ids
    inactive = {h.id for h in store.search_detailed("beta", include_inactive=True).hits}
    assert old in inactive


def test_a_long_note_is_found_by_a_later_chunk(
    store: MemoryStore, encoder: ScriptedEncoder
) -> None:
    encoder.directions = {"zebra": encoder.unit(5)}
    filler = " ".join(f"Sentence number {i} talks about nothing in particular." for i in range(60))
    note_id = save(store, filler + " The last part mentions a zebra crossing.")
    save(store, "An unrelated short note.")
    chunks = (
        store.index.conn()
        .execute("SELECT count(*) FROM note_vectors WHERE id = ?", (note_id,))
        .fetchone()[0]
    )
    assert chunks > 1
    hits = store.search_detailed("zebra", mode="vector").hits
    assert hits[0].id == note_id


def test_a_paraphrase_is_one_fact_once_embedded_and_a_changed_claim_is_pending(
    tmp_path: Path, encoder: ScriptedEncoder
) -> None:
    from memory.history.conflicts import ConflictStore
    from memory.history.store import HistoryStore
    from memory.sqlite.state import StateDB

    encoder.directions = {
        "dark mode": encoder.unit(6),
        "dark theme": encoder.unit(6, tilt=0.2, towards=7),  # cosine ~0.98
        "light mode": encoder.unit(6, tilt=0.6, towards=8),  # cosine ~0.86
    }
    state = StateDB(tmp_path / "state.db")
    config = MemoryConfig.for_home(tmp_path / "home", fsync=False)
    with MemoryStore.open(config, encoder=encoder) as store:
        store.attach_history(HistoryStore(state))
        first = store.save(NoteDraft(content="The user prefers dark mode in every editor."))
        again = store.save(NoteDraft(content="User likes a dark theme in all of the editors."))
        store.sync_vectors()
        # one fact said twice: the newer wording stands for it, the older is kept, replaced
        assert not again.deduplicated
        assert store.get(first.id).status == "superseded"
        assert store.get(first.id).superseded_by == again.id
        assert HistoryStore(state).versions(first.id)[0].kind == "supersede"
        other = store.save(NoteDraft(content="The user prefers light mode in every editor."))
        store.sync_vectors()
        # "dark" -> "light": another claim, never merged; the person chooses
        assert store.get(other.id).status == "active"
        assert store.get(again.id).status == "active"
        (pending,) = ConflictStore(state).list()
        assert (pending.new_id, pending.old_id) == (other.id, again.id)
    state.close()


def test_long_notes_are_not_folded_by_cosine(store: MemoryStore, encoder: ScriptedEncoder) -> None:
    encoder.directions = {"gamma": encoder.unit(9)}
    first = store.save(NoteDraft(content="gamma summary of the project."))
    long_text = "gamma summary of the project. " + " ".join(
        f"Detail {i}: a different fact worth keeping." for i in range(60)
    )
    second = store.save(NoteDraft(content=long_text))
    store.sync_vectors()
    assert not second.deduplicated and second.id != first.id
    assert store.get(first.id).status == "active" and store.get(second.id).status == "active"


def test_stats_report_the_encoder_and_vectors(store: MemoryStore, encoder: ScriptedEncoder) -> None:
    save(store, "one")
    info = store.stats()["encoder"]
    assert info["state"] == "ready" and info["model"] == "scripted-v1" and info["dim"] == 16
    assert info["enabled"] is True
    assert info["vectors"]["embedded"] == info["vectors"]["notes"]


def test_a_long_prompt_is_encoded_by_its_start_and_its_question_and_found_by_its_words(
    store: MemoryStore, encoder: ScriptedEncoder
) -> None:
    # A prompt pasted with a long log: E5 pays ~1.2 ms of CPU per token, so the whole text
    # made a hook's vector cost a second; the vector now takes the start and the question,
    # the keywords the whole text.
    encoder.directions = {"rollback": encoder.unit(3)}
    target = save(store, "Rollback plan: restore the nightly backup, then replay the queue.")
    log_lines = " ".join(f"line {i}: worker heartbeat ok" for i in range(200))
    prompt = f"The deploy failed again. {log_lines} what is our rollback plan?"
    encoder.calls.clear()
    outcome = store.search_detailed(prompt, floor=0.0)
    queries = [texts for kind, texts in encoder.calls if kind == "query"]
    assert len(queries) == 1 and len(queries[0]) == 1
    encoded = queries[0][0]
    assert encoded.startswith("The deploy failed again.")
    assert encoded.endswith("what is our rollback plan?")
    assert len(encoded.split()) < 40 < len(prompt.split())
    assert outcome.mode == "hybrid" and outcome.hits[0].id == target
    # a prompt of ordinary length is encoded whole
    encoder.calls.clear()
    store.search_detailed("what is our rollback plan after a failed deploy?", floor=0.0)
    assert encoder.calls == [("query", ["what is our rollback plan after a failed deploy?"])]


def test_a_long_chinese_prompt_keeps_its_start_and_its_question() -> None:
    from memory.search.plan import vector_text

    prompt = "部署又失败了。" + "日志显示心跳正常，" * 80 + "我们的回滚方案是什么？"
    text = vector_text(prompt)
    assert text.startswith("部署又失败了。") and text.endswith("我们的回滚方案是什么？")
    assert len(text) < 60 < len(prompt)
    assert vector_text("回滚方案是什么？") == "回滚方案是什么？"
