"""How much does run_agent add on top of a bare ClaudeSDKClient turn?

The same scripted turn runs through `SessionManager.run_agent` (warm client) and through a bare
`ClaudeSDKClient` script, alternated, N runs each, against the local fake Messages API (no
network, no real model). Prints median and p95 of both and their ratio, the cold first-turn
latency, and the CLI's resident memory per live session.

    uv run python bench/chat_overhead.py [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient

from agent.conversations import ConversationStore
from agent.logs import RequestLogs
from agent.options import prepare_workspace
from agent.policy import PolicyConfig
from agent.sessions import SessionManager
from settings import Settings
from tests.fakes.anthropic_api import FakeMessagesAPI
from tests.helpers import claude_processes


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def main(runs: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="chat-bench-"))
    os.environ.update(
        HOME=str(tmp / "home"),
        CLAUDE_CONFIG_DIR=str(tmp / "home" / ".claude"),
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        CLAUDE_CODE_MAX_RETRIES="0",
    )
    fake = FakeMessagesAPI().start()
    settings = Settings(home=tmp / "cm", anthropic_base_url=fake.url, anthropic_api_key="dummy")
    prepare_workspace(settings.workspace_dir)
    store = ConversationStore(settings.state_path)
    manager = SessionManager(
        settings,
        store=store,
        logs=RequestLogs(settings.logs_dir),
        policy=PolicyConfig.from_settings(settings),
    )
    bare_options = ClaudeAgentOptions(
        cwd=str(settings.workspace_dir),
        setting_sources=["project"],
        include_partial_messages=True,
        env={"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "dummy"},
    )
    pipeline: list[float] = []
    bare: list[float] = []
    async with manager, ClaudeSDKClient(bare_options) as client:
        t0 = time.perf_counter()
        await manager.run_agent("cold start", conversation_id="bench")
        cold = time.perf_counter() - t0
        await client.query("warm up")
        async for _ in client.receive_response():
            pass
        spawned_before = claude_processes()
        for i in range(runs):
            t0 = time.perf_counter()
            await manager.run_agent(f"turn {i}", conversation_id="bench")
            pipeline.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await client.query(f"turn {i}")
            async for _ in client.receive_response():
                pass
            bare.append(time.perf_counter() - t0)
        spawned_after = claude_processes()
        rss = [rss_mib(pid) for pid in spawned_after]
    fake.stop()
    store.close()

    med_p, med_b = statistics.median(pipeline), statistics.median(bare)
    print(f"{'path':<24}{'median ms':>12}{'p95 ms':>12}")
    print(f"{'run_agent (warm)':<24}{med_p * 1000:>12.1f}{p95(pipeline) * 1000:>12.1f}")
    print(f"{'bare ClaudeSDKClient':<24}{med_b * 1000:>12.1f}{p95(bare) * 1000:>12.1f}")
    print(f"{'ratio (median)':<24}{med_p / med_b:>12.2f}")
    print(f"{'ratio (p95)':<24}{p95(pipeline) / p95(bare):>12.2f}")
    print(f"{'cold first turn':<24}{cold * 1000:>12.1f}")
    print(
        f"CLI processes before/after the warm runs: {len(spawned_before)}/{len(spawned_after)}"
        " (equal: no CLI spawned per warm turn)"
    )
    print("CLI RSS per live session (MiB): " + ", ".join(f"{r:.0f}" for r in rss))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    asyncio.run(main(parser.parse_args().runs))
