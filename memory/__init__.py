"""Long-term memory: markdown notes as the truth, a derived bilingual index for search.

The folders say what each part does (docs/architecture.md, "memory/, by job"):
`notes/` the files (and what a change to a note is), `search/` pure ranking, `encoders/` text
to vectors, `sqlite/` and `postgres/` the two backends behind the seams of `backend.py` (and
the algorithm both share, `core.py`), `history/` the notes' versions and pending conflicts,
`loop/` what goes into a model's context, `clients/` Claude Code and Codex (hooks, MCP server,
installer, background work), `cli/` `claude-memory memory ...`. The modules at this level are
what several folders share (the vocabulary: `model`, `config`, text helpers). Open a memory
with `memory.clients.opening.open_memory(MemoryConfig.for_home(home))`.

This package imports nothing at import time (the hook process imports only what its event
needs), and nothing here imports agent/, bridge/, web/ or settings.
"""
