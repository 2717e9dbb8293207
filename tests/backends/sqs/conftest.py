"""Fixtures of the SQS backend's own tests (the shared functions are in `support.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasuki.testing.servers import MotoServer
from tests.backends.sqs.support import local_url, redis_locks_url


@pytest.fixture(params=["sqlite", "redis"])
def locked_url(request: pytest.FixtureRequest, sqs_server: MotoServer, tmp_path: Path) -> str:
    """An SQS URL on either lock store: `locks=sqlite://` or `locks=redis://`."""
    if request.param == "redis":
        return redis_locks_url(request, sqs_server, tmp_path)
    return local_url(sqs_server, tmp_path)
