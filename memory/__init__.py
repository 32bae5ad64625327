"""Long-term memory: markdown notes as the truth, a bilingual SQLite index for search.

Start with `memory.store.MemoryStore.open(MemoryConfig.for_home(home))`. Modules:
`model` (Note, types, scopes), `files` (front matter, atomic writes, layout), `index`
(SQLite, FTS5, migrations), `search` (query parsing, ranking), `context` (index-first
listings, `_index.json`), `capture` (redaction, `<private>`), `transfer` (import/export),
`api` (FastAPI router), `cli` (`claude-memory memory ...`). Nothing here imports agent/,
bridge/, web/ or settings; importing `memory.store` stays light (no FastAPI).
"""
