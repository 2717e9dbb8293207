"""The worker's maintenance thread (`tasuki.runtime.maintenance`): each service runs once
per interval across every worker sharing the store, under a lock in its lock store."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

import tasuki
from tasuki.backends.base import MaintenanceService
from tasuki.backends.sqlite import SQLiteBackend
from tasuki.errors import BackendUnavailable
from tasuki.runtime.maintenance import BACKLOG_PAUSE, LOCK_PREFIX, Maintenance


class Chore(MaintenanceService):
    def __init__(self, name: str = "chore", interval: float = 30.0) -> None:
        self.name = name
        self.interval = interval
        self.runs = 0
        self.left: list[bool] = []  # what the next runs report (then False)
        self.fail = False

    def run(self) -> bool:
        if self.fail:
            raise BackendUnavailable("the store is down")
        self.runs += 1
        return self.left.pop(0) if self.left else False


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> SQLiteBackend:
    backend = SQLiteBackend(str(tmp_path / "locks.db"))
    backend.locks.clock = clock
    return backend


def test_one_round_per_interval_whatever_the_number_of_workers(
    store: SQLiteBackend, clock: Clock
) -> None:
    chore = Chore(interval=30.0)
    first, second = Maintenance([chore], store.locks), Maintenance([chore], store.locks)
    assert first._round(chore) == 30.0 and chore.runs == 1
    assert second._round(chore) == 30.0 and chore.runs == 1  # the first holds the lock
    holder = store.locks.holder(LOCK_PREFIX + "chore")
    assert holder is not None and holder.owner == first.owner
    assert holder.expires_in == pytest.approx(30.0)
    clock.now += 30.0  # the lock lapses with the interval: whoever asks next runs it
    assert second._round(chore) == 30.0 and chore.runs == 2
    assert (first.rounds, second.rounds) == (1, 1)


def test_a_service_with_work_left_runs_again_soon_under_its_own_lock(
    store: SQLiteBackend,
) -> None:
    chore = Chore(interval=30.0)
    chore.left = [True, True]
    worker, other = Maintenance([chore], store.locks), Maintenance([chore], store.locks)
    assert worker._round(chore) == BACKLOG_PAUSE
    assert other._round(chore) == 30.0  # meanwhile nobody else starts a round
    assert worker._round(chore) == BACKLOG_PAUSE  # its own lock, refreshed
    assert worker._round(chore) == 30.0
    assert chore.runs == 3


def test_a_failing_round_is_logged_once_and_tried_again_next_interval(
    store: SQLiteBackend, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    chore = Chore(interval=30.0)
    chore.fail = True
    maintenance = Maintenance([chore], store.locks)
    with caplog.at_level(logging.DEBUG, logger="tasuki"):
        for _ in range(3):
            assert maintenance._round(chore) == 30.0
            clock.now += 30.0
        chore.fail = False
        assert maintenance._round(chore) == 30.0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings  # failed (once), works again
    assert "the store is down" in warnings[0] and "works again" in warnings[1]
    assert chore.runs == 1


def test_the_worker_runs_its_backends_services_on_a_thread_of_its_own(tmp_path: Path) -> None:
    app = tasuki.App(f"sqlite:///{tmp_path / 'app.db'}")
    chore = Chore(name="test-chore", interval=3_600.0)
    app.backend.services.append(chore)  # type: ignore[attr-defined]
    worker = app.worker(queues=["default"], concurrency=1)
    worker.start()
    deadline = time.monotonic() + 10.0
    while chore.runs == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    worker.stop(grace=1.0)
    assert chore.runs == 1
    assert worker.maintenance.rounds >= 3  # expired, history, the chore: one round each
    assert not worker.maintenance._thread.is_alive()
    app.close()
