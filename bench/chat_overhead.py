"""How much does run_agent add on top of a bare ClaudeSDKClient turn?

The same scripted turn runs through `SessionManager.run_agent` as the app wires it (permission
hooks, memory injection over 200 notes, memory tools, episode recording; warm client) and
through a bare
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
from pydantic import SecretStr

from agent.logs import RequestLogs
from agent.policy import PolicyConfig
from agent.sessions import SessionManager
from app import build_container
from memory.model import NoteDraft
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


async def _timed_bare(client: ClaudeSDKClient, prompt: str) -> float:
    t0 = time.perf_counter()
    await client.query(prompt)
    async for _ in client.receive_response():
        pass
    return time.perf_counter() - t0


async def _timed_agent(manager: SessionManager, prompt: str, conversation: str) -> float:
    t0 = time.perf_counter()
    await manager.run_agent(prompt, conversation_id=conversation)
    return time.perf_counter() - t0


async def main(runs: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="chat-bench-"))
    os.environ.update(
        HOME=str(tmp / "home"),
        CLAUDE_CONFIG_DIR=str(tmp / "home" / ".claude"),
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        CLAUDE_CODE_MAX_RETRIES="0",
    )
    fake = FakeMessagesAPI().start()
    settings = Settings(
        home=tmp / "cm", anthropic_base_url=fake.url, anthropic_api_key=SecretStr("dummy")
    )
    # Full wiring as the app builds it: permission hooks, memory injection (a UserPromptSubmit
    # hook) over 200 notes, the in-process memory MCP server, episode recording.
    container = build_container(settings)
    for i in range(200):
        container.memory.save(
            NoteDraft(content=f"Note {i}: turn handling detail number {i} 测试 记忆", title=f"n{i}")
        )
    full = container.sessions
    # The pipeline alone: the same actors, policy hook, logs and replies, no memory layer.
    plain = SessionManager(
        settings,
        store=container.conversations,
        logs=RequestLogs(settings.logs_dir),
        policy=PolicyConfig.from_settings(settings),
    )
    bare_options = ClaudeAgentOptions(
        cwd=str(settings.workspace_dir),
        setting_sources=["project"],
        include_partial_messages=True,
        env={"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "dummy"},
    )
    rows: dict[str, list[float]] = {"bare": [], "pipeline": [], "full": []}
    async with ClaudeSDKClient(bare_options) as client, plain:
        t0 = time.perf_counter()
        await full.run_agent("cold start", conversation_id="full")
        cold = time.perf_counter() - t0
        await plain.run_agent("warm up", conversation_id="plain")
        await _timed_bare(client, "warm up")
        spawned_before = claude_processes()
        for i in range(runs):
            rows["bare"].append(await _timed_bare(client, f"turn {i}"))
            rows["pipeline"].append(await _timed_agent(plain, f"turn {i}", "plain"))
            rows["full"].append(await _timed_agent(full, f"turn {i}", "full"))
        spawned_after = claude_processes()
        rss = [rss_mib(pid) for pid in spawned_after]
    await container.aclose()
    fake.stop()

    bare = rows["bare"]
    labels = {
        "bare": "bare ClaudeSDKClient",
        "pipeline": "run_agent, pipeline",
        "full": "run_agent, app wiring",
    }
    print(
        f"{'path (warm client)':<26}{'median ms':>11}{'p95 ms':>10}"
        f"{'ratio med':>11}{'ratio p95':>11}"
    )
    for key, values in rows.items():
        print(
            f"{labels[key]:<26}{statistics.median(values) * 1000:>11.1f}{p95(values) * 1000:>10.1f}"
            f"{statistics.median(values) / statistics.median(bare):>11.2f}"
            f"{p95(values) / p95(bare):>11.2f}"
        )
    print(f"{'cold first turn (app)':<26}{cold * 1000:>11.1f}")
    print(
        f"CLI processes before/after the warm runs: {len(spawned_before)}/{len(spawned_after)}"
        " (equal: no CLI spawned per warm turn)"
    )
    print("CLI RSS per live session (MiB): " + ", ".join(f"{r:.0f}" for r in rss))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    asyncio.run(main(parser.parse_args().runs))
