"""The Redis backend: `redis://`, `rediss://` (TLS) and `unix://` URLs, Redis >= 6.2.

    redis://[user:password@]host[:port][/db][?option=value&...]
    rediss://...                                   (TLS; ssl_cert_reqs, ssl_ca_certs)
    unix://[user:password@]/path/to/redis.sock[?db=0&...]

Options: `prefix` (key prefix, default `tasuki:`), `max_message_size` (bytes, default
1 MiB), `cluster` (`auto`: ask the server; `yes`; `no`), `socket_timeout` (seconds,
default 10). The design, the key layout and what survives a crash: docs/redis.md.
"""

from __future__ import annotations

from tasuki.backends.redis.backend import RedisBackend
from tasuki.backends.redis.locks import RedisLockStore
from tasuki.backends.redis.options import parse_url

__all__ = ["RedisBackend", "RedisLockStore", "from_url"]


def from_url(url: str) -> RedisBackend:
    """A backend for `url`; it connects on first use, so Redis may still be starting."""
    return RedisBackend(parse_url(url))
