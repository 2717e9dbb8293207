"""`memory://` — the whole lifecycle in one process, for the unit tests of users' code.

It is a real backend, not a mock: it passes the same contract suite as the others
(except the cross-process tests), so code tested against it behaves the same on SQLite
or Redis. `memory://name` shares one store between apps of the same process. It is also
the reference implementation of the seam, in the shape of the other engines' packages:
`producing`, `leasing`, `settling`, `cancelling` and `operating` over one `store` (the
messages and their order), with `limits` (admission), `flows` (results, flows and
barriers) and `locks`; `backend` joins them.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from tasuki.backends.memory.backend import MemoryBackend
from tasuki.backends.memory.locks import MemoryLockStore
from tasuki.backends.urls import query_options

__all__ = ["MemoryBackend", "MemoryLockStore", "from_url"]


def from_url(url: str) -> MemoryBackend:
    """`memory://` is private to the app; `memory://name` is shared within the process."""
    parts = urlsplit(url)
    query_options(url, {})
    name = (parts.netloc + parts.path).strip("/")
    return MemoryBackend.shared(name) if name else MemoryBackend(url)
