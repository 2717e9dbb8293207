"""Where a shape (b) job's cost goes, per system, in measures the machine's load does not
move: requests and statements per job on the wire, server CPU per job, worker CPU per job.

    python -m benchmarks.shape_pg_profile                  # every PostgreSQL system
    python -m benchmarks.shape_pg_profile --only tasuki,oban --jobs 5000

Each system drains `--jobs` queued `SELECT 1` jobs in one configuration (its best in
`./dev bench shapes postgres`, or `--procs`/`-c`), its worker's every connection going
through a counting proxy (`benchmarks/pg_wire.py`: the job's own `SELECT 1` too, one
request and one statement a job, subtracted in the `framework` columns). From the first
job's run to the queue empty:

- **requests**: the server's ReadyForQuery messages, one per simple query or sync, that
  is per request the client waits on (pipelined ones count one each);
- **statements**: simple queries plus executes (`BEGIN` and `COMMIT` are statements);
- **server CPU**: user + system time of the worker's backends (`/proc/<pid>/stat` of the
  `pg_stat_activity` rows whose client port is the proxy's end), so no other client of
  the server counts; backends that exit mid-drain are missed (none do here);
- **worker CPU**: user + system time of the worker's processes (its session).

The proxy adds latency to each request, so batches may differ from a run without it:
the rates printed are not the benchmark's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from benchmarks import procs, shape_pg
from benchmarks.marks import Marks
from benchmarks.measure import Bench, Settings, fill
from benchmarks.peers.base import REDIS_ENV, Context, Peer, SyncPeer
from benchmarks.peers.tasuki_runner import POSTGRES_ENV, postgres_url
from benchmarks.pg_wire import Proxy
from benchmarks.redis_server import RedisServer
from benchmarks.shape_jobs import SHAPE_ENV
from benchmarks.shape_peers import Config

#: (processes, concurrency) per system: the best of `./dev bench shapes postgres`
BEST = {
    "tasuki": (2, 32),
    "procrastinate": (2, 8),
    "pgqueuer": (2, 8),
    "chancy": (2, 32),
    "oban": (2, 32),
    "dbos": (2, 32),
}
TICK = os.sysconf("SC_CLK_TCK")
#: the job alone, no queue: on 2 x 32 threads (tasuki's sync job) and 2 x 32 tasks
FLOORS = {
    "floor": Config("floor", "2 x 32 threads", 2, 32),
    "floor-async": Config("floor", "2 x 32 tasks", 2, 32, "async"),
}


def backend_cpu(ports: list[int]) -> float:
    """CPU seconds of the backends serving the proxy's connections on these ports."""
    if not ports:
        return 0.0
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        pids = [row[0] for row in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE client_port = ANY(%s)", (ports,)
        )]  # fmt: skip
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / TICK


def sample(proxy: Proxy, worker: Any, marks: Marks, n: int) -> dict[str, float]:
    wire = proxy.snapshot()
    return {
        "done": marks.done(n),
        "requests": wire.get("sZ", 0),
        "statements": wire.get("cQ", 0) + wire.get("cE", 0),
        "parses": wire.get("cP", 0),
        "connections": wire.get("connections", 0),
        "bytes": wire.get("bytes_sent", 0) + wire.get("bytes_received", 0),
        "server_cpu": backend_cpu(proxy.ports()),
        "worker_cpu": worker.cpu_seconds(),
        "t": time.perf_counter(),
    }


class Floor(SyncPeer):
    """The job alone (`benchmarks/peers/pg_floor.py`): nothing to enqueue or drain."""

    name = "floor"
    has_bulk = True

    def __init__(self, ctx: Context, cfg: Config, jobs: int) -> None:
        super().__init__(ctx)
        self.cfg, self.jobs = cfg, jobs

    def enqueue(self, i: int) -> None:
        pass

    def enqueue_bulk(self, indices: Any) -> None:
        pass

    def worker_argv(self) -> list[str]:
        one = [sys.executable, "-m", "benchmarks.peers.pg_floor", str(self.jobs)]
        kind = [self.cfg.kind] if self.cfg.kind else []
        rest = [str(self.cfg.procs), str(self.cfg.conc), *kind]
        loop = " & ".join(shlex.join([*one, str(k), *rest]) for k in range(self.cfg.procs))
        return ["sh", "-c", f"{loop} & wait"]

    def worker_env(self) -> dict[str, str]:
        return {POSTGRES_ENV: postgres_url()}

    def pending(self) -> int:
        return 0


def profile(bench: Bench, cfg: Config, ctx: Context) -> dict[str, Any]:
    row: dict[str, Any] = {"system": cfg.system, "config": cfg.label}
    if cfg.system == "floor":
        peer: Peer = Floor(ctx, cfg, bench.settings.messages)
    else:
        peer = shape_pg.make(cfg, ctx)
    proxy = Proxy(int(postgres_url().rsplit(":", 1)[1].split("/")[0]))
    direct = f":{proxy.upstream[1]}/"
    env = peer.worker_env

    def proxied() -> dict[str, str]:
        return {k: v.replace(direct, f":{proxy.port}/") for k, v in env().items()}

    peer.worker_env = proxied  # type: ignore[method-assign]
    try:
        n = bench.drain_size(peer)
        fill(bench, peer)
        bench.marks.clear()
        worker = bench.start_worker(peer, "profile")
        try:
            bench.wait("a first job", lambda: bench.marks.done(n) > 0, 120, worker)
            first = sample(proxy, worker, bench.marks, n)
            bench.wait("every job to run", lambda: bench.marks.done(n) == n, 240, worker)
            bench.wait("the queue to drain", lambda: peer.pending() == 0, 30, worker, 0.005)
            last = sample(proxy, worker, bench.marks, n)
        finally:
            worker.stop()
        jobs = last["done"] - first["done"]
        per = {k: (last[k] - first[k]) / jobs for k in first if k not in ("done", "t")}
        row.update(
            jobs=jobs,
            per_s_proxied=jobs / (last["t"] - first["t"]),
            requests=per["requests"],
            statements=per["statements"],
            parses=per["parses"],
            bytes=per["bytes"],
            server_us=per["server_cpu"] * 1e6,
            worker_us=per["worker_cpu"] * 1e6,
            connections=last["connections"],
        )
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
    finally:
        procs.kill_all_workers()
        proxy.close()
        with contextlib.suppress(Exception):
            peer.close()
    return row


HEAD = (
    "| system (configuration) | requests / job | framework's | statements / job "
    "| framework's | server CPU / job | worker CPU / job | bytes / job |\n"
    "|---|--:|--:|--:|--:|--:|--:|--:|"
)


def line(row: dict[str, Any]) -> str:
    name = f"{row['system']} ({row['config']})"
    if "error" in row:
        return f"| {name} | failed: {row['error'][:80]} |||||||"
    return (
        f"| {name} | {row['requests']:.2f} | {row['requests'] - 1:.2f} "
        f"| {row['statements']:.2f} | {row['statements'] - 1:.2f} "
        f"| {row['server_us']:.0f} µs | {row['worker_us']:.0f} µs | {row['bytes']:.0f} |"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.shape_pg_profile", description=__doc__)
    p.add_argument("--only", help=f"comma-separated, of: {', '.join(shape_pg.SYSTEMS)}")
    p.add_argument("--jobs", type=int, default=5000)
    p.add_argument("--procs", type=int, help="processes for every system (default: BEST)")
    p.add_argument("-c", "--concurrency", type=int, help="concurrency for every system")
    p.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = p.parse_args(argv)
    systems = args.only.split(",") if args.only else [*shape_pg.SYSTEMS, *FLOORS]
    os.environ[SHAPE_ENV] = "pg"
    rows = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="tasuki-pgprofile-") as tmp:
        workdir = Path(tmp)
        server = RedisServer(workdir)
        marks = Marks(f"/dev/shm/tasuki-pgprofile-{workdir.name}.marks", args.jobs)
        try:
            os.environ[REDIS_ENV] = server.url
            ctx = Context(redis_url=server.url, tmpdir=workdir)
            bench = Bench(server, marks, Settings(messages=args.jobs), workdir)
            for system in systems:
                if system in FLOORS:
                    rows.append(profile(bench, FLOORS[system], ctx))
                    print(line(rows[-1]), file=sys.stderr, flush=True)
                    continue
                procs_, conc = BEST[system]
                procs_, conc = args.procs or procs_, args.concurrency or conc
                label = shape_pg.configs(system)[0].label
                cfg = next(
                    (c for c in shape_pg.configs(system) if (c.procs, c.conc) == (procs_, conc)),
                    Config(system, label, procs_, conc),
                )
                row = profile(bench, cfg, ctx)
                rows.append(row)
                print(line(row), file=sys.stderr, flush=True)
        finally:
            procs.kill_all()
            server.stop()
            marks.close()
            Path(marks.path).unlink(missing_ok=True)
    print(HEAD)
    for row in rows:
        print(line(row))
    print(f"load average before {load_before}, after {os.getloadavg()}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
