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
    "doctor",
    "errors",
    "memory",
    "migration",
    "settings",
    "storage",
    "web",
)
"""Every top-level package and module of ours."""

# memory/'s sub-packages from the top (docs/architecture.md, "memory/, by job"); the modules
# left at the package root (the vocabulary, the seam `backend` and the algorithm `core` behind
# it) are named where they stand.
_MEMORY_ABOVE_LOOP: frozenset[str] = frozenset({"clients", "cli"})
_MEMORY_ABOVE_BACKENDS = _MEMORY_ABOVE_LOOP | {"loop", "history"}
_MEMORY_ABOVE_SEARCH = _MEMORY_ABOVE_BACKENDS | {"sqlite", "postgres", "backend", "core"}
_MEMORY_ABOVE_ENCODERS = _MEMORY_ABOVE_SEARCH | {"search", "notes"}

RULES: dict[str, frozenset[str]] = {
    # memory stands alone: the app, the hooks, the MCP server and the CLI all build on it.
    "memory": frozenset(
        {"agent", "bridge", "web", "settings", "app", "cli", "doctor", "migration"}
    ),
    # the agent pipeline knows neither its front doors nor the composition root.
    "agent": frozenset({"bridge", "web", "app", "cli", "doctor", "migration"}),
    # the two front doors are independent and never reach up into app.py or cli.py.
    "bridge": frozenset({"web", "app", "cli", "doctor", "migration"}),
    "web": frozenset({"bridge", "app", "cli", "doctor", "migration"}),
    # storage is the bottom: plumbing that knows no settings class and no feature.
    "storage": frozenset(
        {"agent", "bridge", "memory", "web", "settings", "app", "cli", "doctor", "migration"}
    ),
    # the exception hierarchy everyone imports imports nothing of ours.
    "errors": frozenset(OURS) - {"errors"},
    # Inside memory/ (docs/architecture.md, "memory/, by job"): from the bottom, the encoders
    # and the notes know nothing of search; search is pure and backend-neutral; the two
    # backends know neither each other nor what is built on them (the conversation loop, the
    # notes' history, the clients and the chooser among them); the loop and the history work
    # over the seam, never a backend.
    "memory.encoders": frozenset({"memory." + p for p in _MEMORY_ABOVE_ENCODERS}),
    "memory.notes": frozenset(
        {"memory." + p for p in (_MEMORY_ABOVE_ENCODERS - {"notes"}) | {"encoders"}}
    ),
    "memory.search": frozenset({"memory." + p for p in _MEMORY_ABOVE_SEARCH}),
    "memory.sqlite": frozenset({"memory." + p for p in _MEMORY_ABOVE_BACKENDS | {"postgres"}}),
    "memory.postgres": frozenset({"memory." + p for p in _MEMORY_ABOVE_BACKENDS | {"sqlite"}}),
    "memory.backend": frozenset(
        {"memory." + p for p in _MEMORY_ABOVE_BACKENDS | {"sqlite", "postgres"}}
    ),
    # the algorithm both backends share knows neither of them
    "memory.core": frozenset(
        {"memory." + p for p in _MEMORY_ABOVE_BACKENDS | {"sqlite", "postgres", "backend"}}
    ),
    "memory.loop": frozenset({"memory." + p for p in _MEMORY_ABOVE_LOOP | {"sqlite", "postgres"}}),
    # the input rules both front doors share (MCP tools, HTTP bodies): pydantic only
    "memory.inputs": frozenset(OURS),
    # a note's history kept in the state database (versions, pending supersessions): over the
    # state seam like the loop, which reads it, never a backend
    "memory.history": frozenset(
        {"memory." + p for p in _MEMORY_ABOVE_LOOP | {"loop", "sqlite", "postgres"}}
    ),
}
"""Layer (a package, a module, or a sub-package such as `memory.search`) -> what it must never
import (a name forbids the module and everything under it)."""


def _sources(root: Path, layer: str) -> list[Path]:
    folder = root.joinpath(*layer.split("."))
    if folder.is_dir():
        return sorted(folder.rglob("*.py"))
    return [folder.with_suffix(".py")]


def imported_modules(root: Path, path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, wherever it stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = list(path.relative_to(root).parent.parts)  # relative imports start here
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            module = node.module or ""
            found.append((node.lineno, module))
            # `from memory import sqlite` imports the module `memory.sqlite` too
            folder = root.joinpath(*module.split("."))
            found += [
                (node.lineno, f"{module}.{a.name}")
                for a in node.names
                if (folder / a.name).is_dir() or (folder / f"{a.name}.py").is_file()
            ]
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
        if any(module == name or module.startswith(name + ".") for name in forbidden)
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


def _folder_cycles(root: Path, package: str) -> list[list[str]]:
    """Cycles among the sub-packages (folders) of `package`, each imports of the others counted
    wherever they stand (inside functions and under `TYPE_CHECKING` too)."""
    base = root / package
    folders = sorted(p.name for p in base.iterdir() if (p / "__init__.py").is_file())
    edges: dict[str, set[str]] = {f: set() for f in folders}
    for folder in folders:
        for path in sorted((base / folder).rglob("*.py")):
            for _, module in imported_modules(root, path):
                parts = module.split(".")
                if parts[0] == package and len(parts) > 1 and parts[1] in edges:
                    edges[folder].add(parts[1])
    cycles: list[list[str]] = []

    def walk(folder: str, path: list[str]) -> None:
        for nxt in sorted(edges[folder] - {folder}):
            if nxt == path[0]:
                cycles.append([*path, nxt])
            elif nxt not in path and nxt > path[0]:  # each cycle once, from its least folder
                walk(nxt, [*path, nxt])

    for folder in folders:
        walk(folder, [folder])
    return cycles


def test_the_memory_folders_import_each_other_one_way() -> None:
    # memory/'s folders are layers (docs/architecture.md, "memory/, by job"): a folder that
    # imports one which imports it back (even lazily) has no place in the order.
    assert _folder_cycles(ROOT, "memory") == []


def test_a_folder_importing_back_is_a_cycle(tmp_path: Path) -> None:
    for folder in ("history", "loop"):
        (tmp_path / "memory" / folder).mkdir(parents=True)
        (tmp_path / "memory" / folder / "__init__.py").write_text("")
    (tmp_path / "memory" / "__init__.py").write_text("")
    (tmp_path / "memory" / "loop" / "prompt.py").write_text("from memory.history import store\n")
    (tmp_path / "memory" / "history" / "store.py").write_text(
        "def later():\n    from memory.loop.recall import PIN_TAG\n"
    )
    assert _folder_cycles(tmp_path, "memory") == [["history", "loop", "history"]]


def test_importing_the_memory_store_is_light() -> None:
    # The hook process imports the store: no web framework, no numpy, no tokenizer on that path.
    code = (
        "import sys, memory.sqlite.store, memory.loop.context, memory.notes.capture;"
        "heavy = [m for m in ('fastapi', 'numpy', 'pydantic', 'rjieba', 'httpx')"
        " if m in sys.modules]; print(heavy)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_a_backend_reaching_into_the_other_is_caught(tmp_path: Path) -> None:
    # The rule that made Filters leave the SQLite index: postgres/ may not import sqlite/,
    # however the import is spelled.
    folder = tmp_path / "memory" / "postgres"
    folder.mkdir(parents=True)
    (tmp_path / "memory" / "sqlite").mkdir()
    (folder / "store.py").write_text(
        "from memory.sqlite.index import Filters\n"
        "from memory import sqlite\n"
        "from memory.search.filters import Filters as F\n"
    )
    assert violations("memory.postgres", tmp_path) == [
        "memory/postgres/store.py:1 imports memory.sqlite.index",
        "memory/postgres/store.py:2 imports memory.sqlite",
    ]
