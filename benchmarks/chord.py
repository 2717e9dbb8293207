"""`./dev bench chord [--members N] [--rounds R] [--only a,b]`: a chord, from enqueue to
its callback, in tasuki (Redis, PostgreSQL, SQLite) and in Celery (Redis broker and result
backend), side by side in one run.

Each side gets two worker processes (the machine's two cores): tasuki `tasuki worker
--workers 2 -c 8`, Celery `--pool=prefork -c 2` (its fastest on this machine in the main
benchmark). One chord of `--members` no-op members returning their index, then a callback
given the list of results, which writes down when it ran. Timed from just before the
enqueue call to the callback's own clock; a warm-up chord of 10 runs first on each
worker set. Rounds interleave the sides; the median is printed, with each side's time
per member and the ratio to Celery.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from benchmarks import procs
from benchmarks.peers.tasuki_runner import postgres_url
from benchmarks.redis_server import RedisServer

SIDES = ("tasuki-redis", "tasuki-postgresql", "tasuki-sqlite", "celery")


def _worker(side: str, url: str, redis_url: str, log: Path) -> procs.Worker:
    env = {
        **os.environ,
        "BENCH_REDIS_URL": redis_url,
        "BENCH_TASUKI_URL": url,
        "BENCH_CHORD_SIDE": "celery" if side == "celery" else "tasuki",
    }
    bindir = Path(sys.executable).parent
    if side == "celery":
        argv = [
            str(bindir / "celery"), "-A", "benchmarks.chord_apps", "worker",
            "--pool=prefork", "-c", "2", "--without-gossip", "--without-mingle",
            "--without-heartbeat", "--loglevel=WARNING",
        ]  # fmt: skip
    else:
        argv = [
            sys.executable, "-m", "tasuki", "worker", "benchmarks.chord_apps:app",
            "--workers", "2", "-c", "8", "--log-level", "WARNING", "--no-scheduler",
        ]  # fmt: skip
    return procs.Worker(argv, env, log)


def _starter(side: str, url: str) -> Callable[[int, str], None]:
    """What enqueues one chord of n members whose callback is told `run`."""
    from benchmarks import chord_apps

    if side == "celery":
        from celery import chord

        app: Any = chord_apps.celery_app()
        member, callback = app.tasks["member"], app.tasks["callback"]

        def start_celery(n: int, run: str) -> None:
            chord(member.s(i) for i in range(n))(callback.s(run))

        return start_celery
    import tasuki

    tapp: Any = chord_apps.tasuki_app()

    def start_tasuki(n: int, run: str) -> None:
        members = [tapp.jobs["member"].step(i) for i in range(n)]
        tasuki.chain(tasuki.group(members), tapp.jobs["callback"].step(run)).enqueue()

    return start_tasuki


def _wait(marks: redis.Redis, run: str, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = marks.get(f"chord:done:{run}")
        if got is not None:
            return float(got.split()[0])
        time.sleep(0.01)
    raise TimeoutError(f"the chord {run} did not call back within {timeout:.0f}s")


def _url(side: str, workdir: Path, redis_url: str) -> str:
    if side == "tasuki-redis":
        return f"{redis_url}?prefix=chord{uuid.uuid4().hex[:6]}:"
    if side == "tasuki-postgresql":
        base = postgres_url()
        return f"{base}{'&' if '?' in base else '?'}schema=chord_{uuid.uuid4().hex[:6]}"
    if side == "tasuki-sqlite":
        return f"sqlite:///{workdir / f'chord-{uuid.uuid4().hex[:6]}.db'}"
    return redis_url


def measure(side: str, members: int, workdir: Path, redis_url: str) -> tuple[float, float]:
    """(seconds from enqueue to callback, seconds the enqueue call took) for one chord."""
    marks = redis.Redis.from_url(redis_url)
    url = _url(side, workdir, redis_url)
    os.environ.update(BENCH_REDIS_URL=redis_url, BENCH_TASUKI_URL=url)
    start = _starter(side, url)
    worker = _worker(side, url, redis_url, workdir / f"{side}.log")
    try:
        warm = uuid.uuid4().hex
        start(10, warm)
        _wait(marks, warm, 60.0)
        run = uuid.uuid4().hex
        t0 = time.time()
        start(members, run)
        enqueued = time.time() - t0
        return _wait(marks, run, 600.0) - t0, enqueued
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; worker log:\n{worker.tail()}") from None
    finally:
        worker.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="./dev bench chord", description=__doc__.split("\n\n")[0])
    p.add_argument("--members", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--only", help=f"comma-separated, of: {', '.join(SIDES)}")
    a = p.parse_args(argv)
    sides = [s for s in SIDES if a.only is None or s in a.only.split(",")]
    times: dict[str, list[tuple[float, float]]] = {s: [] for s in sides}
    with tempfile.TemporaryDirectory(prefix="bench-chord-") as tmp:
        server = RedisServer(Path(tmp))
        try:
            for r in range(a.rounds):
                for side in sides if r % 2 == 0 else reversed(sides):
                    took = measure(side, a.members, Path(tmp), server.url)
                    times[side].append(took)
                    print(f"  round {r + 1} {side}: {took[0]:.2f}s (enqueue {took[1]:.2f}s)")
        finally:
            server.stop()
    celery = statistics.median(t for t, _ in times["celery"]) if "celery" in times else None
    print(f"\nchord of {a.members:,} members, median of {a.rounds} rounds")
    print(f"{'system':<20}{'to callback':>12}{'enqueue':>10}{'per member':>12}{'vs Celery':>11}")
    for side, got in times.items():
        total = statistics.median(t for t, _ in got)
        enq = statistics.median(e for _, e in got)
        ratio = f"{celery / total:.1f}x" if celery else "-"
        per = total / a.members * 1e6
        print(f"{side:<20}{total:>11.2f}s{enq:>9.2f}s{per:>10.0f}µs{ratio:>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
