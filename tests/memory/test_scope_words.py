"""The SQLite index's scope words (memory/sqlite/index.py, migration 7): an index made before
them is rebuilt with them on open, and a project search then finds its notes, not another
project's (docs/search.md, "Filters first")."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memory.config import MemoryConfig
from memory.model import NoteDraft
from memory.search import fts5
from memory.sqlite.store import MemoryStore

TEXTS = {
    "project:alpha": [f"connection pool leak number {i} in the alpha service" for i in range(8)],
    "project:beta": [f"connection pool leak number {i} in the beta worker" for i in range(40)],
}


def _fill(config: MemoryConfig) -> None:
    with MemoryStore.open(config) as store:
        for scope, texts in TEXTS.items():
            for text in texts:
                store.save(NoteDraft(content=text, scope=scope))
        store.save(NoteDraft(content="I like connection pool leak stories", scope="user"))


def _as_before_scope_words(index: Path) -> None:
    """The index as the code before migration 7 left it: four FTS columns, text version 4."""
    conn = sqlite3.connect(index)
    conn.execute("DROP TABLE notes_fts")
    conn.execute(
        f"CREATE VIRTUAL TABLE notes_fts USING fts5({', '.join(fts5.COLUMNS)}, content='',"
        f" tokenize='{fts5.TOKENIZER}')"
    )
    conn.execute("DELETE FROM schema_migrations WHERE version = 7")
    conn.execute("UPDATE meta SET value = '4' WHERE key = 'text_version'")
    conn.commit()
    conn.close()


def test_an_index_from_before_scope_words_is_rebuilt_and_a_project_search_stays_in_it(
    tmp_path: Path,
) -> None:
    config = MemoryConfig.for_home(tmp_path / "home", fsync=False)
    _fill(config)
    _as_before_scope_words(config.index_path)
    with MemoryStore.open(config) as store:
        hits = store.search_detailed("connection pool leak", limit=20, scope="project:alpha").hits
        scopes = [note.scope for h in hits if (note := store.get(h.id)) is not None]
    # every alpha note and the user's one, none of beta's
    assert sorted(scopes) == ["project:alpha"] * len(TEXTS["project:alpha"]) + ["user"]
    conn = sqlite3.connect(config.index_path)
    columns = [r[1] for r in conn.execute("PRAGMA table_info(notes_fts)")]
    conn.close()
    assert columns == [*fts5.COLUMNS, "scope"]
