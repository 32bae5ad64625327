"""Fixtures for the bridge: the fake Feishu platform and an app (or bridge) wired to it."""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge._lark import import_lark
from bridge.feishu import FeishuBridge
from bridge.sender import RetryPolicy, Sender
from bridge.strings import t
from settings import Settings
from tests.conftest import running_app
from tests.fakes.feishu_platform import OWNER_OPEN_ID, BotMessage, FakeFeishu
from tests.helpers import wait_until


@pytest.fixture(scope="session", autouse=True)
def _lark_imported() -> None:
    """Import the SDK once (≈4 s) before any test's clock starts."""
    import_lark()


@pytest.fixture
def feishu_settings(
    make_settings: Callable[..., Settings], fake_feishu: FakeFeishu
) -> Callable[..., Settings]:
    """Settings for an app whose model is the fake and whose Feishu is the fake."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "feishu_app_id": fake_feishu.app_id,
            "feishu_app_secret": fake_feishu.app_secret,
            "feishu_domain": fake_feishu.url,
            "feishu_allowed_users": [OWNER_OPEN_ID],
            "feishu_card_update_interval_seconds": 0.2,
            "feishu_progress_delay_seconds": 0.3,
            # The progress-card path (streaming's fallback) unless a test streams:
            # tests/bridge/test_streaming_e2e.py and test_controls_e2e.py turn it on.
            "feishu_streaming": False,
        }
        values.update(overrides)
        return make_settings(**values)

    return make


@contextlib.asynccontextmanager
async def feishu_app(settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, FeishuBridge]]:
    """The real app (lifespan and all) with its bridge connected to the fake platform."""
    async with running_app(settings) as client:
        bridge: FeishuBridge = client.app.state.feishu  # type: ignore[attr-defined]
        await wait_until(lambda: bridge.connected, timeout=10)
        yield client, bridge


@pytest.fixture
def sender(fake_feishu: FakeFeishu) -> Sender:
    """The real lark.Client pointed at the fake, wrapped in the bridge's Sender."""
    lark = import_lark()
    client = (
        lark.Client.builder()
        .app_id(fake_feishu.app_id)
        .app_secret(fake_feishu.app_secret)
        .domain(fake_feishu.url)
        .build()
    )
    return Sender(client, policy=RetryPolicy(window=5))


def is_queue_notice(message: BotMessage) -> bool:
    """The line a message gets when it waits behind a running answer (not its answer)."""
    return message.msg_type == "text" and message.text.startswith(
        (t("queued", "zh", ahead=0, position=0)[:8], t("queued", "en", ahead=0, position=0)[:7])
    )


def replies(fake: FakeFeishu, message_id: str) -> list[BotMessage]:
    """The replies to a user's message, its queue notice left out."""
    return [m for m in fake.replies_to(message_id) if not is_queue_notice(m)]


def answered(fake: FakeFeishu, message_id: str) -> bool:
    """The user's message has a reply, none of its replies still says 'Working' and none is a
    CardKit card still streaming (a queue notice is not an answer)."""
    shown = replies(fake, message_id)
    # A split answer is there once its last part is: "第 i/n 部分" / "part i/n" notes.
    parts = [m for m in shown if _PART_NOTE.search(m.text)]
    total = max((int(_PART_NOTE.findall(m.text)[-1][1]) for m in parts), default=0)
    return (
        bool(shown)
        and len(parts) >= total
        and not any(
            m.text.startswith((t("progress_title", "zh"), t("progress_title", "en")))
            or (m.card_id and fake.cards[m.card_id].streaming)
            for m in shown
        )
    )


_PART_NOTE = re.compile(r"^(?:第 |part )(\d+)/(\d+)(?: 部分)?$", re.MULTILINE)


async def wait_answer(fake: FakeFeishu, message_id: str, timeout: float = 60) -> str:
    """Wait for the final answer to a user's message; returns all reply texts joined, without
    the final card's tool trace and footer (`wait_reply_text` keeps them)."""
    return answer_only(await wait_reply_text(fake, message_id, timeout))


async def wait_reply_text(fake: FakeFeishu, message_id: str, timeout: float = 60) -> str:
    """Wait for the final answer to a user's message; returns all reply texts joined."""
    await wait_until(lambda: answered(fake, message_id), timeout=timeout)
    return "\n".join(m.text for m in replies(fake, message_id))


_CARD_CHROME = re.compile(
    r"\n(?:(?:Tool steps: |工具步骤：)\d+[^\n]*|⏱ [^\n]*)(?:\n.*)?$", re.DOTALL
)


def answer_only(text: str) -> str:
    """Reply text up to the final card's tool trace ("工具步骤：N" / "Tool steps: N") or
    footer ("⏱ …")."""
    return _CARD_CHROME.sub("", text)


def message_id(event: dict[str, Any]) -> str:
    return str(event["event"]["message"]["message_id"])


REPO = Path(__file__).resolve().parents[2]


async def start_bridge_process(env: dict[str, str], output: Path) -> asyncio.subprocess.Process:
    """`claude-memory feishu` as a real process (its own process group, so a test's SIGKILL of
    the group takes its Claude CLI along), its output appended to `output`."""
    with output.open("ab") as sink:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "cli",
            "feishu",
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )
