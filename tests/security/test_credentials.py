"""Credentials are never stored (#30): a note that still holds something shaped like a
password after redaction is refused at every door with a message saying why, and the value
reaches no file. (The redacted forms go through every door in test_secrets_at_rest.py.)"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from agent.memory_tools import build_memory_tools
from memory.config import MemoryConfig
from memory.sqlite.store import MemoryStore
from settings import Settings
from tests.conftest import running_app
from tests.security.test_secrets_at_rest import CLAUDE_MEMORY, _forms, _sqlite_dump

# Redaction leaves it (no `is`, `:` or `=` between the word and the value); a note may not.
LEFT = "NAS login: admin, password → Zebra-4471"
VALUE = "Zebra-4471"


def _on_disk(home: Path) -> list[str]:
    """The files under `home` whose bytes (or SQLite rows) hold the value."""
    found = []
    for path in sorted(p for p in home.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if data.startswith(b"SQLite format 3\x00"):
            data += _sqlite_dump(path)
        if any(form in data for form in _forms(VALUE)):
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
