"""Claude Code and Codex: their hooks (`hooks`), the MCP server (`mcp_server`), install and
uninstall (`installer`), and what the memory knows about those clients' conventions
(`conventions`: event names, config dirs, transcripts), projects (`project`) and tool
observations (`observations`).
"""
