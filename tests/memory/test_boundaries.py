"""Package boundaries: memory/ stays independent and light to import."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import memory

FORBIDDEN = ("agent", "bridge", "web", "settings", "app", "cli")


def test_memory_imports_nothing_from_the_other_packages() -> None:
    package = Path(memory.__file__).parent
    offenders = []
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []


def test_importing_the_store_is_light() -> None:
    code = (
        "import sys, memory.store, memory.context, memory.capture;"
        "heavy = [m for m in ('fastapi', 'numpy', 'pydantic', 'rjieba', 'httpx')"
        " if m in sys.modules]; print(heavy)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
