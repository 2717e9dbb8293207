"""How single values are stored in Redis, written and read the same way here: times
in whole microseconds (TTLs in milliseconds, at least one), headers as JSON (`{}` for
none), a lease's progress as its fence then JSON."""

from __future__ import annotations

from typing import Any

import orjson

from tasuki.core.records import Progress

_EMPTY_HEADERS = b"{}"


def us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def ms(seconds: float) -> int:
    """A TTL for PX: at least 1 ms (Redis refuses 0), so a zero TTL lapses at once."""
    return max(1, round(seconds * 1000))


def headers_json(headers: Any) -> bytes:
    if not headers:
        return _EMPTY_HEADERS
    return orjson.dumps(headers if type(headers) is dict else dict(headers))


def headers_of(raw: bytes) -> dict[str, str]:
    if raw == _EMPTY_HEADERS or not raw:
        return {}
    headers: dict[str, str] = orjson.loads(raw)
    return headers


def progress_json(fence: str, progress: Progress) -> bytes:
    """The `progress` field keep.lua stores: the lease's fence, then the JSON."""
    return fence.encode() + b" " + orjson.dumps([progress.fraction, progress.text])


def progress_of(raw: bytes, fence: bytes) -> Progress | None:
    """The `progress` field, if the message's current lease (`fence`) stored it."""
    if not raw:
        return None
    stored_fence, _, data = raw.partition(b" ")
    if stored_fence != (fence or b"0"):
        return None
    fraction, text = orjson.loads(data)
    return Progress(float(fraction), str(text))
