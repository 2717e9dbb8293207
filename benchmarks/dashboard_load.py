"""Load check: how fast the dashboard's pages answer with a deep SQLite queue.

    .venv/bin/python -m benchmarks.dashboard_load [--messages 1000000] [--db PATH]

Fills a SQLite file with N waiting messages in one queue (plus a few dead letters and
leases), then times the queues page, the queue page (counts, in-flight, a page of dead
letters) and a message page through the ASGI app in-process (no network), 20 requests
each, and prints the median and the slowest. A measurement, not a test: the issue's bar
is the queues page under 200 ms at 1,000,000 messages.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from starlette.testclient import TestClient

import tasuki
from tasuki.backends.base import Bury, Envelope
from tasuki.web import create_app
from tasuki.web.sampler import Sampler


def fill(app: tasuki.App, queue: str, n: int) -> None:
    batch = 20_000
    for start in range(0, n, batch):
        app.backend.enqueue(
            [
                Envelope(queue, f"m{i}", b'{"args":[1],"kwargs":{}}')
                for i in range(start, min(n, start + batch))
            ]
        )
    dead = app.backend.lease(queue, 30, 3600.0)
    app.backend.bury([Bury(d.receipt, "benchmark") for d in dead[:20]])


def timed(client: TestClient, path: str, rounds: int = 20) -> tuple[float, float]:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        response = client.get(path)
        times.append(time.perf_counter() - started)
        assert response.status_code == 200, (path, response.status_code)
    return statistics.median(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--db", type=Path)
    args = parser.parse_args()
    db = args.db or Path(tempfile.mkdtemp()) / "load.db"
    app = tasuki.App(f"sqlite:///{db}")
    if not db.exists() or not app.backend.stats("deep").ready:
        started = time.perf_counter()
        fill(app, "deep", args.messages)
        print(f"filled {args.messages:,} messages in {time.perf_counter() - started:.1f}s")
    print(f"stats: {app.stats('deep')}")
    sampler = Sampler(app, every=3600.0)  # one sample, taken by hand: no thread
    sampler.sample()
    client = TestClient(create_app(app, sampler=sampler), base_url="http://127.0.0.1")
    for path in ("/", "/queues/deep", "/queues/deep/messages/m50"):
        median, worst = timed(client, path)
        print(f"GET {path:<28} median {median * 1000:7.1f} ms   slowest {worst * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
