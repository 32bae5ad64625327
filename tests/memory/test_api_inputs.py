"""Every HTTP endpoint refuses nonsense with a status and a detail saying what is wrong, and
changes nothing (issue #19). The real app with its lifespan; each row is one bad request."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from memory.loop.entities import EntityCandidate, PendingStore
from memory.loop.episodes import EpisodeStore
from settings import Settings
from tests.conftest import running_app
from tests.helpers import home_fingerprint

# (method, path, JSON body or query parameters, status, a piece of the detail). Names in
# <angle brackets> are filled in from the memory the test sets up.
BAD_REQUESTS: list[tuple[str, str, dict[str, Any] | None, int, str]] = [
    ("POST", "/api/memories/search", {"query": ""}, 422, "at least 1 character"),
    ("POST", "/api/memories/search", {"query": "  \n"}, 422, "query"),
    ("POST", "/api/memories/search", {"query": "pool", "limit": 0}, 422, "greater than or equal"),
    ("POST", "/api/memories/search", {"query": "pool", "limit": -4}, 422, "greater than or equal"),
    ("POST", "/api/memories/search", {"query": "pool", "limit": 101}, 422, "less than or equal"),
    ("POST", "/api/memories/search", {"query": "pool", "mode": "magic"}, 422, "mode"),
    ("POST", "/api/memories/search", {"query": "pool", "type": "wizard"}, 422, "unknown type"),
    ("POST", "/api/memories/search", {"query": "p", "include_inactive": "yes"}, 422, "boolean"),
    ("POST", "/api/memories/search", {"query": "pool", "colour": "red"}, 422, "extra"),
    ("POST", "/api/memories", {"content": ""}, 422, "at least 1 character"),
    ("POST", "/api/memories", {"content": "   "}, 422, "content"),
    ("POST", "/api/memories", {"content": "a fact", "importance": 2}, 422, "less than or equal"),
    ("POST", "/api/memories", {"content": "a fact", "type": "wizard"}, 422, "unknown type"),
    ("PUT", "/api/memories/<note>", {}, 422, "at least one field"),
    ("PUT", "/api/memories/<note>", {"content": "  "}, 422, "content"),
    ("PUT", "/api/memories/<note>", {"status": "gone"}, 422, "status"),
    ("PUT", "/api/memories/<note>", {"importance": -1}, 422, "greater than or equal"),
    ("PUT", "/api/memories/<note>", {"title": None}, 422, "title"),
    ("PUT", "/api/memories/mem_nope", {"title": "x"}, 404, "not found"),
    ("PUT", "/api/memories/<note>", {"superseded_by": "mem_nope"}, 404, "mem_nope"),
    ("DELETE", "/api/memories/mem_nope", None, 404, "not found"),
    ("GET", "/api/memories", {"limit": 0}, 422, "greater than or equal"),
    ("GET", "/api/memories", {"limit": 501}, 422, "less than or equal"),
    ("GET", "/api/memories", {"offset": -1}, 422, "greater than or equal"),
    ("GET", "/api/memories", {"sort": "random"}, 422, "sort"),
    ("GET", "/api/memories", {"status": "gone"}, 422, "status"),
    ("POST", "/api/memories/rebuild", {"vectors": "perhaps"}, 422, "boolean"),
    ("GET", "/api/memories/pending", {"status": "maybe"}, 422, "status must be"),
    ("GET", "/api/memories/pending", {"limit": 0}, 422, "greater than or equal"),
    ("POST", "/api/memories/pending/<confirmed>/reject", None, 409, "already confirmed"),
    ("POST", "/api/memories/pending/<rejected>/confirm", None, 409, "already rejected"),
    ("POST", "/api/memories/pending/pend_nope/confirm", None, 404, "not found"),
    ("GET", "/api/observations/search", {"q": ""}, 422, "at least 1 character"),
    ("GET", "/api/observations/search", {"q": "   "}, 422, "q"),
    ("GET", "/api/observations/search", {"q": "？！"}, 422, "no word to look for"),
    ("GET", "/api/observations/search", {"q": "pytest", "limit": 0}, 422, "greater than"),
    ("GET", "/api/observations/search", {"q": "pytest", "limit": 101}, 422, "less than"),
    ("GET", "/api/observations/<obs>/timeline", {"before": -1}, 422, "greater than or equal"),
    ("GET", "/api/observations/<obs>/timeline", {"after": 21}, 422, "less than or equal"),
    ("GET", "/api/observations/999999/timeline", None, 404, "not found"),
    ("GET", "/api/observations", {"ids": ""}, 422, "at least 1 character"),
    ("GET", "/api/observations", {"ids": "a,b"}, 422, "numbers"),
    ("GET", "/api/observations", {"ids": "-1"}, 422, "positive"),
    ("GET", "/api/observations", {"ids": ",".join(map(str, range(1, 52)))}, 422, "50 ids"),
    # Past a database integer: refused as input, never an overflow in the driver (a 500)
    ("GET", "/api/observations", {"ids": "99999999999999999999999"}, 422, "at most"),
    ("GET", "/api/observations", {"ids": "999998,999999"}, 404, "not found"),
    ("GET", "/api/observations/99999999999999999999999/timeline", None, 422, "less than or"),
    ("GET", "/api/memories/<note>/history/99999999999999999999999", None, 422, "less than or"),
    ("POST", "/api/memories/<note>/history/9223372036854775808/restore", None, 422, "less than"),
    ("GET", "/api/memories/history/deleted", {"limit": 0}, 422, "greater than or equal"),
    ("GET", "/api/memories/<note>/history/0", None, 422, "greater than or equal"),
    ("POST", "/api/memories/<note>/history/0/restore", None, 422, "greater than or equal"),
    ("POST", "/api/memories/<note>/history/9/restore", None, 404, "not found"),
    ("GET", "/api/memories/supersessions", {"status": "maybe"}, 422, "status must be"),
    ("GET", "/api/memories/supersessions", {"limit": 0}, 422, "greater than or equal"),
    ("GET", "/api/memories/supersessions/sup_nope", None, 404, "not found"),
    ("POST", "/api/memories/supersessions/sup_nope/resolve", {"keep": "maybe"}, 422, "keep"),
    ("POST", "/api/memories/supersessions/sup_nope/resolve", {"keep": "new"}, 404, "not found"),
    ("POST", "/api/memories/<note>/not-relevant", {"prompt": ""}, 422, "at least 1 character"),
    ("POST", "/api/memories/<note>/not-relevant", {"prompt": "？！"}, 422, "no word to compare"),
    ("POST", "/api/memories/<note>/not-relevant", {}, 422, "prompt"),
    ("POST", "/api/memories/mem_nope/not-relevant", {"prompt": "pool size"}, 404, "not found"),
    ("GET", "/api/memories/mem_nope", None, 404, "not found"),
    ("GET", "/api/memories/mem_nope/history", None, 404, "not found"),
    ("GET", "/api/conversations/c-nope", None, 404, "not found"),
    ("DELETE", "/api/conversations/c-nope", None, 404, "not found"),
    ("POST", "/api/conversations/c-nope/interrupt", None, 404, "not found"),
    ("POST", "/api/chat/stream", {"message": " "}, 422, "message is empty"),
    ("POST", "/api/chat", {"message": ""}, 422, "message is empty"),
    ("POST", "/api/chat", {"message": "   "}, 422, "message is empty"),
    ("POST", "/api/chat", {"message": "hi", "new_conversation": "yes"}, 422, "boolean"),
    ("POST", "/api/embed", {"texts": []}, 422, "at least 1 item"),
]


NOTHING_TO_REFUSE = {"GET /health", "GET /api/conversations", "GET /api/memories/stats"}
"""Endpoints that take no input, so no input of theirs can be wrong."""


def template_of(method: str, path: str, templates: list[str]) -> str:
    """The route a row's request goes to: the most literal path template it matches."""
    matching = [
        t
        for t in templates
        if t.startswith(method + " ")
        and re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", t.split(" ", 1)[1]), path)
    ]
    return min(matching, key=lambda t: t.count("{"))


def fill(text: str, known: dict[str, str]) -> str:
    for name, value in known.items():
        text = text.replace(f"<{name}>", value)
    return text


async def test_every_endpoint_refuses_bad_input_with_a_clear_error_and_changes_nothing(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings()
    async with running_app(settings) as client:
        container = client.app.state.container  # type: ignore[attr-defined]
        saved = await client.post("/api/memories", json={"content": "The pool holds 20."})
        pending = PendingStore(container.state)
        keep = pending.add(EntityCandidate("decision", "we use uv for envs", 0.6, "use uv"))
        drop = pending.add(EntityCandidate("preference", "vim is fine I guess", 0.5, "vim"))
        assert (await client.post(f"/api/memories/pending/{keep.id}/confirm")).status_code == 200
        assert (await client.post(f"/api/memories/pending/{drop.id}/reject")).status_code == 200
        episodes = EpisodeStore(container.state, container.memory)
        episode = episodes.start("claude-code:s1", title="app", project="app", scope="user")
        obs = episodes.record(
            episode.id, "observation", "7 passed", kind="change", title="ran pytest -q"
        )
        known = {
            "note": saved.json()["id"],
            "confirmed": keep.id,
            "rejected": drop.id,
            "obs": str(obs),
        }
        routes = [
            f"{method.upper()} {path}"
            for path, operations in client.app.openapi()["paths"].items()  # type: ignore[attr-defined]
            for method in operations
        ]
        covered = {template_of(m, p, routes) for m, p, *_ in BAD_REQUESTS}
        assert set(routes) - NOTHING_TO_REFUSE == covered, "every endpoint with input has rows"

        before = home_fingerprint(settings.home)
        wrong = []
        for method, path, data, status, expected in BAD_REQUESTS:
            url = fill(path, known)
            if method in ("GET", "DELETE") or path.endswith("/rebuild"):
                response = await client.request(method, url, params=data)
            else:
                response = await client.request(method, url, json=data)
            detail = json.dumps(response.json().get("detail"), ensure_ascii=False)
            if response.status_code != status or expected.lower() not in detail.lower():
                wrong.append(f"{method} {path} {data} -> {response.status_code}: {detail[:300]}")
        assert not wrong, "\n".join(wrong)
        assert home_fingerprint(settings.home) == before


# JSON may escape a lone surrogate (`"\ud800"`): valid JSON, but no Unicode text, so it can
# be neither stored nor echoed back in an error as UTF-8. Sent as raw bytes (a JSON encoder
# refuses to write them).
SURROGATE_BODIES = [
    ("POST", "/api/memories", b'{"content": "x \\ud800"}'),
    ("POST", "/api/memories/search", b'{"query": "pool \\udfff"}'),
    ("PUT", "/api/memories/<note>", b'{"title": "x \\udfff"}'),
    ("POST", "/api/chat", b'{"message": "hi \\ud83d"}'),
    ("POST", "/api/chat/stream", b'{"message": "hi", "conversation_id": "c\\udc00"}'),
]


async def test_a_lone_surrogate_in_json_is_a_clear_422_and_changes_nothing(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings()
    async with running_app(settings) as client:
        note = (await client.post("/api/memories", json={"content": "The pool holds 20."})).json()
        saved = (await client.get(f"/api/memories/{note['id']}")).json()
        before = home_fingerprint(settings.home)
        for method, path, body in SURROGATE_BODIES:
            response = await client.request(
                method,
                path.replace("<note>", note["id"]),
                content=body,
                headers={"content-type": "application/json"},
            )
            assert response.status_code == 422, (path, response.text)
            assert "surrogate" in response.text.lower() or "\\ud" in response.text, response.text
        assert home_fingerprint(settings.home) == before
        kept = (await client.get(f"/api/memories/{note['id']}")).json()
    assert kept == saved
