"""`python -m benchmarks.sqlite_depth`: does a deep queue slow tasuki on SQLite down?

One worker process (`tasuki worker -c 256`, the benchmark's SQLite setting) drains
20,000 no-op jobs twice: from a queue that holds only them, and from one where 1,000,000
more wait behind them (inserted in one transaction, due after the measured ones, with
ids made by the tasuki under test). Rounds alternate; the medians are printed with their
ratio. The rate is from the first of the 20,000 jobs to start to the last; the worker's
CPU time per job is printed beside it (a busy machine changes it less than the rate).
`stats` is timed on each store too, before the drain (median of 50 calls).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.drain import Drain
from benchmarks.drain import drain as run_worker
from benchmarks.marks import Marks
from benchmarks.peers.tasuki_app import build
from benchmarks.peers.tasuki_runner import CONCURRENCY
from tasuki.core.message import new_ids

INSERT = """
INSERT INTO tasuki_messages (queue, id, body, headers, visible_at, enqueued_at, max_attempts)
VALUES ('default', ?, ?, '{"tasuki-job":"noop"}', ?, ?, 10)
"""
DEPTH = """
INSERT INTO tasuki_depth (queue, waiting) VALUES ('default', ?)
ON CONFLICT (queue) DO UPDATE SET waiting = waiting + excluded.waiting
"""


def fill_deep(path: str, count: int, after: int) -> None:
    """`count` waiting jobs with arguments `after`.., all due after the measured ones, with
    ids made as the tasuki under test makes them (`new_ids`)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA cache_size = -262144")  # 256 MiB: the id index's pages
    conn.execute("BEGIN IMMEDIATE")
    now = time.time()
    for lo in range(after, after + count, 10_000):
        hi = min(lo + 10_000, after + count)
        rows = zip(new_ids(hi - lo), range(lo, hi), strict=True)
        conn.executemany(
            INSERT,
            ((id, b'{"args":[%d],"kwargs":{}}' % i, now + i * 1e-6, now) for id, i in rows),
        )
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'tasuki_depth'").fetchone():
        conn.execute(DEPTH, (count,))  # the counts kept with the writes, as tasuki does
    conn.execute("COMMIT")
    # Write the fill's pages into the database now, not in a checkpoint during the drain.
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def time_stats(url: str, calls: int = 50) -> float:
    """Median seconds of one `app.stats("default")`."""
    app, _ = build(url)
    app.stats("default")
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        app.stats("default")
        times.append(time.perf_counter() - start)
    app.close()
    return statistics.median(times)


def drain(path: str, n: int, marks: Marks, deep: int) -> tuple[Drain, float]:
    """The worker's drain and the seconds of one `stats`, on a fresh database file."""
    for suffix in ("", "-wal", "-shm"):
        Path(path + suffix).unlink(missing_ok=True)
    url = f"sqlite:///{path}"
    app, job = build(url)
    for lo in range(0, n, 1_000):
        job.enqueue_many([(i,) for i in range(lo, min(lo + 1_000, n))])
    app.close()
    if deep:
        fill_deep(path, deep, n)
    stats = time_stats(url)
    return run_worker(url, n, marks, CONCURRENCY["sqlite"]), stats


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sqlite_depth", description=__doc__)
    p.add_argument("--messages", type=int, default=20_000)
    p.add_argument("--deep", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dir", help="where the database files go (default: a temporary one)")
    args = p.parse_args(argv)
    rates: dict[str, list[float]] = {"empty": [], "deep": []}
    cpus: dict[str, list[float]] = {"empty": [], "deep": []}
    stats: dict[str, list[float]] = {"empty": [], "deep": []}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        marks = Marks(str(Path(tmp) / "marks"), args.messages + args.deep + 1)
        for rnd in range(args.rounds):
            for name in ("empty", "deep") if rnd % 2 == 0 else ("deep", "empty"):
                path = str(Path(tmp) / f"{name}.db")
                deep = args.deep if name == "deep" else 0
                (rate, cpu), took = drain(path, args.messages, marks, deep)
                rates[name].append(rate)
                cpus[name].append(cpu)
                stats[name].append(took)
                load = os.getloadavg()[0]
                print(
                    f"round {rnd + 1} {name}: {rate:,.0f} jobs/s, worker CPU {cpu * 1e6:.1f}"
                    f" µs/job, stats {took * 1e3:.2f} ms (load {load:.1f})",
                    flush=True,
                )
        marks.close()
    empty, deep = statistics.median(rates["empty"]), statistics.median(rates["deep"])
    print(f"median: empty queue {empty:,.0f} jobs/s; with {args.deep:,} waiting {deep:,.0f}")
    print(f"jobs/s ({deep / empty:.0%} of the empty queue's rate)")
    c_empty, c_deep = statistics.median(cpus["empty"]), statistics.median(cpus["deep"])
    print(f"worker CPU: {c_empty * 1e6:.1f} µs/job empty, {c_deep * 1e6:.1f} µs/job deep")
    s_empty, s_deep = statistics.median(stats["empty"]), statistics.median(stats["deep"])
    print(f"stats: {s_empty * 1e3:.2f} ms empty, {s_deep * 1e3:.2f} ms with {args.deep:,} waiting")
    return 0


if __name__ == "__main__":
    sys.exit(main())
