"""What memory does around a conversation: what goes into a prompt (`prompt`, the one
assembler used by the chat agent, the hooks and the MCP server), the index-first context
listing (`context`), recall rules (`recall`), injection windows (`windows`), episodes
(`episodes`), captured memories waiting for a decision (`entities`) and what a model may
change in memory by itself during a conversation, and what waits for the person (`reach`).
"""
