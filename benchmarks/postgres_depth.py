"""`python -m benchmarks.postgres_depth`: does a deep queue slow tasuki-postgres down?

One worker process drains 20,000 no-op jobs twice: from a queue that holds only them,
then from one where 1,000,000 more wait behind them (made by the server with
generate_series, so filling takes seconds). Rounds alternate; the medians are printed
with their ratio. The rate is from the first of the 20,000 jobs to start to the last.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from benchmarks.drain import drain as run_worker
from benchmarks.marks import Marks
from benchmarks.peers.tasuki_app import build
from benchmarks.peers.tasuki_runner import CONCURRENCY, postgres_url

SCHEMA = "tasuki_depth"


def url() -> str:
    base = postgres_url()
    return f"{base}{'&' if '?' in base else '?'}schema={SCHEMA}"


def fill_deep(count: int, after: int) -> None:
    """`count` waiting jobs with arguments `after`.. , all due after the measured ones."""
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {SCHEMA}.tasuki_messages"
            " (queue, id, body, headers, visible_at, enqueued_at, max_attempts)"
            " SELECT 'default', 'deep' || i, convert_to('{\"args\":[' || i || '],\"kwargs\":{}}',"
            " 'UTF8'), '{\"tasuki-job\":\"noop\"}', %(now)s + i * 1e-6, %(now)s, 10"
            " FROM generate_series(%(lo)s, %(hi)s) AS i",
            {"now": time.time(), "lo": after, "hi": after + count - 1},
        )
        conn.execute(f"VACUUM ANALYZE {SCHEMA}.tasuki_messages")
        # Write the fill's pages out now, not in a checkpoint during the drain.
        conn.execute("CHECKPOINT")


def drain(n: int, marks: Marks, deep: int) -> float:
    app, job = build(url())
    app.purge("default")
    for lo in range(0, n, 1_000):
        job.enqueue_many([(i,) for i in range(lo, min(lo + 1_000, n))])
    app.close()
    if deep:
        fill_deep(deep, n)
    return run_worker(url(), n, marks, CONCURRENCY["postgres"], timeout=240).rate


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.postgres_depth", description=__doc__)
    p.add_argument("--messages", type=int, default=20_000)
    p.add_argument("--deep", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    rates: dict[str, list[float]] = {"empty": [], "deep": []}
    with tempfile.TemporaryDirectory() as tmp:
        marks = Marks(str(Path(tmp) / "marks"), args.messages + args.deep + 1)
        for rnd in range(args.rounds):
            for name in ("empty", "deep") if rnd % 2 == 0 else ("deep", "empty"):
                rate = drain(args.messages, marks, args.deep if name == "deep" else 0)
                rates[name].append(rate)
                load = os.getloadavg()[0]
                print(f"round {rnd + 1} {name}: {rate:,.0f} jobs/s (load {load:.1f})", flush=True)
        marks.close()
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    empty, deep = statistics.median(rates["empty"]), statistics.median(rates["deep"])
    print(f"median: empty queue {empty:,.0f} jobs/s; with {args.deep:,} waiting {deep:,.0f}")
    print(f"jobs/s ({deep / empty:.0%} of the empty queue's rate)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
