"""`python -m benchmarks.sql_paths`: what one call on the hot path costs the SQL backends.

For SQLite and PostgreSQL, each operation a producer or a worker repeats, called many
times through the backend (no worker, no jobs): the median and 99th percentile time of
one call; the CPU time this process spent in it (on SQLite, all of the work, and less at
the mercy of a busy machine than the wall time); the statements it runs (BEGIN and
COMMIT count; PostgreSQL's pipelined `executemany` counts one per parameter set) and, on
PostgreSQL, the round trips it waits for (a pipelined `executemany` is one). They are
counted by the engine's client, not by tasuki: SQLite's trace callback, psycopg's cursor
and transaction.

To compare two trees, run it with each on `PYTHONPATH`, alternately:

    PYTHONPATH=/path/to/other/src python -m benchmarks.sql_paths
    python -m benchmarks.sql_paths
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import tasuki
from tasuki.backends.base import Backend, Envelope, Settle, UniqueClaim
from tasuki.backends.urls import backend_from_url
from tasuki.core.message import ErrorInfo

BATCH = 100


class Statements:
    """Counts the statements the engine's client sends, and the round trips it waits
    for, while `on`."""

    def __init__(self) -> None:
        self.count = 0
        self.trips = 0
        self.on = False

    def add(self, n: int = 1, trips: int = 0) -> None:
        if self.on:
            self.count += n
            self.trips += trips


@contextlib.contextmanager
def traced(backend: Backend, statements: Statements) -> Iterator[None]:
    if backend.url.startswith("sqlite"):
        conn = backend.sqlite.conn()  # type: ignore[attr-defined]
        conn.set_trace_callback(lambda _sql: statements.add())
        try:
            yield
        finally:
            conn.set_trace_callback(None)
        return
    import psycopg

    cursor_execute = psycopg.Cursor.execute
    cursor_many = psycopg.Cursor.executemany
    transaction = psycopg.Connection.transaction

    def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if query != "":  # the pool's idle check
            statements.add(1, 1)
        return cursor_execute(self, query, *args, **kwargs)

    def many(self: Any, query: Any, params: Any, *args: Any, **kwargs: Any) -> Any:
        params = list(params)
        statements.add(len(params), 1)
        return cursor_many(self, query, params, *args, **kwargs)

    def begin(self: Any, *args: Any, **kwargs: Any) -> Any:
        statements.add(2, 2)  # BEGIN, COMMIT
        return transaction(self, *args, **kwargs)

    with (
        mock.patch.object(psycopg.Cursor, "execute", execute),
        mock.patch.object(psycopg.Cursor, "executemany", many),
        mock.patch.object(psycopg.Connection, "transaction", begin),
    ):
        yield


Result = tuple[str, float, float, float, float, float]


def measure(
    statements: Statements,
    calls: int,
    prepare: Callable[[int], Any],
    call: Callable[[Any], object],
) -> tuple[float, float, float, float, float]:
    """(median µs, p99 µs, median CPU µs, statements, round trips per call) of
    `call(prepare(n))`."""
    times, cpu, sent, trips = [], [], 0, 0
    for n in range(calls):
        arg = prepare(n)
        statements.count, statements.trips, statements.on = 0, 0, True
        start, cpu_start = time.perf_counter(), time.process_time()
        call(arg)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu_start)
        statements.on = False
        sent += statements.count
        trips += statements.trips
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    median_cpu = statistics.median(cpu) * 1e6
    return statistics.median(times) * 1e6, p99 * 1e6, median_cpu, sent / calls, trips / calls


def run(url: str, calls: int) -> list[Result]:
    backend = backend_from_url(url)
    statements = Statements()
    out: list[Result] = []
    body = b'{"args":[1],"kwargs":{}}'
    headers = {"tasuki-job": "noop"}
    error = ErrorInfo("RuntimeError", "boom", "Traceback ...")

    def envelope(queue: str, **kw: Any) -> Envelope:
        return Envelope(queue, uuid.uuid4().hex, body, headers, **kw)

    def leased(queue: str, count: int) -> list[Any]:
        backend.enqueue([envelope(queue) for _ in range(count)])
        return backend.lease(queue, count, 60.0)

    backend.enqueue([envelope("warm")])  # migrations, connections, the first clean-up
    with traced(backend, statements):
        cases: list[tuple[str, Callable[[int], Any], Callable[[Any], object]]] = [
            ("enqueue 1", lambda n: [envelope("e1")], backend.enqueue),
            (
                f"enqueue {BATCH}",
                lambda n: [envelope("eb") for _ in range(BATCH)],
                backend.enqueue,
            ),
            (
                "enqueue 1 unique",
                lambda n: [envelope("eu", unique=UniqueClaim(f"u{n}", 60.0))],
                backend.enqueue,
            ),
            (
                f"lease {BATCH}",
                lambda n: backend.enqueue([envelope("l") for _ in range(BATCH)]),
                lambda _: backend.lease("l", BATCH, 60.0),
            ),
            (
                f"settle {BATCH} acks",
                lambda n: [Settle.ack(d.receipt) for d in leased("a", BATCH)],
                backend.settle,
            ),
            (
                f"settle {BATCH} mixed",
                lambda n: [
                    Settle.ack(d.receipt)
                    if i % 10 < 8
                    else Settle.release(d.receipt, 60.0, True, error)
                    if i % 10 == 8
                    else Settle.dead(d.receipt, "failed", error)
                    for i, d in enumerate(leased("m", BATCH))
                ],
                backend.settle,
            ),
            ("stats", lambda n: None, lambda _: backend.stats("l")),
        ]
        for name, prepare, call in cases:
            out.append((name, *measure(statements, calls, prepare, call)))
    backend.close()
    return out


POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"


def engine_urls(tmp: str, postgres: str, stem: str) -> tuple[dict[str, str], str]:
    """The URLs of a fresh SQLite file under `tmp` and of a fresh schema on `postgres`
    (the local server when empty), and that schema's name."""
    base = postgres or POSTGRES
    schema = f"{stem}_{uuid.uuid4().hex[:8]}"
    return {
        "sqlite": f"sqlite:///{tmp}/{stem}.db",
        "postgresql": f"{base}{'&' if '?' in base else '?'}schema={schema}",
    }, schema


@contextlib.contextmanager
def schema_dropped(engine: str, postgres: str, schema: str) -> Iterator[None]:
    """A run on `engine`, after which its PostgreSQL schema is dropped, whatever the run
    did (nothing is left on a shared server; SQLite's file goes with its directory)."""
    try:
        yield
    finally:
        if engine == "postgresql":
            import psycopg

            with psycopg.connect(postgres or POSTGRES, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def print_results(engine: str, results: list[Result], load: float, width: int) -> None:
    """One line per case of `run`, its name padded to `width`."""
    for name, median, p99, cpu, sent, trips in results:
        rt = f"{trips:5.1f} round trips" if engine == "postgresql" else " " * 17
        print(
            f"{engine:10} {name:{width}} median {median:8.1f} µs  p99 {p99:8.1f} µs"
            f"  CPU {cpu:7.1f} µs  {sent:5.1f} statements {rt} per call"
            f"  (load {load:.1f})",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sql_paths", description=__doc__)
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--postgres", default=os.environ.get("BENCH_POSTGRES_URL", ""))
    p.add_argument("--only", choices=("sqlite", "postgresql"))
    args = p.parse_args(argv)
    print(f"tasuki from {Path(tasuki.__file__).parent.parent}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        urls, schema = engine_urls(tmp, args.postgres, "paths")
        for engine, url in urls.items():
            if args.only and engine != args.only:
                continue
            load = os.getloadavg()[0]
            with schema_dropped(engine, args.postgres, schema):
                print_results(engine, run(url, args.calls), load, 18)
    return 0


if __name__ == "__main__":
    sys.exit(main())
