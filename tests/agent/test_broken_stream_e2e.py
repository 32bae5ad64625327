"""A model stream that breaks in the middle (an error event, a dropped connection) never reads
as a finished answer (real SDK and CLI, fake model). The CLI asks again without streaming; when
that fails too (the fake answers 529 then, as the API's "Error events" say an overloaded stream
would), the chat says what failed instead of the first words of the answer or "Done"."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from settings import Settings
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI, broken_stream

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("error_type", ["overloaded_error", "api_error", None])
async def test_a_stream_that_breaks_is_an_error_not_a_done(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI, error_type: str | None
) -> None:
    fake_model.on(
        "long answer",
        *(
            [broken_stream("The first part of a long answer, then more.", error_type=error_type)]
            * 8
        ),
    )
    async with running_app(make_settings()) as client:
        body = (await client.post("/api/chat", json={"message": "long answer please"})).json()
    assert body["is_error"] is True, body
    assert body["status"] == "failed", body
    assert "Done, no text output." not in body["reply"]
    assert "overloaded (529)" in body["reply"]
    assert not body["reply"].startswith("The first part")
