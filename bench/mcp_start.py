"""How long a client waits for `claude-memory mcp`: spawn to the `initialize` answer, and to
the `tools/list` answer, over real stdio, with the size of the tool list a client sends on.

    uv run python bench/mcp_start.py              # 20 starts
    uv run python bench/mcp_start.py --starts 50 --burners 2

Each start is a new process on an empty memory home, as a client starts one per session;
`--burners N` runs N processes that spin a core each meanwhile (the busy machine of issue #32,
where Codex's 1 s wait for an optional MCP server ran out). Prints the load average beside the
numbers: on a shared machine they are only comparable within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}


def one_start(command: list[str], home: Path) -> tuple[float, float, int, int]:
    """(seconds to initialize, seconds to tools/list, tools, characters of the list)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=home,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(INITIALIZE) + "\n")
        proc.stdin.flush()
        json.loads(proc.stdout.readline())
        initialized = time.perf_counter() - started
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        proc.stdin.write("\n" + json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        proc.stdin.write("\n")
        proc.stdin.flush()
        listed = json.loads(proc.stdout.readline())["result"]
        tools_at = time.perf_counter() - started
    finally:
        proc.stdin.close()
        proc.wait(60)
        proc.stdout.close()
    return initialized, tools_at, len(listed["tools"]), len(json.dumps(listed))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--burners", type=int, default=0, help="processes spinning a core each")
    args = parser.parse_args()
    command = [str(Path(sys.executable).parent / "claude-memory"), "--home", "", "mcp"]
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)
    ]
    try:
        with tempfile.TemporaryDirectory() as folder:
            home = Path(folder)
            command[2] = str(home / "home")
            runs = [one_start(command, home) for _ in range(args.starts)]
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()
    init = sorted(r[0] for r in runs)
    listed = sorted(r[1] for r in runs)
    load = os.getloadavg()[0]
    print(f"starts {len(runs)}, burners {args.burners}, load average (1 min) {load:.2f}")
    print(
        f"initialize p50 {statistics.median(init) * 1000:.0f} ms, "
        f"max {init[-1] * 1000:.0f} ms; tools/list p50 {statistics.median(listed) * 1000:.0f} ms"
    )
    print(f"tools {runs[0][2]}, tools/list {runs[0][3]} characters")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
