"""The runtime reads what a backend can do and keeps each promise another way, or refuses
at configuration time naming the missing capability."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

import tasuki
from tasuki.backends.memory import MemoryBackend
from tasuki.errors import ConfigurationError


def limited(**caps: Any) -> MemoryBackend:
    backend = MemoryBackend()
    backend.capabilities = dataclasses.replace(backend.capabilities, **caps)  # type: ignore[misc]
    return backend


@pytest.fixture
def hopping() -> Iterator[tasuki.App]:
    app = tasuki.App(backend=limited(max_delay=0.2))
    yield app
    app.close()


def test_a_delay_beyond_the_backends_maximum_travels_in_hops(hopping: tasuki.App) -> None:
    runs: list[tuple[float, int]] = []

    @hopping.job
    def later() -> None:
        runs.append((time.time(), tasuki.current().attempt))

    enqueued = time.time()
    later.options(delay=1.0).enqueue()
    assert hopping.stats()["delayed"] == 1
    hopping.worker(concurrency=2).run(until_idle=True, timeout=10)
    assert len(runs) == 1
    ran_at, attempt = runs[0]
    assert ran_at - enqueued >= 0.5  # several hops of 0.2 s, not the first one
    assert attempt == 1  # hops are handed back without penalty


def test_the_keeper_stops_at_the_maximum_visibility(caplog: pytest.LogCaptureFixture) -> None:
    app = tasuki.App(backend=limited(max_visibility=0.9))
    starts: list[int] = []

    @app.job(visibility_timeout=0.3, retry=tasuki.Retry(max_attempts=5))
    def long() -> None:
        starts.append(tasuki.current().attempt)
        if len(starts) == 1:
            time.sleep(1.6)

    long.enqueue()
    with caplog.at_level(logging.WARNING, logger="tasuki"):
        app.worker(concurrency=2).run(until_idle=True, timeout=10)
    assert starts[:2] == [1, 2]  # delivered again once the capped lease lapsed
    assert "maximum visibility" in caplog.text
    app.close()


@pytest.mark.parametrize("option", [{"dedup": True}, {"unique": tasuki.Unique()}])
def test_locks_without_a_lock_store_are_refused_at_declaration(option: dict[str, Any]) -> None:
    app = tasuki.App(backend=limited(native_locks=False))
    with pytest.raises(ConfigurationError, match="native_locks"):
        app.job(**option)(lambda: None)
    with_store = tasuki.App(backend=limited(native_locks=False), locks="memory://")
    with_store.job(name="fine", **option)(lambda: None)


def test_replacing_a_waiting_copy_needs_an_atomic_claim() -> None:
    """Without atomic_unique (SQS) every mode works, the claim taken just before the
    send; only on_conflict='replace', which rewrites the waiting copy, is refused."""
    app = tasuki.App(backend=limited(atomic_unique=False))
    with pytest.raises(ConfigurationError, match="atomic_unique"):
        app.job(unique=tasuki.Unique(mode="until_executed", on_conflict="replace"))(lambda: None)
    app.job(name="ok", unique=tasuki.Unique(mode="until_executed"))(lambda: None)
    app.job(name="also", unique=tasuki.Unique(mode="while_executing", on_conflict="replace"))(
        lambda: None
    )


def test_message_ids_need_an_id_window() -> None:
    app = tasuki.App(backend=limited(id_window=False))

    @app.job
    def job() -> None: ...

    job.enqueue()
    with pytest.raises(ConfigurationError, match="id_window"):
        job.options(message_id="x").enqueue()
    with pytest.raises(ConfigurationError, match="id_window"):
        app.periodic(every=60)(lambda: None)
