"""`python -m benchmarks.workers_cpu`: a CPU-bound job under `tasuki worker --workers N`.

Shape (d) of the real-job benchmarks: each job does about 1 ms of pure-Python CPU
(a loop calibrated here, once, and handed to every process as `$BENCH_SPIN` steps), so
one process is bound by the GIL and only more processes use more cores. Per round: the
group is started (`tasuki worker benchmarks.workers_cpu_app:app --workers N`) and
waits on an empty queue (its `/readyz` answers 200); then `--jobs` messages are enqueued
at once and the clock runs until the queue is empty. Rounds alternate between the
counts given, so that a machine that slows down slows every count alike; the median of
each is printed, and the ratio to N x one process.

    python -m benchmarks.workers_cpu                       # 4,000 jobs, --workers 1 and 2
    python -m benchmarks.workers_cpu --workers 1,2,4 --rounds 3 --concurrency 8

Its own redis-server on a free port (`benchmarks/redis_server.py`).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import tasuki
from benchmarks.procs import session_cpu_seconds
from benchmarks.redis_server import RedisServer, free_port
from benchmarks.workers_cpu_app import spin

ROOT = Path(__file__).resolve().parents[1]


def calibrate(seconds: float = 0.001) -> int:
    """Steps of `spin` that take `seconds` here (the best of several tries)."""
    steps = 10_000
    best = min(_timed(steps) for _ in range(50))
    return max(1, round(steps * seconds / best))


def _timed(steps: int) -> float:
    started = time.perf_counter()
    spin(steps)
    return time.perf_counter() - started


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def one_round(
    server: RedisServer, workers: int, jobs: int, concurrency: int, spin_steps: int
) -> tuple[float, float, float]:
    """Jobs per second of one group draining `jobs` messages, and the group's CPU time
    per job (supervisor and workers, in ms): the same per job at any count means the
    processes scale, and a rate short of N x one process means cores were short; and
    redis-server's CPU time per job (ms), which shares the same cores."""
    url = f"{server.url}?prefix=bench-{uuid.uuid4().hex[:8]}:"
    port = free_port()
    env = {**os.environ, "TASUKI_URL": url, "BENCH_SPIN": str(spin_steps)}
    argv = [
        sys.executable, "-m", "tasuki", "worker", "benchmarks.workers_cpu_app:app",
        "--workers", str(workers), "-c", str(concurrency), "--health-port", str(port),
        "--log-level", "WARNING",
    ]  # fmt: skip
    group = subprocess.Popen(
        argv, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while not ready(port):
            if time.monotonic() > deadline or group.poll() is not None:
                raise RuntimeError(f"--workers {workers} did not become ready")
            time.sleep(0.05)
        app = tasuki.App(url)
        cpu = app.job(name="cpu")(lambda n: None)
        cpu_before = session_cpu_seconds(group.pid)
        redis_before = server.cpu_seconds()
        started = time.perf_counter()
        cpu.enqueue_many([(n,) for n in range(jobs)])
        while True:
            s = app.stats("default")
            if s["ready"] + s["in_flight"] + s["delayed"] == 0:
                break
            time.sleep(0.01)
        took = time.perf_counter() - started
        cpu_ms = 1000 * (session_cpu_seconds(group.pid) - cpu_before) / jobs
        redis_ms = 1000 * (server.cpu_seconds() - redis_before) / jobs
        app.backend.close()
        return jobs / took, cpu_ms, redis_ms
    finally:
        group.send_signal(signal.SIGTERM)
        group.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="comma-separated process counts")
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    counts = [int(c) for c in args.workers.split(",")]
    steps = calibrate()
    print(f"cpu cores: {os.cpu_count()}; 1 ms of CPU = {steps} steps of spin()")
    rates: dict[int, list[float]] = {c: [] for c in counts}
    cpu: dict[int, list[float]] = {c: [] for c in counts}
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp))
        try:
            for round_ in range(args.rounds):
                for count in counts if round_ % 2 == 0 else reversed(counts):
                    rate, ms, redis_ms = one_round(
                        server, count, args.jobs, args.concurrency, steps
                    )
                    rates[count].append(rate)
                    cpu[count].append(ms)
                    print(
                        f"round {round_ + 1}: --workers {count}: {rate:,.0f} jobs/s, "
                        f"{ms:.2f} ms CPU per job (redis-server {redis_ms:.2f} ms), "
                        f"{rate * ms / 1000:.2f} cores busy in the group"
                    )
        finally:
            server.stop()
    one = statistics.median(rates[counts[0]]) / counts[0]
    print(f"\n{args.jobs:,} jobs of 1 ms CPU on Redis, -c {args.concurrency}, medians:")
    for count in counts:
        median = statistics.median(rates[count])
        print(
            f"  --workers {count}: {median:,.0f} jobs/s "
            f"({median / (count * one):.0%} of {count} x one process), "
            f"{statistics.median(cpu[count]):.2f} ms CPU per job"
        )


if __name__ == "__main__":
    main()
