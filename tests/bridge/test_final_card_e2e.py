"""The final answer card through the real app, the real Claude CLI and the fake model: it keeps
the tool steps (refused ones marked) and a footer, a stopped turn is not an error, and an answer
full of tables, code and images arrives as cards the platform accepts."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bridge.strings import t
from settings import Settings
from tests.bridge.conftest import feishu_app, message_id, wait_answer, wait_reply_text
from tests.fakes.anthropic_api import FakeMessagesAPI, text, tool
from tests.fakes.feishu_platform import FakeFeishu, markdown_tables
from tests.helpers import wait_until

pytestmark = pytest.mark.e2e


async def test_a_refused_step_then_a_claim_of_success_shows_the_refusal_in_the_final_card(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on(
        "fetch the installer",
        tool("Bash", {"command": "curl http://example.com"}),
        text("Installed the tool successfully."),
    )
    async with feishu_app(feishu_settings()):
        event = fake_feishu.push_text("fetch the installer please")
        answer = await wait_answer(fake_feishu, message_id(event))
        full = await wait_reply_text(fake_feishu, message_id(event))
    [card] = fake_feishu.replies_to(message_id(event))
    assert answer.startswith("Installed the tool successfully.")
    assert "已拒绝（未执行）：\n- Bash `curl http://example.com`" in answer  # the chat's language
    panels = [e for e in card.content["body"]["elements"] if e["tag"] == "collapsible_panel"]
    assert [p["header"]["title"]["content"] for p in panels] == ["工具步骤：1 · 1 个被拒绝"]
    assert panels[0]["expanded"] is True
    assert "🚫 Bash `curl http://example.com` — 被拒绝" in full
    assert "⏱ " in full and "$" in full.rsplit("⏱", 1)[1]
    assert "/home/" not in full and "/tmp/" not in full
    assert fake_feishu.refused == []


async def test_stop_ends_the_card_stopped_not_in_a_red_error(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("slow job", text("never delivered", delay=30))
    async with feishu_app(feishu_settings()):
        slow = fake_feishu.push_text("slow job")
        await wait_until(lambda: bool(fake_model.requests_for("slow job")), timeout=30)
        await wait_until(lambda: bool(fake_feishu.replies_to(message_id(slow))), timeout=10)
        stop = fake_feishu.push_text("/stop")
        await wait_answer(fake_feishu, message_id(stop))
        answer = await wait_answer(fake_feishu, message_id(slow), timeout=30)
    [card] = fake_feishu.replies_to(message_id(slow))
    header = card.content["header"]
    assert header["template"] != "red"
    assert header["title"]["content"] == t("stopped_title")
    assert t("stopped_title") in answer and "never delivered" not in answer
    assert "/home/" not in card.text and "/tmp/" not in card.text


EIGHT_TABLES = "\n\n".join(
    [
        "Here is the report.",
        *(
            f"## Region {i}\n\n| item | units |\n|---|--:|\n| widget {i} | {i * 11} |"
            for i in range(8)
        ),
        *(f"```python\nprint('block {i}')\n```" for i in range(9)),
        "Charts: ![sales](https://example.com/sales.png) and ![](https://example.com/trend.png)",
    ]
)


async def test_an_answer_with_eight_tables_nine_code_blocks_and_two_images_arrives_as_cards(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    fake_model.on("quarterly report", tool("Bash", {"command": "ls"}), text(EIGHT_TABLES, delay=1))
    async with feishu_app(feishu_settings()):
        event = fake_feishu.push_text("the quarterly report please")
        answer = await wait_answer(fake_feishu, message_id(event))
    messages = fake_feishu.replies_to(message_id(event))
    assert fake_feishu.refused == []
    assert {m.msg_type for m in messages} == {"interactive"}
    markdowns = [
        e["content"]
        for m in messages
        for e in m.content["body"]["elements"]
        if e["tag"] == "markdown"
    ]
    assert sum(markdown_tables(m) for m in markdowns) == 8
    assert answer.count("```python") == 9
    assert "[sales](https://example.com/sales.png)" in answer
    assert "![" not in answer
    assert t("progress_title") not in messages[0].text  # the progress card reached its final state
    assert len(messages[0].versions) >= 2
