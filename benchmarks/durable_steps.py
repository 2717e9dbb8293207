"""`./dev bench steps`: what a recorded durable step costs, against a plain job, and DBOS.

On every backend that has `durable_steps` (asked of the backend, not known by name:
memory, SQLite, PostgreSQL, Redis, SQS against a local moto_server with a SQLite lock
store, whose costs are moto's and not AWS's), each in a store of its own, in one
process: `--jobs` jobs of three recorded no-op steps (`ctx.step` three times), against as
many plain no-op jobs. Each side is timed as enqueue (one `job.enqueue()` per job) plus
drain (`worker.run(until_idle=True)`), per job; a step's cost is what the 3-step job
costs more than the plain one, divided by three, and its ratio is that over the plain
job's whole cost (lease, run and ack). At the store itself, one `record_step` per leased
message is timed against one `ack` per message: the target is a step record at most
1.5x an ack.

Beside it, the same workflow on DBOS (its Python SDK, `benchmarks.dbos_steps`, in a
process of its own, on the local PostgreSQL, in a database of its own): three
`@DBOS.step()` no-ops in a `@DBOS.workflow()`, against a workflow with none, both
enqueued on a DBOS queue and awaited. Rounds alternate the sides; medians are printed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import tasuki
from tasuki.backends.base import Envelope
from tasuki.core.records import StepRecord
from tasuki.testing.servers import DUMMY_AWS_ENV, MotoServer, PostgresServer, RedisServer

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.5


def noop(i: int) -> int:
    return i


def _app(url: str) -> tuple[tasuki.App, Any, Any]:
    app = tasuki.App(url)

    @app.job(name="plain")
    def plain(i: int) -> int:
        return i

    @app.job(name="three")
    def three(i: int) -> int:
        ctx = tasuki.current()
        a = ctx.step("one", noop, i)
        b = ctx.step("two", noop, a)
        return int(ctx.step("three", noop, b))

    return app, plain, three


def one_side(url: str, which: str, jobs: int, concurrency: int) -> tuple[float, float]:
    """(enqueue, drain) seconds per job of one side, in a fresh store."""
    app, plain, three = _app(url)
    job = plain if which == "plain" else three
    try:
        t0 = time.perf_counter()
        for i in range(jobs):
            job.enqueue(i)
        t1 = time.perf_counter()
        app.worker(concurrency=concurrency).run(until_idle=True, timeout=600.0)
        t2 = time.perf_counter()
        left = app.stats("default")
        assert left["ready"] + left["in_flight"] + left["delayed"] == 0, left
    finally:
        app.close()
    return (t1 - t0) / jobs, (t2 - t1) / jobs


def store_ops(url: str, jobs: int) -> tuple[float, float]:
    """At the store itself, one call per message: (record_step, ack) seconds each. The
    messages are leased first, all of them; each gets one step record, then its ack."""
    app = tasuki.App(url)
    backend = app.backend
    try:
        backend.enqueue([Envelope(queue="ops", id=f"m{i}", body=b"x") for i in range(jobs)])
        leased = []
        while batch := backend.lease("ops", 100, 300.0):
            leased.extend(batch)
        assert len(leased) == jobs, len(leased)
        t0 = time.perf_counter()
        for d in leased:
            assert backend.record_step(d.receipt, StepRecord("s", 1, b"1", time.time(), 0.0))
        t1 = time.perf_counter()
        for d in leased:
            assert backend.ack([d.receipt]) == [True]
        t2 = time.perf_counter()
    finally:
        app.close()
    return (t1 - t0) / jobs, (t2 - t1) / jobs


@contextlib.contextmanager
def stores(workdir: Path, only: set[str] | None) -> Iterator[list[tuple[str, Callable[[], str]]]]:
    """Each backend's name and a maker of fresh store URLs, with its server running."""
    made: list[tuple[str, Callable[[], str]]] = []
    with contextlib.ExitStack() as stack:

        def want(name: str) -> bool:
            return only is None or name in only

        if want("memory"):
            made.append(("memory", lambda: "memory://"))
        if want("sqlite"):
            made.append(("sqlite", lambda: f"sqlite:///{workdir / uuid.uuid4().hex}.db"))
        if want("postgresql"):
            pg = PostgresServer(workdir / "postgres").start()
            stack.callback(pg.stop)
            stack.callback(pg.drop_schemas)
            made.append(("postgresql", lambda: pg.url(f"steps_{uuid.uuid4().hex[:10]}")))
        if want("redis"):
            redis = RedisServer(workdir / "redis")
            redis.start()
            stack.callback(redis.stop)
            made.append(
                ("redis", lambda: f"redis://127.0.0.1:{redis.port}/0?prefix={uuid.uuid4().hex}:")
            )
        if want("sqs") and shutil.which("moto_server", path=_path()):
            os.environ.update(DUMMY_AWS_ENV)
            moto = MotoServer().start()
            stack.callback(moto.stop)
            made.append(
                (
                    "sqs",
                    lambda: (
                        f"sqs://us-east-1?endpoint_url=http://127.0.0.1:{moto.port}"
                        f"&prefix=s{uuid.uuid4().hex[:8]}-"
                        f"&locks=sqlite:///{workdir / uuid.uuid4().hex}.db"
                    ),
                )
            )
        if want("sqs") and not shutil.which("moto_server", path=_path()):
            print(f"{'sqs':12} skipped: moto_server is not installed here", flush=True)
        yield made


def _path() -> str:
    """Where this interpreter's own scripts are, then the PATH (moto_server is one)."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def durable(url: str) -> bool:
    app = tasuki.App(url)
    try:
        return app.backend.capabilities.durable_steps
    finally:
        app.close()


def dbos_side(jobs: int, rounds: int, concurrency: int, url: str) -> dict[str, Any]:
    """DBOS's figures from its own process (`benchmarks.dbos_steps`), or why none."""
    cmd = [sys.executable, "-m", "benchmarks.dbos_steps", "--jobs", str(jobs)]
    cmd += ["--rounds", str(rounds), "-c", str(concurrency), "--url", url]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
    if out.returncode != 0:
        return {"error": (out.stderr or out.stdout).strip().splitlines()[-1:]}
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def us(values: list[float]) -> float:
    return statistics.median(values) * 1e6


def summary(name: str, plain: list[tuple[float, float]], three: list[tuple[float, float]]) -> dict:
    p = us([e + d for e, d in plain])
    t = us([e + d for e, d in three])
    step = (t - p) / 3
    return {
        "backend": name,
        "plain_us": round(p, 1),
        "three_steps_us": round(t, 1),
        "per_step_us": round(step, 1),
        "step_over_plain": round(step / p, 2),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="./dev bench steps", description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=2000, help="jobs per side and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("-c", "--concurrency", type=int, default=8)
    p.add_argument("--only", default="", help="comma-separated backends (and 'dbos')")
    p.add_argument("--quick", action="store_true", help="a smoke run: 50 jobs, one round")
    p.add_argument("--json", type=Path, help="also write the figures to this file")
    a = p.parse_args(argv)
    jobs, rounds = (50, 1) if a.quick else (a.jobs, a.rounds)
    only = {s for s in a.only.split(",") if s} or None
    rows: list[dict[str, Any]] = []
    print(
        f"{jobs} jobs of 3 recorded steps vs {jobs} plain jobs, -c {a.concurrency}, "
        f"median of {rounds} round(s), per job (enqueue + drain); load "
        f"{os.getloadavg()[0]:.2f}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-steps-") as tmp, stores(Path(tmp), only) as made:
        for name, fresh in made:
            try:
                has = durable(fresh())
            except Exception as exc:  # a backend whose client is not installed here
                print(f"{name:12} skipped: {type(exc).__name__}: {exc}", flush=True)
                continue
            if not has:
                print(f"{name:12} skipped: no durable_steps", flush=True)
                continue
            plain: list[tuple[float, float]] = []
            three: list[tuple[float, float]] = []
            ops: list[tuple[float, float]] = []
            for _ in range(rounds):
                plain.append(one_side(fresh(), "plain", jobs, a.concurrency))
                three.append(one_side(fresh(), "three", jobs, a.concurrency))
                ops.append(store_ops(fresh(), jobs))
            rows.append(summary(name, plain, three))
            record, ack = us([r[0] for r in ops]), us([r[1] for r in ops])
            rows[-1].update(
                record_step_us=round(record, 1),
                ack_us=round(ack, 1),
                record_over_ack=round(record / ack, 2),
            )
            _print(rows[-1])
        if only is None or "dbos" in only:
            pg = PostgresServer(Path(tmp) / "postgres-dbos").start()
            try:
                url = f"postgresql://postgres@127.0.0.1:{pg.port}/tasuki_bench_dbos"
                got = dbos_side(jobs, rounds, a.concurrency, url)
            finally:
                pg.stop()
            if "error" in got:
                print(f"{'dbos':12} failed: {got['error']}", flush=True)
            else:
                rows.append(summary("dbos", got["plain"], got["three"]))
                _print(rows[-1])
    dbos = next((r for r in rows if r["backend"] == "dbos"), None)
    if dbos is not None:
        for r in rows:
            if r is not dbos:
                job = r["three_steps_us"] / dbos["three_steps_us"]
                step = r["per_step_us"] / dbos["per_step_us"]
                print(f"{r['backend']:12} vs DBOS: a 3-step job {job:.2f}x, a step {step:.2f}x")
    if a.json is not None:
        a.json.write_text(json.dumps({"jobs": jobs, "rounds": rounds, "rows": rows}, indent=1))
    return 0 if rows else 1


def _print(r: dict[str, Any]) -> None:
    print(
        f"{r['backend']:12} plain {r['plain_us']:9.1f}us  3 steps {r['three_steps_us']:9.1f}us  "
        f"a step {r['per_step_us']:8.1f}us = {r['step_over_plain']:.2f}x a plain job",
        flush=True,
    )
    if "ack_us" in r:
        verdict = "ok" if r["record_over_ack"] <= TARGET else "OVER"
        print(
            f"{'':12} at the store: record_step {r['record_step_us']:8.1f}us, ack "
            f"{r['ack_us']:8.1f}us: {r['record_over_ack']:.2f}x an ack, {verdict} "
            f"(target {TARGET}x)",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
