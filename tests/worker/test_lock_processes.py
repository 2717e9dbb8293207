"""Dedup and uniqueness across real worker processes, including one SIGKILLed mid-run."""

from __future__ import annotations

import time
from pathlib import Path

import tasuki
from tests.worker.helpers import WorkerProcess, by_n, read_log, wait_until


def producer(url: str, vt: float) -> tasuki.App:
    app = tasuki.App(url)

    @app.job(visibility_timeout=vt, dedup=tasuki.Dedup(key=lambda m: str(m.args[0])))
    def dedup_work(n: int, copy: int, sleep: float = 0.0) -> None: ...

    @app.job(
        visibility_timeout=vt,
        unique=tasuki.Unique(mode="while_executing", on_conflict="reschedule"),
    )
    def exclusive(n: int, sleep: float) -> None: ...

    @app.job(
        visibility_timeout=vt,
        unique=tasuki.Unique(mode="until_and_while_executing", key=lambda m: "report"),
    )
    def report(n: int, sleep: float) -> None: ...

    return app


def idle(app: tasuki.App) -> bool:
    s = app.stats("default")
    return s["ready"] + s["in_flight"] + s["delayed"] == 0


def test_duplicates_across_two_processes_run_once(
    shared_url: str, log: Path, workers: list[WorkerProcess]
) -> None:
    app = producer(shared_url, 5.0)
    pairs = 15
    for _ in range(2):
        workers.append(WorkerProcess(shared_url, log, "-c", "4", vt=5.0))
    if app.backend.capabilities.worker_registry:
        # Both are up before the work arrives: on a busy machine one process starting
        # seconds after the other found nothing left to take.
        wait_until(lambda: len(app.workers()) >= 2, 60, interval=0.1)
    app.jobs["dedup_work"].enqueue_many([(n, copy, 0.2) for n in range(pairs) for copy in (1, 2)])
    wait_until(lambda: idle(app), 60, interval=0.1)
    runs = by_n(read_log(log), "start")
    assert sorted(runs) == list(range(pairs))
    assert all(len(r) == 1 for r in runs.values()), {n: len(r) for n, r in runs.items()}
    assert len({r["pid"] for rs in runs.values() for r in rs}) == 2  # both took a share
    assert app.stats("default")["dead"] == 0


def test_sigkill_while_holding_locks_frees_them_and_the_job_runs_again(
    shared_url: str, log: Path, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    vt = 1.0
    app = producer(shared_url, vt)
    app.jobs["exclusive"].enqueue(1, 2.0)
    app.jobs["dedup_work"].enqueue(2, 1, 2.0)
    first = WorkerProcess(shared_url, log, "-c", "2", vt=vt, stderr=tmp_path / "w1.log")
    workers.append(first)
    wait_until(lambda: len(by_n(read_log(log), "start")) == 2, 20)
    first.kill()
    killed_at = time.time()
    workers.append(WorkerProcess(shared_url, log, "-c", "2", vt=vt, stderr=tmp_path / "w2.log"))
    wait_until(lambda: len(by_n(read_log(log), "end")) == 2, 30)
    starts = by_n(read_log(log), "start")
    for n in (1, 2):
        assert len(starts[n]) == 2, f"job {n} should have run again after the kill"
        again = max(starts[n], key=lambda r: r["t"])
        assert again["t"] - killed_at < vt + 4.0
    wait_until(lambda: idle(app), 10)


def test_one_waits_one_runs_across_processes(
    shared_url: str, log: Path, workers: list[WorkerProcess]
) -> None:
    app = producer(shared_url, 5.0)
    report = app.jobs["report"]
    for _ in range(2):
        workers.append(WorkerProcess(shared_url, log, "-c", "2", vt=5.0))
    report.enqueue(1, 1.5)
    wait_until(lambda: len(by_n(read_log(log), "start")) == 1, 20)
    waiting = report.enqueue(2, 0.1)  # the other process leases it and must wait for 1
    assert report.enqueue(3, 0.1) == waiting  # a third copy conflicts with the waiting one
    wait_until(lambda: len(by_n(read_log(log), "end")) == 2, 30)
    wait_until(lambda: idle(app), 10)
    records = read_log(log)
    starts, ends = by_n(records, "start"), by_n(records, "end")
    assert sorted(starts) == [1, 2]
    assert ends[1][0]["t"] <= starts[2][0]["t"], "the waiting copy ran while the first ran"
