"""Credentials are never stored (#30): a note that still holds something shaped like a
password after redaction is refused at every door with a message saying why, and the value
reaches no file. (The redacted forms go through every door in test_secrets_at_rest.py.)"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.memory_tools import build_memory_tools
from memory.config import MemoryConfig
from memory.sqlite.store import MemoryStore
from settings import Settings
from tests.conftest import running_app
from tests.fakes.anthropic_api import FakeMessagesAPI, text
from tests.security.test_secrets_at_rest import CLAUDE_MEMORY, _forms, _sqlite_dump

# Redaction leaves it (no `is`, `:` or `=` between the word and the value); a note may not.
LEFT = "NAS login: admin, password → Zebra-4471"
VALUE = "Zebra-4471"


def _on_disk(home: Path, value: str = VALUE) -> list[str]:
    """The files under `home` whose bytes (or SQLite rows) hold the value."""
    found = []
    for path in sorted(p for p in home.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if data.startswith(b"SQLite format 3\x00"):
            data += _sqlite_dump(path)
        if any(form in data for form in _forms(value)):
            found.append(str(path.relative_to(home)))
    return found


def _cli(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    proc = subprocess.run(
        [str(CLAUDE_MEMORY), *args], capture_output=True, timeout=60, check=False, env=env
    )
    return proc.returncode, proc.stderr.decode()


def _says_why(message: str) -> None:
    assert "not saved" in message and "credential" in message and "'password'" in message
    assert "password manager" in message
    assert VALUE not in message  # the refusal never repeats the value


async def test_a_note_still_holding_a_credential_is_refused_at_every_door(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    from tests.hooks.test_mcp_server import mcp_session

    settings = make_settings()
    home = settings.home
    project = tmp_path / "work" / "app"
    project.mkdir(parents=True)

    # HTTP API: 422 with the reason; an update of a kept note too
    async with running_app(settings) as client:
        refused = await client.post("/api/memories", json={"content": LEFT})
        assert refused.status_code == 422, refused.text
        _says_why(refused.json()["detail"])
        kept = await client.post("/api/memories", json={"content": "NAS login: admin"})
        assert kept.status_code == 200, kept.text
        changed = await client.put(
            f"/api/memories/{kept.json()['id']}", json={"title": f"NAS {LEFT}"}
        )
        assert changed.status_code == 422, changed.text
        _says_why(changed.json()["detail"])

    # CLI: a non-zero exit and the reason on stderr
    env = {**os.environ, "CLAUDE_MEMORY_HOME": str(home), "CLAUDE_MEMORY_HOOK_SERVER": "0"}
    code, err = _cli(["memory", "add", LEFT], env)
    assert code != 0
    _says_why(err)

    # MCP: a tool error the client's model can act on
    async with mcp_session(home, project) as session:
        result = await session.call_tool("memory_save", {"content": LEFT, "title": "nas"})
        assert result.isError
        _says_why("\n".join(getattr(block, "text", "") for block in result.content))

    # the chat agent's own memory_save tool
    with MemoryStore.open(MemoryConfig.for_home(home, fsync=False)) as store:
        [save] = [t for t in build_memory_tools(store) if t.name == "memory_save"]
        answer = await save.handler({"content": LEFT, "type": "general"})
        assert answer.get("is_error") is True
        _says_why(answer["content"][0]["text"])
        assert "NAS login: admin" in [n.title for n in store.iter_notes()]

    assert _on_disk(home) == []


# The three phrasings of the issue, each with its own value.
PHRASINGS = {
    "english": ("my server password is PlainPw-Zebra-4471", "PlainPw-Zebra-4471"),
    "chinese": ("服务器的密码是 'ZhPw-Zebra-8812'，别外传", "ZhPw-Zebra-8812"),
    "pw": ("login with root, pw: Colon-Pw-5521", "Colon-Pw-5521"),
}


@pytest.mark.e2e
async def test_the_three_password_phrasings_through_chat_leave_no_value_in_logs_or_state(
    make_settings: Callable[..., Settings], fake_model: FakeMessagesAPI
) -> None:
    fake_model.on("Zebra", text("Noted. I will not keep passwords."))
    fake_model.on("Colon-Pw", text("Noted."))
    settings = make_settings()
    async with running_app(settings) as client:
        for message, _ in PHRASINGS.values():
            reply = await client.post(
                "/api/chat", json={"message": message, "conversation_id": "creds"}
            )
            assert reply.status_code == 200, reply.text
    values = [value for _, value in PHRASINGS.values()]
    sent = "\n".join(str(r) for r in fake_model.requests)
    assert all(v in sent for v in values), "the model saw each message: the scan is not vacuous"
    request_logs = sorted((settings.home / "logs").rglob("*.jsonl"))
    assert request_logs, "no request log written"
    logged = b"".join(p.read_bytes() for p in request_logs)
    state = (settings.home / "state.db").read_bytes() + _sqlite_dump(settings.home / "state.db")
    for value in values:
        for where, data in (("request log", logged), ("state.db", state)):
            assert not any(form in data for form in _forms(value)), (where, value)
    assert b"[REDACTED:password]" in logged
    assert [_on_disk(settings.home, v) for v in values] == [[], [], []]  # nor anywhere else
