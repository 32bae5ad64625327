"""Shared-database plumbing used by several packages (agent, bridge; memory in phase B).

Imports nothing from `agent/`, `bridge/`, `memory/` or `web/`, so any of them may use it.
"""
