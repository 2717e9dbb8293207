"""`python -m benchmarks.cancel_latency`: from `app.cancel()` to the running job seeing it.

A running job learns of a cancel with its lease's next keep (`runtime/heartbeat.py`):
within a third of its visibility timeout, or within `WATCH_EVERY` when the job looks for
a stop (`ctx.should_stop`, `ctx.wait_for_stop`, `ctx.cancelled`). Per backend that can
cancel (memory://, and sqlite:// once it claims the capability; the others are named and
skipped), two jobs with the default 30 s lease:

- `looks`: waits on `ctx.wait_for_stop()`, as a cooperative long job does;
- `never looks`: sleeps in small steps and reads nothing the keeper watches (the
  benchmark reads `ctx.stop_reason` to see the moment), so its lease is kept every 10 s.

`--jobs` run at once and are cancelled one by one at uniformly random moments of the
next 10 s (a third of the lease: the keeps of jobs started together come at once, and
cancels bunched after their start would all wait nearly a whole period); the latency is
from the call to the job's own clock seeing the cancel. Also
printed: how many leases `keep` was asked to keep per running job and second, what the
watching costs the backend.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import tasuki
from tasuki.backends.base import Keep, LeaseStatus

BACKENDS = ("memory", "sqlite")


@dataclass
class Result:
    backend: str
    job: str
    latencies: list[float]
    keeps_per_job_second: float

    def row(self) -> str:
        ms = sorted(x * 1000 for x in self.latencies)
        p50 = statistics.median(ms)
        p99 = statistics.quantiles(ms, n=100, method="inclusive")[98] if len(ms) > 1 else ms[0]
        return (
            f"| {self.backend} | {self.job} | {len(ms)} | {p50:,.0f} | {p99:,.0f} | "
            f"{ms[-1]:,.0f} | {self.keeps_per_job_second:.2f} |"
        )


def url_of(backend: str, tmp: Path) -> str:
    return "memory://cancel-bench" if backend == "memory" else f"sqlite:///{tmp / 'cancel.db'}"


def count_keeps(app: tasuki.App) -> Callable[[], int]:
    """Wrap the backend's `keep` to count the leases it is asked to keep."""
    backend = app.backend
    inner = backend.keep
    kept = [0]

    def keep(items: Sequence[Keep]) -> list[LeaseStatus]:
        kept[0] += len(items)
        return inner(items)

    backend.keep = keep  # type: ignore[method-assign]
    return lambda: kept[0]


def measure(url: str, backend: str, looks: bool, jobs: int, rounds: int, spread: float) -> Result:
    app = tasuki.App(url)
    seen: dict[str, float] = {}
    started: dict[str, float] = {}
    mutex = threading.Lock()

    @app.job(name="long", visibility_timeout=30.0)
    def long() -> None:
        ctx = tasuki.current()
        with mutex:
            started[ctx.message.id] = time.monotonic()
        if looks:
            while not ctx.wait_for_stop(60.0):
                pass
        else:
            while ctx.stop_reason != "cancelled":
                time.sleep(0.005)
        with mutex:
            seen[ctx.message.id] = time.monotonic()

    kept = count_keeps(app)
    worker = app.worker(concurrency=jobs, inline=False)
    worker.start()
    latencies: list[float] = []
    running_seconds = 0.0
    try:
        for _ in range(rounds):
            ids = long.enqueue_many([() for _ in range(jobs)])
            deadline = time.monotonic() + 30
            while len(started.keys() & set(ids)) < jobs and time.monotonic() < deadline:
                time.sleep(0.01)
            called: dict[str, float] = {}
            begin = time.monotonic()
            for offset, mid in sorted((random.uniform(0.0, spread), m) for m in ids):
                time.sleep(max(0.0, begin + offset - time.monotonic()))
                called[mid] = time.monotonic()
                status = app.cancel("default", mid)
                if status != "signalled":
                    raise RuntimeError(f"cancel of a running job answered {status!r}")
            deadline = time.monotonic() + 60
            while len(seen.keys() & set(ids)) < jobs and time.monotonic() < deadline:
                time.sleep(0.01)
            latencies += [seen[m] - called[m] for m in ids]
            running_seconds += sum(seen[m] - started[m] for m in ids)
    finally:
        worker.stop(grace=5.0)
        app.close()
    return Result(backend, "looks" if looks else "never looks", latencies, kept() / running_seconds)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.cancel_latency", description=__doc__)
    p.add_argument("--jobs", type=int, default=50, help="jobs running at once (default 50)")
    p.add_argument("--rounds", type=int, default=4, help="rounds of --jobs cancels (default 4)")
    p.add_argument("--backends", default=",".join(BACKENDS), help="memory,sqlite (default)")
    p.add_argument(
        "--spread", type=float, default=10.0, help="seconds the cancels spread over (10)"
    )
    args = p.parse_args(argv)
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            url = url_of(backend, Path(tmp))
            probe = tasuki.App(url)
            can = probe.backend.capabilities.cancel
            probe.close()
            if not can:
                print(f"{backend}:// lacks the cancel capability: skipped")
                continue
            for looks in (True, False):
                results.append(measure(url, backend, looks, args.jobs, args.rounds, args.spread))
                print(results[-1].row(), flush=True)
    print()
    print("| backend | job | cancels | p50 ms | p99 ms | max ms | keeps per job-second |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(r.row())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
