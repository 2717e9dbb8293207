"""The PostgreSQL backend (`postgresql://user:pass@host:port/db?schema=tasuki`)."""

from __future__ import annotations

from tasuki.backends.postgres.backend import OPTIONS, PostgresBackend, split_options
from tasuki.backends.postgres.schema import migrate
from tasuki.backends.urls import query_options

__all__ = ["PostgresBackend", "from_url", "migrate"]


def _flag(value: str) -> bool:
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


def from_url(url: str) -> PostgresBackend:
    _, ours = split_options(url, OPTIONS)
    options = query_options(
        f"postgresql://?{ours}",
        {
            "schema": str,
            "migrate": _flag,
            "pool_size": int,
            "max_message_size": int,
            "pgbouncer": _flag,
            "listen_url": str,
            "archive": _flag,
            "archive_days": float,
        },
    )
    return PostgresBackend(url, **options)  # type: ignore[arg-type]
