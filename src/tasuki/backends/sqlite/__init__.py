"""The embedded SQLite backend (`sqlite:///relative.db`, `sqlite:////absolute/path.db`)."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from tasuki.backends.sqlite.backend import SQLiteBackend
from tasuki.backends.urls import query_options
from tasuki.errors import InvalidURL

__all__ = ["SQLiteBackend", "from_url", "open_existing"]


def from_url(url: str, *, create: bool = True) -> SQLiteBackend:
    """`create=False` (or `?create=false` in the URL) refuses a file that does not exist."""
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
            "create": _flag,
        },
    )
    if not create:  # the caller's word wins over the URL's
        options["create"] = False
    return SQLiteBackend(path, **options)  # type: ignore[arg-type]


def open_existing(url: str) -> SQLiteBackend:
    """The database at `url` if the file exists (`tasuki stats` and the like never make one)."""
    return from_url(url, create=False)


def _flag(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")
