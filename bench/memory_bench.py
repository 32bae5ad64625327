"""Memory store benchmark on synthetic bilingual notes.

    uv run python bench/memory_bench.py                       # 1k and 10k notes (quick)
    uv run python bench/memory_bench.py --sizes 1000,10000,100000   # 100k takes minutes

For each size: note files are written straight to a fresh home, then timed:
- reindex: `MemoryStore.rebuild()` from the files (full rebuild);
- save: `MemoryStore.save()` of new notes into the full store (default config: fsync on,
  dedup check on);
- search: `MemoryStore.search()` with Chinese, English, mixed and identifier queries (access
  counting on, freshness check as configured by default);
- context: `build_memory_context(store, query, 1500)`;
- sync: an incremental sync that finds nothing changed (the cost of a full file rescan);
- index size: index.db after a WAL checkpoint.
Targets: search p95 <= 15 ms at 10k and <= 60 ms at 100k; save p95 <= 10 ms; reindex 10k
<= 20 s.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory.config import MemoryConfig
from memory.context import build_memory_context
from memory.files import ensure_memory_layout, note_folder, render_note
from memory.model import NOTE_TYPES, Note, NoteDraft, new_note_id
from memory.store import MemoryStore

_ZH = """
连接池 缓存 数据库 索引 查询 事务 死锁 超时 重试 日志 监控 告警 部署 容器 集群 节点 负载均衡
消息队列 订阅 发布 接口 认证 授权 令牌 会话 加密 解密 签名 证书 密钥 配置 环境变量 依赖 版本
升级 回滚 迁移 备份 恢复 压缩 序列化 反序列化 并发 线程 协程 异步 同步 锁 信号量 内存 泄漏
性能 优化 延迟 吞吐量 基准测试 单元测试 集成测试 覆盖率 重构 架构 模块 组件 服务 网关 代理
路由 中间件 前端 后端 页面 按钮 表单 校验 错误 异常 修复 问题 需求 设计 评审 文档 规范 用户
偏好 习惯 喜欢 简洁 回答 中文 英文 项目 会议 决定 方案 选型 权衡 风险 进度 计划 周报 总结
飞书 机器人 消息 卡片 群聊 私聊 通知 提醒 日程 任务 标签 分类 搜索 排序 分页 过滤 统计 报表
"""

_EN = """
connection pool cache database index query transaction deadlock timeout retry log monitor alert
deploy container cluster node balancer queue subscribe publish interface auth token session
encrypt decrypt sign certificate key config environment dependency version upgrade rollback
migrate backup restore compress serialize concurrency thread coroutine async sync lock memory
leak performance latency throughput benchmark test coverage refactor architecture module
component service gateway proxy route middleware frontend backend page button form validate
error exception fix issue design review document user preference habit concise answer project
meeting decision tradeoff risk schedule summary feishu bot message card notification reminder
"""

_IDS = """
auth_timeout getConnPoolSize max_retries JWT OAuth2 Redis PostgreSQL SQLite FTS5 asyncio
httpx FastAPI pydantic uvicorn k8s gRPC HTTP2 TLS1.3 read_timeout write_buffer UserService
OrderRepository cache_ttl pool_size idle_timeout retry_backoff rate_limit api_key_rotation
"""
ZH_WORDS = _ZH.split()
EN_WORDS = _EN.split()
IDENTIFIERS = _IDS.split()


def sentence(rng: random.Random) -> str:
    if rng.random() < 0.6:
        words = rng.sample(ZH_WORDS, rng.randint(4, 9))
        if rng.random() < 0.5:
            words.insert(rng.randrange(len(words)), rng.choice(IDENTIFIERS))
        return "".join(words) + "。"
    words = rng.sample(EN_WORDS, rng.randint(6, 14))
    if rng.random() < 0.5:
        words.insert(rng.randrange(len(words)), rng.choice(IDENTIFIERS))
    return " ".join(words).capitalize() + "."


def make_note(rng: random.Random, now: datetime, n: int) -> Note:
    title_words = [*rng.sample(ZH_WORDS, 2), rng.choice(EN_WORDS + IDENTIFIERS)]
    body = "\n\n".join(" ".join(sentence(rng) for _ in range(rng.randint(1, 3))) for _ in range(2))
    created = now - timedelta(days=rng.uniform(0, 720))
    note_type = rng.choice(NOTE_TYPES)
    scope = rng.choice(["user", "user", "project:api", "project:web", f"chat:c{n % 50}"])
    return Note(
        id=new_note_id(created.timestamp()),
        title="".join(title_words[:2]) + " " + title_words[2],
        type=note_type,
        scope=scope,
        tags=tuple(rng.sample(ZH_WORDS + EN_WORDS, 2)),
        created=created,
        updated=created + timedelta(days=rng.uniform(0, 30)),
        summary=sentence(rng)[:100],
        importance=round(rng.random(), 2),
        status="active",
        superseded_by=None,
        expires_at=None,
        source="bench",
        access_count=0,
        body=f"{body}\n\n(bench #{n} {rng.getrandbits(64):x})",
        path="",
    )


def query(rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        return rng.choice(ZH_WORDS)
    if kind == 1:
        return rng.choice(EN_WORDS)
    if kind == 2:
        return rng.choice(IDENTIFIERS)
    if kind == 3:
        return "".join(rng.sample(ZH_WORDS, 2))  # compound: segmented by rjieba
    return f"{rng.choice(ZH_WORDS)} {rng.choice(IDENTIFIERS)} {rng.choice(EN_WORDS)}"


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def run_size(size: int, base: Path, seed: int, operations: int) -> dict[str, float]:
    rng = random.Random(seed + size)
    home = base / f"home-{size}"
    config = MemoryConfig.for_home(home)
    ensure_memory_layout(config.root)
    now = datetime.now(UTC)
    print(f"[{size}] writing {size} note files...", file=sys.stderr)
    for n in range(size):
        note = make_note(rng, now, n)
        folder = note_folder(note.type, note.scope)
        rel = f"{folder}/{note.id}.md"
        path = config.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_note(note), encoding="utf-8")

    store = MemoryStore.open(config)  # indexes everything (first sync)
    try:
        print(f"[{size}] full reindex...", file=sys.stderr)
        reindex_s = timed(store.rebuild) / 1000

        print(f"[{size}] {operations} saves...", file=sys.stderr)
        saves = []
        for n in range(operations):
            note = make_note(rng, now, size + n)
            draft = NoteDraft(content=note.body, title=note.title, type=note.type, scope=note.scope)
            saves.append(timed(lambda d=draft: store.save(d)))

        print(f"[{size}] {operations} searches...", file=sys.stderr)
        queries = [query(rng) for _ in range(operations)]
        store.search(queries[0])  # warm up (rjieba import, page cache)
        searches = [timed(lambda q=q: store.search(q, limit=10)) for q in queries]
        empty = sum(1 for q in queries[:50] if not store.search(q, record_access=False))

        contexts = [timed(lambda q=q: build_memory_context(store, q, 1500)) for q in queries[:50]]
        context_plain = timed(lambda: build_memory_context(store, None, 1500))
        sync_ms = statistics.median(timed(store.sync) for _ in range(3))
        conn = store.index.conn()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        index_mb = config.index_path.stat().st_size / 1e6
    finally:
        store.close()
    return {
        "notes": size,
        "save_p50": statistics.median(saves),
        "save_p95": pct(saves, 95),
        "search_p50": statistics.median(searches),
        "search_p95": pct(searches, 95),
        "search_max": max(searches),
        "context_p50": statistics.median(contexts),
        "context_plain": context_plain,
        "sync_ms": sync_ms,
        "reindex_s": reindex_s,
        "index_mb": index_mb,
        "empty_queries": empty,
    }


def print_table(rows: list[dict[str, float]]) -> None:
    headers = [
        ("notes", "notes", "{:,.0f}"),
        ("save p50 ms", "save_p50", "{:.2f}"),
        ("save p95 ms", "save_p95", "{:.2f}"),
        ("search p50 ms", "search_p50", "{:.2f}"),
        ("search p95 ms", "search_p95", "{:.2f}"),
        ("search max ms", "search_max", "{:.1f}"),
        ("context ms (query)", "context_p50", "{:.2f}"),
        ("context ms (none)", "context_plain", "{:.2f}"),
        ("rescan ms", "sync_ms", "{:.1f}"),
        ("reindex s", "reindex_s", "{:.2f}"),
        ("index MB", "index_mb", "{:.1f}"),
    ]
    cells = [[fmt.format(row[key]) for _, key, fmt in headers] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, (h, _, _) in enumerate(headers)]
    print(
        "| " + " | ".join(h.ljust(w) for (h, _, _), w in zip(headers, widths, strict=True)) + " |"
    )
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for c in cells:
        print("| " + " | ".join(v.rjust(w) for v, w in zip(c, widths, strict=True)) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated note counts")
    parser.add_argument("--ops", type=int, default=300, help="saves and searches per size")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the generated homes")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    base = Path(tempfile.mkdtemp(prefix="memory-bench-"))
    try:
        rows = [run_size(size, base, args.seed, args.ops) for size in sizes]
    finally:
        if args.keep:
            print(f"homes kept in {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
