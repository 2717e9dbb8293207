"""`python -m benchmarks.redis_browse`: `benchmarks/browse.py`'s pages on Redis.

A redis-server of our own is filled through the backend (enqueue in batches of 1,000)
with `--depth` ready messages of two jobs ("a" and "b", alternating), 1,000 delayed and
1,000 dead ones, the bodies and headers `browse.py` makes; then each listing's page of
50 is timed as there (`app.messages`, the median of `--calls`). Redis lists by walking
the ZSETs the lease keeps, and a job filter walks past the other job's messages (at most
`console.JOB_WALK` a call), so "ready of job b" reads about two messages per one shown.
A last line times one call that walks `JOB_WALK` messages of another job and finds none.
A `match` is filtered in browse.lua as it walks, at most `JOB_WALK` messages a call
(`RedisBackend.browse_matching`); its CPU per call, this process's and Redis's own, is
printed last (figures a loaded machine moves less than times).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import tasuki
from benchmarks.browse import PAGE, SIDE, body, measure, median_ms
from tasuki.backends.base import Envelope, Settle
from tasuki.backends.redis import console
from tasuki.backends.urls import backend_from_url
from tasuki.core.message import new_ids
from tasuki.testing.servers import RedisServer


def fill(url: str, depth: int) -> None:
    backend = backend_from_url(url)
    ids = new_ids(depth + 2 * SIDE)
    dead = [
        Envelope("default", ids[depth + SIDE + i], body(i), headers=_headers(i))
        for i in range(SIDE)
    ]
    backend.enqueue(dead)
    leased = backend.lease("default", SIDE, 600.0)
    backend.settle([Settle.dead(d.receipt, "benchmark") for d in leased])
    for lo in range(0, depth, 1000):
        hi = min(lo + 1000, depth)
        backend.enqueue(
            [Envelope("default", ids[i], body(i), headers=_headers(i)) for i in range(lo, hi)]
        )
    backend.enqueue(
        [
            Envelope("default", ids[depth + i], body(i), headers=_headers(i), delay=3600.0)
            for i in range(SIDE)
        ]
    )
    backend.close()


def _headers(i: int) -> dict[str, str]:
    return {"tasuki-job": "a" if i % 2 == 0 else "b"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp)) as server:
        url = server.url()
        start = time.monotonic()
        fill(url, args.depth)
        print(f"redis: filled in {time.monotonic() - start:.0f}s", flush=True)
        results = measure(url, args.calls)
        app = tasuki.App(url)
        results["job c: JOB_WALK walked, none found"] = median_ms(
            lambda: app.messages("default", job="c", limit=PAGE), args.calls
        )
        cpu = cpu_per_match(app, args.calls)
        app.close()
    print(f"\na page of {PAGE} at {args.depth:,} ready (+{SIDE:,} delayed, +{SIDE:,} dead),")
    print(f"median of {args.calls} calls, in ms (target <= 50 ms); {os.cpu_count()} cores")
    for name, ms in results.items():
        print(f"{name:40}{ms:12.2f}")
    print(f"JOB_WALK = {console.JOB_WALK}")
    print(
        f"match, per call: {cpu[0]:.2f} ms of this process's CPU, {cpu[1]:.2f} ms of"
        " Redis's own time (INFO commandstats: the scripts' usec)"
    )
    return 0


def cpu_per_match(app: tasuki.App, calls: int) -> tuple[float, float]:
    """The match page's cost in CPU, less bound to the machine's load than its time: this
    process's CPU seconds (`time.process_time`) and Redis's own time in the scripts it
    ran, each per call, in ms."""

    def script_usec() -> int:
        text = app.backend._command("INFO", "commandstats")  # type: ignore[attr-defined]
        text = text.decode() if isinstance(text, bytes) else str(text)
        total = 0
        for line in text.splitlines():
            if line.startswith(("cmdstat_eval:", "cmdstat_evalsha:")):
                total += int(line.split("usec=", 1)[1].split(",", 1)[0])
        return total

    before_cpu, before_redis = time.process_time(), script_usec()
    for _ in range(calls):
        app.messages("default", match={"customer": "c7"}, limit=PAGE)
    own = (time.process_time() - before_cpu) / calls * 1000
    return own, (script_usec() - before_redis) / calls / 1000


if __name__ == "__main__":
    sys.exit(main())
