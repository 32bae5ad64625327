"""`claude-memory feishu` as a real process: pairing code in the log, an answer, a clean stop."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bridge.strings import t
from tests.bridge.conftest import REPO, message_id, start_bridge_process, wait_answer
from tests.fakes.anthropic_api import FakeMessagesAPI
from tests.fakes.feishu_platform import FakeFeishu
from tests.helpers import wait_until

pytestmark = pytest.mark.e2e


async def test_feishu_command_runs_the_bridge_alone_and_stops_on_sigterm(
    tmp_path: Path, fake_feishu: FakeFeishu, fake_model: FakeMessagesAPI
) -> None:
    home = tmp_path / "home"
    env = {
        **os.environ,
        "CLAUDE_MEMORY_HOME": str(home),
        "ANTHROPIC_BASE_URL": fake_model.url,
        "ANTHROPIC_API_KEY": "dummy",
        "FEISHU_APP_ID": fake_feishu.app_id,
        "FEISHU_APP_SECRET": fake_feishu.app_secret,
        "FEISHU_DOMAIN": fake_feishu.url,
    }
    output = tmp_path / "stdout.txt"
    proc = await start_bridge_process(env, output)
    log = home / "logs" / "feishu_ws_bridge.log"
    try:
        await wait_until(lambda: fake_feishu.connected or proc.returncode is not None, timeout=45)
        assert proc.returncode is None, output.read_text()
        await wait_until(lambda: log.is_file() and "/pair" in log.read_text(), timeout=10)
        code = re.search(r"/pair (\d{8})", log.read_text())
        assert code is not None
        pair = fake_feishu.push_text(f"/pair {code.group(1)}")
        assert await wait_answer(fake_feishu, message_id(pair)) == t("paired")
        event = fake_feishu.push_text("hello from the phone")
        answer = await wait_answer(fake_feishu, message_id(event))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout=30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    assert answer == "echo: hello from the phone"
    assert proc.returncode == 0, output.read_text()[-3000:]
    text = log.read_text()
    assert "Feishu bridge stopped" in text
    await wait_until(lambda: not fake_feishu.connected, timeout=5)


def test_feishu_command_without_credentials_says_what_to_set(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEISHU_")}
    env["CLAUDE_MEMORY_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-m", "cli", "feishu"],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert done.returncode == 2
    assert "FEISHU_APP_ID and FEISHU_APP_SECRET" in done.stderr
