"""`python -m benchmarks.redis_priorities`: does priority slow a deep Redis queue down?

The Redis side of `benchmarks.sql_priorities`: on the harness's own redis-server, a queue
of 1,000,000 due no-op jobs is filled twice through the backend's own enqueue (its
`enqueue.lua`, batches of 5,000): all of priority 0, and of priorities 0..9 at random.
One worker process (`tasuki worker`, the benchmark's concurrency) then drains the first
50,000 of them by rank: with mixed priorities those were enqueued over the whole
million. The fill takes seconds, far less than `priority_aging`, so the rank order is
priority first, then enqueue order, and the jobs are numbered in it: the drain measured
is exactly the lease's order. Rounds alternate; the medians are printed with their ratio
(the target: mixed within 10 % of uniform) and the worker's CPU time per job.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.drain import drain as run_worker
from benchmarks.marks import Marks
from benchmarks.peers.tasuki_app import build
from benchmarks.peers.tasuki_runner import CONCURRENCY
from benchmarks.redis_server import RedisServer
from tasuki.backends.base import Envelope
from tasuki.core.message import new_ids

LEVELS = {"uniform": 1, "mixed": 10}
BATCH = 5_000
HEADERS = {"tasuki-job": "noop"}


def fill(server: RedisServer, count: int, levels: int) -> None:
    server.flush()
    app, _ = build(server.url)
    rng = random.Random(42)
    prio = [rng.randrange(levels) for _ in range(count)]
    arg = [0] * count
    for rank, i in enumerate(sorted(range(count), key=lambda i: (-prio[i], i))):
        arg[i] = rank
    ids = new_ids(count)
    for start in range(0, count, BATCH):
        app.backend.enqueue(
            [
                Envelope(
                    "default",
                    ids[i],
                    b'{"args":[%d],"kwargs":{}}' % arg[i],
                    HEADERS,
                    priority=prio[i],
                )
                for i in range(start, min(count, start + BATCH))
            ]
        )
    app.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.redis_priorities", description=__doc__)
    p.add_argument("--messages", type=int, default=50_000)
    p.add_argument("--deep", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp))
        marks = Marks(str(Path(tmp) / "marks"), args.deep + 1)
        rates: dict[str, list[float]] = {"uniform": [], "mixed": []}
        cpus: dict[str, list[float]] = {"uniform": [], "mixed": []}
        try:
            print(f"redis-server {server.version}, {args.deep:,} deep", flush=True)
            for rnd in range(args.rounds):
                for name in ("uniform", "mixed") if rnd % 2 == 0 else ("mixed", "uniform"):
                    fill(server, args.deep, LEVELS[name])
                    rate, cpu = run_worker(server.url, args.messages, marks, CONCURRENCY["redis"])
                    rates[name].append(rate)
                    cpus[name].append(cpu)
                    print(
                        f"redis round {rnd + 1} {name}: {rate:,.0f} jobs/s, worker CPU"
                        f" {cpu * 1e6:.1f} µs/job (load {os.getloadavg()[0]:.1f})",
                        flush=True,
                    )
        finally:
            marks.close()
            server.stop()
    uniform, mixed = statistics.median(rates["uniform"]), statistics.median(rates["mixed"])
    print(
        f"redis median: uniform {uniform:,.0f} jobs/s, mixed priorities {mixed:,.0f} jobs/s"
        f" ({mixed / uniform:.0%} of uniform); worker CPU"
        f" {statistics.median(cpus['uniform']) * 1e6:.1f} µs/job uniform,"
        f" {statistics.median(cpus['mixed']) * 1e6:.1f} µs/job mixed",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
