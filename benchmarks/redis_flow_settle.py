"""What a workflow step's effects cost Redis's settle: 100 acks per `settle.lua` call,
plain against step acks that carry their flow's follow-ups.

    .venv/bin/python -m benchmarks.redis_flow_settle

One redis-server of our own holds three queues of the same messages. `plain`: acks
alone. `chain`: each ack is a chain step's, with its result and its successor
(`Effects(result, flow, enqueue=(next,))`: the flow's cancelled flag read, the
successor enqueued as enqueue.lua would). `group`: each ack fills one slot of its
flow's barrier of 100 (HSETNX, HLEN) with its callback, so one settle in a hundred
joins the barrier and enqueues the callback. Rounds alternate the queues, and the
server times every call itself (SLOWLOG with a threshold of 0): what is printed is
Redis CPU per settle call, free of the client's and the network's noise.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasuki.backends.base import Effects, Envelope, Fill, FlowRecord, FlowStep, Settle
from tasuki.backends.redis.backend import RedisBackend
from tasuki.backends.redis.scripts import SCRIPTS
from tasuki.backends.urls import backend_from_url
from tasuki.testing.servers import RedisServer

ROUNDS, BATCH = 200, 100
RESULT = b'{"id": 12345, "status": "ok"}'
BODY = b'{"args": [12345], "kwargs": {}}'
HEADERS = {"tasuki-job": "bench.job", "tasuki-content-type": "json"}


def _message(queue: str, id: str) -> Envelope:
    return Envelope(queue, id, BODY, HEADERS, keep_id=3600.0)


def _effects(queue: str, round_: int, n: int) -> Effects | None:
    """The follow-ups of message `n` of round `round_` in `queue`."""
    flow = f"{queue}-{round_}"
    if queue == "chain":
        return Effects(result=RESULT, flow=flow, enqueue=(_message("next", f"{flow}.{n}.1"),))
    if queue == "group":
        fill = Fill(flow, "0", n, BATCH)
        return Effects(
            result=RESULT, flow=flow, fills=(fill,), enqueue=(_message("next", f"{flow}.1"),)
        )
    return None


def main() -> None:
    with RedisServer(Path(tempfile.mkdtemp())) as server:
        backend = backend_from_url(f"{server.url()}?prefix=fs:")
        assert isinstance(backend, RedisBackend)
        conn = backend.redis.connection()
        queues = ("plain", "chain", "group")
        for round_ in range(ROUNDS):
            for queue in queues:
                first = [_message(queue, f"{queue}-{round_}.0.{n}") for n in range(BATCH)]
                if queue == "plain":
                    backend.enqueue(first)
                    continue
                steps = tuple(FlowStep(f"0.{n}", "job", queue, e.id) for n, e in enumerate(first))
                record = FlowRecord(f"{queue}-{round_}", time.time(), 3600.0, steps)
                assert backend.start_flow(record, first)
        conn.command("CONFIG", "SET", "slowlog-log-slower-than", "0")
        conn.command("CONFIG", "SET", "slowlog-max-len", "1000000")
        settle_sha = SCRIPTS.settle.sha.encode()
        conn.command("SLOWLOG", "RESET")
        for round_ in range(ROUNDS):
            order = queues if round_ % 2 == 0 else queues[::-1]
            for queue in order:
                leased = sorted(backend.lease(queue, BATCH, 30.0), key=lambda d: d.id)
                assert len(leased) == BATCH
                items = []
                for d in leased:
                    n = int(d.id.rsplit(".", 1)[1])
                    items.append(Settle.ack(d.receipt, _effects(queue, round_, n)))
                assert backend.settle(items) == [True] * BATCH
        times: dict[str, list[int]] = {name: [] for name in queues}
        for entry in conn.command("SLOWLOG", "GET", "-1"):
            call = entry[3]
            if call[0] == b"EVALSHA" and call[1] == settle_sha:
                base = call[3].decode()  # the first key: the queue's `waiting`
                name = base.split("{", 1)[1].split("}", 1)[0]
                times[name].append(int(entry[2]))
        chained = backend.stats("next").ready
        backend.close()
    assert chained == ROUNDS * BATCH + ROUNDS, chained
    for name, calls in times.items():
        print(
            f"settle of {BATCH} acks, {name:5}: median {statistics.median(calls):7.1f} µs"
            f"  mean {statistics.mean(calls):7.1f} µs  ({len(calls)} calls)"
        )


if __name__ == "__main__":
    main()
