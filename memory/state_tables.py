"""The memory state's tables (episodes and their messages, pending entities, the hooks'
injection windows, note versions, supersessions, feedback, native imports), written once for
both databases: `memory.sqlite.state.StateDB` and `memory.postgres.state.PostgresStateDB` apply
these migrations through their `storage.sql.Dialect` (`{REAL}`: 8-byte floats on PostgreSQL,
whose REAL would round timestamps to minutes; `{SERIAL}`: an id the database assigns, which a
copy from a SQLite home may still set), and `memory migrate` copies the tables they create.

Tables carry a `mem_` prefix and migrate as their own component, so the agent's conversation
tables can share the SQLite file and the shared database.
"""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE mem_episodes (
        id TEXT PRIMARY KEY,
        key TEXT NOT NULL,
        project TEXT NOT NULL DEFAULT '',
        scope TEXT NOT NULL DEFAULT 'user',
        title TEXT NOT NULL,
        source TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'active',
        started {REAL} NOT NULL,
        ended {REAL},
        turns INTEGER NOT NULL DEFAULT 0,
        file_changes INTEGER NOT NULL DEFAULT 0,
        summary TEXT NOT NULL DEFAULT '',
        summary_note_id TEXT
    );
    CREATE INDEX mem_episodes_by_key ON mem_episodes(key, status);
    CREATE INDEX mem_episodes_by_time ON mem_episodes(started);
    CREATE TABLE mem_episode_messages (
        id {SERIAL},
        episode_id TEXT NOT NULL,
        role TEXT NOT NULL,
        kind TEXT NOT NULL DEFAULT 'message',
        title TEXT NOT NULL DEFAULT '',
        content TEXT NOT NULL,
        created {REAL} NOT NULL
    );
    CREATE INDEX mem_messages_by_episode ON mem_episode_messages(episode_id, id);
    CREATE TABLE mem_pending (
        id TEXT PRIMARY KEY,
        type TEXT NOT NULL,
        title TEXT NOT NULL,
        content TEXT NOT NULL,
        confidence {REAL} NOT NULL,
        scope TEXT NOT NULL DEFAULT 'user',
        source TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'pending',
        created {REAL} NOT NULL,
        note_id TEXT
    );
    CREATE TABLE mem_injections (
        key TEXT NOT NULL,
        note_id TEXT NOT NULL,
        turn INTEGER NOT NULL,
        PRIMARY KEY (key, note_id)
    );
    CREATE TABLE mem_turns (
        key TEXT PRIMARY KEY,
        turn INTEGER NOT NULL DEFAULT 0,
        previous TEXT NOT NULL DEFAULT ''
    );
    """,
    """
    -- versions of notes (memory.history.store): not derived from the notes, so here
    CREATE TABLE mem_note_versions (
        note_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        kind TEXT NOT NULL,
        door TEXT NOT NULL,
        session TEXT NOT NULL DEFAULT '',
        at {REAL} NOT NULL,
        digest TEXT NOT NULL,
        snapshot TEXT NOT NULL,
        restored_from INTEGER,
        PRIMARY KEY (note_id, version)
    );
    CREATE INDEX mem_note_versions_by_kind ON mem_note_versions(kind, at)
    """,
    """
    -- a new note that contradicts an older one, until the user chooses (memory.history.conflicts)
    CREATE TABLE mem_supersessions (
        id TEXT PRIMARY KEY,
        new_id TEXT NOT NULL,
        old_id TEXT NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'pending',
        keep TEXT,
        created {REAL} NOT NULL,
        resolved {REAL}
    );
    CREATE INDEX mem_supersessions_by_status ON mem_supersessions(status, created)
    """,
    """
    -- "not relevant to this prompt", said of a recalled note (memory.loop.feedback)
    CREATE TABLE mem_feedback (
        note_id TEXT NOT NULL,
        prompt TEXT NOT NULL,
        words TEXT NOT NULL,
        created {REAL} NOT NULL,
        PRIMARY KEY (note_id, prompt)
    );
    CREATE INDEX mem_feedback_by_time ON mem_feedback(created)
    """,
    """
    -- what the native memories' folders looked like at the last import (memory.clients.native)
    CREATE TABLE mem_native_imports (
        folders TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        imported {REAL} NOT NULL
    )
    """,
    """
    -- a model's memory change that waits for the person (memory.loop.reach): a pending entry
    -- that is not a new note holds what to do to which note
    ALTER TABLE mem_pending ADD COLUMN action TEXT NOT NULL DEFAULT 'save';
    ALTER TABLE mem_pending ADD COLUMN target TEXT;
    ALTER TABLE mem_pending ADD COLUMN change TEXT NOT NULL DEFAULT '';
    ALTER TABLE mem_pending ADD COLUMN why TEXT NOT NULL DEFAULT ''
    """,
    # Episodes by project, the pending list by status: PostgreSQL had these indexes from its
    # first version, SQLite has them too now.
    """
    CREATE INDEX IF NOT EXISTS mem_episodes_by_project ON mem_episodes(project, status);
    CREATE INDEX IF NOT EXISTS mem_pending_by_status ON mem_pending(status, created)
    """,
)
