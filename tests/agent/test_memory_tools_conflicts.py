"""The chat agent's memory_save tells the model when a new note contradicts an older one, so
it can ask the user which to keep (the store and state database are real)."""

from __future__ import annotations

from pathlib import Path

from agent.memory_tools import build_memory_tools
from memory.config import MemoryConfig
from memory.conflicts import ConflictStore
from memory.history_store import HistoryStore
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
