"""One JSONL log per request, with every SDK object converted safely to JSON.

A log is the full record of a turn: the request, every SDK message, permission decisions,
errors and the final response. Users are pointed at it whenever a turn fails. Every string of
a record (user and model text, tool inputs and results) is sanitized first, as stored memory
is: `<private>` spans dropped, secrets replaced by `[REDACTED:<kind>]`.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import json
import logging
import math
import re
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any, Literal

from memory.notes.capture import sanitize_data

logger = logging.getLogger(__name__)

RecordType = Literal[
    "request", "message", "permission", "memory", "memory_change", "error", "response"
]

_MAX_DEPTH = 20
_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """Convert SDK messages, blocks, paths and unknown objects into JSON-safe data."""
    if _depth > _MAX_DEPTH:
        return repr(value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value, _depth + 1)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return {"__bytes__": base64.b64encode(bytes(value)).decode("ascii")}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        data = {f.name: to_jsonable(getattr(value, f.name), _depth + 1) for f in fields}
        return {"__type__": type(value).__name__, **data}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v, _depth + 1) for v in value]
    if isinstance(value, BaseException):
        return {"__type__": type(value).__name__, "message": str(value)}
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        try:
            return to_jsonable(model_dump(), _depth + 1)
        except Exception:  # a broken third-party model must not break logging
            return repr(value)
    return repr(value)


_DELTA_FIELDS = ("text", "partial_json", "thinking")


def _without_delta_text(record: Any) -> Any:
    """A stream event's text delta reduced to its length: a secret split across deltas cannot
    be recognized, and the whole text is logged with the message that follows."""
    if isinstance(record, dict) and record.get("__type__") == "StreamEvent":
        delta = (record.get("event") or {}).get("delta")
        if isinstance(delta, dict):
            for name in _DELTA_FIELDS:
                if isinstance(delta.get(name), str):
                    delta[name] = f"[{len(delta[name])} characters]"
    return record


class RequestLog:
    """Append-only JSONL file for one request. Safe to write from hooks on other tasks."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    def write(self, record_type: RecordType, data: Any) -> None:
        line = json.dumps(
            {
                "type": record_type,
                "ts": time.time(),
                "data": sanitize_data(_without_delta_text(to_jsonable(data))),
            },
            ensure_ascii=False,
        )
        with self._lock:
            if self._file.closed:
                logger.debug("log %s closed; dropped a %s record", self.path, record_type)
                return
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> RequestLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RequestLogs:
    """Names and opens request log files under one directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def open(self, conversation_id: str) -> RequestLog:
        now = dt.datetime.now()
        slug = _SLUG.sub("_", conversation_id)[:60] or "conversation"
        name = f"{now:%Y%m%d-%H%M%S}-{slug}-{uuid.uuid4().hex[:6]}.jsonl"
        return RequestLog(self.root / f"{now:%Y-%m-%d}" / name)
