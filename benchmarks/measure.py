"""One system, one round: enqueue rates, drain throughput, latency, idle cost."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.marks import ENV as MARKS_ENV
from benchmarks.marks import Marks
from benchmarks.peers.base import ROOT, Peer
from benchmarks.procs import Worker
from benchmarks.redis_server import RedisServer

Metrics = dict[str, Any]


@dataclass
class Settings:
    messages: int = 20_000
    #: one-by-one enqueues timed when the drain is filled in bulk anyway
    each_cap: int = 5_000
    bulk_chunk: int = 1_000
    latency_rate: float = 200.0
    latency_seconds: float = 5.0
    idle_seconds: float = 5.0
    idle_probes: int = 8
    idle_gap: float = 0.5
    system_timeout: float = 240.0
    startup_timeout: float = 30.0

    @property
    def latency_jobs(self) -> int:
        return int(self.latency_rate * self.latency_seconds)

    @property
    def capacity(self) -> int:
        return max(self.messages, self.latency_jobs + self.idle_probes + 1)


class WorkerFailed(RuntimeError):
    pass


@dataclass
class Bench:
    """What every measurement shares: the Redis server, the scoreboard, a scratch dir."""

    server: RedisServer
    marks: Marks
    settings: Settings
    workdir: Path

    def drain_size(self, peer: Peer) -> int:
        """How many messages this system drains (see `Peer.drain_share`)."""
        n = self.settings.messages
        return n if peer.drain_share >= 1 else max(1_000, int(round(n * peer.drain_share, -3)))

    def fresh(self, peer: Peer) -> None:
        """Empty Redis (and the peer's own store), zero the scoreboard."""
        self.server.flush()
        peer.reset()
        self.marks.clear()

    def start_worker(self, peer: Peer, tag: str) -> Worker:
        env = dict(os.environ)
        env.update(peer.worker_env())
        env[MARKS_ENV] = self.marks.path
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        env["PYTHONUNBUFFERED"] = "1"
        log = self.workdir / f"{peer.name}-{tag}.log"
        return Worker(peer.worker_argv(), env, log, cwd=ROOT)

    def wait(
        self,
        what: str,
        done: Callable[[], bool],
        timeout: float,
        worker: Worker | None,
        poll: float = 0.002,
        progress: Callable[[], str] | None = None,
    ) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if worker is not None and not worker.alive():
                raise WorkerFailed(
                    f"worker exited with {worker.proc.returncode} while waiting for {what}:\n"
                    + worker.tail()
                )
            if time.monotonic() > deadline:
                extra = f" ({progress()})" if progress else ""
                tail = f"\n{worker.tail()}" if worker else ""
                raise TimeoutError(f"{what}: not done after {timeout:.0f} s{extra}{tail}")
            time.sleep(poll)


def measure(bench: Bench, peer: Peer, idle: bool = True, drain_only: bool = False) -> Metrics:
    """Every measurement of one round for one system."""
    out: Metrics = {}
    if drain_only:
        fill(bench, peer)
    else:
        out.update(measure_enqueue(bench, peer))
    out.update(measure_drain(bench, peer, prefilled=True))
    if not drain_only:
        out.update(measure_latency(bench, peer, idle=idle))
    return out


def measure_enqueue(bench: Bench, peer: Peer) -> Metrics:
    s, out = bench.settings, Metrics()
    n = bench.drain_size(peer)
    # Without a bulk API these are the messages the drain consumes, so all of them;
    # with one, the drain is filled in bulk and fewer one-by-one calls tell the rate.
    each = min(n, s.each_cap) if peer.has_bulk else n
    bench.fresh(peer)
    t = time.perf_counter()
    peer.enqueue_each(range(each))
    out["enqueue_per_s"] = each / (time.perf_counter() - t)
    if peer.has_bulk:
        bench.fresh(peer)
        t = time.perf_counter()
        for lo in range(0, n, s.bulk_chunk):
            peer.enqueue_bulk(range(lo, min(lo + s.bulk_chunk, n)))
        out["bulk_per_s"] = n / (time.perf_counter() - t)
    queued = peer.pending()
    if queued != n:
        out["note"] = f"{queued} of {n} messages visible in the queue after enqueue"
    return out


def fill(bench: Bench, peer: Peer) -> None:
    """Queue the messages for a drain, the fastest way the system offers."""
    s, n = bench.settings, bench.drain_size(peer)
    bench.fresh(peer)
    if peer.has_bulk:
        for lo in range(0, n, s.bulk_chunk):
            peer.enqueue_bulk(range(lo, min(lo + s.bulk_chunk, n)))
    else:
        peer.enqueue_each(range(n))


def measure_drain(bench: Bench, peer: Peer, prefilled: bool = False) -> Metrics:
    """Start one worker on a full queue; time until every job ran and the queue is empty."""
    s, marks, n = bench.settings, bench.marks, bench.drain_size(peer)
    if not prefilled:
        fill(bench, peer)
    marks.clear()
    redis_cpu = bench.server.cpu_seconds()
    wall0 = time.time()
    worker = bench.start_worker(peer, "drain")
    try:
        bench.wait(
            "every job to run",
            lambda: marks.done(n) == n,
            s.system_timeout,
            worker,
            progress=lambda: f"{marks.done(n)} of {n} ran",
        )
        bench.wait("the queue to drain", lambda: peer.pending() == 0, 30.0, worker, poll=0.005)
        elapsed = time.perf_counter() - worker.started
        ended = time.time()
        worker_cpu = worker.cpu_seconds()
    finally:
        worker.stop()
    first = marks.first_start(n) - wall0
    starts = marks.start_times(n)
    return {
        "drained": n,
        "processed_per_s": n / elapsed,
        "drain_s": elapsed,
        "startup_s": first,
        "steady_per_s": n / max(elapsed - first, 1e-9),
        # the middle 80 % of job starts: no start-up ramp (a second process still
        # starting) and no tail (the last acks, the harness seeing the queue empty)
        "mid_per_s": mid_rate(starts),
        # from the last job's start to the harness seeing every job ran and none pending
        "tail_s": ended - starts[-1],
        "duplicates": marks.duplicates(n),
        "worker_cpu_s": worker_cpu,
        "redis_cpu_s": bench.server.cpu_seconds() - redis_cpu,
    }


def mid_rate(starts: list[float], lo: float = 0.1, hi: float = 0.9) -> float:
    """Jobs per second between the `lo` and `hi` quantiles of sorted start times."""
    a, b = int(lo * (len(starts) - 1)), int(hi * (len(starts) - 1))
    return (b - a) / max(starts[b] - starts[a], 1e-9)


def measure_latency(bench: Bench, peer: Peer, idle: bool = True) -> Metrics:
    """Idle CPU and idle wake-up latency of a worker, then latency at a steady rate."""
    s, marks = bench.settings, bench.marks
    bench.fresh(peer)
    jobs = s.latency_jobs
    probe = jobs + s.idle_probes
    worker = bench.start_worker(peer, "latency")
    out: Metrics = {}
    try:
        # Ready when one job went through; then let it settle into its idle state.
        peer.enqueue_each([probe])
        bench.wait("the worker to start", lambda: marks.ran(probe), s.startup_timeout, worker)
        time.sleep(0.5)
        if idle:
            out.update(measure_idle(bench, peer, worker))

        sent_at = peer.enqueue_each(range(jobs), rate=s.latency_rate)
        bench.wait(
            "the paced jobs to run",
            lambda: marks.done(jobs) == jobs,
            30.0,
            worker,
            progress=lambda: f"{marks.done(jobs)} of {jobs} ran",
        )
        lat = sorted(
            1000 * (b - a) for a, b in zip(sent_at, marks.started(range(jobs)), strict=True)
        )
        out["p50_ms"] = percentile(lat, 50)
        out["p99_ms"] = percentile(lat, 99)
        out["max_ms"] = lat[-1]
        out["offered_rate"] = jobs / (sent_at[-1] - sent_at[0]) if jobs > 1 else 0.0
    finally:
        worker.stop()
    return out


def measure_idle(bench: Bench, peer: Peer, worker: Worker) -> Metrics:
    """CPU of a worker with nothing to do; how soon it starts a job enqueued then."""
    s, marks = bench.settings, bench.marks
    cpu = worker.cpu_seconds()
    time.sleep(s.idle_seconds)
    out: Metrics = {"idle_cpu_pct": 100.0 * (worker.cpu_seconds() - cpu) / s.idle_seconds}
    wake: list[float] = []
    first = s.latency_jobs
    for k in range(first, first + s.idle_probes):
        time.sleep(s.idle_gap)
        (sent,) = peer.enqueue_each([k])
        bench.wait("an idle probe", lambda k=k: marks.ran(k), 10.0, worker, poll=0.0005)
        wake.append(marks.started([k])[0] - sent)
    out["idle_wake_ms"] = 1000 * statistics.median(wake)
    return out


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    k = max(0, min(len(sorted_values) - 1, round(p / 100 * len(sorted_values)) - 1))
    return sorted_values[k]
