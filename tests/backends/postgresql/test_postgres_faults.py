"""PostgreSQL going away under a running worker: nothing is lost, the worker recovers."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import psycopg
import pytest

import tasuki
from tests.support.servers import PostgresServer


def _kill_sessions(url: str, application_name: str) -> int:
    base = url.split("?", 1)[0]
    with psycopg.connect(base, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (application_name,),
        ).fetchall()
    return len(rows)


def test_connections_killed_mid_run_lose_nothing(
    postgres_server: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    app = tasuki.App(url)
    done: list[int] = []

    @app.job(retry=tasuki.Retry(max_attempts=50, backoff=tasuki.constant(0.0)))
    def work(n: int) -> None:
        time.sleep(0.005)
        done.append(n)

    total = 400
    work.enqueue_many([(i,) for i in range(total)])
    worker = app.worker(concurrency=4)
    runner = threading.Thread(target=worker.run, kwargs={"until_idle": True, "timeout": 90})
    runner.start()
    name = f"tasuki {url.rsplit('schema=', 1)[1]}"
    kills = 0
    for _ in range(3):
        time.sleep(0.1)
        kills += _kill_sessions(url, name)
    assert len(set(done)) < total, "the kills came after the run"
    runner.join(100)
    assert not runner.is_alive()
    assert kills > 0
    assert set(done) == set(range(total))
    assert any("failed, retrying" in r.getMessage() for r in caplog.records)
    stats = app.stats("default")
    assert (stats["ready"], stats["in_flight"], stats["delayed"], stats["dead"]) == (0, 0, 0, 0)
    app.close()


@pytest.mark.slow
def test_server_restarted_under_a_running_worker(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A cluster of our own (the shared server is not ours to restart), restarted twice
    with `-m immediate` while a worker runs: every job runs, the worker carries on."""
    server = PostgresServer(tmp_path / "pg", own=True).start()
    try:
        url = server.url("t_restart")
        app = tasuki.App(url)
        done: set[int] = set()

        @app.job(retry=tasuki.Retry(max_attempts=50, backoff=tasuki.constant(0.0)))
        def work(n: int) -> None:
            time.sleep(0.005)
            done.add(n)

        total = 600
        work.enqueue_many([(i,) for i in range(total)])
        worker = app.worker(concurrency=4)
        runner = threading.Thread(target=worker.run, kwargs={"until_idle": True, "timeout": 90})
        runner.start()
        for _ in range(2):
            time.sleep(0.2)
            server.restart()
        assert len(done) < total, "the restarts came after the run"
        runner.join(100)
        assert not runner.is_alive()
        assert done == set(range(total))
        stats = app.stats("default")
        assert (stats["ready"], stats["in_flight"], stats["dead"]) == (0, 0, 0)
        assert any("failed, retrying" in r.getMessage() for r in caplog.records)
        app.close()
    finally:
        server.stop()
