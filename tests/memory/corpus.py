"""A small bilingual corpus used by the search tests."""

from __future__ import annotations

from memory.model import NoteDraft
from memory.sqlite.store import MemoryStore

CORPUS: dict[str, NoteDraft] = {
    "pool_leak": NoteDraft(
        title="修复连接池泄漏",
        content="订单服务在高峰期耗尽数据库连接。原因是事务异常时连接没有归还连接池。"
        "修复：在 finally 中释放连接，并把 pool_size 调到 20。",
        type="bug",
        tags=("数据库", "db"),
    ),
    "cache": NoteDraft(
        title="缓存策略",
        content="接口响应慢，决定在网关层加 Redis 缓存，缓存过期时间 cache_ttl 设为 300 秒。",
        type="decision",
    ),
    "jwt": NoteDraft(
        title="令牌过期处理",
        content="登录令牌使用 JWT，原因是JWT无状态。"
        "auth_timeout 设为 30 分钟，过期后前端自动刷新。",
        type="code",
        scope="project:api",
    ),
    "concise": NoteDraft(
        title="User prefers concise answers",
        content="The user prefers short, concise answers in Chinese, with code examples "
        "when relevant.",
        type="preference",
    ),
    "deploy": NoteDraft(
        title="Deploying with Docker",
        content="We deploy the API with Docker Compose; the healthcheck hits /health every "
        "10 seconds.",
        type="project",
        scope="project:api",
    ),
    "feishu": NoteDraft(
        title="飞书机器人接入",
        content="飞书机器人通过 websocket 长连接接收消息，FEISHU_APP_ID 配置在环境变量中。"
        "卡片消息按字节分割。",
        type="architecture",
    ),
    "getconn": NoteDraft(
        title="Connection pool metrics",
        content="getConnPoolSize() returns the current size; we log it every minute to catch "
        "leaks early.",
        type="code",
    ),
    "meeting": NoteDraft(
        title="周会纪要",
        content="本周讨论了搜索排序的权衡：相关性优先，其次是时间衰减。下周评审索引方案。",
        type="conversation",
    ),
    "sqlite": NoteDraft(
        title="SQLite WAL mode",
        content="Enable WAL journal mode and a busy timeout so readers never block the writer.",
        type="research",
    ),
    "person": NoteDraft(
        title="技术背景",
        content="王小明是后端工程师，熟悉 Python 和 Go，偏好用 asyncio 写服务。",
        type="identity",
    ),
    "rate_limit": NoteDraft(
        title="Rate limiting decision",
        content="We chose a token bucket rate_limit of 100 requests per minute per user.",
        type="decision",
    ),
    "retry": NoteDraft(
        title="异步任务重试",
        content="Celery 任务失败时使用 retry_backoff 指数退避，最多重试 5 次 (max_retries=5)。",
        type="code",
    ),
    "indexer_leak": NoteDraft(
        title="Memory leak in the indexer",
        content="The indexer kept file handles open; fixed by using a context manager.",
        type="bug",
    ),
    "timeout": NoteDraft(
        title="网络连接超时",
        content="外部接口连接超时，增加了重试和告警。",
        type="bug",
    ),
    "prefetch": NoteDraft(
        title="Prefetching in the browser",
        content="The page prefetches assets to speed up navigation.",
        type="general",
    ),
}


def load_corpus(store: MemoryStore) -> dict[str, str]:
    """Save the corpus; returns key -> note id."""
    ids: dict[str, str] = {}
    for key, draft in CORPUS.items():
        result = store.save(draft)
        assert not result.deduplicated, key
        ids[key] = result.id
    return ids
