"""Behaviour around enqueue and execution, as an ordered chain (see `base`)."""

from __future__ import annotations

from tasuki.middleware.base import Middleware, MiddlewareChain, Outcome, Outgoing
from tasuki.middleware.logging import Logging
from tasuki.middleware.retry import Retries
from tasuki.middleware.timeout import Timeouts


def default_middleware() -> list[Middleware]:
    """The chain every app starts with, outermost first."""
    return [Logging(), Retries(), Timeouts()]


__all__ = [
    "Logging",
    "Middleware",
    "MiddlewareChain",
    "Outcome",
    "Outgoing",
    "Retries",
    "Timeouts",
    "default_middleware",
]
