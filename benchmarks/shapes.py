"""`./dev bench shapes`: every system on real job shapes, each in its best configuration.

Beside the no-op of `./dev bench`, three shapes of job (`benchmarks/shape_jobs.py`):
(a) `redis`, one redis-py `INCR` of the job's own; (c) `sleep`, an I/O wait of 10 ms;
(d) `cpu`, 1 ms of pure-Python CPU. Each system runs each shape in every configuration
of its sweep (`benchmarks/shape_peers.py`: processes 1/2 x threads or concurrency 8/32,
the same grid for tasuki), one drain of a full queue each (shape (a): three interleaved
rounds of 20,000 jobs, each configuration's median kept); the table keeps each
system's best configuration, named, and divides tasuki's best by it. Shape (a) also runs
the raw floor (`benchmarks/peers/raw_worker.py` with the same job), and shape (c) a
series of tasuki at -c 8..256 (threads) and async at -c 1024 against the ideal,
concurrency / 10 ms.

Shape io50, a 50 ms wait at the concurrency I/O jobs run at (threads 256, async tasks or
greenlets 1,024), runs only when named (`--shapes io50`, half an hour or more in all): its
own sweep (`shape_peers.io_configs`), each system with the Redis pool size its users
would set there, each drain IO_SECONDS of its configuration's ideal rate, and each rate
also as a share of that ideal.

The rate is jobs / (time from the first job's start until every job ran and the system
shows its queue empty): `steady_per_s` of the no-op harness. Start-up is left out here
because a few thousand jobs of a few ms would otherwise mostly time interpreter starts.

    python -m benchmarks.shapes                      # the full matrix, ~15 min on 2 cores
    python -m benchmarks.shapes --quick              # a smoke run: fewer jobs, fewer configs
    python -m benchmarks.shapes --only tasuki,dramatiq --shapes redis
    python -m benchmarks.shapes --shapes io50           # the I/O shape at 256 / 1,024
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import machine, procs, shape_pg, shapes_report
from benchmarks.cli import on_sigterm
from benchmarks.marks import Marks
from benchmarks.measure import Bench, Settings, fill, measure_drain
from benchmarks.peers.base import REDIS_ENV, ROOT, Context, Peer
from benchmarks.redis_server import RedisServer
from benchmarks.shape_jobs import COUNTER, SHAPE_ENV, SLEEP, SPIN_ENV, spin
from benchmarks.shape_peers import SYSTEMS, Config, configs, io_configs, io_ideal, io_messages, make

DOCS = ROOT / "docs" / "benchmarks" / "shapes"
#: jobs per drain, per shape (the brief of issue #23: the matrix in about 15 minutes)
MESSAGES = {"redis": 20_000, "sleep": 2_000, "cpu": 5_000, "pg": 5_000}
#: shape io50 sizes each drain by its configuration (`io_messages`): 0 here says so
MESSAGES["io50"] = 0
#: interleaved rounds per shape; each configuration's row is its median round. Shape (a)
#: once ran one drain of about a second per configuration, and on this shared 2-core
#: machine the ratio to the best peer then moved between 0.8x and 2.2x from run to run
#: (docs/benchmarks/shapes.md, "Settled: why two harnesses disagreed")
ROUNDS = {"redis": 3, "sleep": 1, "cpu": 1, "pg": 1}
#: shape (a): the share of its drain that systems 5-10x slower than the top drain (a
#: full one would take half a minute each): still several seconds each
SHARE = {"celery": 0.25, "arq": 0.25, "saq": 0.25}
QUICK = {"redis": 500, "sleep": 200, "cpu": 500, "pg": 500, "io50": 400}
#: the default matrix; io50 (its own sweep, 8 s drains) only when named
SHAPES = ("redis", "sleep", "cpu")
EXTRA_SHAPES = ("io50",)
#: shape io50: a drain's time limit lets a system run down to this many jobs/s (its drain
#: is sized by the ideal, up to 328,000 jobs, and peers run a few % of it on 2 loaded cores)
IO_SLOWEST = 250.0
#: tasuki's shape (c) against the ideal: (-c, async job); each drains c x IDEAL_SECONDS / 10 ms
IDEAL = ((8, False), (32, False), (64, False), (128, False), (256, False), (1024, True))
IDEAL_SECONDS = 2.0


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.shapes", description=__doc__)
    p.add_argument(
        "section",
        nargs="?",
        choices=("redis", "postgres"),
        default="redis",
        help="redis (default): shapes a, c, d on the Redis queues; postgres: shape b, "
        "one PostgreSQL query, on the PostgreSQL queues",
    )
    p.add_argument("--quick", action="store_true", help="a smoke run: few jobs, one config each")
    p.add_argument("--only", help=f"comma-separated systems, of: {', '.join(SYSTEMS)}, raw")
    p.add_argument(
        "--shapes",
        help=f"comma-separated shapes, of: {', '.join(SHAPES + EXTRA_SHAPES)} "
        f"(default: {','.join(SHAPES)})",
    )
    p.add_argument("--messages", type=int, help="jobs per drain for every shape")
    p.add_argument("--rounds", type=int, help="interleaved rounds for every shape (median kept)")
    p.add_argument("--no-ideal", action="store_true", help="skip tasuki's shape (c) series")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per drain")
    p.add_argument("--out", type=Path, help="where results go (default: see README)")
    return p.parse_args(argv)


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def calibrate(seconds: float = 0.001) -> int:
    """Steps of `spin` that take `seconds` here: the best of 50 tries of 10,000 steps."""
    best = float("inf")
    for _ in range(50):
        t = time.perf_counter()
        spin(10_000)
        best = min(best, time.perf_counter() - t)
    return max(1, round(10_000 * seconds / best))


Maker = Callable[[Config, Context], Peer]


def one(bench: Bench, cfg: Config, ctx: Context, shape: str, maker: Maker = make) -> dict[str, Any]:
    """One drain of `shape` by `cfg`: its metrics, or its error."""
    row: dict[str, Any] = {"system": cfg.system, "config": cfg.label, "shape": shape}
    try:
        peer = maker(cfg, ctx)
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
        return row
    if shape == "redis" and cfg.system in SHARE:
        peer.drain_share = SHARE[cfg.system]
    if shape == "io50":
        row["ideal_per_s"] = io_ideal(cfg)
        row["pool"] = cfg.pool
    try:
        fill(bench, peer)
        row.update(measure_drain(bench, peer, prefilled=True))
        if shape == "redis":
            row["counted"] = int(peer.redis.get(COUNTER) or 0)
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
    finally:
        procs.kill_all_workers()
        with contextlib.suppress(Exception):
            peer.close()
    return row


def median_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per shape, system and configuration, the round of median rate (every round's rate
    in `rounds_per_s`); a configuration that failed every round keeps its last error."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["shape"], r["system"], r["config"]), []).append(r)
    out = []
    for group in groups.values():
        ok = sorted((r for r in group if "error" not in r), key=lambda r: r["steady_per_s"])
        if not ok:
            out.append(group[-1])
            continue
        row = dict(ok[(len(ok) - 1) // 2])
        row["rounds_per_s"] = [round(r["steady_per_s"]) for r in group if "error" not in r]
        row["rounds_failed"] = len(group) - len(ok)
        out.append(row)
    return out


def ideal_series(bench: Bench, ctx: Context, quick: bool) -> list[dict[str, Any]]:
    """tasuki, one process, on shape (c) at each -c of IDEAL: % of concurrency / 10 ms."""
    out = []
    base = bench.settings
    for conc, is_async in IDEAL[:2] + IDEAL[-1:] if quick else IDEAL:
        n = int(conc * (0.2 if quick else IDEAL_SECONDS) / SLEEP)
        bench.settings = Settings(messages=n, system_timeout=base.system_timeout)
        cfg = Config("tasuki", f"-c {conc}" + (", async def" if is_async else ""), 1, conc,
                     "async" if is_async else "")  # fmt: skip
        row = one(bench, cfg, ctx, "sleep")
        row["ideal_per_s"] = conc / SLEEP
        out.append(row)
        say(f"  ideal: {shapes_report.line(row)}")
    bench.settings = base
    return out


def plan(args: argparse.Namespace) -> dict[str, tuple[list[Config], Maker]]:
    """Per shape to run, the configurations to drain it with and how to make each."""
    only = set(args.only.split(",")) if args.only else None
    if args.section == "postgres":
        shapes, systems, sweep, maker = (
            ["pg"],
            list(shape_pg.SYSTEMS),
            shape_pg.configs,
            shape_pg.make,
        )
    else:
        shapes = list(SHAPES) if not args.shapes else args.shapes.split(",")
        unknown = set(shapes) - {*SHAPES, *EXTRA_SHAPES}
        if unknown:
            raise SystemExit(f"unknown shape(s): {', '.join(sorted(unknown))}")
        systems, sweep, maker = [*SYSTEMS, "raw"], configs, make
    out: dict[str, tuple[list[Config], Maker]] = {}
    for shape in shapes:
        chosen = [s for s in systems if (only is None or s in only)]
        chosen = [s for s in chosen if s != "raw" or shape == "redis"]
        each = io_configs if shape == "io50" else sweep
        cfgs = [c for s in chosen for c in (each(s)[-1:] if args.quick else each(s))]
        out[shape] = (cfgs, maker)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    signal.signal(signal.SIGTERM, on_sigterm)  # the clean-up of Ctrl-C: no stray workers
    todo = plan(args)
    sizes = {k: v for k, v in (QUICK if args.quick else MESSAGES).items() if k in todo}
    if args.messages:
        sizes = dict.fromkeys(sizes, args.messages)
    rounds = {k: 1 if args.quick else ROUNDS.get(k, 1) for k in sizes}
    if args.rounds:
        rounds = dict.fromkeys(rounds, args.rounds)
    official = not (
        args.quick or args.only or args.shapes or args.messages or args.no_ideal or args.rounds
    )
    docs = DOCS / "postgres" if args.section == "postgres" else DOCS
    out_dir = args.out or (docs if official else Path(tempfile.mkdtemp(prefix="tasuki-shapes-")))
    load_before = os.getloadavg()
    started = time.time()
    runs: list[dict[str, Any]] = []
    ideal: list[dict[str, Any]] = []
    if "io50" in sizes and not sizes["io50"]:
        io_sizes = [io_messages(c) for c in todo["io50"][0]]
        capacity_io = max(io_sizes, default=0)
    else:
        capacity_io = sizes.get("io50", 0)
    capacity = max(*sizes.values(), capacity_io, int(IDEAL[-1][0] * IDEAL_SECONDS / SLEEP))
    with tempfile.TemporaryDirectory(prefix="tasuki-shapes-") as tmp:
        workdir = Path(tmp)
        postgres: Any = None
        if args.section == "postgres":
            from benchmarks.cli import own_postgres

            postgres = own_postgres(workdir)
        server = RedisServer(workdir)
        marks = Marks(f"/dev/shm/tasuki-shapes-{workdir.name}.marks", capacity)
        try:
            os.environ[REDIS_ENV] = server.url
            steps = calibrate()
            os.environ[SPIN_ENV] = str(steps)
            say(f"redis-server {server.version} on port {server.port}; 1 ms = {steps} steps")
            ctx = Context(redis_url=server.url, tmpdir=workdir)
            for shape, (cfgs, maker) in todo.items():
                os.environ[SHAPE_ENV] = shape  # every worker started from here on
                settings = Settings(messages=sizes[shape], system_timeout=args.timeout)
                bench = Bench(server, marks, settings, workdir)
                for k in range(rounds[shape]):
                    for cfg in cfgs:
                        if shape == "io50" and not sizes[shape]:  # sized per configuration
                            n = io_messages(cfg)
                            bench.settings = Settings(
                                messages=n, system_timeout=max(args.timeout, n / IO_SLOWEST)
                            )
                        row = one(bench, cfg, ctx, shape, maker)
                        row["round"] = k + 1
                        runs.append(row)
                        say(f"{shape} ({k + 1}/{rounds[shape]}): {shapes_report.line(row)}")
                tasuki = any(c.system == "tasuki" for c in cfgs)
                if shape == "sleep" and tasuki and not args.no_ideal:
                    ideal = ideal_series(bench, ctx, args.quick)
        except KeyboardInterrupt:
            say("interrupted: stopping every worker")
            return 130
        finally:
            procs.kill_all()
            server.stop()
            if postgres is not None:
                postgres.stop()
            marks.close()
            Path(marks.path).unlink(missing_ok=True)
        pg_url = None
        if args.section == "postgres":
            from benchmarks.cli import postgres_env_url

            pg_url = postgres_env_url()
        info = machine.info(server.version, section=args.section, postgres_url=pg_url)
        if args.section == "redis":
            info["engines"] = {"redis-server": server.version}
    info.update(
        command=shlex.join(["./dev", "bench", "shapes", *(sys.argv[1:] if argv is None else argv)]),
        spin_steps=steps,
        load_before=load_before,
        load_after=os.getloadavg(),
        minutes=(time.time() - started) / 60,
        messages=sizes,
        rounds=rounds,
    )
    data = {"machine": info, "rows": median_rows(runs), "runs": runs, "ideal": ideal}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(data, indent=2) + "\n")
    text = shapes_report.markdown(data)
    (out_dir / "latest.md").write_text(text)
    print(text)
    print(f"results: {out_dir}/results.json, latest.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
