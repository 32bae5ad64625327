"""What memory does around a conversation: what goes into a prompt (`prompt`, the one
assembler used by the chat agent, the hooks and the MCP server), the index-first context
listing (`context`), recall rules (`recall`), injection windows (`windows`), episodes
(`episodes`) and captured memories waiting for a decision (`entities`).
"""
