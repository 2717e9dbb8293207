"""`./dev bench embedded`: tasuki's embedded default (SQLite) against the queues people
run on SQLite today, on the same machine in one run.

The systems (`benchmarks/peers/`): tasuki (`tasuki worker`, `sqlite:///`), Huey's
`SqliteHuey` (`huey_consumer`), persist-queue's `SQLiteAckQueue` and litequeue's
`LiteQueue` (neither has a worker: `embedded_loop.py` is the loop their READMEs show).
Each drains a full queue of the same job (`embedded_jobs.py`: a no-op, and a 1 ms wait)
in each configuration of a small sweep for two cores, in three interleaved rounds; each
configuration keeps its median round, the table each system's best configuration,
named, and divides tasuki's best by it.

The rate is jobs / (time from the first job's start until every job ran and the system
shows none pending); the rate over the middle 80 % of job starts is kept beside it.
Each system's durability is read from the database it made: `PRAGMA journal_mode` and
`synchronous` of the connection it opens, and, with `--fsyncs`, the fsync and fdatasync
calls per job of one more drain under `strace -f -c`.

    python -m benchmarks.embedded                 # the full sweep, a few minutes
    python -m benchmarks.embedded --quick         # a smoke run: 300 jobs, one config each
    python -m benchmarks.embedded --only tasuki,huey --shapes noop
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import machine, procs
from benchmarks.cli import on_sigterm
from benchmarks.marks import ENV as MARKS_ENV
from benchmarks.marks import Marks
from benchmarks.measure import mid_rate
from benchmarks.peers.base import ROOT, bin_path
from benchmarks.peers.embedded_jobs import DB_ENV, QUERY_ENV, SHAPE_ENV, SHAPES
from benchmarks.procs import Worker
from benchmarks.shape_peers import spawn

DOCS = ROOT / "docs" / "benchmarks" / "embedded"
MESSAGES = 5_000
QUICK = 300
#: interleaved rounds; each configuration's row is its median round (single drains of a
#: second or two moved the ratios by 2x between runs on this shared machine)
ROUNDS = 3


@dataclass(frozen=True)
class Config:
    label: str
    procs: int
    conc: int
    kind: str = ""


class System(ABC):
    """One embedded queue: how to fill it, start its worker, and see it empty."""

    name = ""
    package = ""
    #: what a crash of the worker does to the job it was running
    semantics = ""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir / self.name
        self.db = self.dir / "queue.db"

    def fresh(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)

    @abstractmethod
    def configs(self) -> list[Config]: ...

    @abstractmethod
    def fill(self, n: int) -> None:
        """Queue jobs 0..n-1 (not timed)."""

    @abstractmethod
    def argv(self, cfg: Config) -> list[str]: ...

    def env(self) -> dict[str, str]:
        return {}

    @abstractmethod
    def pending(self) -> int:
        """Jobs not yet done (queued, or taken and not acknowledged)."""

    @abstractmethod
    def connection(self) -> sqlite3.Connection:
        """A connection opened the way the system opens its own (for its PRAGMAs)."""

    def count(self, sql: str) -> int:
        with contextlib.closing(sqlite3.connect(self.db, timeout=30)) as conn:
            return int(conn.execute(sql).fetchone()[0])

    def pragmas(self) -> dict[str, str]:
        conn = self.connection()
        try:
            sync = int(conn.execute("PRAGMA synchronous").fetchone()[0])
            mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
        finally:
            conn.close()
        return {"journal_mode": mode, "synchronous": ["off", "normal", "full", "extra"][sync]}

    def version(self) -> str:
        from importlib.metadata import version

        return version(self.package)


class Tasuki(System):
    name, package = "tasuki", "tasuki"
    semantics = "lease: a crashed worker's jobs run again when the lease runs out"

    def configs(self) -> list[Config]:
        return [Config(f"--workers {p} -c {c}", p, c) for p in (1, 2) for c in (8, 32)]

    #: the URL's query: tasuki's default is synchronous=full
    query = ""

    def url(self) -> str:
        return f"sqlite:///{self.db}{self.query}"

    def env(self) -> dict[str, str]:
        return {QUERY_ENV: self.query}

    def app(self) -> Any:
        import tasuki

        return tasuki.App(self.url())

    def fill(self, n: int) -> None:
        from benchmarks.peers.embedded_jobs import run

        app = self.app()
        try:
            job = app.job(name="job", queue="default")(run)
            for lo in range(0, n, 1_000):
                job.enqueue_many([(i,) for i in range(lo, min(lo + 1_000, n))])
        finally:
            app.close()

    def argv(self, cfg: Config) -> list[str]:
        return [
            sys.executable, "-m", "tasuki", "worker", "benchmarks.peers.tasuki_sqlite_app:app",
            "-q", "default", "-c", str(cfg.conc), "--workers", str(cfg.procs),
            "--log-level", "WARNING", "--no-scheduler",
        ]  # fmt: skip

    def pending(self) -> int:
        app = self.app()
        try:
            s = app.stats("default")
        finally:
            app.close()
        return int(s["ready"] + s["in_flight"] + s["delayed"])

    def connection(self) -> sqlite3.Connection:
        from tasuki.backends.sqlite import from_url

        # a connection of the backend's own dialect: the one every worker thread opens
        conn: sqlite3.Connection = from_url(self.url()).sqlite.conn()
        return conn


class TasukiNormal(Tasuki):
    """tasuki at litequeue's durability: no fsync per commit (WAL, synchronous=normal)."""

    name = "tasuki-normal"
    query = "?synchronous=normal"


class Huey(System):
    name, package = "huey", "huey"
    semantics = "pop: the row is deleted when taken; a crash loses the running job"

    def configs(self) -> list[Config]:
        return [
            Config("-k process -w 2", 1, 2, "process"),
            Config("-k process -w 8", 1, 8, "process"),
            Config("-k thread -w 8", 1, 8, "thread"),
            Config("-k thread -w 32", 1, 32, "thread"),
        ]

    def fill(self, n: int) -> None:
        os.environ[DB_ENV] = str(self.db)
        from benchmarks.peers import huey_sqlite_app

        # the producer alone skips fsync (fsync=False): filling is not what is timed
        huey, task = huey_sqlite_app.make(fsync=False)
        for i in range(n):
            task(i)
        huey.storage.close()

    def argv(self, cfg: Config) -> list[str]:
        return [
            bin_path("huey_consumer"), "benchmarks.peers.huey_sqlite_app.huey",
            "-k", cfg.kind, "-w", str(cfg.conc), "-n", "-C", "-q",
        ]  # fmt: skip

    def pending(self) -> int:
        return self.count("SELECT count(*) FROM task")

    def connection(self) -> sqlite3.Connection:
        os.environ[DB_ENV] = str(self.db)
        from benchmarks.peers import huey_sqlite_app

        storage: Any = huey_sqlite_app.make()[0].storage
        conn: sqlite3.Connection = storage.conn
        return conn


class PersistQueue(System):
    name, package = "persist-queue", "persist-queue"
    semantics = "ack: taken rows are marked unacked; they go back to ready when a queue reopens"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.db = self.dir / "data.db"

    def configs(self) -> list[Config]:
        return [Config(f"{t} threads", 1, t) for t in (1, 8, 32)]

    def fill(self, n: int) -> None:
        from persistqueue import SQLiteAckQueue

        q = SQLiteAckQueue(str(self.dir), multithreading=True)
        q._putter.execute("PRAGMA synchronous=OFF")  # the producer only: not timed
        for i in range(n):
            q.put(i)
        q.close()

    def argv(self, cfg: Config) -> list[str]:
        loop = [sys.executable, "-m", "benchmarks.peers.embedded_loop", self.name,
                str(self.dir), str(cfg.conc)]  # fmt: skip
        return spawn(cfg.procs, loop)

    def pending(self) -> int:
        return self.count("SELECT count(*) FROM ack_queue_default WHERE status < 5")

    def connection(self) -> sqlite3.Connection:
        from persistqueue import SQLiteAckQueue

        # kept on self: the queue closes its connections when it is collected
        self._probe: Any = SQLiteAckQueue(str(self.dir), multithreading=True, auto_resume=False)
        conn: sqlite3.Connection = self._probe._getter
        return conn


class LiteQueue(System):
    name, package = "litequeue", "litequeue"
    semantics = "lock: taken rows are marked locked; re-queueing stale ones is the user's call"

    def configs(self) -> list[Config]:
        return [Config(f"{p} x {t} threads", p, t) for p in (1, 2) for t in (1, 8)]

    def fill(self, n: int) -> None:
        from litequeue import LiteQueue as Queue

        q = Queue(str(self.db))
        with q.transaction():
            for i in range(n):
                q.put(str(i))
        q.conn.close()

    def argv(self, cfg: Config) -> list[str]:
        loop = [sys.executable, "-m", "benchmarks.peers.embedded_loop", self.name,
                str(self.db), str(cfg.conc)]  # fmt: skip
        return spawn(cfg.procs, loop)

    def pending(self) -> int:
        return self.count("SELECT count(*) FROM Queue WHERE status < 2")

    def connection(self) -> sqlite3.Connection:
        from litequeue import LiteQueue as Queue

        conn: sqlite3.Connection = Queue(str(self.db)).conn
        return conn


SYSTEMS: dict[str, type[System]] = {
    "tasuki": Tasuki,
    "tasuki-normal": TasukiNormal,
    "huey": Huey,
    "persist-queue": PersistQueue,
    "litequeue": LiteQueue,
}


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def drain(
    system: System,
    cfg: Config,
    shape: str,
    n: int,
    marks: Marks,
    workdir: Path,
    timeout: float,
    wrap: list[str] | None = None,
) -> dict[str, Any]:
    """One drain of `n` queued jobs by `cfg`: its metrics, or its error."""
    row: dict[str, Any] = {"system": system.name, "config": cfg.label, "shape": shape}
    worker = None
    try:
        system.fresh()
        system.fill(n)
        marks.clear()
        env = dict(os.environ)
        env.update({MARKS_ENV: marks.path, DB_ENV: str(system.db), SHAPE_ENV: shape})
        env.update(system.env())
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        log = workdir / f"{system.name}-{shape}.log"
        wall0 = time.time()
        worker = Worker([*(wrap or []), *system.argv(cfg)], env, log, cwd=ROOT)
        deadline = time.monotonic() + timeout
        while marks.done(n) < n or system.pending() > 0:
            if not worker.alive():
                raise RuntimeError(f"worker exited {worker.proc.returncode}:\n{worker.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{marks.done(n)} of {n} ran in {timeout:.0f} s")
            time.sleep(0.005 if marks.done(n) == n else 0.02)
        ended = time.time()
        cpu = worker.cpu_seconds()
        starts = marks.start_times(n)
        row.update(
            drained=n,
            rate=n / max(ended - starts[0], 1e-9),
            mid_rate=mid_rate(starts),
            startup_s=starts[0] - wall0,
            tail_s=ended - starts[-1],
            cpu_us_per_job=1e6 * cpu / n,
            duplicates=marks.duplicates(n),
        )
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
    finally:
        if worker is not None:
            worker.stop()
    return row


def fsyncs(
    system: System, cfg: Config, n: int, marks: Marks, workdir: Path, timeout: float
) -> float | None:
    """fsync + fdatasync calls per job in a drain of `n` under `strace -f -c`."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    out = workdir / f"strace-{system.name}.txt"
    wrap = [strace, "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", str(out)]
    row = drain(system, cfg, "noop", n, marks, workdir, timeout, wrap=wrap)
    if "error" in row or not out.exists():
        return None
    calls, seen = 0, False
    for line in out.read_text().splitlines():
        parts = line.split()
        if parts and parts[-1] in ("fsync", "fdatasync"):
            calls, seen = calls + int(parts[3]), True
    return calls / n if seen else None  # no line at all: strace lost track, not zero


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.embedded", description=__doc__)
    p.add_argument("--quick", action="store_true", help="a smoke run: few jobs, one config each")
    p.add_argument("--only", help=f"comma-separated systems, of: {', '.join(SYSTEMS)}")
    p.add_argument("--shapes", help=f"comma-separated shapes, of: {', '.join(SHAPES)}")
    p.add_argument("--messages", type=int, help=f"jobs per drain (default {MESSAGES:,})")
    p.add_argument("--fsyncs", type=int, default=0, metavar="N",
                   help="also count fsyncs per job in a drain of N under strace")  # fmt: skip
    p.add_argument("--rounds", type=int, help=f"interleaved rounds, median kept ({ROUNDS})")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per drain")
    p.add_argument("--out", type=Path, help="where results go (default: see README)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    given = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGTERM, on_sigterm)
    names = args.only.split(",") if args.only else list(SYSTEMS)
    shapes = args.shapes.split(",") if args.shapes else list(SHAPES)
    n = args.messages or (QUICK if args.quick else MESSAGES)
    official = not (args.quick or args.only or args.shapes or args.messages or args.rounds)
    out_dir = args.out or (DOCS if official else Path(tempfile.mkdtemp(prefix="tasuki-emb-")))
    load_before = os.getloadavg()
    started = time.time()
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    rounds = args.rounds or (1 if args.quick else ROUNDS)
    durability: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="tasuki-embedded-") as tmp:
        workdir = Path(tmp)
        marks = Marks(f"/dev/shm/tasuki-embedded-{workdir.name}.marks", max(n, args.fsyncs))
        try:
            systems = [SYSTEMS[name](workdir) for name in names]
            for k in range(rounds):
                for shape in shapes:
                    for system in systems:
                        cfgs = system.configs()
                        for cfg in cfgs[-1:] if args.quick else cfgs:
                            row = drain(system, cfg, shape, n, marks, workdir, args.timeout)
                            row["round"] = k + 1
                            runs.append(row)
                            say(f"{shape} ({k + 1}/{rounds}): {line(row)}")
            rows = median_rows(runs)
            for system in systems:
                found: dict[str, Any] = {"semantics": system.semantics}
                try:
                    found["version"] = system.version()
                    found.update(system.pragmas())
                except Exception as exc:
                    found["error"] = f"{type(exc).__name__}: {exc}"
                if args.fsyncs:
                    best = best_config(rows, system.name)
                    chosen = next((c for c in system.configs() if c.label == best), None)
                    if chosen is not None:
                        found["fsyncs_per_job"] = fsyncs(
                            system, chosen, args.fsyncs, marks, workdir, args.timeout
                        )
                durability[system.name] = found
                say(f"{system.name}: {found}")
        except KeyboardInterrupt:
            say("interrupted: stopping every worker")
            return 130
        finally:
            procs.kill_all()
            marks.close()
            Path(marks.path).unlink(missing_ok=True)
    info = machine.info("", section="embedded")
    info.update(
        command=shlex.join(["./dev", "bench", "embedded", *given]),
        load_before=load_before,
        load_after=os.getloadavg(),
        minutes=(time.time() - started) / 60,
        messages=n,
        sqlite=sqlite3.sqlite_version,
    )
    info["rounds"] = rounds
    data = {"machine": info, "rows": rows, "runs": runs, "durability": durability}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(data, indent=2) + "\n")
    text = markdown(data)
    (out_dir / "latest.md").write_text(text)
    print(text)
    print(f"results: {out_dir}/results.json, latest.md")
    return 0


def median_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per shape, system and configuration, the round of median rate (all in `rounds`)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["shape"], r["system"], r["config"]), []).append(r)
    out = []
    for group in groups.values():
        ok = sorted((r for r in group if "error" not in r), key=lambda r: r["rate"])
        if not ok:
            out.append(group[-1])
            continue
        row = dict(ok[(len(ok) - 1) // 2])
        row["rounds"] = [round(r["rate"]) for r in group if "error" not in r]
        out.append(row)
    return out


def line(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"{row['system']} {row['config']}: {row['error'][:200]}"
    return (
        f"{row['system']} {row['config']}: {row['rate']:,.0f} jobs/s "
        f"(middle 80 %: {row['mid_rate']:,.0f}), {row['cpu_us_per_job']:.0f} µs CPU a job"
    )


def best_config(rows: list[dict[str, Any]], system: str, shape: str = "noop") -> str | None:
    ok = [r for r in rows if r["system"] == system and r["shape"] == shape and "error" not in r]
    return max(ok, key=lambda r: r["rate"])["config"] if ok else None


def markdown(data: dict[str, Any]) -> str:
    rows, m = data["rows"], data["machine"]
    out = [
        f"`{m['command']}` at {m.get('tasuki_revision', '?')}, {m.get('date', '?')}; "
        f"{m.get('cores', '?')} CPUs ({m.get('cpu', '?')}), SQLite {m['sqlite']}, "
        f"{m['messages']:,} jobs a drain; load average "
        f"{m['load_before'][0]:.2f} before, {m['load_after'][0]:.2f} after.",
        "",
    ]
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    for shape in shapes:
        best: dict[str, dict[str, Any]] = {}
        for r in rows:
            if r["shape"] != shape or "error" in r:
                continue
            if r["system"] not in best or r["rate"] > best[r["system"]]["rate"]:
                best[r["system"]] = r
        title = "no-op job" if shape == "noop" else "a 1 ms wait per job"
        out += [
            f"### {title}: each system's best configuration",
            "",
            "| system | best configuration | jobs/s | middle 80 % | CPU a job | tasuki ÷ system |",
            "|---|---|--:|--:|--:|--:|",
        ]
        ours = best.get("tasuki")
        for name, r in best.items():
            ratio = f"{ours['rate'] / r['rate']:.2f}x" if ours else "-"
            out.append(
                f"| {name} | {r['config']} | {r['rate']:,.0f} | {r['mid_rate']:,.0f} | "
                f"{r['cpu_us_per_job']:,.0f} µs | {ratio} |"
            )
        failed = sorted(
            {r["system"] for r in rows if r["shape"] == shape and "error" in r} - set(best)
        )
        for name in failed:
            out.append(f"| {name} | failed | - | - | - | - |")
        peers = [r for k, r in best.items() if not k.startswith("tasuki")]
        if peers:
            top = max(peers, key=lambda r: r["rate"])
            out.append("")
            for name, r in best.items():
                if name.startswith("tasuki"):
                    out.append(
                        f"- {name}'s best ÷ the best peer ({top['system']}, {top['config']}): "
                        f"**{r['rate'] / top['rate']:.2f}x** (target 3x)."
                    )
        out.append("")
    out += [
        "### Every configuration",
        "",
        "| shape | system | configuration | jobs/s | rounds | middle 80 % | start-up | tail "
        "| CPU a job |",
        "|---|---|---|--:|---|--:|--:|--:|--:|",
    ]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['shape']} | {r['system']} | {r['config']} | failed | | | | | |")
            continue
        each = ", ".join(f"{v:,}" for v in r.get("rounds", []))
        out.append(
            f"| {r['shape']} | {r['system']} | {r['config']} | {r['rate']:,.0f} | {each} | "
            f"{r['mid_rate']:,.0f} | {r['startup_s']:.2f} s | {r['tail_s'] * 1000:.0f} ms | "
            f"{r['cpu_us_per_job']:,.0f} µs |"
        )
    out += [
        "",
        "### Durability, as each system opens its database",
        "",
        "| system | version | journal_mode | synchronous | fsyncs a job | a crashed job |",
        "|---|---|---|---|--:|---|",
    ]
    for name, d in data["durability"].items():
        f = d.get("fsyncs_per_job")
        out.append(
            f"| {name} | {d.get('version', '?')} | {d.get('journal_mode', '?')} | "
            f"{d.get('synchronous', '?')} | {'-' if f is None else f'{f:.2f}'} | "
            f"{d['semantics']} |"
        )
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
