"""`/api/memories/pending`: captured entities waiting for the user's confirm or reject.

Mounted before the main memory router so `/api/memories/{id}` never captures `pending`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter

from memory.backend import MemoryBackend
from memory.entities import PendingStore, pending_filter


def create_pending_router(
    get_pending: Callable[[], PendingStore], get_store: Callable[[], MemoryBackend]
) -> APIRouter:
    router = APIRouter(prefix="/api/memories/pending", tags=["memories"])

    @router.get("")
    async def list_pending(status: str = "pending", limit: int = 100) -> dict[str, Any]:
        wanted = pending_filter(status)  # an unknown status: 422 saying which ones exist
        items = await asyncio.to_thread(get_pending().list, wanted, limit)
        return {"pending": [p.to_dict() for p in items]}

    @router.post("/{pending_id}/confirm")
    async def confirm(pending_id: str) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            pending = get_pending()
            entity = pending.get(pending_id)
            if entity.status == "confirmed" and entity.note_id:
                return {"id": entity.note_id, "pending": entity.to_dict()}
            saved = get_store().save(entity.draft())
            resolved = pending.resolve(pending_id, "confirmed", saved.id)
            return {
                "id": saved.id,
                "deduplicated": saved.deduplicated,
                "pending": resolved.to_dict(),
            }

        return await asyncio.to_thread(run)

    @router.post("/{pending_id}/reject")
    async def reject(pending_id: str) -> dict[str, Any]:
        resolved = await asyncio.to_thread(get_pending().resolve, pending_id, "rejected")
        return {"pending": resolved.to_dict()}

    return router
