"""`./dev bench sqs [--messages N]`: SQS requests and worker CPU per processed message.

Against a local SQS-compatible server (`moto_server`, started here on a free loopback
port and stopped by its pid), three consumers process the same N no-op messages:

- tasuki: `enqueue_many`, then a worker (`--concurrency`, default 20 slots; it leases
  half its slots at a time, so over 20 a lease takes several receives) until idle;
- tasuki with priorities: the same, a third of the messages at each of levels 0, 5
  and 9 (three SQS queues, each lease asking them from the highest down);
- loop-1: what most hand-written consumers do: send one by one, then receive 1 /
  delete 1;
- loop-10: receive 10, delete each one by one (Shoryuken's default `auto_delete`).

Requests are counted with a botocore `before-call` hook on each client; CPU is this
process's (the server runs in its own). The local server is far slower than AWS and
slows down with depth, so wall times here mean little: requests and CPU are the point.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def moto_server() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    binary = str(Path(sys.executable).parent / "moto_server")
    proc = subprocess.Popen(
        [binary, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(10)


def counter(client: Any) -> Counter[str]:
    calls: Counter[str] = Counter()

    def count(event_name: str, **_: Any) -> None:
        calls[event_name.rsplit(".", 1)[-1]] += 1

    client.meta.events.register("before-call.sqs", count)
    return calls


def measured(run: Callable[[], None]) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    return time.process_time() - cpu, time.perf_counter() - wall


def bench_tasuki(
    endpoint: str, n: int, locks: Path | None, slots: int, levels: tuple[int, ...] = (0,)
) -> dict[str, Any]:
    import tasuki

    prefix = f"b{uuid.uuid4().hex[:8]}-"
    url = f"sqs://us-east-1?endpoint_url={endpoint}&prefix={prefix}"
    app = tasuki.App(url + (f"&locks=sqlite:///{locks}" if locks else ""))
    calls = counter(app.backend.sqs.client)  # type: ignore[attr-defined]
    done = [0]

    @app.job(queue="bench")
    def noop(i: int) -> None:
        done[0] += 1

    for k, level in enumerate(levels):  # an equal share per priority level (an SQS queue each)
        noop.options(priority=level).enqueue_many([(i,) for i in range(k, n, len(levels))])
    sent = sum(calls.values())
    calls.clear()
    cpu, wall = measured(lambda: app.worker(concurrency=slots).run(until_idle=True, timeout=600))
    app.close()
    assert done[0] >= n, f"tasuki processed {done[0]} of {n}"
    return {"send": sent, "process": dict(calls), "cpu": cpu, "wall": wall}


def bench_loop(endpoint: str, n: int, receive: int) -> dict[str, Any]:
    import boto3

    client = boto3.client("sqs", region_name="us-east-1", endpoint_url=endpoint)
    calls = counter(client)
    url = client.create_queue(QueueName=f"loop{receive}-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    for i in range(n):
        client.send_message(QueueUrl=url, MessageBody=str(i))
    sent = sum(calls.values())
    calls.clear()
    done = [0]

    def consume() -> None:
        empty = 0
        while done[0] < n and empty < 3:
            got = client.receive_message(
                QueueUrl=url, MaxNumberOfMessages=receive, WaitTimeSeconds=0
            ).get("Messages", [])
            empty = 0 if got else empty + 1
            for message in got:
                int(message["Body"])  # the no-op job
                client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                done[0] += 1

    cpu, wall = measured(consume)
    client.close()
    return {"send": sent, "process": dict(calls), "cpu": cpu, "wall": wall}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="./dev bench sqs", description=__doc__)
    p.add_argument("--messages", type=int, default=500, help="messages per consumer")
    p.add_argument("--concurrency", type=int, default=20, help="tasuki worker slots")
    args = p.parse_args(argv)
    n, slots = args.messages, args.concurrency
    os.environ.update(CREDENTIALS)
    rows = []
    with moto_server() as endpoint, tempfile.TemporaryDirectory() as tmp:
        locks = Path(tmp) / "locks.db"
        rows.append(("tasuki, locks=sqlite (fenced)", bench_tasuki(endpoint, n, locks, slots)))
        rows.append(("tasuki, no locks=", bench_tasuki(endpoint, n, None, slots)))
        rows.append(
            (
                "tasuki, locks=sqlite, priorities 0/5/9 (3 SQS queues)",
                bench_tasuki(endpoint, n, locks, slots, (0, 5, 9)),
            )
        )
        rows.append(("loop: receive 1, delete 1", bench_loop(endpoint, n, 1)))
        rows.append(("loop: receive 10, delete each", bench_loop(endpoint, n, 10)))
    print(f"\n{n} messages each, local moto_server, tasuki with {slots} slots\n")
    print(
        "| consumer | enqueue req/msg | processing req/msg | worker CPU µs/msg"
        " | processing wall s | requests |"
    )
    print("|---|---|---|---|---|---|")
    for name, r in rows:
        processing = sum(r["process"].values())
        detail = ", ".join(f"{k} {v}" for k, v in sorted(r["process"].items()))
        print(
            f"| {name} | {r['send'] / n:.2f} | {processing / n:.3f} |"
            f" {r['cpu'] / n * 1e6:,.0f} | {r['wall']:.1f} | {detail} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
