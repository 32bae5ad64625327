"""Files and images the agent makes, sent to the chat (real app, real lark clients, real Claude
CLI, fake model): an image is uploaded and shown in a card, another file is uploaded and sent as
a file message; only files inside the workspace go. The fake platform enforces the upload
endpoints' documented limits (tests/fakes/feishu_platform.py, "uploads")."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from pathlib import Path

import pytest

from bridge.outputs import FILES_INSTRUCTIONS
from bridge.strings import t
from settings import Settings
from tests.bridge.conftest import feishu_app, message_id, replies, wait_answer
from tests.fakes.anthropic_api import FakeMessagesAPI, text, tool
from tests.fakes.feishu_platform import FakeFeishu
from tests.helpers import wait_until

pytestmark = pytest.mark.e2e

# a 1x1 PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
CSV = "region,units\nnorth,11\nsouth,7\n"


async def test_a_generated_png_and_csv_arrive_as_an_image_and_a_file_and_paths_outside_do_not(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
    tmp_path: Path,
) -> None:
    # issue #33: nothing went back to the chat but text
    settings = feishu_settings()
    workspace = settings.workspace_dir
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "secret.png").write_bytes(PNG)
    fake_model.on(
        "chart the sales",
        tool("Write", {"file_path": str(workspace / "out" / "sales.csv"), "content": CSV}),
        text(
            "Here is the chart ![sales chart](out/chart.png) and [the data](out/sales.csv).\n\n"
            "Also [a secret](../private/secret.png), [another]("
            + str(outside / "secret.png")
            + "), ![linked](out/link.png) and [the web](https://example.com/x.csv)."
        ),
    )
    async with feishu_app(settings):
        workspace.joinpath("out").mkdir(parents=True, exist_ok=True)
        # the chart as a plotting script the agent ran earlier left it (the policy's Bash runs
        # one allowlisted program; the CSV below the agent writes in this turn)
        workspace.joinpath("out", "chart.png").write_bytes(PNG)
        workspace.joinpath("out", "link.png").symlink_to(outside / "secret.png")
        event = fake_feishu.push_text("chart the sales please")
        await wait_answer(fake_feishu, message_id(event))
        await wait_until(lambda: len(replies(fake_feishu, message_id(event))) >= 4, timeout=30)
        await asyncio.sleep(0.5)  # nothing more comes
    answer, *rest = replies(fake_feishu, message_id(event))
    assert "sales chart" in answer.text
    uploads = list(fake_feishu.uploads.values())
    assert sorted((u.kind, u.name, u.data) for u in uploads) == [
        ("file", "sales.csv", CSV.encode()),
        ("image", "chart.png", PNG),
    ]
    [image] = [u for u in uploads if u.kind == "image"]
    [file] = [u for u in uploads if u.kind == "file"]
    [shown] = [m for m in rest if m.msg_type == "interactive"]
    assert any(e.get("img_key") == image.key for e in shown.content["body"]["elements"])
    [sent] = [m for m in rest if m.msg_type == "file"]
    assert sent.content == {"file_key": file.key} and file.file_type == "stream"
    [refused] = [m for m in rest if m.msg_type == "text"]
    assert refused.text.startswith(t("files_refused", "zh", lines="")[:8])
    for target in ("../private/secret.png", str(outside / "secret.png"), "out/link.png"):
        assert f"{target}: {t('file_outside')}" in refused.text
    assert "example.com" not in refused.text
    assert fake_feishu.refused == []


async def test_the_fake_refuses_uploads_outside_the_documented_limits(
    feishu_settings: Callable[..., Settings], fake_feishu: FakeFeishu
) -> None:
    async with feishu_app(feishu_settings()) as (_, bridge):
        api = bridge._ctx.api
        assert (await api.upload_image(PNG, "ok.png")).startswith("img_")
        for data, name, code in (
            (b"", "empty.png", 234010),
            (b"not an image at all", "fake.png", 234011),
            (PNG + b"\0" * (10 * 1024 * 1024), "huge.png", 234006),
        ):
            with pytest.raises(Exception) as failed:
                await api.upload_image(data, name)
            assert getattr(failed.value, "code", None) == code, name
        with pytest.raises(Exception) as empty:
            await api.upload_file(b"", "empty.csv", "stream")
        assert getattr(empty.value, "code", None) == 234010
        with pytest.raises(Exception) as big:
            await api.upload_file(b"x" * (30 * 1024 * 1024 + 1), "big.bin", "stream")
        assert getattr(big.value, "code", None) == 234006
    assert [r.code for r in fake_feishu.refused] == [234010, 234011, 234006, 234010, 234006]


async def test_the_model_is_told_in_feishu_how_to_send_a_file_and_not_elsewhere(
    feishu_settings: Callable[..., Settings],
    fake_feishu: FakeFeishu,
    fake_model: FakeMessagesAPI,
) -> None:
    # issue #33: the bridge sent files the model named, but nothing told the model so
    fake_model.on("draw me", text("好的。"))
    async with feishu_app(feishu_settings()) as (client, _):
        event = fake_feishu.push_text("draw me a chart of last week")
        await wait_answer(fake_feishu, message_id(event))
        web = await client.post("/api/chat", json={"message": "draw me a table on the web"})
        assert web.status_code == 200, web.text
    [feishu] = fake_model.requests_for("draw me a chart")
    [elsewhere] = fake_model.requests_for("draw me a table")
    assert FILES_INSTRUCTIONS in feishu.all_text()  # the convention the bridge reads
    assert "![chart](out/chart.png)" in feishu.all_text()
    assert "Sending files to the Feishu chat" not in elsewhere.all_text()
