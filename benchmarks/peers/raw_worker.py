"""The floor: the least a Python consumer with leases must do, in one process, one thread.

One round trip per batch: a Lua script acks the previous batch (ZREM from the in-flight
set) and leases the next one (LPOP N, ZADD each with a deadline). Each body is decoded
with orjson and dispatched by name to the same no-op job as every other system. When the
list is empty it blocks in BLMOVE (a no-op rotation of the list's head) instead of polling.

    python -m benchmarks.peers.raw_worker REDIS_URL [BATCH]
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson
import redis

from benchmarks.marks import mark
from benchmarks.shape_jobs import run as shape

READY = "raw:ready"
INFLIGHT = "raw:inflight"
LEASE = 30.0
BATCH = 256

FETCH_AND_ACK = """
if #ARGV > 2 then
    redis.call('ZREM', KEYS[2], unpack(ARGV, 3))
end
local batch = redis.call('LPOP', KEYS[1], tonumber(ARGV[1]))
if not batch then
    return {}
end
local deadline = tonumber(ARGV[2])
for _, body in ipairs(batch) do
    redis.call('ZADD', KEYS[2], deadline, body)
end
return batch
"""

JOBS: dict[str, Callable[..., Any]] = {"noop": mark, "shape": shape}


def encode(i: int, job: str = "noop") -> bytes:
    return orjson.dumps({"job": job, "args": [i]})


def run(url: str, batch: int) -> None:
    client = redis.Redis.from_url(url)
    fetch_and_ack = client.register_script(FETCH_AND_ACK)
    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    done: list[bytes] = []
    while not stop:
        got = fetch_and_ack(keys=[READY, INFLIGHT], args=[batch, time.time() + LEASE, *done])
        done = []
        if not got:
            client.blmove(READY, READY, 1.0, "LEFT", "LEFT")
            continue
        for body in got:
            message = orjson.loads(body)
            JOBS[message["job"]](*message["args"])
            done.append(body)


if __name__ == "__main__":
    run(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else BATCH)
