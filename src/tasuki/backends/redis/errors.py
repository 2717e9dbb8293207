"""A Redis error, ours (`resp`) or redis-py's (a Cluster), as a tasuki error.

The worker retries `BackendUnavailable` (the server may come back, the password may be
fixed); `BackendError` is a fault of this one call.
"""

from __future__ import annotations

from tasuki.backends.redis import resp
from tasuki.errors import BackendError, BackendUnavailable

_WORDS = {
    "credentials": "refused the credentials",
    "loading": "is still loading its data",
    "unreachable": "is unreachable",
}
_AUTH_CODES = ("NOAUTH", "WRONGPASS")


def translate(exc: Exception, where: str) -> BackendError:
    """`exc` as a tasuki error naming the server (`where`) and the fault."""
    if isinstance(exc, resp.RespError):
        what = _kind(exc)
    else:
        from tasuki.backends.redis import cluster  # only a Cluster client raises these

        what = cluster.kind(exc)
        if what == "cluster":
            return BackendUnavailable(f"Redis Cluster at {where} is not available: {exc}")
    if what is not None:
        return BackendUnavailable(f"Redis server at {where} {_WORDS[what]}: {exc}")
    return BackendError(f"Redis at {where} failed: {type(exc).__name__}: {exc}")


def _kind(exc: resp.RespError) -> str | None:
    if isinstance(exc, resp.ConnectionFailed | resp.TimedOut):
        return "unreachable"
    if isinstance(exc, resp.AuthError):
        return "credentials"
    if isinstance(exc, resp.ReplyError):
        if exc.code in _AUTH_CODES:
            return "credentials"
        if exc.code == "LOADING":
            return "loading"
    return None
