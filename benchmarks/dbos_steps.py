"""`python -m benchmarks.dbos_steps --url postgresql://.../db`: the 3-step workflow on DBOS.

Run by `benchmarks.durable_steps` in a process of its own (DBOS is a singleton, launched
once per process), in the bench venv, which has the `dbos` package. Its system database
is the one `--url` names, dropped first so every run starts empty. Each round enqueues
`--jobs` workflows of three `@DBOS.step()` no-ops on a queue, and as many workflows with
no step, and waits for every result; the queue polls every 10 ms (its default is 1 s,
which would be a poll, not a step, measured). Prints one JSON line: per side, the
(enqueue, wait) seconds per workflow of each round.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import psycopg


def _fresh(url: str) -> None:
    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("-c", "--concurrency", type=int, default=8)
    p.add_argument("--url", required=True)
    a = p.parse_args(argv)
    _fresh(a.url)

    from dbos import DBOS, DBOSConfig

    DBOS(config=DBOSConfig(name="tasuki-bench", system_database_url=a.url, log_level="WARNING"))

    @DBOS.step()
    def noop(i: int) -> int:
        return i

    @DBOS.workflow()
    def three(i: int) -> int:
        return noop(noop(noop(i)))

    @DBOS.workflow()
    def plain(i: int) -> int:
        return i

    DBOS.launch()
    # A queue's configuration lives in the system database: registered once it is up.
    queue = DBOS.register_queue(
        "bench", worker_concurrency=a.concurrency, polling_interval_sec=0.01
    )
    out: dict[str, list[tuple[float, float]]] = {"plain": [], "three": []}
    try:
        for _ in range(a.rounds):
            for name, wf in (("plain", plain), ("three", three)):
                out[name].append(_side(queue, wf, a.jobs))
    finally:
        DBOS.destroy()
    print(json.dumps(out))
    return 0


def _side(queue: Any, wf: Any, jobs: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    handles = [queue.enqueue(wf, i) for i in range(jobs)]
    t1 = time.perf_counter()
    got = [h.get_result() for h in handles]
    t2 = time.perf_counter()
    assert got == list(range(jobs)), got[:5]
    return (t1 - t0) / jobs, (t2 - t1) / jobs


if __name__ == "__main__":
    sys.exit(main())
