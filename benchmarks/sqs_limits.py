"""`python -m benchmarks.sqs_limits [--messages N]`: what over-limit messages cost on SQS.

Against a local SQS-compatible server (`moto_server`, started here) with
`locks=sqlite`, one worker of 10 slots: 90 % of the messages are limited
(`ConcurrencyLimit(2)` on one key, jobs of 20 ms), enqueued first; once the worker has
received each of them (run, or put back to wait), the other 10 %, without limits, are
enqueued, and the time they take is compared with the same messages alone on a fresh
queue: the speed they keep while the limited ones wait. Then, over `--window` seconds,
the SQS requests and lock-store calls per slot freed (each limited run frees one).

A third run tells the server's part: the unlimited messages on a queue where as many
messages as were waiting then are in flight, held by a plain consumer, not by tasuki.
The local server's receive walks every message of the queue, in flight or not, so it
slows down with depth (AWS does not); the speed kept beside that depth is tasuki's part.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.sqs import CREDENTIALS, counter, moto_server


def _count_locks(locks: Any) -> Counter[str]:
    calls: Counter[str] = Counter()
    for name in ("acquire", "renew", "release", "swap", "holder"):
        original = getattr(locks, name)

        def wrapped(*args: Any, _name: str = name, _f: Any = original, **kw: Any) -> Any:
            calls[_name] += 1
            return _f(*args, **kw)

        setattr(locks, name, wrapped)
    return calls


def run(
    endpoint: str,
    locks: Path,
    limited: int,
    free: int,
    window: float,
    in_flight: int = 0,
    after: float = 0.0,
) -> dict[str, Any]:
    """`limited` messages of one key first; once the worker has received each (run, or
    put back waiting), `free` unlimited ones: how long they take. Then `window` seconds
    more: the requests and lock-store calls per slot freed while the limited ones wait.
    `in_flight` messages are received first by a plain consumer and kept in flight; the
    unlimited ones are enqueued `after` seconds after the limited ones' first pass."""
    import tasuki

    prefix = f"l{uuid.uuid4().hex[:8]}-"
    url = f"sqs://us-east-1?endpoint_url={endpoint}&prefix={prefix}"
    app = tasuki.App(url + f"&locks=sqlite:///{locks}")
    sqs_calls = counter(app.backend.sqs.client)  # type: ignore[attr-defined]
    lock_calls = _count_locks(app.backend.locks)
    done: Counter[str] = Counter()
    mutex = threading.Lock()

    @app.job(queue="bench", concurrency_limit=tasuki.ConcurrencyLimit(2, key=lambda m: "k"))
    def scarce(i: int) -> None:
        time.sleep(0.02)
        with mutex:
            done["scarce"] += 1

    @app.job(queue="bench")
    def plenty(i: int) -> None:
        with mutex:
            done["plenty"] += 1

    def wait_for(check: Any, what: str) -> None:
        deadline = time.monotonic() + 600
        while not check():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} not done in 600 s: {dict(done)}")
            time.sleep(0.01)

    if in_flight:
        plenty.enqueue_many([(-1,) for _ in range(in_flight)])
        client = app.backend.sqs.client  # type: ignore[attr-defined]
        queue_url = client.get_queue_url(QueueName=f"{prefix}bench")["QueueUrl"]
        held = 0
        while held < in_flight:
            reply = client.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=3600
            )
            held += len(reply.get("Messages", []))
    scarce.enqueue_many([(i,) for i in range(limited)])
    worker = app.worker(concurrency=10)
    worker.start()
    # The first pass: every limited message received once, run or put back waiting (a
    # woken one is visible for a moment, hence the key's limit).
    first_pass = time.monotonic() + 120
    while limited and app.stats("bench")["ready"] > 2:
        if time.monotonic() > first_pass:
            break
        time.sleep(0.05)
    if limited:
        time.sleep(after)
    waiting_then = limited - done["scarce"]
    began = time.perf_counter()
    plenty.enqueue_many([(i,) for i in range(free)])
    wait_for(lambda: done["plenty"] >= free, "the unlimited")
    free_wall = time.perf_counter() - began
    sqs_calls.clear()
    lock_calls.clear()
    freed_before = done["scarce"]
    time.sleep(window if limited else 0.0)
    freed = done["scarce"] - freed_before
    sqs, locks_ = dict(sqs_calls), dict(lock_calls)
    worker.stop(grace=5)
    app.close()
    return {
        "sqs": sqs,
        "locks": locks_,
        "freed": freed,
        "waiting": limited - done["scarce"],
        "free_wall": free_wall,
        "waiting_then": waiting_then,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sqs_limits", description=__doc__)
    p.add_argument("--limited", type=int, default=450, help="limited messages (one key)")
    p.add_argument("--free", type=int, default=50, help="unlimited messages")
    p.add_argument("--window", type=float, default=30.0, help="seconds the costs are counted")
    p.add_argument(
        "--after",
        type=float,
        default=0.0,
        help="seconds after the limited ones' first pass the unlimited ones are enqueued",
    )
    args = p.parse_args(argv)
    os.environ.update(CREDENTIALS)
    with moto_server() as endpoint, tempfile.TemporaryDirectory() as tmp:
        mixed = run(
            endpoint, Path(tmp) / "a.db", args.limited, args.free, args.window, 0, args.after
        )
        alone = run(endpoint, Path(tmp) / "b.db", 0, args.free, args.window)
        depth = mixed["waiting_then"]
        deep = run(endpoint, Path(tmp) / "c.db", 0, args.free, args.window, depth)
    print(
        f"\n{args.limited} limited (ConcurrencyLimit 2 on one key, 20 ms jobs) + {args.free}"
        f" unlimited ({args.after:.0f} s after the first pass), one worker of 10 slots,"
        " local moto_server, locks=sqlite\n"
    )
    print(
        f"unlimited: {alone['free_wall']:.2f} s alone, {mixed['free_wall']:.2f} s while"
        f" {args.limited} limited wait: {alone['free_wall'] / mixed['free_wall']:.0%} of"
        " their speed kept"
    )
    print(
        f"beside {depth} in flight (as many as waited then) held by a plain consumer:"
        f" {deep['free_wall']:.2f} s"
        f" (the server's part): {deep['free_wall'] / mixed['free_wall']:.0%} kept beside"
        " the same depth"
    )
    freed = mixed["freed"]
    sqs = ", ".join(f"{k} {v}" for k, v in sorted(mixed["sqs"].items()))
    locks = ", ".join(f"{k} {v}" for k, v in sorted(mixed["locks"].items()))
    print(
        f"\nover {args.window:.0f} s after that: {freed} slots freed,"
        f" {mixed['waiting']} still waiting"
    )
    print(f"SQS requests: {sqs}")
    print(f"lock-store calls: {locks}")
    if freed:
        sqs_total, lock_total = sum(mixed["sqs"].values()), sum(mixed["locks"].values())
        print(
            f"per slot freed: {sqs_total / freed:.2f} SQS requests,"
            f" {lock_total / freed:.2f} lock-store calls; per waiting message per slot freed:"
            f" {sqs_total / freed / max(1, mixed['waiting']):.4f} SQS requests"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
