"""Behaviour around enqueue and execution, as an ordered chain (see `base`)."""

from __future__ import annotations

from tasuki.middleware.base import Middleware, MiddlewareChain, Outcome, Outgoing


def default_middleware() -> list[Middleware]:
    """The chain every app starts with, outermost first."""
    return []


__all__ = ["Middleware", "MiddlewareChain", "Outcome", "Outgoing", "default_middleware"]
