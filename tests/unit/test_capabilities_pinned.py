"""Each backend's `Capabilities`, pinned. A capability that silently turns False turns
its tests into skips (`requires`), and CI would stay green: here it fails instead. A
change that means it edits this table, in the same commit."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tasuki.backends.base import Capabilities
from tasuki.backends.urls import backend_from_url
from tests.support.backends import CONTRACT, URL_FACTORIES

MiB = 1 << 20
# What a backend with everything has; each backend below says how it differs.
FULL: dict[str, Any] = {
    "max_message_size": 16 * MiB,
    "cross_process": True,
    "blocking_wait": True,
    "max_delay": None,
    "max_visibility": None,
    "exact_attempts": True,
    "refundable_release": True,
    "id_window": True,
    "atomic_unique": True,
    "dead_letter_browsing": True,
    "transactional_enqueue": True,
    "native_locks": True,
    "exact_stats": True,
    "fencing": True,
    "timer_resolution": 0.0,
    "inspection": True,
    "settled_counts": True,
    "reliability_counts": True,
    "results": True,
    "workflows": True,
    "priorities": True,
    "rate_limits": True,
    "concurrency_limits": True,
    "cancel": True,
    "progress": True,
    "durable_steps": True,
    "transactional_steps": True,
    "pause": True,
    "browsing": True,
    "browse_waiting": True,
    "worker_registry": True,
    "job_stats": True,
}
# The console's capabilities, on backends that do not have them yet.
_NO_CONSOLE = {
    "pause": False,
    "browsing": False,
    "browse_waiting": False,
    "worker_registry": False,
    "job_stats": False,
}
_SQS = {
    "max_message_size": 256 * 1024,
    "max_delay": 900.0,
    "max_visibility": 43200.0,
    "exact_attempts": False,
    "atomic_unique": False,
    "dead_letter_browsing": False,
    "transactional_enqueue": False,
    "exact_stats": False,
    "timer_resolution": 1.0,
    "inspection": False,
    "settled_counts": False,
    "reliability_counts": False,
    "transactional_steps": False,
    # Pause, workers, job stats and the listings of in-flight and dead messages in the
    # lock store; waiting messages never (SQS shows them only by receiving them).
    "browse_waiting": False,
}
DIFFERS: dict[str, dict[str, Any]] = {
    "memory": {
        "cross_process": False,
        "transactional_enqueue": False,
        "transactional_steps": False,
    },
    "postgresql": {},
    "postgresql-archive": {},
    "sqlite": {"max_message_size": MiB},
    "redis": {
        "max_message_size": MiB,
        "transactional_enqueue": False,
        "transactional_steps": False,
    },
    "sqs": _SQS,
    "sqs-redis": _SQS,
}


def test_every_capability_is_pinned() -> None:
    assert set(FULL) == {f.name for f in dataclasses.fields(Capabilities)}
    assert set(DIFFERS) == set(CONTRACT), "a backend of the suites has no pinned capabilities"


@pytest.mark.parametrize("name", CONTRACT)
def test_capabilities_are_what_they_were(
    name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    backend = backend_from_url(URL_FACTORIES[name](request, tmp_path))
    try:
        got = dataclasses.asdict(backend.capabilities)
    finally:
        backend.close()
    want = {**FULL, **DIFFERS[name]}
    changed = {k: (want.get(k), got.get(k)) for k in {*want, *got} if got.get(k) != want.get(k)}
    assert not changed, f"{name}: capabilities changed (pinned, now): {changed}"
