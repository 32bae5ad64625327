"""One coroutine beside the app for as long as its `async with` is open (pure lifecycle)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import ClassVar, Self


class BackgroundTask:
    """`async with` starts `_run` as a task named `task_name`; leaving cancels it and waits
    for it to end. Subclasses write `_run` (and may wait for more in `__aexit__`)."""

    task_name: ClassVar[str] = "background"
    _task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._run(), name=self.task_name)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
