"""DBOS queues' side of the benchmark: one worker process (a DBOS executor of its own id)
that registers workflow `shape` (and `noop`) and queue `bench` with
`worker_concurrency=C`, then dequeues until SIGTERM; the harness enqueues with
`DBOSClient`. Run as `python -m benchmarks.peers.dbos_app C`; with C = 0 it launches once and
exits (the system database's schema, made before the first enqueue).

A workflow here is a plain `def` (DBOS runs a dequeued workflow on a thread of its
pool), its body the shape's job; the queue polls every 10 ms, as in `dbos_steps.py`
(DBOS's default is 1 s, which would measure the poll).
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from benchmarks.marks import mark
from benchmarks.shape_jobs import run

URL_ENV = "BENCH_DBOS_URL"
APP = "tasuki-bench-queues"
QUEUE = "bench"
POLL = 0.01


def main(concurrency: int) -> None:
    from dbos import DBOS, DBOSConfig

    DBOS(
        config=DBOSConfig(
            name=APP,
            system_database_url=os.environ[URL_ENV],
            log_level="WARNING",
            executor_id=f"bench-{os.getpid()}",
        )
    )

    @DBOS.workflow(name="noop")
    def noop(i: int) -> None:
        mark(i)

    @DBOS.workflow(name="shape")
    def shape(i: int) -> None:
        run(i)

    if concurrency == 0:
        DBOS.launch()
        DBOS.destroy()
        return
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    DBOS.launch()
    DBOS.register_queue(QUEUE, worker_concurrency=concurrency, polling_interval_sec=POLL)
    try:
        stop.wait()
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    main(int(sys.argv[1]))
