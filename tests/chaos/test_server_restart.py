"""Kill the server and the workers mid-run: every message still runs to its end.

On every backend of the list with a server of its own to kill (Redis, PostgreSQL).
Redis runs with `appendonly yes` + `appendfsync always`, so every write it acknowledged
is on disk before the reply (docs/redis.md says what weaker settings lose); PostgreSQL
is stopped with `-m immediate`, a crash as far as it can tell. Real worker processes
(`tasuki worker`) run the jobs. Twice during the run the server is killed and restarted
from its data directory, and a worker is SIGKILLed; one replacement worker is even
started while the server is down. At the end every message has
run to its `end` record, the queue is empty, nothing is dead, and a message ran twice
only if a kill happened between its two starts, with a fencing token that grew.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import tasuki
from tasuki.testing.servers import PostgresServer, RedisServer
from tests.support.backends import CROSS_PROCESS
from tests.worker.helpers import WorkerProcess, by_n, kill_all, read_log, wait_until

pytestmark = pytest.mark.slow

TOTAL = 300
VT = 2.0


def ends(log: Path) -> int:
    return len(by_n(read_log(log), "end"))


@contextmanager
def _redis(workdir: Path) -> Iterator[tuple[Any, str]]:
    with RedisServer(workdir, appendonly=True) as server:
        yield server, server.url()


@contextmanager
def _postgresql(workdir: Path) -> Iterator[tuple[Any, str]]:
    server = PostgresServer(workdir, own=True).start()
    try:
        yield server, server.url("t_chaos")
    finally:
        server.stop()


# Servers these tests can kill and start again (each has `kill()` and `start()`).
SERVERS: dict[str, Callable[[Path], Any]] = {"redis": _redis, "postgresql": _postgresql}


@pytest.mark.parametrize("engine", [name for name in CROSS_PROCESS if name in SERVERS])
def test_server_and_workers_killed_mid_run_lose_nothing(tmp_path: Path, engine: str) -> None:
    log = tmp_path / "runs.jsonl"
    stderr = tmp_path / "workers.log"
    workers: list[WorkerProcess] = []
    kills: list[float] = []

    def worker() -> None:
        workers.append(WorkerProcess(url, log, "-c", "4", vt=VT, stderr=stderr))

    with SERVERS[engine](tmp_path / engine) as (server, url):
        producer = tasuki.App(url)

        @producer.job(visibility_timeout=VT)
        def work(n: int, sleep: float = 0.0) -> None: ...

        try:
            work.enqueue_many([(n, 0.05) for n in range(TOTAL)])
            for _ in range(3):
                worker()

            # First blow: the server dies, then a worker; both come back.
            wait_until(lambda: ends(log) >= 60, 20)
            kills.append(time.time())
            server.kill()
            time.sleep(0.3)
            kills.append(time.time())
            workers[0].kill()
            server.start()
            worker()

            # Second blow: the server dies; a worker starts while it is down; another is killed.
            wait_until(lambda: ends(log) >= 160, 20)
            kills.append(time.time())
            server.kill()
            worker()
            time.sleep(0.3)
            kills.append(time.time())
            workers[1].kill()
            time.sleep(0.3)
            server.start()

            wait_until(lambda: ends(log) == TOTAL, 25)
            wait_until(lambda: sum(producer.stats().values()) == 0, 10)
        finally:
            kill_all(workers)
            producer.close()

    records = read_log(log)
    starts = by_n(records, "start")
    assert sorted(by_n(records, "end")) == list(range(TOTAL)), "a message was lost"
    repeated = 0
    for n, runs in starts.items():
        runs.sort(key=lambda r: r["t"])
        for first, second in itertools.pairwise(runs):
            assert any(first["t"] <= k <= second["t"] for k in kills), (
                f"message {n} ran twice with no kill in between: {first} then {second}"
            )
            assert second["fence"] > first["fence"], f"fencing token of {n} went back"
            repeated += 1
    print(f"\n{TOTAL} messages, {repeated} re-runs after kills at {len(kills)} points")
