"""The chat agent's in-process memory tools refuse nonsense with an error saying what is wrong,
by the same rules as the MCP server and the HTTP API (memory/inputs.py), and change nothing."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.memory_tools import build_memory_tools
from memory.config import MemoryConfig
from memory.model import NoteDraft
from memory.sqlite.store import MemoryStore

BAD_INPUTS: list[tuple[str, dict[str, Any], str]] = [
    ("memory_search", {}, "query: Field required"),
    ("memory_search", {"query": ""}, "query: String should have at least 1 character"),
    ("memory_search", {"query": "  "}, "query: String should match pattern"),
    ("memory_search", {"query": "pool", "limit": -1}, "limit: Input should be greater than"),
    ("memory_search", {"query": "pool", "limit": 31}, "limit: Input should be less than"),
    ("memory_search", {"query": "pool", "type": "wizard"}, "unknown type 'wizard'"),
    ("memory_search", {"query": "pool", "colour": "red"}, "colour: Extra inputs"),
    ("memory_get", {"ids": []}, "ids: List should have at least 1 item"),
    ("memory_get", {"ids": [""]}, "ids.0: String should have at least 1 character"),
    ("memory_get", {"ids": [f"mem_{n}" for n in range(11)]}, "at most 10 items"),
    ("memory_save", {"content": ""}, "content: String should have at least 1 character"),
    ("memory_save", {"content": "x", "importance": 3}, "importance: Input should be less"),
    ("memory_save", {"content": "x", "type": "wizard"}, "unknown type"),
    ("memory_update", {"id": "<note>"}, "nothing to change"),
    ("memory_update", {"id": "<note>", "content": " "}, "content: String should match"),
    ("memory_update", {"id": "mem_nope", "title": "x"}, "not found"),
    ("memory_update", {"id": ""}, "id: String should have at least 1 character"),
    ("memory_deprecate", {"id": ""}, "id: String should have at least 1 character"),
    ("memory_deprecate", {"id": "mem_nope"}, "not found"),
]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(MemoryConfig.for_home(tmp_path / "home", fsync=False)) as opened:
        yield opened


def files(store: MemoryStore) -> dict[str, str]:
    return {
        str(p.relative_to(store.root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(store.root.rglob("*.md"))
    }


async def test_every_tool_refuses_bad_input_and_changes_nothing(store: MemoryStore) -> None:
    note = store.save(NoteDraft(content="The pool holds 20 connections.")).id
    tools = {t.name: t for t in build_memory_tools(store)}
    assert set(tools) == {tool for tool, _, _ in BAD_INPUTS}
    before = files(store)
    wrong = []
    for tool, arguments, expected in BAD_INPUTS:
        args = {k: note if v == "<note>" else v for k, v in arguments.items()}
        result = await tools[tool].handler(args)
        text = result["content"][0]["text"]
        if not result.get("is_error") or expected not in text:
            wrong.append(f"{tool}({arguments}) -> {result.get('is_error')}: {text[:200]}")
    assert not wrong, "\n".join(wrong)
    assert files(store) == before
    # the limits are in the schema the model sees
    assert tools["memory_search"].input_schema["properties"]["limit"]["maximum"] == 30
    found = await tools["memory_search"].handler({"query": "pool", "limit": 3})
    assert f"[{note}]" in found["content"][0]["text"]
    read = await tools["memory_get"].handler({"ids": [note]})
    assert "The pool holds 20" in read["content"][0]["text"]
    assert store.get(note).access_count == 2  # found once, read once
