"""`python -m benchmarks.flow_steps`: what a workflow step costs against a plain job.

On `memory://` unless `--url` names another store (a template: `{run}` becomes a fresh
number for each run, so that each starts from an empty store, e.g.
`--url 'sqlite:////tmp/flows/{run}.db'`), in one process:
`--flows` chains of three no-op steps (`chain(a.step(0), a.step(), a.step())`), against
three times as many plain messages of the same no-op job. Each side is timed in two
parts: enqueue (one `flow.enqueue()` per chain; one `job.enqueue()` per plain message,
the call a user makes) and drain (`worker.run(until_idle=True)` from the first lease to
idle). A step's drain includes what a plain job's does not: reading its plan, sealing its
successor, and the backend applying the follow-ups with the ack. A third side, "by
hand", is what a user wrote before workflows: each job enqueues the next from inside it
(`job.enqueue` through the producer and its middleware). Rounds alternate the sides; the
medians are printed, per message.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from typing import Any

import tasuki

URL = "memory://"
_runs = itertools.count()


def _url() -> str:
    """The store of the next run: `URL` with its `{run}` a number no run used before."""
    return URL.replace("{run}", str(next(_runs)))


def _app() -> tuple[tasuki.App, Any]:
    app = tasuki.App(_url())

    @app.job()
    def step(x: int) -> int:
        return x + 1

    return app, step


def run_plain(messages: int, concurrency: int) -> tuple[float, float]:
    app, step = _app()
    t0 = time.perf_counter()
    for i in range(messages):
        step.enqueue(i)
    t1 = time.perf_counter()
    app.worker(concurrency=concurrency).run(until_idle=True, timeout=600.0)
    t2 = time.perf_counter()
    assert app.stats()["ready"] == 0
    app.close()
    return (t1 - t0) / messages, (t2 - t1) / messages


def run_by_hand(flows: int, concurrency: int) -> tuple[float, float]:
    """What a user wrote before workflows: each job enqueues the next from inside it."""
    app = tasuki.App(_url())

    @app.job()
    def hop(x: int, left: int) -> int:
        if left:
            hop.enqueue(x + 1, left - 1)
        return x + 1

    t0 = time.perf_counter()
    for i in range(flows):
        hop.enqueue(i, 2)
    t1 = time.perf_counter()
    app.worker(concurrency=concurrency).run(until_idle=True, timeout=600.0)
    t2 = time.perf_counter()
    app.close()
    steps = 3 * flows
    return (t1 - t0) / steps, (t2 - t1) / steps


def run_flows(flows: int, concurrency: int) -> tuple[float, float]:
    app, step = _app()
    t0 = time.perf_counter()
    ids = [tasuki.chain(step.step(i), step.step(), step.step()).enqueue() for i in range(flows)]
    t1 = time.perf_counter()
    app.worker(concurrency=concurrency).run(until_idle=True, timeout=600.0)
    t2 = time.perf_counter()
    assert app.flow_result(ids[-1], timeout=0) == flows - 1 + 3
    app.close()
    steps = 3 * flows
    return (t1 - t0) / steps, (t2 - t1) / steps


def main(argv: list[str] | None = None) -> None:
    global URL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flows", type=int, default=2000, help="3-step chains per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-c", "--concurrency", type=int, default=8)
    parser.add_argument("--url", default=URL, help="the store; {run}: a fresh one per run")
    args = parser.parse_args(argv)
    URL = args.url
    plain: list[tuple[float, float]] = []
    steps: list[tuple[float, float]] = []
    by_hand: list[tuple[float, float]] = []
    for _ in range(args.rounds):
        plain.append(run_plain(3 * args.flows, args.concurrency))
        steps.append(run_flows(args.flows, args.concurrency))
        by_hand.append(run_by_hand(args.flows, args.concurrency))

    def us(values: list[float]) -> float:
        return statistics.median(values) * 1e6

    print(
        f"{args.url}, {args.flows} chains of 3 vs {3 * args.flows} plain jobs, "
        f"-c {args.concurrency}, median of {args.rounds} rounds, per message:"
    )
    print(f"{'':14}{'enqueue':>12}{'drain':>12}{'total':>12}")
    for name, rows in (("plain job", plain), ("flow step", steps), ("by hand", by_hand)):
        enq, drain = us([r[0] for r in rows]), us([r[1] for r in rows])
        total = us([r[0] + r[1] for r in rows])
        print(f"{name:14}{enq:>10.1f}us{drain:>10.1f}us{total:>10.1f}us")
    p = us([r[0] + r[1] for r in plain])
    s = us([r[0] + r[1] for r in steps])
    d = us([r[1] for r in steps]) / us([r[1] for r in plain])
    h = us([r[0] + r[1] for r in by_hand])
    print(
        f"a step costs {s / p:.2f}x a plain job end to end ({d:.2f}x in the drain), "
        f"{s / h:.2f}x a job that enqueues the next itself"
    )


if __name__ == "__main__":
    main()
