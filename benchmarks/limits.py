"""`python -m benchmarks.limits [--backends redis,sqlite,postgresql] [--messages N]`:
what concurrency and rate limits cost a drain, with 1,000 keys.

Per backend that claims the capability (the others are named and skipped), one worker
in this process (`-c 16`), no-op jobs, each side drained from a full queue to empty:

- `none`: no limit (the baseline);
- `1,000 keys x ConcurrencyLimit(2)`: every message under its key's limit, keys spread
  evenly, so the limits are rarely reached: what admission itself costs;
- `1,000 keys x RateLimit(100/s)`: the same with a rate, each key's tokens far from
  spent;
- `hot key, 90 %`: 90 % of the messages under one key's `ConcurrencyLimit(1)`, 10 %
  unlimited on the same queue: the unlimited ones' rate, against the baseline's, says
  whether over-limit messages cost the others (the issue's target: >= 80 %).

Rates in jobs/s, median of `--rounds` rounds, sides interleaved.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import tasuki

SIDES = ("none", "1,000 keys x ConcurrencyLimit(2)", "1,000 keys x RateLimit(100/s)", "hot key")
KEYS = 1000


def url_of(backend: str, tmp: Path, postgres: str, redis: str) -> str:
    tag = uuid.uuid4().hex[:8]
    if backend == "sqlite":
        return f"sqlite:///{tmp / f'limits-{tag}.db'}"
    if backend == "postgresql":
        return f"{postgres}{'&' if '?' in postgres else '?'}schema=limits_{tag}"
    if backend == "redis":
        return f"{redis}?prefix=limits-{tag}:"
    return f"memory://limits-{tag}"


def drain(url: str, side: str, messages: int) -> tuple[float, float | None]:
    """(jobs/s over all messages, jobs/s of the unlimited ones on the hot-key side)."""
    app = tasuki.App(url)
    done = [0]
    free_done: list[float] = []
    finished = threading.Event()

    def count(free: bool = False) -> None:
        if free:
            free_done.append(time.perf_counter())
        done[0] += 1
        if done[0] >= messages:
            finished.set()

    @app.job(name="none")
    def plain(i: int, key: str) -> None:
        count(free=side == "hot key")

    @app.job(name="conc", concurrency_limit=tasuki.ConcurrencyLimit(2, key=_key))
    def conc(i: int, key: str) -> None:
        count()

    @app.job(name="rate", rate_limit=tasuki.RateLimit(100, per=1.0, key=_key))
    def rate(i: int, key: str) -> None:
        count()

    @app.job(name="hot", concurrency_limit=tasuki.ConcurrencyLimit(1, key=_key))
    def hot(i: int, key: str) -> None:
        count()

    job = {"none": plain, SIDES[1]: conc, SIDES[2]: rate}.get(side)
    for start in range(0, messages, 1000):
        batch = range(start, min(messages, start + 1000))
        if job is not None:
            job.enqueue_many({"i": i, "key": f"k{i % KEYS}"} for i in batch)
        else:
            plain.enqueue_many({"i": i, "key": "free"} for i in batch if i % 10 == 0)
            hot.enqueue_many({"i": i, "key": "hot"} for i in batch if i % 10 != 0)
    worker = app.worker(concurrency=16)
    t0 = time.perf_counter()
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    # The hot key drains one at a time: the side ends when the unlimited ones are done.
    want = messages // 10 if side == "hot key" else messages
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if (len(free_done) if side == "hot key" else done[0]) >= want:
            break
        time.sleep(0.005)
    took = time.perf_counter() - t0
    worker.stop(grace=5.0)
    app.close()
    if side == "hot key":
        return done[0] / took, len(free_done) / (free_done[-1] - t0) if free_done else 0.0
    return messages / took, None


def _key(m: tasuki.Message) -> str:
    return str(m.kwargs["key"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.limits", description=__doc__)
    p.add_argument("--backends", default="memory,redis,sqlite,postgresql")
    p.add_argument("--messages", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    a = p.parse_args(argv)
    print(f"{a.messages:,} no-op jobs per drain, worker -c 16 in process, {a.rounds} rounds")
    print("| backend | side | jobs/s | vs none | unlimited jobs' jobs/s |")
    print("|---|---|--:|--:|--:|")
    with tempfile.TemporaryDirectory(prefix="bench-limits-") as tmp:
        for backend in a.backends.split(","):
            url: Callable[[], str] = lambda b=backend: url_of(b, Path(tmp), a.postgres, a.redis)  # noqa: E731
            probe = tasuki.App(url())
            caps = probe.backend.capabilities
            probe.close()
            if not (caps.concurrency_limits and caps.rate_limits):
                print(f"| {backend} | (no limits on this backend) | | | |")
                continue
            rates: dict[str, list[float]] = {s: [] for s in SIDES}
            free: list[float] = []
            for r in range(a.rounds):
                for side in SIDES if r % 2 == 0 else reversed(SIDES):
                    rate, unlimited = drain(url(), side, a.messages)
                    rates[side].append(rate)
                    if unlimited is not None:
                        free.append(unlimited)
            base = statistics.median(rates["none"])
            for side in SIDES:
                med = statistics.median(rates[side])
                extra = (
                    f"{statistics.median(free):,.0f} ({statistics.median(free) / base:.0%})"
                    if side == "hot key"
                    else ""
                )
                print(f"| {backend} | {side} | {med:,.0f} | {med / base:.0%} | {extra} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
