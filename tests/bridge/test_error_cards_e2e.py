"""An error the bridge did not plan for reaches the Feishu chat cleaned as at every door (no
server path, no URL credential: storage/public_text.py) with what to do, never as a raw
exception text nor as silence. Real app, real lark clients, the fake platform; the error is made
from the outside (the memory home's files on disk)."""

from __future__ import annotations

import shutil
from collections.abc import Callable

import pytest

from bridge.strings import t
from settings import Settings
from tests.bridge.conftest import feishu_app, message_id, wait_answer
from tests.fakes.feishu_platform import FakeFeishu
from tests.test_unexpected_errors import damage_index

pytestmark = pytest.mark.e2e


async def test_a_store_error_on_remember_shows_cleaned_text_and_a_next_step(
    feishu_settings: Callable[..., Settings], fake_feishu: FakeFeishu
) -> None:
    settings = feishu_settings()
    inbox = settings.home_dir / "memory" / "inbox"
    async with feishu_app(settings):
        shutil.rmtree(inbox, ignore_errors=True)
        inbox.write_text("not a folder")  # where the new note's file would go
        sent = fake_feishu.push_text("/remember 我下周三去上海出差")
        answer = await wait_answer(fake_feishu, message_id(sent))
    # The raw exception quotes the inbox's full path under the home: cut to its last piece.
    assert answer == t(
        "memory_failed",
        error="FileExistsError: [Errno 17] File exists: '…/inbox'; check that the memory home "
        "(CLAUDE_MEMORY_HOME) and its files can be read and written, and that the disk is not "
        "full; `claude-memory doctor` checks them",
    )
    assert str(settings.home_dir) not in answer


async def test_a_damaged_index_on_recall_says_what_to_run(
    feishu_settings: Callable[..., Settings], fake_feishu: FakeFeishu
) -> None:
    settings = feishu_settings()
    async with feishu_app(settings):
        damage_index(settings.index_path)
        sent = fake_feishu.push_text("/recall 上海")
        answer = await wait_answer(fake_feishu, message_id(sent))
    assert answer == t(
        "memory_failed",
        error="OperationalError: no such table: notes; the memory index or the state database "
        "may be damaged: `claude-memory memory reindex` rebuilds the index from the note files; "
        "`claude-memory doctor` checks the rest",
    )
