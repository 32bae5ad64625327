"""The Feishu/Lark bridge, by job (docs/architecture.md, "bridge/, by job"): `FeishuBridge`
(bridge/feishu/bridge.py) is the facade the app builds and owns; `memory_search` adapts the
memory store's search to the chat's `/recall` and `/forget`."""

from bridge.feishu.bridge import FeishuBridge
from bridge.feishu.memory_chat import memory_search

__all__ = ["FeishuBridge", "memory_search"]
