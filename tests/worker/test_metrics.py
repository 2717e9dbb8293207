"""Prometheus metrics: counted in the worker, served by `tasuki worker --metrics-port`."""

from __future__ import annotations

import logging
import re
import socket
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

import tasuki
from tasuki.backends.base import Settle
from tasuki.middleware.metrics import Metrics, QueueCollector
from tasuki.testing.servers import free_port
from tests.worker.helpers import WorkerProcess, read_log, wait_until


def test_runs_are_counted_by_outcome(any_url: str) -> None:
    app = tasuki.App(any_url)
    registry = CollectorRegistry()
    app.middleware.insert_before("Logging", Metrics(registry))

    @app.job(queue="m", retry=tasuki.Retry(max_attempts=2, backoff=tasuki.constant(0.0)))
    def flaky(n: int) -> None:
        if n == 0:
            raise ValueError("always")

    @app.job(queue="m", dedup=True)
    def once(n: int) -> None: ...

    for n in range(3):
        flaky.enqueue(n)
    once.options(message_id="same").enqueue(1)
    app.worker(queues="m", concurrency=4).run(until_idle=True, timeout=30)

    def value(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    assert value("tasuki_enqueued_total", queue="m", job="flaky", status="enqueued") == 3
    assert value("tasuki_runs_total", queue="m", job="flaky", outcome="ack") == 2
    assert value("tasuki_runs_total", queue="m", job="flaky", outcome="retry") == 1
    assert value("tasuki_runs_total", queue="m", job="flaky", outcome="dead") == 1
    assert value("tasuki_redeliveries_total", queue="m", job="flaky") == 1
    assert value("tasuki_run_seconds_count", queue="m", job="flaky") == 4
    assert value("tasuki_runs_total", queue="m", job="once", outcome="ack") == 1

    registry.register(QueueCollector(app.backend, queues=lambda: ["m"]))
    assert value("tasuki_queue_messages", queue="m", state="dead") == 1
    assert value("tasuki_queue_messages", queue="m", state="ready") == 0
    if app.backend.capabilities.pause:
        assert value("tasuki_queue_paused", queue="m") == 0
        app.pause("m")
        assert value("tasuki_queue_paused", queue="m") == 1
    app.close()


def test_worker_serves_metrics(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'metrics.db'}"
    app = tasuki.App(url)
    work = app.job(name="work", visibility_timeout=2.0)(lambda n, sleep=0.0: None)
    for n in range(5):
        work.enqueue(n)
    port = free_port()
    worker = WorkerProcess(url, tmp_path / "log", "--metrics-port", str(port))
    scraped = ""
    acked = re.compile(r'^tasuki_runs_total\{[^}]*outcome="ack"[^}]*\} (\S+)$', re.M)

    def served() -> bool:
        nonlocal scraped
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
                scraped = r.read().decode()
        except OSError:
            return False
        line = acked.search(scraped)
        return line is not None and float(line.group(1)) == 5.0

    try:
        wait_until(served, timeout=20)
        # Queue gauges are read at scrape time: once all five are acked, none is ready.
        wait_until(lambda: served() and 'state="in_flight"} 0.0' in scraped, timeout=10)
    finally:
        worker.stop()
    assert 'tasuki_queue_messages{queue="default",state="ready"} 0.0' in scraped
    assert "# TYPE tasuki_leases_lost_total counter" in scraped
    assert "# TYPE tasuki_heartbeat_lag_seconds histogram" in scraped
    assert worker.wait() == 0


def test_metrics_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        url = f"sqlite:///{tmp_path / 'busy.db'}"
        stderr = tmp_path / "stderr"
        worker = WorkerProcess(url, tmp_path / "log", "--metrics-port", str(port), stderr=stderr)
        code = worker.wait(30)
    assert code != 0
    assert f"cannot serve metrics on 127.0.0.1:{port}" in stderr.read_text()


def test_reliability_metrics(any_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """Leases lost, redeliveries, heartbeat lag and the time from a lost lease's expiry to
    the message's next start, after a scripted run: a lease taken away from a running
    job, and a message whose worker "crashed" holding it."""
    app = tasuki.App(any_url)
    registry = CollectorRegistry()
    app.middleware.insert_before("Logging", Metrics(registry, backend=app.backend))
    runs: list[tuple[int, int]] = []

    @app.job(
        queue="r",
        visibility_timeout=0.3,
        retry=tasuki.Retry(max_attempts=5, backoff=tasuki.constant(0.0)),
    )
    def slow(n: int) -> None:
        ctx = tasuki.current()
        runs.append((n, ctx.attempt))
        if n == 0 and ctx.attempt == 1:
            # Another party takes the message back: the next extension is refused.
            assert app.backend.settle([Settle.release(ctx.receipt, 0.0, penalty=True)]) == [True]
            assert ctx.wait_for_stop(timeout=5.0)
            return
        time.sleep(0.5)  # several extensions of a 0.3 s lease

    # A worker that died holding message 1: its lease expires in 0.3 s.
    crashed_id = slow.enqueue(1)
    [held] = app.backend.lease("r", 1, 0.3)
    expired_at = time.time() + 0.3
    assert held.id == crashed_id
    slow.enqueue(0)
    time.sleep(0.35)
    began = time.time()
    with caplog.at_level(logging.INFO, logger="tasuki"):
        app.worker(queues="r", concurrency=2).run(until_idle=True, timeout=30)
    started_after = time.time() - expired_at
    # What the worker saw, should the runs not be these (a timing this test cannot hold
    # on a machine slower than it allows shows here as which event came when).
    seen = [
        f"{r.created - began:+.3f}s {r.getMessage()}"
        for r in caplog.records
        if r.name.startswith("tasuki")
    ]

    def value(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    assert sorted(runs) == [(0, 1), (0, 2), (1, 2)], "\n".join(seen)
    assert held.attempt == 1
    assert value("tasuki_leases_lost_total", queue="r", job="slow") == 1
    assert value("tasuki_redeliveries_total", queue="r", job="slow") == 2
    if app.backend.capabilities.inspection:  # the lost lease's expiry is in the history
        # Only the crashed message's start counts: message 0's lease was released, not lost.
        assert value("tasuki_lease_expiry_to_start_seconds_count", queue="r") == 1
        recovery = value("tasuki_lease_expiry_to_start_seconds_sum", queue="r")
        assert 0.0 <= recovery <= started_after
    else:
        assert value("tasuki_lease_expiry_to_start_seconds_count", queue="r") == 0
    lag_count = value("tasuki_heartbeat_lag_seconds_count", queue="r")
    assert lag_count >= 2  # two runs of 0.5 s under a 0.3 s lease: extended every 0.1 s
    assert value("tasuki_heartbeat_lag_seconds_sum", queue="r") < 0.25 * lag_count

    if not app.backend.capabilities.reliability_counts:  # SQS: the middleware's alone
        app.close()
        return
    # The backend's counts, which the dashboard shows (another process could read them).
    # Its "leases lost" are leases that expired unsettled (message 1's crash); the
    # middleware's are extensions refused to this worker (message 0): one each here.
    kept = app.backend.reliability("r")
    assert kept is not None
    assert (kept.redeliveries, kept.leases_lost, kept.expiry_to_start.count) == (2, 1, 1)
    assert 0.0 <= kept.expiry_to_start.seconds <= recovery + 0.05
    # The heartbeat lags are the same observations, bucket by bucket.
    lag = kept.heartbeat_lag
    assert lag.count == lag_count
    cumulative = 0
    for bound, n in zip(lag.bounds, lag.counts, strict=False):
        cumulative += n
        le = value("tasuki_heartbeat_lag_seconds_bucket", queue="r", le=str(bound))
        assert cumulative == le, f"bucket {bound}"
    sum_ = value("tasuki_heartbeat_lag_seconds_sum", queue="r")
    assert lag.seconds == pytest.approx(sum_, abs=1e-5 * lag_count)
    app.close()


@pytest.mark.requires("reliability_counts")
def test_reliability_counts_after_a_sigkill(
    shared_url: str, log: Path, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    """A worker process SIGKILLed mid-job: the next worker's lease of its message is a
    redelivery of a lost lease, and the backend times it from the lease's expiry."""
    vt = 1.0
    app = tasuki.App(shared_url)
    ran: list[int] = []

    @app.job(name="work", visibility_timeout=vt)
    def work(n: int, sleep: float = 0.0) -> None:
        ran.append(tasuki.current().attempt)

    work.enqueue(7, 30.0)
    w = WorkerProcess(shared_url, log, "-c", "1", vt=vt, stderr=tmp_path / "w.log")
    workers.append(w)
    wait_until(lambda: any(r["event"] == "start" for r in read_log(log)), 20)
    w.kill()
    [started] = [r for r in read_log(log) if r["event"] == "start"]
    assert started["attempt"] == 1
    app.worker(queues="default", concurrency=1).run(until_idle=True, timeout=30)
    assert ran == [2]
    # The killed lease expired at most `vt` after the worker's last extension, which
    # came at most `vt` after its start; the redelivery came after that expiry.
    bound = time.time() - started["t"]
    kept = app.backend.reliability("default")
    assert kept is not None
    assert (kept.redeliveries, kept.leases_lost, kept.expiry_to_start.count) == (1, 1, 1)
    assert 0.0 <= kept.expiry_to_start.seconds <= bound
    app.close()
