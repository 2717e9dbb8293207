from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tasuki.backends.base import Backend, Delivery, Envelope


def env(queue: str, n: int | str, **fields: Any) -> Envelope:
    msg_id = n if isinstance(n, str) else f"m{n}"
    fields.setdefault("body", f"body-{msg_id}".encode())
    return Envelope(queue=queue, id=msg_id, **fields)


def put(backend: Backend, queue: str, count: int, **fields: Any) -> list[str]:
    results = backend.enqueue([env(queue, i, **fields) for i in range(count)])
    return [r.id for r in results]


def lease_all(backend: Backend, queue: str, vt: float = 30.0) -> list[Delivery]:
    leased: list[Delivery] = []
    while batch := backend.lease(queue, 100, vt):
        leased.extend(batch)
    return leased


def stats(backend: Backend, queue: str) -> tuple[int, int, int, int]:
    s = backend.stats(queue)
    return (s.ready, s.in_flight, s.delayed, s.dead)


def needs(backend: Backend, capability: str, why: str) -> None:
    """Skip, naming the capability, when the backend declares it missing."""
    if not getattr(backend.capabilities, capability):
        pytest.skip(f"{backend.scheme}:// lacks the {capability} capability: {why}")


def eventually(check: Callable[[], bool], timeout: float = 5.0, interval: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)
