"""`python -m benchmarks.embedded_profile URL -c N --jobs N`: one in-process drain of
no-op jobs by a tasuki worker on SQLite, and what it cost a job: the rate, the process's
CPU, and the SQL statements it ran (every connection's trace callback), transactions
among them. Where `./dev bench embedded` says how fast, this says where the time goes.

    python -m benchmarks.embedded_profile sqlite:////tmp/p.db -c 32 --jobs 10000
    python -m benchmarks.embedded_profile "sqlite:////tmp/p.db?synchronous=normal" -c 32
"""

from __future__ import annotations

import argparse
import collections
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

counts: collections.Counter[str] = collections.Counter()
_mutex = threading.Lock()
_connect = sqlite3.connect


def _traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    conn = _connect(*args, **kwargs)

    def trace(sql: str) -> None:
        words = sql.split(None, 3)[:3]
        key = " ".join(w for w in words if not w.startswith("--")).upper()[:40]
        with _mutex:
            counts[key] += 1

    conn.set_trace_callback(trace)
    return conn


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("url")
    p.add_argument("-c", "--concurrency", type=int, default=32)
    p.add_argument("--jobs", type=int, default=10_000)
    args = p.parse_args()
    db = Path(urlsplit(args.url).path[1:])
    for suffix in ("", "-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    sqlite3.connect = _traced  # type: ignore[assignment]
    import tasuki

    app = tasuki.App(args.url)
    job = app.job(name="noop", queue="default")(lambda i: None)
    for lo in range(0, args.jobs, 1000):
        job.enqueue_many([(i,) for i in range(lo, min(lo + 1000, args.jobs))])
    counts.clear()
    worker = app.worker(concurrency=args.concurrency, scheduler=False)
    wall, cpu = time.perf_counter(), time.process_time()
    worker.run(until_idle=True)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    n = args.jobs
    print(f"{args.url} -c {args.concurrency}: {n / wall:,.0f} jobs/s, "
          f"{1e6 * wall / n:.0f} µs wall and {1e6 * cpu / n:.0f} µs CPU a job")  # fmt: skip
    for sql, k in counts.most_common(8):
        print(f"  {k / n:7.3f} a job  {sql}")
    app.close()


if __name__ == "__main__":
    main()
