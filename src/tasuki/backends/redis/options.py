"""A Redis URL parsed into `RedisOptions`: the server, credentials, TLS, and tasuki's options.

    redis://[user:password@]host[:port][/db][?option=value&...]
    rediss://...                                   (TLS; ssl_cert_reqs, ssl_ca_certs)
    unix://[user:password@]/path/to/redis.sock[?db=0&...]

Bad input is refused here, before anything connects, with an error naming the URL (its
password masked) and the problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from tasuki.backends.redis.keys import DEFAULT_PREFIX
from tasuki.backends.urls import query_options, redact
from tasuki.errors import InvalidURL

DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024
DEFAULT_SOCKET_TIMEOUT = 10.0
CLUSTER_MODES = ("auto", "yes", "no")


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError("must be > 0")
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if not value > 0:
        raise ValueError("must be > 0")
    return value


def _cluster_mode(raw: str) -> str:
    if raw not in CLUSTER_MODES:
        raise ValueError(f"must be one of {', '.join(CLUSTER_MODES)}")
    return raw


def _cert_reqs(raw: str) -> str:
    if raw not in ("none", "optional", "required"):
        raise ValueError("must be none, optional or required")
    return raw


_COMMON_OPTIONS: dict[str, Any] = {
    "prefix": str,
    "max_message_size": _positive_int,
    "cluster": _cluster_mode,
    "socket_timeout": _positive_float,
}
_TLS_OPTIONS: dict[str, Any] = {"ssl_cert_reqs": _cert_reqs, "ssl_ca_certs": str}
_UNIX_OPTIONS: dict[str, Any] = {"db": int}


@dataclass(frozen=True)
class RedisOptions:
    """A parsed backend URL."""

    url: str  # the URL for display: password masked
    where: str  # host:port or the socket path, for error messages
    prefix: str
    max_message_size: int
    cluster: str
    socket_timeout: float
    connection: dict[str, Any] = field(hash=False)  # host, port, db, credentials, TLS

    @property
    def identity(self) -> tuple[object, ...]:
        """What makes two URLs share a client: everything but the key prefix and limits."""
        return (self.cluster, self.socket_timeout, *sorted(self.connection.items()))


def parse_url(url: str) -> RedisOptions:
    """`redis://[user:pass@]host[:port][/db]`, `rediss://...`, `unix://[user:pass@]/path`."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    allowed = dict(_COMMON_OPTIONS)
    if scheme == "rediss":
        allowed.update(_TLS_OPTIONS)
    if scheme == "unix":
        allowed.update(_UNIX_OPTIONS)
    options = query_options(url, allowed)
    try:
        username = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password else None
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(f"invalid redis URL {redact(url)!r}: {exc}") from exc
    conn: dict[str, Any] = {"username": username, "password": password}
    if scheme == "unix":
        if not parts.path:
            raise InvalidURL(
                f"unix:// URL {redact(url)!r} needs a socket path, e.g. unix:///run/redis.sock"
            )
        conn["unix_socket_path"] = parts.path
        conn["db"] = options.get("db", 0)
        where = parts.path
    else:
        host = parts.hostname or "localhost"
        port = port or 6379
        db_text = parts.path.strip("/") or "0"
        if not db_text.isdigit():
            raise InvalidURL(
                f"invalid redis database {db_text!r} in {redact(url)!r}: expected /0, /1..."
            )
        conn.update(host=host, port=port, db=int(db_text))
        where = f"{host}:{port}"
        if scheme == "rediss":
            conn["ssl"] = True
            conn["ssl_cert_reqs"] = options.get("ssl_cert_reqs", "required")
            if "ssl_ca_certs" in options:
                conn["ssl_ca_certs"] = options["ssl_ca_certs"]
    cluster = str(options.get("cluster", "auto"))
    if cluster == "yes" and scheme == "unix":
        raise InvalidURL(f"Redis Cluster is reached over TCP, not a unix socket: {redact(url)!r}")
    if cluster == "yes" and conn["db"] != 0:
        raise InvalidURL(f"Redis Cluster has only database 0: {redact(url)!r}")
    prefix = str(options.get("prefix", DEFAULT_PREFIX))
    display = redact(url)
    return RedisOptions(
        url=display,
        where=where,
        prefix=prefix,
        max_message_size=int(options.get("max_message_size", DEFAULT_MAX_MESSAGE_SIZE)),  # type: ignore[call-overload]
        cluster=cluster,
        socket_timeout=float(options.get("socket_timeout", DEFAULT_SOCKET_TIMEOUT)),  # type: ignore[arg-type]
        connection=conn,
    )
