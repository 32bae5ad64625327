"""The fake platform refuses what the documentation says the server refuses, with the
documented codes, and the bridge's own check (`render.card_breaches`) agrees before sending."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bridge.render import card_breaches, card_content
from bridge.sender import FeishuAPIError, Sender
from tests.fakes.feishu_platform import FakeFeishu, content_refusal


def _table(i: int) -> str:
    return f"| name | n |\n|---|---|\n| row {i} | {i} |"


def _card(*contents: str) -> dict[str, Any]:
    return {
        "schema": "2.0",
        "config": {"update_multi": True},
        "body": {"elements": [{"tag": "markdown", "content": c} for c in contents]},
    }


def _panel(depth: int) -> dict[str, Any]:
    element: dict[str, Any] = {"tag": "markdown", "content": "deep"}
    for _ in range(depth - 1):
        element = {"tag": "collapsible_panel", "header": {}, "elements": [element]}
    return {"schema": "2.0", "body": {"elements": [element]}}


# (card, the documented refusal: code and the sub-code named in msg, or None)
CASES: dict[str, tuple[dict[str, Any], tuple[int, str] | None]] = {
    "plain": (_card("hello"), None),
    "four tables in one element": (_card("\n\n".join(_table(i) for i in range(4))), None),
    "five tables in one element": (
        _card("\n\n".join(_table(i) for i in range(5))),
        (230099, "ErrCode: 11310"),
    ),
    "five tables in a card": (_card(_table(1), _table(2), _table(3), _table(4), _table(5)), None),
    "six tables in a card": (
        _card(*(_table(i) for i in range(6))),
        (230099, "ErrCode: 11310"),
    ),
    "two hundred components": (_card(*["x"] * 200), None),
    "two hundred and one components": (_card(*["x"] * 201), (230099, "ErrCode: 11310")),
    "an image URL": (_card("![chart](https://x.y/c.png)"), (230099, "ErrCode: 200570")),
    "an image as a link": (_card("[chart](https://x.y/c.png)"), None),
    "an image in code": (_card("```\n![chart](https://x.y/c.png)\n```"), None),
    "nested five levels": (_panel(5), None),
    "nested six levels": (_panel(6), (230099, "ErrCode: 11310")),
    "over 30 KB": (_card("x" * 30_100), (230025, "length of the message content")),
}


@pytest.mark.parametrize(("card", "refusal"), CASES.values(), ids=CASES.keys())
def test_the_fake_refuses_as_documented_and_the_bridge_knows_before_sending(
    card: dict[str, Any], refusal: tuple[int, str] | None
) -> None:
    body = {"msg_type": "interactive", "content": json.dumps(card, ensure_ascii=False)}
    got = content_refusal("interactive", body)
    if refusal is None:
        assert got is None
        assert card_breaches(card) == ()
    else:
        assert got is not None
        status, code, msg = got
        assert (status, code) == (400, refusal[0])
        assert refusal[1] in msg
        assert card_breaches(card) != ()


def test_text_and_post_bodies_are_refused_over_their_documented_sizes() -> None:
    text = {"msg_type": "text", "content": json.dumps({"text": "x" * 149_000})}
    assert content_refusal("text", text) is None
    text["content"] = json.dumps({"text": "x" * 150_100})
    assert content_refusal("text", text) == (
        400,
        230025,
        "The length of the message content reaches its limit.",
    )
    post = {"msg_type": "post", "content": json.dumps({"zh_cn": {"title": "x" * 30_100}})}
    assert content_refusal("post", post) is not None


async def test_a_card_with_an_image_url_is_refused_through_the_real_client(
    sender: Sender, fake_feishu: FakeFeishu
) -> None:
    with pytest.raises(FeishuAPIError) as refused:
        await sender.reply(
            "om_user", "interactive", card_content("![x](https://x.y/a.png)"), uuid="u1"
        )
    assert refused.value.code == 230099
    assert refused.value.status == 400
    assert [r.code for r in fake_feishu.refused] == [230099]
    assert fake_feishu.replies_to("om_user") == []
    fake_feishu.image_keys.add("img_v2_uploaded")
    await sender.reply("om_user", "interactive", card_content("![x](img_v2_uploaded)"), uuid="u2")
    assert len(fake_feishu.replies_to("om_user")) == 1


def _form(*elements: dict[str, Any], name: str | None = "f") -> dict[str, Any]:
    form: dict[str, Any] = {"tag": "form", "elements": list(elements)}
    if name is not None:
        form["name"] = name
    return form


_SUBMIT = {"tag": "button", "name": "go", "form_action_type": "submit", "text": {}}
_INPUT = {"tag": "input", "name": "text", "max_length": 1000}


@pytest.mark.parametrize(
    ("elements", "refused"),
    [
        ([_form(_INPUT, _SUBMIT)], None),
        ([_form(_INPUT, _SUBMIT, name=None)], "form needs a name"),
        ([_form({**_INPUT, "name": ""}, _SUBMIT)], "input in a form needs a name"),
        ([_form(_INPUT, {**_SUBMIT, "form_action_type": "reset"})], "form needs a submit button"),
        ([_form(_INPUT, {**_SUBMIT, "name": "text"})], "names in a form must be unique"),
        ([_form(_INPUT, _SUBMIT, {"tag": "table"})], "form cannot hold a table or a form"),
        (
            [{"tag": "column_set", "columns": [{"elements": [_form(_SUBMIT)]}]}],
            "at the card's root",
        ),
        ([_form({**_INPUT, "max_length": 1001}, _SUBMIT)], "max_length must be 1-1000"),
        ([_form({**_INPUT, "max_length": 3, "default_value": "四个字符"}, _SUBMIT)], "longer"),
    ],
)
def test_the_fake_refuses_a_form_as_the_form_container_page_says(
    elements: list[dict[str, Any]], refused: str | None
) -> None:
    card = {"schema": "2.0", "body": {"elements": elements}}
    got = content_refusal("interactive", {"content": json.dumps(card)})
    if refused is None:
        assert got is None
    else:
        assert got is not None and got[1] == 230099 and refused in got[2]
