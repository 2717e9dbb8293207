"""`python -m benchmarks.worker_overhead`: one in-process drain, and what the worker spent
on each job: its rate, the process's CPU per job (user and system), the context switches
per job, and for 10 ms sleeps the share of the ideal rate (concurrency / 10 ms).

The quickest way to compare two versions of the worker's hot path on the same machine
minutes apart: run it with `PYTHONPATH` pointing at each tree in turn, interleaved.

    python -m benchmarks.worker_overhead memory:// -c 256 --jobs 30000 --shape sleep
    python -m benchmarks.worker_overhead redis://127.0.0.1:6379/7 -c 32 --shape noop
    python -m benchmarks.worker_overhead memory:// -c 8 --shape noop --no-inline

`--shape sleep` is shape (c) of docs/benchmarks/shapes.md, `noop` the main table's job
(`--no-inline` keeps it on the thread pool, as a job that waits would be). A Redis URL's
database is emptied first (FLUSHDB): give it one nothing else uses.

`--floor` measures no worker at all: the same sleeps on `-c` bare threads, each taking
its next job from a `SimpleQueue` fed by one thread that waits for a free slot (a
semaphore), what any thread-pool worker in CPython costs at the least on this machine.

    python -m benchmarks.worker_overhead --floor -c 256 --jobs 30000
"""

from __future__ import annotations

import argparse
import resource
import threading
import time
from collections.abc import Callable
from queue import SimpleQueue

import tasuki

SLEEP = 0.010


def sleep(i: int) -> None:
    time.sleep(SLEEP)


def noop(i: int) -> None:
    pass


def run_floor(concurrency: int, n: int) -> None:
    """Bare threads: one feeder that waits for a free slot, `concurrency` sleepers."""
    jobs: SimpleQueue[int | None] = SimpleQueue()
    slots = threading.Semaphore(concurrency)

    def work() -> None:
        while jobs.get() is not None:
            time.sleep(SLEEP)
            slots.release()

    threads = [threading.Thread(target=work, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for i in range(n):
        slots.acquire()
        jobs.put(i)
    for _ in range(concurrency):
        slots.acquire()
    for _ in threads:
        jobs.put(None)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("url", nargs="?", default="memory://")
    p.add_argument("-c", "--concurrency", type=int, default=256)
    p.add_argument("--jobs", type=int, default=30_000)
    p.add_argument("--shape", choices=("sleep", "noop"), default="sleep")
    p.add_argument("--no-inline", action="store_true", help="never run jobs on the fetcher")
    p.add_argument("--floor", action="store_true", help="bare threads and sleeps, no worker")
    args = p.parse_args()
    if args.floor:
        args.shape, args.url = "sleep", "floor:"
        measure(args, lambda: run_floor(args.concurrency, args.jobs))
        return
    app = tasuki.App(args.url)
    job = app.job(name="overhead", queue="default")(sleep if args.shape == "sleep" else noop)
    if args.url.startswith("redis"):
        import redis

        redis.Redis.from_url(args.url).flushdb()
    for lo in range(0, args.jobs, 1000):
        job.enqueue_many([(i,) for i in range(lo, min(lo + 1000, args.jobs))])
    worker = app.worker(concurrency=args.concurrency, scheduler=False, inline=not args.no_inline)
    measure(args, lambda: worker.run(until_idle=True))
    app.close()


def measure(args: argparse.Namespace, drain: Callable[[], None]) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    drain()
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    n = args.jobs
    user = 1e6 * (after.ru_utime - before.ru_utime) / n
    system = 1e6 * (after.ru_stime - before.ru_stime) / n
    line = (
        f"{args.url.split(':')[0]} {args.shape} -c {args.concurrency}: {n / seconds:,.0f} "
        f"jobs/s, CPU {user + system:.1f} µs/job (user {user:.1f}, system {system:.1f}), "
        f"context switches per job {(after.ru_nvcsw - before.ru_nvcsw) / n:.2f} voluntary "
        f"{(after.ru_nivcsw - before.ru_nivcsw) / n:.2f} involuntary"
    )
    if args.shape == "sleep":
        line += f", {100 * n / seconds / (args.concurrency / SLEEP):.0f} % of the ideal"
    print(line, flush=True)


if __name__ == "__main__":
    main()
