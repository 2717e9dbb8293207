"""The embedded SQLite backend (`sqlite:///relative.db`, `sqlite:////absolute/path.db`)."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from tasuki.backends.sqlite.backend import SQLiteBackend
from tasuki.backends.urls import query_options
from tasuki.errors import InvalidURL

__all__ = ["SQLiteBackend", "from_url"]


def from_url(url: str) -> SQLiteBackend:
    parts = urlsplit(url)
    if parts.netloc:
        raise InvalidURL(
            f"invalid SQLite URL {url!r}: it takes no host; "
            "use sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    path = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)
    if not path:
        raise InvalidURL(f"invalid SQLite URL {url!r}: no database path (e.g. sqlite:///tasuki.db)")
    options = query_options(
        url,
        {
            "synchronous": str.lower,
            "busy_timeout": float,
            "max_message_size": int,
            "poll_interval": float,
        },
    )
    return SQLiteBackend(path, **options)  # type: ignore[arg-type]
