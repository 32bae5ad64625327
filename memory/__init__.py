"""Long-term memory: markdown notes as the truth, a derived bilingual index for search.

The folders say what each part does (docs/architecture.md, "memory/, by job"):
`notes/` the files, `search/` pure ranking, `encoders/` text to vectors, `sqlite/` and
`postgres/` the two backends behind the seams of `backend.py`, `loop/` what goes into a
model's context, `clients/` Claude Code and Codex (hooks, MCP server, installer). Open a
memory with `memory.clients.opening.open_memory(MemoryConfig.for_home(home))`.

This package imports nothing at import time (the hook process imports only what its event
needs), and nothing here imports agent/, bridge/, web/ or settings.
"""
