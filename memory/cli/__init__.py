"""`claude-memory memory ...`, the person's own door to a memory from a terminal: the
subcommands (`commands`: search, add, list, show, rm, reindex, export, import, stats) and the
export and import they run over any backend (`transfer`: JSONL, a markdown tree, Claude Code's
`MEMORY.md` / `CLAUDE.md`). `python -m memory.cli` runs the same command with the same
settings (`__main__`).
"""
