"""`python -m benchmarks.sql_limits`: what rate and concurrency limits cost the SQL backends.

For SQLite and PostgreSQL, through the backend (no worker, no jobs), the median and
99th percentile time of one call, its CPU time in this process, and the statements and
round trips it takes (counted as `benchmarks.sql_paths` counts them):
- a lease of 100 messages without limits (the path every queue takes);
- a lease of 100 messages each with a `ConcurrencyLimit(1)` of its own key among 1,000
  keys, all admitted (the previous batch acked first);
- a settle of 100 acks of such messages (their slots freed);
- a lease of 100 due messages of which 90 are over a concurrency limit held by
  another lease: 10 leased, 90 parked.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks.sql_paths import (
    Result,
    Statements,
    engine_urls,
    measure,
    print_results,
    schema_dropped,
    traced,
)
from tasuki.backends.base import Delivery, Envelope, Limit, Settle
from tasuki.backends.urls import backend_from_url

BATCH = 100
KEYS = 1_000


def run(url: str, calls: int) -> list[Result]:
    backend = backend_from_url(url)
    statements = Statements()
    body = b'{"args":[1],"kwargs":{}}'
    headers = {"tasuki-job": "noop"}

    def envelope(queue: str, *limits: Limit) -> Envelope:
        return Envelope(queue, uuid.uuid4().hex, body, headers, limits=limits)

    def slot(key: int, group: str) -> Limit:
        return Limit(f"concurrency:{group}:{key % KEYS}", "concurrency", 1)

    previous: list[Delivery] = []

    def admitted_batch(n: int) -> None:
        backend.ack([d.receipt for d in previous])
        previous.clear()
        backend.enqueue([envelope("k", slot(n * BATCH + i, "k")) for i in range(BATCH)])

    def lease_keys(_: object) -> None:
        previous.extend(backend.lease("k", BATCH, 60.0))
        assert len(previous) == BATCH, len(previous)

    def leased_limited(n: int) -> list[Settle]:
        backend.enqueue([envelope("s", slot(n * BATCH + i, "s")) for i in range(BATCH)])
        return [Settle.ack(d.receipt) for d in backend.lease("s", BATCH, 60.0)]

    hot = Limit("concurrency:bench:hot", "concurrency", 1)
    backend.enqueue([envelope("h", hot)])
    assert len(backend.lease("h", 1, 3600.0)) == 1  # the hot key's one slot, held

    def mixed(n: int) -> None:
        backend.enqueue([envelope("h", hot) if i % 10 else envelope("h") for i in range(BATCH)])

    def lease_mixed(_: object) -> None:
        leased = backend.lease("h", BATCH, 60.0)
        assert len(leased) == BATCH // 10, len(leased)
        backend.ack([d.receipt for d in leased])

    backend.enqueue([envelope("warm")])  # migrations, connections, the first clean-up
    cases: list[tuple[str, Callable[[int], Any], Callable[[Any], object]]] = [
        (
            f"lease {BATCH} plain",
            lambda n: backend.enqueue([envelope("l") for _ in range(BATCH)]),
            lambda _: backend.lease("l", BATCH, 60.0),
        ),
        (f"lease {BATCH} limited", admitted_batch, lease_keys),
        (f"ack {BATCH} limited", leased_limited, backend.settle),
        (f"lease {BATCH}, 90 over", mixed, lease_mixed),
    ]
    out = []
    with traced(backend, statements):
        for name, prepare, call in cases:
            out.append((name, *measure(statements, calls, prepare, call)))
    backend.close()
    return out


def flood(url: str, parked: int) -> tuple[float, float, int]:
    """`parked` messages of one key parked behind a holder whose worker died, all due
    again at its lease's expiry (the backstop), ahead of one message without limits:
    (seconds to park them the first time, seconds until a worker leasing 8 at a time
    gets the unlimited one after the expiry, lease calls it made)."""
    backend = backend_from_url(url)
    key = Limit("concurrency:flood", "concurrency", 1)
    body = b'{"args":[1],"kwargs":{}}'
    backend.enqueue([Envelope("f", "holder", body, limits=(key,))])
    holder_at = time.perf_counter()
    assert len(backend.lease("f", 1, 20.0)) == 1  # its worker dies: never settled
    for start in range(0, parked, 1_000):
        backend.enqueue(
            [Envelope("f", f"p{i}", body, limits=(key,)) for i in range(start, start + 1_000)]
        )
    backend.enqueue([Envelope("f", "free", body)])
    began = time.perf_counter()
    first = backend.lease("f", 8, 60.0)
    parking = time.perf_counter() - began
    assert [d.id for d in first] == ["free"], first
    assert time.perf_counter() - holder_at < 20.0, "parking outlasted the holder's lease"
    time.sleep(max(0.0, holder_at + 20.2 - time.perf_counter()))  # all due again
    backend.enqueue([Envelope("f", "free2", body)])  # behind them
    began, calls, got = time.perf_counter(), 0, False
    while not got:
        calls += 1
        got = any(d.id == "free2" for d in backend.lease("f", 8, 60.0))
    again = time.perf_counter() - began
    backend.close()
    return parking, again, calls


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sql_limits", description=__doc__)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--postgres", default=os.environ.get("BENCH_POSTGRES_URL", ""))
    p.add_argument("--only", choices=("sqlite", "postgresql"))
    p.add_argument("--flood", type=int, default=0, help="measure `flood` with this many")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        urls, schema = engine_urls(tmp, args.postgres, "limits")
        for engine, url in urls.items():
            if args.only and engine != args.only:
                continue
            load = os.getloadavg()[0]
            with schema_dropped(engine, args.postgres, schema):
                if args.flood:
                    parking, again, calls = flood(url, args.flood)
                    print(
                        f"{engine:10} {args.flood} parked: parked in {parking:.2f} s; due again"
                        f" at the expiry, re-parked in {again:.2f} s over {calls} leases of 8"
                        f"  (load {load:.1f})",
                        flush=True,
                    )
                    continue
                print_results(engine, run(url, args.calls), load, 20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
