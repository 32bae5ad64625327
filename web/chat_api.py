"""HTTP routes for chatting and managing conversations; all go through `run_agent`."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from agent.events import TurnEvent, TurnResult, event_to_dict
from agent.sessions import SessionManager
from errors import NotFoundError
from memory.inputs import Flag
from web.auth import require_token


class ChatRequest(BaseModel):
    message: str = Field(description="What the user says.")
    conversation_id: str | None = Field(
        default=None, description="Conversation to continue; default `main`."
    )
    new_conversation: Flag = Field(
        default=False, description="Start a new conversation (a fresh Claude session)."
    )


class ToolIssue(BaseModel):
    tool: str = Field(description="The tool's name, e.g. Bash or Write.")
    input: str = Field(description="The command or path, shortened.")
    reason: str = Field(description="Why it was refused, or the error it reported.")


class ChatResponse(BaseModel):
    reply: str = Field(
        description="The answer, with every refused or failed step stated in plain words."
    )
    conversation_id: str
    session_id: str | None
    is_error: bool = Field(description="True when the turn did not complete (see status).")
    status: Literal["completed", "stopped", "timed_out", "failed"] = Field(
        description="completed; stopped (interrupted on request); timed_out; failed."
    )
    refused: list[ToolIssue] = Field(description="Tool calls the permission policy refused.")
    failed: list[ToolIssue] = Field(description="Tool calls that ran and reported an error.")
    log_file: str = Field(description="This request's JSONL log on the server.")
    cost_usd: float | None = Field(description="This turn's own cost (not a running total).")
    memory_changes: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The turn's memory changes: `status` done (with `undo`, the request that "
        "puts the note back) or waiting for the person (`pending_id`, `why`, `confirm`, "
        "`undo`); `read`: the tools that read outside input before it in the turn.",
    )


def _sessions(request: Request) -> SessionManager:
    sessions: SessionManager = request.app.state.container.sessions
    return sessions


Sessions = Annotated[SessionManager, Depends(_sessions)]
"""The running app's sessions (`app.Container.sessions`)."""

router = APIRouter(prefix="/api", dependencies=[Depends(require_token)], tags=["chat"])


@router.post("/chat", response_model=ChatResponse)
async def chat(body: ChatRequest, sessions: Sessions) -> dict[str, Any]:
    result = await sessions.run_agent(
        body.message,
        conversation_id=body.conversation_id,
        new_conversation=body.new_conversation,
    )
    return result.to_public()


@router.post("/chat/stream")
async def chat_stream(body: ChatRequest, sessions: Sessions) -> StreamingResponse:
    conversation_id = await sessions.resolve_conversation(
        body.conversation_id, body.new_conversation
    )
    # Validate before the stream starts, so bad input is a plain 422, not an SSE event.
    sessions.validate_message(body.message)
    return StreamingResponse(
        _stream(sessions, body.message, conversation_id),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.get("/conversations")
async def list_conversations(sessions: Sessions) -> dict[str, Any]:
    live = {s.conversation_id: s for s in sessions.live()}
    items = []
    for conv in await sessions.run_state(sessions.store.list):
        data = conv.to_public()
        status = live.get(conv.id)
        data["running"] = bool(status and status.running)
        data["connected"] = bool(status and status.connected)
        items.append(data)
    return {"conversations": items}


@router.get("/conversations/{conversation_id}")
async def get_conversation(conversation_id: str, sessions: Sessions) -> dict[str, Any]:
    conv = await sessions.run_state(sessions.store.get, conversation_id)
    if conv is None:
        raise NotFoundError("conversation", conversation_id)
    status = sessions.live_status(conversation_id)
    data = conv.to_public()
    data["running"] = bool(status and status.running)
    data["connected"] = bool(status and status.connected)
    turns = await sessions.run_state(sessions.store.turns, conversation_id)
    data["history"] = [t.to_public() for t in turns]
    return data


@router.delete("/conversations/{conversation_id}")
async def delete_conversation(conversation_id: str, sessions: Sessions) -> dict[str, Any]:
    if await sessions.run_state(sessions.store.get, conversation_id) is None:
        raise NotFoundError("conversation", conversation_id)
    await sessions.delete_conversation(conversation_id)
    return {"deleted": conversation_id}


@router.post("/conversations/{conversation_id}/interrupt")
async def interrupt(conversation_id: str, sessions: Sessions) -> dict[str, Any]:
    if await sessions.run_state(sessions.store.get, conversation_id) is None:
        raise NotFoundError("conversation", conversation_id)
    return {"interrupted": await sessions.interrupt(conversation_id)}


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def _stream(
    sessions: SessionManager, message: str, conversation_id: str
) -> AsyncIterator[bytes]:
    queue: asyncio.Queue[TurnEvent] = asyncio.Queue()

    async def sink(event: TurnEvent) -> None:
        queue.put_nowait(event)

    async def run() -> None:
        result = await sessions.run_agent(message, conversation_id=conversation_id, on_event=sink)
        queue.put_nowait(result)

    yield _sse("start", {"conversation_id": conversation_id})
    # If the client goes away the generator is closed and this task cancelled; the turn itself
    # belongs to the conversation's actor and still finishes and is recorded.
    task = asyncio.create_task(run())
    try:
        while True:
            getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                event = getter.result()
                yield _sse(event.kind, event_to_dict(event))
                if isinstance(event, TurnResult):
                    return
                continue
            getter.cancel()
            if task.exception() is not None:
                exc = task.exception()
                yield _sse("error", {"message": str(exc), "is_error": True})
                return
    finally:
        if not task.done():
            task.cancel()
        with contextlib.suppress(BaseException):
            await task
