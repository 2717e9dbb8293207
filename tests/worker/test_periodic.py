"""Periodic jobs: any number of workers, exactly one message per tick."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import tasuki
from tasuki.core.periodic import Periodic
from tasuki.errors import InvalidArgument


def make_app(url: str, seen: list[str], mutex: threading.Lock) -> tasuki.App:
    app = tasuki.App(url)

    @app.periodic(every=timedelta(seconds=1))
    def tick() -> None:
        with mutex:
            seen.append(tasuki.current().message.id)

    return app


def test_three_schedulers_one_message_per_tick(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    seen: list[str] = []
    mutex = threading.Lock()
    workers = [make_app(url, seen, mutex).worker(concurrency=2) for _ in range(3)]
    for w in workers:
        w.start()
    time.sleep(3.2)
    for w in workers:
        w.stop(grace=2)
    counts = Counter(seen)
    assert len(counts) >= 2, f"expected ticks, saw {seen}"
    assert max(counts.values()) == 1, f"a tick ran twice: {counts}"
    assert all(i.startswith("periodic:tick:") for i in counts)


def test_cron_ticks() -> None:
    app = tasuki.App("memory://")

    @app.job
    def job() -> None: ...

    p = Periodic.create(job, cron="*/5 * * * *", every=None)
    start = datetime(2026, 1, 1, 12, 0, tzinfo=UTC).timestamp()
    ticks = p.ticks(start, start + 15 * 60)
    assert [int(t - start) for t in ticks] == [300, 600, 900]
    assert p.message_id(ticks[0]) == f"periodic:job:{int(ticks[0])}"


def test_every_ticks_align_across_processes() -> None:
    app = tasuki.App("memory://")

    @app.job
    def job() -> None: ...

    p = Periodic.create(job, cron=None, every=10)
    assert p.ticks(100.0, 135.0) == [110.0, 120.0, 130.0]
    assert p.ticks(105.5, 109.9) == []


def test_bad_schedules_are_refused() -> None:
    app = tasuki.App("memory://")
    with pytest.raises(InvalidArgument):
        app.periodic("not a cron")(lambda: None)
    with pytest.raises(InvalidArgument):
        app.periodic(every=0.1)(lambda: None)
    with pytest.raises(InvalidArgument):
        app.periodic()(lambda: None)
