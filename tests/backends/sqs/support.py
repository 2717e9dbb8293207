"""What the SQS backend's own tests share: URLs on the session's local SQS server, and a
count of the requests a backend makes."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tasuki.backends.sqs import SqsBackend
from tasuki.backends.urls import backend_from_url
from tasuki.testing.servers import MotoServer


def local_url(server: MotoServer, tmp_path: Path, locks: bool = True, **options: Any) -> str:
    url = f"sqs://us-east-1?endpoint_url={server.endpoint}&prefix=s{uuid.uuid4().hex[:10]}-"
    if locks:
        url += f"&locks=sqlite:///{tmp_path / f'locks-{uuid.uuid4().hex[:6]}.db'}"
    for name, value in options.items():
        url += f"&{name}={value}"
    return url


def redis_locks_url(request: pytest.FixtureRequest, server: MotoServer, tmp_path: Path) -> str:
    """An SQS URL whose lock store is the session's Redis server (`locks=redis://`)."""
    redis = request.getfixturevalue("redis_server")
    return local_url(server, tmp_path, locks=False) + f"&locks={redis.url()}"


def opened(url: str) -> SqsBackend:
    backend = backend_from_url(url)
    assert isinstance(backend, SqsBackend)
    return backend


def requests_counted(backend: SqsBackend) -> Counter[str]:
    """From now on, the requests `backend` sends, counted by operation name."""
    calls: Counter[str] = Counter()

    def count(event_name: str, **_: Any) -> None:
        calls[event_name.rsplit(".", 1)[-1]] += 1

    backend.sqs.client.meta.events.register("before-call.sqs", count)
    return calls
