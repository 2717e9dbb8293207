"""What keeping results costs Redis's settle: 100 acks per `settle.lua` call, with and
without a result record.

    .venv/bin/python -m benchmarks.redis_results_settle

One redis-server of our own holds two queues filled with the same messages, one
enqueued with `keep_result` (each ack writes its record, `r:<id>` with its TTL, and
pushes its waiters' wake-up) and one without (each ack batch only asks the `results`
hash, one HMGET). Leases of 100 and their acks alternate between the queues, so that
whatever else the machine does weighs on both alike, and the server times every call
itself (SLOWLOG with a threshold of 0): what is printed is Redis CPU per settle call,
free of the client's and the network's noise.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasuki.backends.base import Effects, Envelope, Settle
from tasuki.backends.redis.backend import RedisBackend
from tasuki.backends.redis.scripts import SCRIPTS
from tasuki.backends.urls import backend_from_url
from tasuki.testing.servers import RedisServer

MESSAGES, BATCH = 50_000, 100
RESULT = b'{"id": 12345, "status": "ok"}'


def main() -> None:
    with RedisServer(Path(tempfile.mkdtemp())) as server:
        backend = backend_from_url(f"{server.url()}?prefix=rs:")
        assert isinstance(backend, RedisBackend)
        conn = backend.redis.connection()
        body = b'{"args": [12345], "kwargs": {}}'
        headers = {"tasuki-job": "bench.job", "tasuki-content-type": "json"}
        queues = {"without": 0.0, "with": 3600.0}
        for queue, keep in queues.items():
            for start in range(0, MESSAGES, 1000):
                batch = range(start, start + 1000)
                backend.enqueue(
                    [Envelope(queue, f"m{i}", body, headers, keep_result=keep) for i in batch]
                )
        conn.command("CONFIG", "SET", "slowlog-log-slower-than", "0")
        conn.command("CONFIG", "SET", "slowlog-max-len", "1000000")
        settle_sha = SCRIPTS.settle.sha.encode()
        conn.command("SLOWLOG", "RESET")
        for round_ in range(MESSAGES // BATCH):
            order = list(queues) if round_ % 2 == 0 else list(queues)[::-1]
            for queue in order:
                leased = backend.lease(queue, BATCH, 30.0)
                effects = Effects(result=RESULT) if queues[queue] else None
                assert (
                    backend.settle([Settle.ack(d.receipt, effects) for d in leased])
                    == [True] * BATCH
                )
        times: dict[str, list[int]] = {name: [] for name in queues}
        for entry in conn.command("SLOWLOG", "GET", "-1"):
            call = entry[3]
            if call[0] == b"EVALSHA" and call[1] == settle_sha:
                base = call[3].decode()  # the first key: the queue's `waiting`
                name = base.split("{", 1)[1].split("}", 1)[0]
                times[name].append(int(entry[2]))
        backend.close()
    for name, calls in times.items():
        print(
            f"settle of {BATCH} acks, {name:7} results: median {statistics.median(calls):7.1f} µs"
            f"  mean {statistics.mean(calls):7.1f} µs  ({len(calls)} calls)"
        )


if __name__ == "__main__":
    main()
