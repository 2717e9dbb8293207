"""Prometheus metrics: counted in the worker, served by `tasuki worker --metrics-port`."""

from __future__ import annotations

import re
import socket
import urllib.request
from pathlib import Path

from prometheus_client import CollectorRegistry

import tasuki
from tasuki.middleware.metrics import Metrics, QueueCollector
from tests.support.servers import free_port
from tests.worker.helpers import WorkerProcess, wait_until


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
    assert "tasuki_leases_lost_total 0.0" in scraped
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
