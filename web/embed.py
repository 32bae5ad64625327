"""`POST /api/embed`: vectors of texts from the memory's own encoder, for a client that ranks
or clusters with the same model the memory searches with (docs/retrieval.md). 503 while the
model loads."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from memory.encoders.client import EncoderClient, EncoderReady
from web.auth import require_token

router = APIRouter(tags=["memories"], dependencies=[Depends(require_token)])


class EmbedRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    texts: list[Annotated[str, Field(max_length=20_000)]] = Field(min_length=1, max_length=256)
    kind: Literal["query", "passage"] = Field(
        default="passage", description="query: a search question; passage: stored text."
    )


@router.post("/api/embed")
async def embed(body: EmbedRequest, request: Request) -> dict[str, Any]:
    """Vectors of the given texts from the memory's encoder (503 while it loads)."""
    client: EncoderClient = request.app.state.container.encoder
    vectors = await client.encode(body.texts, body.kind)
    status = client.status
    return {
        "model": status.name if isinstance(status, EncoderReady) else None,
        "dim": int(vectors.shape[1]),
        "vectors": vectors.tolist(),
    }
