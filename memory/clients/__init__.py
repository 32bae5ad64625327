"""Claude Code and Codex: their hooks (`hooks`), the MCP server (`mcp_server`), install and
uninstall (`installer`), and what the memory knows about those clients' conventions
(`conventions`: event names, config dirs, transcripts), projects (`project`) and tool
observations (`observations`); how a process opens its memory (`opening`: the one chooser of
SQLite or PostgreSQL, for the app, the CLI, the hooks and the MCP server); and what runs beside
the app or the MCP server while they serve the clients (over `_background.BackgroundTask`):
background embedding (`vector_sync`) and the app's rescans of the notes folder (`rescans`).
"""
