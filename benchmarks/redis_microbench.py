"""Micro-benchmark of the Redis backend's hot path, from one Python thread.

    .venv/bin/python -m benchmarks.redis_microbench [redis://host:port/db]

Without a URL it starts its own redis-server on a free port. It measures bulk enqueue
(100k messages in batches of 1,000), lease 100 + ack 100 in a loop until the queue is
empty, and the CPU a blocked worker burns while its queue stays empty. Not a test and
not a comparison with peers (that is `benchmarks/`): a quick check of one backend.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasuki.backends.base import Envelope
from tasuki.backends.urls import backend_from_url
from tasuki.testing.servers import RedisServer

TOTAL, BATCH, LEASE = 100_000, 1_000, 100
IDLE_SECONDS = 10.0


def run(url: str) -> None:
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    backend = backend_from_url(f"{url}?prefix={prefix}")
    queue = "bench"
    body = b'{"args": [12345], "kwargs": {}}'
    headers = {"tasuki-job": "bench.job", "tasuki-content-type": "json"}
    batches = [
        [Envelope(queue, f"m{i}", body, headers) for i in range(start, start + BATCH)]
        for start in range(0, TOTAL, BATCH)
    ]
    backend.ping()

    started = time.perf_counter()
    for batch in batches:
        backend.enqueue(batch)
    enqueue_s = time.perf_counter() - started

    started = time.perf_counter()
    done = 0
    while leased := backend.lease(queue, LEASE, 30.0):
        backend.ack([d.receipt for d in leased])
        done += len(leased)
    lease_s = time.perf_counter() - started
    assert done == TOTAL, done

    print(f"enqueue  {TOTAL:,} in batches of {BATCH:,}: {TOTAL / enqueue_s:>9,.0f} msg/s")
    print(f"lease {LEASE} + ack {LEASE}, one thread:      {TOTAL / lease_s:>9,.0f} msg/s")

    stop = threading.Event()
    calls = [0]

    def idle_worker() -> None:  # what the fetcher does on an empty queue
        while not stop.is_set():
            backend.lease(queue, 1, 30.0)
            backend.lease(queue, 1, 30.0, wait=0.25)
            calls[0] += 2

    cpu0, wall0 = time.process_time(), time.perf_counter()
    thread = threading.Thread(target=idle_worker)
    thread.start()
    time.sleep(IDLE_SECONDS)
    stop.set()
    thread.join()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    print(
        f"idle blocked worker: {100 * cpu / wall:.2f}% of one core "
        f"({calls[0] / wall:.1f} lease calls/s, wait=0.25 s)"
    )
    backend.purge(queue)
    backend.close()


def main() -> None:
    if len(sys.argv) > 1:
        run(sys.argv[1])
        return
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp)) as server:
        run(server.url())


if __name__ == "__main__":
    main()
