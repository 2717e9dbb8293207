"""`python -m benchmarks.shape_profile`: where a `tasuki worker`'s time goes on a real job
shape, sampled by py-spy while it drains.

Its own redis-server (the queue, and the job's own `INCR` in shape a; with `--shape pg`,
shape b, the queue is on the PostgreSQL server of `./dev bench shapes postgres`, in a
schema of its own emptied first, and the job is one `SELECT 1`); `--jobs` messages of
the shape job (`benchmarks/shape_jobs.py`) queued in bulk; one worker (`-c`,
`--workers`) started on them; once the first job ran, `py-spy record` samples the
worker for `--seconds` (all threads, `--idle` included, so a thread waiting shows as
waiting), then `--gil` for as long again (only the thread holding the GIL: what the
interpreter itself spends its time on). Printed: redis-py's `INCR` alone (shape a), the
drain's rate, the worker's and redis-server's CPU per job, Redis's commands per job,
and per thread the share of samples in each activity (`BUCKETS`: leasing, settling,
running the job's own round trip, the pool's hand-off, waiting).

    python -m benchmarks.shape_profile --py-spy /path/to/py-spy --shape redis -c 32
    python -m benchmarks.shape_profile --py-spy /path/to/py-spy --shape pg -c 32 --jobs 80000
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
import redis

from benchmarks.drain import _cpu
from benchmarks.marks import ENV as MARKS_ENV
from benchmarks.marks import Marks
from benchmarks.peers.base import REDIS_ENV, ROOT
from benchmarks.peers.tasuki_app import URL_ENV, build
from benchmarks.peers.tasuki_runner import TABLES, postgres_url
from benchmarks.redis_server import RedisServer
from benchmarks.shape_jobs import POSTGRES_ENV, SHAPE_ENV, SPIN_ENV

#: the schema `--shape pg` puts its queue in (emptied before each run)
PG_SCHEMA = "tasuki_profile"

#: (bucket, patterns of a frame's function or file that put a sample in it), the first
#: match wins, looked for from the innermost frame outwards
BUCKETS = (
    ("the job's own round trip", (r"shape_jobs\.py",)),
    ("lease", (r"(^|[^a-z])lease", r"_fetch", r"fetcher\.py.*_next")),
    ("settle / ack", (r"settle", r"(^|[^a-z])ack", r"finisher\.py", r"_done")),
    ("hand-off to the pool", (r"ThreadPool\.submit",)),
    ("receive / dispatch", (r"Receiver\.", r"_dispatch")),
    ("heartbeat / keep", (r"heartbeat", r"(^|[^a-z])keep")),
)
_COMPILED = tuple((name, tuple(re.compile(k) for k in keys)) for name, keys in BUCKETS)


def bucket(stack: list[str]) -> str:
    for frame in reversed(stack):
        low = frame.lower() if "Pool.submit" not in frame else frame
        for name, patterns in _COMPILED:
            if any(p.search(low) or p.search(frame) for p in patterns):
                return name
    leaf = stack[-1] if stack else ""
    if any(w in leaf for w in ("wait (threading", "get (queue", "acquire", "select", "poll")):
        return "waiting (lock, queue, socket)"
    if "ThreadPool._work" in leaf:
        return "waiting (lock, queue, socket)"
    return "other"


def summarize(path: Path) -> str:
    """Per thread, the share of its samples in each bucket (py-spy's raw format)."""
    per: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    leaves: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack_text, _, count_text = line.rpartition(" ")
        if not stack_text:
            continue
        frames = stack_text.split(";")
        thread, stack = frames[0], frames[1:]
        count = int(count_text)
        total += count
        per[thread][bucket(stack)] += count
        if stack:
            leaves[stack[-1]] += count
    out = [f"{path.name}: {total} samples"]
    for thread, counts in sorted(per.items(), key=lambda kv: -sum(kv[1].values())):
        n = sum(counts.values())
        parts = ", ".join(f"{k} {100 * v / n:.0f}%" for k, v in counts.most_common())
        out.append(f"  {thread}: {100 * n / total:.0f}% of samples: {parts}")
    out.append("  innermost frames:")
    out += [f"    {100 * v / total:4.1f}%  {k}" for k, v in leaves.most_common(12)]
    return "\n".join(out)


def incr_baseline(client: redis.Redis, calls: int = 10_000, tries: int = 5) -> str:
    """What the job's own round trip costs alone: redis-py `INCR` in a loop, one thread."""
    walls, cpus = [], []
    for _ in range(tries):
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            client.incr("bench:baseline")
        walls.append(1e6 * (time.perf_counter() - wall) / calls)
        cpus.append(1e6 * (time.process_time() - cpu) / calls)
    return (
        f"redis-py INCR alone, one thread, {tries} x {calls:,} calls: "
        f"{min(walls):.1f}-{max(walls):.1f} µs wall, {min(cpus):.1f}-{max(cpus):.1f} µs "
        "of client CPU per call"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--py-spy", default="py-spy", help="the py-spy binary")
    p.add_argument("--shape", default="redis", choices=("redis", "pg", "sleep", "cpu"))
    p.add_argument("-c", "--concurrency", type=int, default=32)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--jobs", type=int, default=200_000)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()))
    p.add_argument("--no-spy", action="store_true", help="only the rate and the round trips")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tasuki-profile-") as tmp:
        server = RedisServer(Path(tmp))
        marks = Marks(f"/dev/shm/tasuki-profile-{Path(tmp).name}.marks", args.jobs)
        try:
            run(args, server, marks)
        finally:
            server.stop()
            marks.close()
            Path(marks.path).unlink(missing_ok=True)


def fresh_postgres_url() -> str:
    """The queue's URL for `--shape pg`, its tables emptied (as each drain of `./dev bench
    shapes postgres` starts)."""
    base = postgres_url()
    url = f"{base}{'&' if '?' in base else '?'}schema={PG_SCHEMA}"
    app, _ = build(url)
    try:
        app.stats("default")  # the first use creates the schema
    finally:
        app.close()
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {', '.join(f'{PG_SCHEMA}.{t}' for t in TABLES)}")
    return url


def run(args: argparse.Namespace, server: RedisServer, marks: Marks) -> None:
    url = fresh_postgres_url() if args.shape == "pg" else server.url
    app, _ = build(url)
    stats = redis.Redis.from_url(server.url)
    if args.shape == "redis":
        print(incr_baseline(stats), flush=True)
    job = app.jobs["shape"]
    for lo in range(0, args.jobs, 1000):
        job.enqueue_many([(i,) for i in range(lo, min(lo + 1000, args.jobs))])
    env = dict(os.environ, **{URL_ENV: url, REDIS_ENV: server.url, POSTGRES_ENV: postgres_url()})
    env.update({MARKS_ENV: marks.path, SHAPE_ENV: args.shape, SPIN_ENV: "36000"})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "tasuki", "worker", "benchmarks.peers.tasuki_app:app"]
    argv += ["-q", "default", "-c", str(args.concurrency), "--workers", str(args.workers)]
    worker = subprocess.Popen([*argv, "--no-scheduler", "--log-level", "WARNING"], env=env)
    try:
        while marks.done(args.jobs) == 0:
            time.sleep(0.002)

        def now() -> tuple[int, float, float, float, dict[str, Any]]:
            clock = time.perf_counter()
            calls = stats.info("commandstats")
            return marks.done(args.jobs), _cpu(worker.pid), server.cpu_seconds(), clock, calls

        time.sleep(0.5)  # past start-up
        before = now()
        time.sleep(2.0)
        after = now()
        jobs = max(1, after[0] - before[0])
        print(
            f"{args.shape}, -c {args.concurrency}: {jobs / (after[3] - before[3]):,.0f} jobs/s "
            f"over 2 s; worker CPU {1e6 * (after[1] - before[1]) / jobs:.0f} µs/job, "
            f"redis-server {1e6 * (after[2] - before[2]) / jobs:.0f} µs/job"
            + ("" if args.shape != "pg" else " (the queue is on PostgreSQL: see shape_pg_profile)"),
            flush=True,
        )
        for name in sorted(set(after[4]) | set(before[4])):
            a, b = after[4].get(name, {}), before[4].get(name, {})
            calls = a.get("calls", 0) - b.get("calls", 0)
            if calls:
                usec = a.get("usec", 0) - b.get("usec", 0)
                print(
                    f"  {name}: {calls / jobs:.3f} per job ({jobs / calls:,.1f} jobs per call), "
                    f"{usec / calls:.1f} µs in redis-server per call"
                )
        for mode in () if args.no_spy else ("--idle", "--gil"):
            out = args.out / f"profile-{args.shape}-c{args.concurrency}{mode[1:]}.txt"
            subprocess.run(
                [args.py_spy, "record", "--pid", str(worker.pid), "-d", str(int(args.seconds)),
                 "-r", "250", "-f", "raw", "--threads", mode, "-o", str(out), "--nonblocking"],
                check=True, capture_output=True,
            )  # fmt: skip
            print(summarize(out), flush=True)
        if marks.done(args.jobs) == args.jobs:
            print("note: the queue ran dry while sampling: use more --jobs")
    finally:
        worker.terminate()
        worker.wait(30)
        app.close()
        stats.close()


if __name__ == "__main__":
    main()
