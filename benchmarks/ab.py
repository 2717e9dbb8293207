"""`python -m benchmarks.ab A=TREE B=TREE`: one worker draining no-op jobs, two source
trees of tasuki interleaved in one run, per backend: jobs/s and worker CPU per job.

Each run puts `TREE/src` first on the worker's `PYTHONPATH` in this same virtual
environment (the harness and the job module, `benchmarks.peers.tasuki_app`, are this
checkout's), so the two sides differ in tasuki's sources only. Per round and backend the
sides alternate, their order flipped every round (A B, B A, A B, ...), so that the
machine's other load falls on both alike. Every run starts from an empty store of its
own, filled by a process of its side's tree:

- `memory`: in one process (`benchmarks.worker_overhead memory:// --shape noop`), the
  drain alone timed, CPU from `getrusage`;
- `sqlite`, `redis`, `postgres`, `sqs`: `enqueue_many`, then one `tasuki worker` process
  (`benchmarks.drain`): the rate from the first job's start to the last's, the worker's
  CPU (user + system, /proc) over the same span;
- `postgres-io`: the same with a job doing one `SELECT 1` on a pool of the worker's own.

Servers are the harness's own (`tasuki.testing.servers`): a redis-server on a free port,
a `moto_server` for SQS (with `locks=sqlite`), and PostgreSQL on 127.0.0.1:5432 when it
answers (a schema per run, dropped after it). It prints each run, then per backend the
medians, the B/A ratio and each side's spread (min-max), and which backends are outside
noise: B's CPU per job more than 5 % above A's with spreads that do not overlap.

    git worktree add --detach /tmp/before <commit>
    .venv/bin/python -m benchmarks.ab before=/tmp/before after=. --jobs 5000 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import NamedTuple

from benchmarks.drain import Drain, drain
from benchmarks.marks import Marks
from benchmarks.peers.base import ROOT
from benchmarks.peers.tasuki_app import POSTGRES_ENV

BACKENDS = ("memory", "sqlite", "redis", "postgres", "postgres-io", "sqs")
#: worker slots (`-c`): the main table's (`tasuki_runner.CONCURRENCY`), SQS's own benchmark's
CONCURRENCY = {
    "memory": 256,
    "sqlite": 256,
    "redis": 256,
    "postgres": 512,
    "postgres-io": 32,
    "sqs": 20,
}
#: B's CPU per job above A's by more than this (and spreads apart) is outside noise
NOISE = 0.05
_OVERHEAD = re.compile(r": ([\d,]+) jobs/s, CPU ([\d.]+) µs/job")


class Side(NamedTuple):
    label: str
    tree: Path


class Stores:
    """The servers a run needs, started once, and a fresh URL per run."""

    def __init__(self, stack: ExitStack, backends: list[str], tmp: Path) -> None:
        from tasuki.testing import servers

        self.tmp = tmp
        self.redis_url = self.moto = ""
        if "redis" in backends:
            server = stack.enter_context(servers.RedisServer(tmp / "redis"))
            self.redis_url = server.url(0)
        if "sqs" in backends:
            os.environ.update(servers.DUMMY_AWS_ENV)
            self.moto = stack.enter_context(servers.MotoServer()).endpoint
        self.postgres = ""
        if {"postgres", "postgres-io"} & set(backends):
            from benchmarks.peers.tasuki_runner import postgres_url

            self.postgres = postgres_url()
            os.environ[POSTGRES_ENV] = self.postgres

    @contextmanager
    def fresh(self, backend: str) -> Iterator[str]:
        """An empty store for one run, removed after it."""
        run = uuid.uuid4().hex[:10]
        if backend == "sqlite":
            path = self.tmp / f"{run}.db"
            yield f"sqlite:///{path}"
            for leftover in self.tmp.glob(f"{run}.db*"):
                leftover.unlink()
        elif backend == "redis":
            import redis

            client = redis.Redis.from_url(self.redis_url)
            client.flushall()
            yield self.redis_url
            client.flushall()
            client.close()
        elif backend in ("postgres", "postgres-io"):
            import psycopg

            schema = f"tasuki_ab_{run}"
            sep = "&" if "?" in self.postgres else "?"
            try:
                yield f"{self.postgres}{sep}schema={schema}"
            finally:
                with psycopg.connect(self.postgres, autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        elif backend == "sqs":
            locks = self.tmp / f"{run}-locks.db"
            yield f"sqs://us-east-1?endpoint_url={self.moto}&prefix=ab{run}-&locks=sqlite:///{locks}"
            for leftover in self.tmp.glob(f"{run}-locks.db*"):
                leftover.unlink()
        else:
            raise ValueError(f"no store for {backend!r}")


@contextmanager
def sources(side: Side) -> Iterator[dict[str, str]]:
    """This process's environment with `side`'s sources first on `PYTHONPATH` (what
    `benchmarks.drain` hands its worker), put back afterwards."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(side.tree / "src")])
    try:
        yield dict(os.environ)
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def _python(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def run_once(side: Side, backend: str, n: int, stores: Stores, marks: Marks) -> Drain:
    """One drain of `n` jobs on `backend` with `side`'s tasuki."""
    concurrency = CONCURRENCY[backend]
    with sources(side) as env:
        if backend == "memory":
            out = _python(
                env, "-m", "benchmarks.worker_overhead", "memory://", "--shape", "noop",
                "-c", str(concurrency), "--jobs", str(n),
            )  # fmt: skip
            found = _OVERHEAD.search(out)
            if found is None:
                raise RuntimeError(f"unexpected worker_overhead output: {out!r}")
            return Drain(float(found[1].replace(",", "")), float(found[2]) / 1e6)
        with stores.fresh(backend) as url:
            job = "select_one" if backend == "postgres-io" else "noop"
            _python(env, "-m", "benchmarks.ab", "--enqueue", url, "--jobs", str(n), "--job", job)
            return drain(url, n, marks, concurrency, timeout=600)


def enqueue(url: str, n: int, job_name: str) -> None:
    """Fill `url` with jobs 0..n-1 of `job_name`, with whichever tasuki is on the path."""
    from benchmarks.peers.tasuki_app import build

    app, _ = build(url)
    job = app.jobs[job_name]
    for lo in range(0, n, 1000):
        job.enqueue_many([(i,) for i in range(lo, min(lo + 1000, n))])
    app.close()


class Summary(NamedTuple):
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Summary:
        return cls(statistics.median(values), min(values), max(values))

    def spread(self, scale: float, fmt: str) -> str:
        return f"{self.median * scale:{fmt}} ({self.low * scale:{fmt}}-{self.high * scale:{fmt}})"


def outside_noise(a: Summary, b: Summary) -> bool:
    """B costs more CPU per job than A beyond noise: over NOISE and no overlap."""
    return b.median > a.median * (1 + NOISE) and b.low > a.high


def table(sides: tuple[Side, Side], results: dict[tuple[str, str], list[Drain]]) -> list[str]:
    """The medians with their spreads (min-max), the ratio of the medians, and the
    median (min-max) of each round's own B/A of CPU per job: the two drains of a round
    ran a few seconds apart, so that ratio leaves out most of the load's drift."""
    a, b = sides
    lines = [
        f"| backend | -c | runs | {a.label} jobs/s | {b.label} jobs/s | B/A |"
        f" {a.label} CPU µs/job | {b.label} CPU µs/job | B/A | B/A per round |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    flagged = []
    backends = list(dict.fromkeys(backend for backend, _ in results))
    for backend in backends:
        ra, rb = results[(backend, a.label)], results[(backend, b.label)]
        rate_a, rate_b = Summary.of([r.rate for r in ra]), Summary.of([r.rate for r in rb])
        cpu_a, cpu_b = Summary.of([r.cpu for r in ra]), Summary.of([r.cpu for r in rb])
        paired = Summary.of([y.cpu / x.cpu for x, y in zip(ra, rb, strict=False) if x.cpu])
        if min(len(ra), len(rb)) > 1 and outside_noise(cpu_a, cpu_b):
            flagged.append(backend)
        lines.append(
            f"| {backend} | {CONCURRENCY[backend]} | {len(ra)}+{len(rb)} |"
            f" {rate_a.spread(1, ',.0f')} | {rate_b.spread(1, ',.0f')} |"
            f" {rate_b.median / rate_a.median:.3f} |"
            f" {cpu_a.spread(1e6, '.1f')} | {cpu_b.spread(1e6, '.1f')} |"
            f" {cpu_b.median / cpu_a.median if cpu_a.median else float('nan'):.3f} |"
            f" {paired.spread(1, '.3f')} |"
        )
    lines.append("")
    lines.append(
        "outside noise (B's CPU/job > +5 %, spreads apart; 2 rounds at least): "
        + (", ".join(flagged) if flagged else "none")
    )
    return lines


def _side(text: str) -> Side:
    label, sep, tree = text.partition("=")
    path = Path(tree).resolve()
    if not sep or not (path / "src" / "tasuki" / "__init__.py").is_file():
        raise argparse.ArgumentTypeError(f"want LABEL=TREE with TREE/src/tasuki: {text!r}")
    return Side(label, path)


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ab", description=__doc__)
    p.add_argument("sides", nargs="*", type=_side, help="A=TREE B=TREE")
    p.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated")
    p.add_argument("--jobs", type=int, default=5_000, help="jobs per drain")
    p.add_argument("--sqs-jobs", type=int, default=500, help="jobs per drain on sqs")
    p.add_argument("--rounds", type=int, default=5, help="drains per side and backend")
    p.add_argument("--enqueue", metavar="URL", help=argparse.SUPPRESS)
    p.add_argument("--job", default="noop", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.enqueue:
        enqueue(args.enqueue, args.jobs, args.job)
        return 0
    if len(args.sides) != 2:
        p.error("give two sides: A=TREE B=TREE")
    sides: tuple[Side, Side] = (args.sides[0], args.sides[1])
    backends = [b for b in args.backends.split(",") if b]
    unknown = set(backends) - set(BACKENDS)
    if unknown:
        p.error(f"unknown backends: {', '.join(sorted(unknown))}")
    for side in sides:  # compiled once here, not by the first worker of each side
        compile_argv = [sys.executable, "-m", "compileall", "-q", str(side.tree / "src")]
        subprocess.run(compile_argv, check=True)
    for side in sides:
        commit = subprocess.run(
            ["git", "-C", str(side.tree), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=False,
        ).stdout.strip()  # fmt: skip
        print(f"{side.label} = {side.tree} ({commit or 'not a git tree'})")
    print(f"before: {_uptime()}", flush=True)
    results: dict[tuple[str, str], list[Drain]] = {}
    started = time.monotonic()
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tasuki-ab-")))
        stores = Stores(stack, backends, tmp)
        marks = Marks(str(tmp / "marks"), max(args.jobs, args.sqs_jobs))
        stack.callback(marks.close)
        for rnd in range(args.rounds):
            for backend in backends:
                n = args.sqs_jobs if backend == "sqs" else args.jobs
                order = sides if rnd % 2 == 0 else sides[::-1]
                for side in order:
                    r = run_once(side, backend, n, stores, marks)
                    results.setdefault((backend, side.label), []).append(r)
                    print(
                        f"round {rnd + 1} {backend:<11} {side.label:<8} {r.rate:>9,.0f} jobs/s"
                        f" {r.cpu * 1e6:>8.1f} µs CPU/job  load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
    print(f"after:  {_uptime()}  ({time.monotonic() - started:.0f} s)\n")
    print("\n".join(table(sides, {k: results[k] for k in _ordered(results, backends, sides)})))
    return 0


def _ordered(
    results: dict[tuple[str, str], list[Drain]], backends: list[str], sides: tuple[Side, Side]
) -> list[tuple[str, str]]:
    return [(b, s.label) for b in backends for s in sides if (b, s.label) in results]


if __name__ == "__main__":
    sys.exit(main())
