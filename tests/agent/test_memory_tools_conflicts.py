"""The chat agent's memory_save tells the model when a new note contradicts an older one, so
it can ask the user which to keep (the store and state database are real)."""

from __future__ import annotations

from pathlib import Path

from agent.memory_tools import build_memory_tools
from memory.config import MemoryConfig
from memory.history.conflicts import ConflictStore
from memory.history.store import HistoryStore
from memory.loop.entities import PendingStore
from memory.model import NoteDraft
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore


async def test_a_contradicting_save_tells_the_model_it_is_pending(tmp_path: Path) -> None:
    state = StateDB(tmp_path / "home" / "state.db")
    with MemoryStore.open(MemoryConfig.for_home(tmp_path / "home", fsync=False)) as store:
        store.attach_history(HistoryStore(state))
        [save] = [t for t in build_memory_tools(store) if t.name == "memory_save"]
        first = await save.handler({"content": "用户周末有空", "type": "preference"})
        second = await save.handler({"content": "用户周末没空", "type": "preference"})
        [old_text, new_text] = [r["content"][0]["text"] for r in (first, second)]
        [pending] = ConflictStore(state).list()
        assert f"conflicts with [{pending.old_id}]" in new_text
        assert f"Pending your choice ({pending.id})" in new_text
        assert old_text.startswith(f"Saved as [{pending.old_id}]")
    state.close()


async def test_the_model_says_what_a_save_updates_or_repeats_and_the_store_checks_it(
    tmp_path: Path,
) -> None:
    # mem0's update step, in the chat: the model searched and says add / update / repeat;
    # the decision is checked, recorded in the history with its source, and never deletes
    from memory.notes.changes import conversation_source

    state = StateDB(tmp_path / "home" / "state.db")
    with MemoryStore.open(MemoryConfig.for_home(tmp_path / "home", fsync=False)) as store:
        store.attach_history(HistoryStore(state))
        tools = build_memory_tools(store, conversation_id="c-1", pending=PendingStore(state))
        [save] = [t for t in tools if t.name == "memory_save"]

        async def said(args: dict[str, object]) -> str:
            return str((await save.handler(args))["content"][0]["text"])

        old = store.save(NoteDraft(content="Daily standup is at 9:30.", type="preference")).id
        # a repeat that is not one: a number differs, so the model is told to update
        refused = await said(
            {"content": "Standup is at 9:45.", "relation": "repeats", "about": old}
        )
        assert "does not say the same" in refused and "relation=updates" in refused
        assert store.count() == 2  # the profile and the old note: nothing written
        # an update names the note it replaces: kept, marked replaced
        text = await said(
            {"content": "Standup moved to 9:45.", "relation": "updates", "about": old}
        )
        new = text.split("[", 1)[1].split("]", 1)[0]
        assert store.get(old).status == "superseded" and store.get(old).superseded_by == new
        version = HistoryStore(state).versions(old)[0]
        assert version.kind == "supersede" and version.source == conversation_source("c-1")
        # a true repeat writes nothing; an update of a replaced note is refused
        assert "nothing new was written" in await said(
            {"content": "Standup: 9:45.", "relation": "repeats", "about": new}
        )
        assert "is superseded" in await said(
            {"content": "Standup at 10:00.", "relation": "updates", "about": old}
        )
        assert "needs `about`" in await said({"content": "x", "relation": "updates"})
        assert store.count() == 3
    state.close()
