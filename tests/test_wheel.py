"""The wheel holds everything the commands need: installed without `-e`, away from the source
tree, `claude-memory serve` answers /health and `memory migrate` runs to its own errors.

No network: the wheel is built with the build backend uv already cached (`uv sync` built the
project with it), installed with `--no-deps`, and the dependencies come from this checkout's
virtual environment through a `.pth` line (a plain path: the `.pth` files there, among them
the editable install pointing at the source tree, are not read).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import site
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.fakes.anthropic_api import FakeMessagesAPI

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Installed:
    bin: Path
    """The fresh environment's bin folder."""


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    # Module scope runs before the per-test environment isolation: uv finds its own cache.
    uv = shutil.which("uv")
    assert uv is not None, "uv is not installed (scripts/test installs it)"
    work = tmp_path_factory.mktemp("wheel")
    _run(uv, "build", "--wheel", "--offline", "--out-dir", work / "dist", ROOT, cwd=ROOT)
    (wheel,) = (work / "dist").glob("claude_memory_system-*.whl")
    venv = work / "venv"
    _run(uv, "venv", "--offline", "--python", sys.executable, venv, cwd=work)
    python = venv / "bin" / "python"
    _run(uv, "pip", "install", "--offline", "--no-deps", "--python", python, wheel, cwd=work)
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=work)
    ours = {sysconfig.get_path("purelib"), *site.getsitepackages()}
    (Path(purelib.strip()) / "_test_dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    yield Installed(bin=venv / "bin")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "CLAUDE_MEMORY_HOME": str(tmp_path / "home"), **extra}


def test_the_installed_code_is_the_wheel_not_the_source_tree(
    installed: Installed, tmp_path: Path
) -> None:
    code = "import app, cli, migration, agent.options as o; print(app.__file__, o.AGENT_PLUGIN)"
    app_file, plugin = _run(installed.bin / "python", "-c", code, cwd=tmp_path).split()
    assert not Path(app_file).is_relative_to(ROOT)
    skills = sorted(p.name for p in (Path(plugin) / "skills").iterdir())
    assert skills and (Path(plugin) / ".claude-plugin" / "plugin.json").is_file()


def test_installed_serve_answers_health(
    installed: Installed, tmp_path: Path, fake_model: FakeMessagesAPI
) -> None:
    port = _free_port()
    env = _env(
        tmp_path,
        CLAUDE_MEMORY_PORT=str(port),
        ANTHROPIC_BASE_URL=fake_model.url,
        ANTHROPIC_API_KEY="dummy",
    )
    proc = subprocess.Popen(
        [str(installed.bin / "claude-memory"), "serve"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # until the model endpoint's first check has answered
            with contextlib.suppress(httpx.TransportError):
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                if health.json()["model_endpoint"]["state"] != "checking":
                    break
            assert proc.poll() is None, "serve exited"
            assert time.monotonic() < deadline, "no settled /health within 60 s"
            time.sleep(0.2)
        page = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    log = out.decode(errors="replace")
    assert health.status_code == 200, log[-2000:]
    assert health.json()["status"] == "ok", (health.json(), log[-2000:])
    assert page.status_code == 200 and "<html" in page.text.lower()  # static files shipped


def test_installed_migrate_to_an_unreachable_database_says_what_to_check(
    installed: Installed, tmp_path: Path
) -> None:
    nowhere = "postgresql://127.0.0.1:1/x"
    done = subprocess.run(
        [str(installed.bin / "claude-memory"), "memory", "migrate", "--to", nowhere],
        env=_env(tmp_path, CLAUDE_MEMORY_DATABASE_POOL_TIMEOUT_SECONDS="1"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "could not connect to the database" in done.stderr, done.stderr
    assert "check --to" in done.stderr
    assert "Traceback" not in done.stderr and "ModuleNotFoundError" not in done.stderr
