"""Blocking calls by kind, each kind on its own sized pool of threads (a "lane").

`asyncio.to_thread` hands every blocking call to the loop's one default pool (min(32, CPUs + 4)
threads: six on a 2-core machine). Six chats waiting on a locked `state.db` took all six, and
`/health` and `/api/memories` waited behind them for as long as the lock held. Each lane here has
its own threads, so a slow database fills its own lane only:

* `state`: conversation state, episodes and the Feishu bridge state (`state.db`, or the shared
  PostgreSQL database);
* `memory`: the memory store's searches, lists and edits from the memory routes;
* `health`: `/health`'s look at the databases (answered with a time limit besides).

Everything else (the Feishu SDK's sends, the memory lookups of the prompt hook and the agent's
memory tools) keeps the default pool, which no state write occupies any more.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class Lane:
    """A named pool of `threads` worker threads for one kind of blocking call."""

    def __init__(self, name: str, threads: int) -> None:
        if threads < 1:
            raise ValueError(f"a lane needs at least one thread ({name}: {threads})")
        self.name = name
        self.threads = threads
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix=f"lane-{name}")

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` on one of the lane's threads, with the caller's context
        variables (as `asyncio.to_thread` carries them: who is acting, for the history)."""
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)

    def close(self) -> None:
        """Stop taking calls; calls still queued are cancelled, running ones finish."""
        self._pool.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True, slots=True)
class Lanes:
    state: Lane
    memory: Lane
    health: Lane

    @classmethod
    def sized(cls, *, state: int, memory: int, health: int = 2) -> Lanes:
        return cls(Lane("state", state), Lane("memory", memory), Lane("health", health))

    def close(self) -> None:
        for lane in (self.state, self.memory, self.health):
            lane.close()


async def default_lane(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """The loop's default pool, for callers built without lanes (tests, tools)."""
    return await asyncio.to_thread(fn, *args, **kwargs)
