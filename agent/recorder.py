"""Connects finished turns and ended conversations to memory: episodes and entity capture.

* every turn: the conversation's active episode (started on its first turn) records the cleaned
  user message and reply; the user message is scanned for decisions and preferences;
* a conversation end (new conversation, /clear, idle eviction, shutdown) closes the episode, with
  a model-written summary when it had real work, else none; rule-based if the model fails.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from agent.sessions import TurnInfo
from memory.backend import MemoryBackend
from memory.loop.entities import CaptureResult, PendingStore, capture_entities
from memory.loop.episodes import (
    EpisodeStore,
    episode_title,
    rule_based_summary,
    transcript,
)
from storage.lanes import default_lane

logger = logging.getLogger(__name__)

Summarizer = Callable[[str], Awaitable[str | None]]
Run = Callable[..., Awaitable[Any]]


def channel_name(conversation_id: str) -> str:
    """The place a conversation happens, for episode titles."""
    if conversation_id.startswith("feishu:"):
        return "飞书"
    return "Web"


class MemoryRecorder:
    def __init__(
        self,
        store: MemoryBackend,
        episodes: EpisodeStore,
        pending: PendingStore,
        *,
        summarizer: Summarizer | None,
        run: Run = default_lane,
    ) -> None:
        self._run = run  # the state lane: episodes live in the state database
        self.store = store
        self.episodes = episodes
        self.pending = pending
        self.summarizer = summarizer
        self._locks: dict[str, asyncio.Lock] = {}

    def _lock(self, conversation_id: str) -> asyncio.Lock:
        return self._locks.setdefault(conversation_id, asyncio.Lock())

    async def on_turn(self, info: TurnInfo) -> None:
        async with self._lock(info.conversation_id):
            await self._run(self._record_turn, info)

    def _record_turn(self, info: TurnInfo) -> CaptureResult | None:
        # whose the words are: a Feishu member's go to their own scope, never the owner's
        whose = info.reader.saves_to
        episode = self.episodes.active(info.conversation_id)
        if episode is None:
            episode = self.episodes.start(
                info.conversation_id,
                title=episode_title(channel_name(info.conversation_id), info.started),
                # the session's summary is theirs too (a reader saving nowhere: its first
                # scope, a group's team)
                scope=whose or next(iter(info.reader.scopes), "user"),
                source=channel_name(info.conversation_id),
            )
        self.episodes.record(episode.id, "user", info.message, turn=True)
        self.episodes.record(
            episode.id, "assistant", info.result.reply, file_changes=info.file_changes
        )
        if whose is None:
            return None  # a turn that saves nowhere captures nothing
        return capture_entities(
            self.store,
            self.pending,
            info.message,
            scope=whose,
            source=f"conversation:{info.conversation_id}",
        )

    async def on_close(self, conversation_id: str, reason: str) -> None:
        async with self._lock(conversation_id):
            episode = await self._run(self.episodes.active, conversation_id)
            if episode is None:
                return
            summary: str | None = None
            if await self._run(self.episodes.wants_summary, episode):
                messages = await self._run(self.episodes.messages, episode.id)
                if self.summarizer is not None:
                    summary = await self.summarizer(transcript(messages))
                summary = summary or rule_based_summary(messages)
            await self._run(self.episodes.close, episode.id, summary)
            logger.info(
                "episode %s of %s closed (%s, %s)",
                episode.id,
                conversation_id,
                reason,
                "summarized" if summary else "no summary",
            )
