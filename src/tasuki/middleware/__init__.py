"""Behaviour around enqueue and execution, as an ordered chain (see `base`)."""

from __future__ import annotations

from tasuki.middleware.base import Middleware, MiddlewareChain, Outcome, Outgoing
from tasuki.middleware.dedup import DedupGuard
from tasuki.middleware.errors import ReportErrors
from tasuki.middleware.groups import MessageGroups
from tasuki.middleware.logging import Logging
from tasuki.middleware.metrics import Metrics
from tasuki.middleware.retry import Retries
from tasuki.middleware.sentry import SentryErrors
from tasuki.middleware.timeout import Timeouts
from tasuki.middleware.tracing import TraceContext
from tasuki.middleware.unique import Uniqueness


def default_middleware() -> list[Middleware]:
    """The chain every app starts with, outermost first.

    Dedup and uniqueness sit outside `Retries` so that their after-hooks see the final
    decision (retry, dead letter, exhaustion handler) and not just the raw error.
    `TraceContext` is outermost, so a run's span covers the whole chain and records the
    final outcome.
    """
    return [TraceContext(), Logging(), DedupGuard(), Uniqueness(), Retries(), Timeouts()]


__all__ = [
    "DedupGuard",
    "Logging",
    "MessageGroups",
    "Metrics",
    "Middleware",
    "MiddlewareChain",
    "Outcome",
    "Outgoing",
    "ReportErrors",
    "Retries",
    "SentryErrors",
    "Timeouts",
    "TraceContext",
    "Uniqueness",
    "default_middleware",
]
