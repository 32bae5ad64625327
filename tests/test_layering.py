"""The layers: which of our packages may import which (docs/architecture.md, "Layering").

Read from the source with `ast`, so imports inside functions and under `TYPE_CHECKING` count
too: a type-only import still ties one layer to another.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

OURS = (
    "agent",
    "app",
    "bridge",
    "cli",
    "errors",
    "memory",
    "migration",
    "settings",
    "storage",
    "web",
)
"""Every top-level package and module of ours."""

RULES: dict[str, frozenset[str]] = {
    # memory stands alone: the app, the hooks, the MCP server and the CLI all build on it.
    "memory": frozenset({"agent", "bridge", "web", "settings", "app", "cli", "migration"}),
    # the agent pipeline knows neither its front doors nor the composition root.
    "agent": frozenset({"bridge", "web", "app", "cli", "migration"}),
    # the two front doors are independent and never reach up into app.py or cli.py.
    "bridge": frozenset({"web", "app", "cli", "migration"}),
    "web": frozenset({"bridge", "app", "cli", "migration"}),
    # storage is the bottom: plumbing that knows no settings class and no feature.
    "storage": frozenset(
        {"agent", "bridge", "memory", "web", "settings", "app", "cli", "migration"}
    ),
    # the exception hierarchy everyone imports imports nothing of ours.
    "errors": frozenset(OURS) - {"errors"},
}
"""Layer -> what it must never import."""


def _sources(root: Path, layer: str) -> list[Path]:
    folder = root / layer
    if folder.is_dir():
        return sorted(folder.rglob("*.py"))
    return [root / f"{layer}.py"]


def imported_modules(root: Path, path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, wherever it stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = list(path.relative_to(root).parent.parts)  # relative imports start here
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.append((node.lineno, node.module or ""))
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - (node.level - 1)]
            if node.module:
                found.append((node.lineno, ".".join([*base, node.module])))
            else:  # `from .. import x`: each name may be a module
                found += [(node.lineno, ".".join([*base, a.name])) for a in node.names]
    return found


def violations(layer: str, root: Path = ROOT) -> list[str]:
    forbidden = RULES[layer]
    return [
        f"{path.relative_to(root).as_posix()}:{line} imports {module}"
        for path in _sources(root, layer)
        for line, module in imported_modules(root, path)
        if module.split(".")[0] in forbidden
    ]


@pytest.mark.parametrize("layer", sorted(RULES))
def test_layer_imports_only_what_it_may(layer: str) -> None:
    assert _sources(ROOT, layer)[0].is_file(), f"no source found for {layer}"
    assert violations(layer) == []


def test_every_package_of_ours_has_a_place() -> None:
    # A new top-level package or module must be given its place in the layers (OURS, RULES).
    found = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    found |= {p.stem for p in ROOT.glob("*.py")}
    assert found <= {*OURS, "tests", "bench"}


def test_imports_inside_functions_and_under_type_checking_count(tmp_path: Path) -> None:
    folder = tmp_path / "storage"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "pool.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from settings import Settings\n"
        "def build():\n"
        "    from .. import app\n"
        "    from .urls import safe_url\n"
    )
    assert violations("storage", tmp_path) == [
        "storage/pool.py:3 imports settings",
        "storage/pool.py:5 imports app",
    ]


def test_importing_the_memory_store_is_light() -> None:
    # The hook process imports the store: no web framework, no numpy, no tokenizer on that path.
    code = (
        "import sys, memory.store, memory.context, memory.capture;"
        "heavy = [m for m in ('fastapi', 'numpy', 'pydantic', 'rjieba', 'httpx')"
        " if m in sys.modules]; print(heavy)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
