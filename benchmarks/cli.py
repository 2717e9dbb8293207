"""`python -m benchmarks [redis|postgres] [--messages N] [--rounds N] [--only a,b] [--quick]`."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from types import FrameType
from typing import Any

from benchmarks import chart, machine, peers, procs, report
from benchmarks.marks import Marks
from benchmarks.measure import Bench, Settings, fill, measure, measure_drain
from benchmarks.peers.base import REDIS_ENV, ROOT, Context, Peer, Unavailable
from benchmarks.redis_server import RedisServer
from benchmarks.report import SystemResult

DOCS = ROOT / "docs" / "benchmarks"
SWEEP = (8, 64, 128, 256, 512, 1024)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument(
        "section",
        nargs="?",
        choices=sorted(peers.SECTIONS),
        default="redis",
        help="redis (default): the Redis queues; postgres: the PostgreSQL queues",
    )
    p.add_argument("--messages", type=int, help="jobs per drain (default 20000; --quick 2000)")
    p.add_argument("--rounds", type=int, help="interleaved rounds, median kept (default 3)")
    p.add_argument("--only", help=f"comma-separated systems, of: {', '.join(peers.SYSTEMS)}")
    p.add_argument("--quick", action="store_true", help="1 round, fewer messages: a smoke test")
    p.add_argument(
        "--sweep",
        action="store_true",
        help=f"only time tasuki drains at -c {', '.join(map(str, SWEEP))} (to pick -c)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help=f"where results go (default {DOCS.relative_to(ROOT)} for a full default run, "
        "else a temporary directory)",
    )
    p.add_argument("--timeout", type=float, default=240.0, help="seconds per system and round")
    p.add_argument(
        "--idle-every-round",
        action="store_true",
        help="measure idle CPU and wake-up in every round (default: the first only)",
    )
    p.add_argument("--drain-only", action="store_true", help="only time drains (for tuning)")
    p.add_argument(
        "--render",
        type=Path,
        metavar="RESULTS_JSON",
        help="run nothing: redraw the table, latest.md and the chart from a results.json",
    )
    return p.parse_args(argv)


class SystemTimeout(Exception):
    pass


@contextlib.contextmanager
def alarm(seconds: float) -> Iterator[None]:
    """Interrupt whatever the main thread is blocked in after `seconds` (a hung client)."""

    def ring(signum: int, frame: FrameType | None) -> None:
        raise SystemTimeout(f"no result after {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def short_error(exc: BaseException) -> str:
    if isinstance(exc, ImportError | ModuleNotFoundError):
        return f"not installed: {exc}"
    text = f"{type(exc).__name__}: {exc}".strip()
    if not isinstance(exc, TimeoutError | SystemTimeout):
        text += "\n" + "".join(traceback.format_exception(exc)[-4:])
    return text


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load_all(names: list[str], ctx: Context) -> tuple[dict[str, Peer], list[SystemResult]]:
    loaded: dict[str, Peer] = {}
    results: list[SystemResult] = []
    for name in names:
        result = SystemResult(name)
        results.append(result)
        try:
            with alarm(60):
                peer = peers.load(name, ctx)
        except Unavailable as exc:
            result.unavailable = str(exc)
            say(f"  {name}: unavailable: {exc}")
            continue
        except Exception as exc:
            result.errors.append(short_error(exc))
            say(f"  {name}: FAILED to load: {short_error(exc)}")
            continue
        loaded[name] = peer
        result.title, result.settings = peer.title, peer.settings
        with contextlib.suppress(metadata.PackageNotFoundError):
            result.version = metadata.version(peer.package)
    return loaded, results


def run_rounds(
    bench: Bench,
    loaded: dict[str, Peer],
    results: list[SystemResult],
    args: argparse.Namespace,
    rounds: int,
) -> None:
    by_name = {r.name: r for r in results}
    order = list(loaded)
    for rnd in range(rounds):
        # Rotate the order each round so no system always runs first (or last).
        shift = rnd % len(order) if order else 0
        for name in order[shift:] + order[:shift]:
            result, peer = by_name[name], loaded[name]
            say(f"round {rnd + 1}/{rounds}: {name} ...")
            started = time.monotonic()
            try:
                idle = rnd == 0 or args.idle_every_round
                with alarm(args.timeout + 60):
                    metrics = measure(bench, peer, idle=idle, drain_only=args.drain_only)
            except (Exception, SystemTimeout) as exc:
                result.errors.append(f"round {rnd + 1}: {short_error(exc)}")
                say(f"  FAILED: {short_error(exc)}")
            else:
                metrics["round"] = rnd + 1
                result.rounds.append(metrics)
                say(f"  {progress_line(metrics)} ({time.monotonic() - started:.0f} s)")
            finally:
                procs.kill_all_workers()


def progress_line(m: dict[str, float]) -> str:
    parts = [f"{m['processed_per_s']:,.0f} jobs/s (startup {m['startup_s']:.2f} s)"]
    if "enqueue_per_s" in m:
        parts.append(f"enqueue {m['enqueue_per_s']:,.0f}/s")
    if "p50_ms" in m:
        parts.append(f"p50 {m['p50_ms']:.1f} ms")
    return ", ".join(parts)


def sweep(bench: Bench, ctx: Context, timeout: float, rounds: int, section: str) -> None:
    """tasuki's drains at each -c of SWEEP, rounds interleaved, medians printed at the end."""
    from benchmarks.peers.tasuki_runner import TasukiPostgres, TasukiRedis, TasukiSQLite

    classes = (TasukiPostgres,) if section == "postgres" else (TasukiRedis, TasukiSQLite)
    seen: dict[tuple[str, int], list[dict[str, float]]] = {}
    for rnd in range(rounds):
        for cls in classes:
            for c in SWEEP:
                try:
                    peer = cls(ctx, concurrency=c)
                except Unavailable as exc:
                    say(f"{cls.name}: unavailable: {exc}")
                    break
                try:
                    with alarm(timeout):
                        fill(bench, peer)
                        m = measure_drain(bench, peer, prefilled=True)
                    seen.setdefault((peer.name, c), []).append(m)
                    say(f"round {rnd + 1}/{rounds}: {peer.name} -c {c}: {describe_sweep(m)}")
                except (Exception, SystemTimeout) as exc:
                    print(f"{peer.name} -c {c}: FAILED {short_error(exc)}", flush=True)
                finally:
                    procs.kill_all_workers()
                    peer.close()
    print(f"medians of {rounds} round(s):", flush=True)
    for (name, c), runs in seen.items():
        median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{name} -c {c}: {describe_sweep(median)}", flush=True)


def describe_sweep(m: dict[str, float]) -> str:
    return (
        f"{m['processed_per_s']:,.0f} jobs/s (steady {m['steady_per_s']:,.0f}/s, "
        f"startup {m['startup_s']:.2f} s, worker CPU {m['worker_cpu_s']:.1f} s)"
    )


def own_postgres(workdir: Path) -> Any:
    """The PostgreSQL section's server: `BENCH_POSTGRES_URL`, or the local one on 5432
    when it answers, else a cluster of our own on a free port (the tests' helper:
    Debian's binaries, `fsync=off`), stopped at the end. Returns that cluster, or None."""
    from benchmarks.peers.tasuki_runner import POSTGRES_ENV

    if os.environ.get(POSTGRES_ENV):
        return None
    from tasuki.testing.servers import PostgresServer

    server = PostgresServer(workdir / "postgres")
    server.start()
    if server.process_dir is None:  # the local server answered
        return None
    os.environ[POSTGRES_ENV] = f"postgresql://postgres@127.0.0.1:{server.port}/test"
    say(f"PostgreSQL of our own on port {server.port} (nothing answered on 5432)")
    return server


def postgres_env_url() -> str | None:
    from benchmarks.peers.tasuki_runner import postgres_url

    return postgres_url()


def on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # the same clean-up as Ctrl-C: no worker outlives the harness


def render(path: Path) -> int:
    results, info, settings, rounds = report.load(path)
    print(report.text_table(results))
    report.save(path.parent, results, info, settings, rounds)
    chart.draw(results, path.parent / "throughput.png", subtitle(info, settings, rounds))
    return 0


def subtitle(info: dict[str, Any], settings: Settings, rounds: int) -> str:
    return (
        f"{settings.messages:,} no-op jobs, median of {rounds} round(s); {info['cpu']}, "
        f"{info['cores']} cores, Python {info['python']}, {report.engines_text(info)}"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.render:
        return render(args.render)
    signal.signal(signal.SIGTERM, on_sigterm)
    settings = Settings(system_timeout=args.timeout)
    rounds = args.rounds or (1 if args.quick else 3)
    if args.quick:
        settings.messages, settings.latency_seconds, settings.idle_seconds = 2_000, 2.0, 2.0
        settings.idle_probes = 4
    if args.messages:
        settings.messages = args.messages
    systems, reference = peers.SECTIONS[args.section]
    report.set_reference(reference)
    names = systems if not args.only else [n.strip() for n in args.only.split(",")]
    unknown = [n for n in names if n not in peers.SYSTEMS]
    if unknown:
        say(f"unknown system(s) {unknown}; known: {', '.join(peers.SYSTEMS)}")
        return 2
    official = not (
        args.quick or args.only or args.sweep or args.messages or args.rounds or args.drain_only
    )
    if args.out:
        out_dir: Path | None = args.out
    elif official:
        out_dir = DOCS if args.section == "redis" else DOCS / args.section
    else:
        out_dir = None

    with tempfile.TemporaryDirectory(prefix="tasuki-bench-") as tmp:
        workdir = Path(tmp)
        server: RedisServer | None = None
        loaded: dict[str, Peer] = {}
        marks_path = Path("/dev/shm") if Path("/dev/shm").is_dir() else workdir
        marks = Marks(str(marks_path / f"tasuki-bench-{Path(tmp).name}.marks"), settings.capacity)
        postgres: Any = None
        try:
            if args.section == "postgres":
                postgres = own_postgres(workdir)
            server = RedisServer(workdir)
            say(f"redis-server {server.version} on port {server.port} (pid {server.pid})")
            # Before any peer module is imported: they all read it at import time.
            os.environ[REDIS_ENV] = server.url
            ctx = Context(redis_url=server.url, tmpdir=workdir)
            bench = Bench(server, marks, settings, workdir)
            if args.sweep:
                sweep(bench, ctx, args.timeout, args.rounds or 3, args.section)
                return 0
            load_before = os.getloadavg()
            loaded, results = load_all(names, ctx)
            run_rounds(bench, loaded, results, args, rounds)
            info = machine.info(
                server.version, section=args.section, postgres_url=postgres_env_url()
            )
            info.update(load_before=load_before, load_after=os.getloadavg())
        except KeyboardInterrupt:
            say("interrupted: stopping every worker")
            return 130
        finally:
            procs.kill_all()
            for peer in loaded.values():
                with contextlib.suppress(Exception):
                    peer.close()
            if server is not None:
                server.stop()
            if postgres is not None:
                postgres.stop()
            marks.close()
            Path(marks.path).unlink(missing_ok=True)

        print()
        print(report.text_table(results))
        for line in report.duplicates(results):
            print(f"note: {line}")
        failed = [r for r in results if r.errors]
        for r in failed:
            print(f"\n{r.name}: {r.status}\n  " + "\n  ".join("\n".join(r.errors).splitlines()))
        if out_dir is None:
            out_dir = Path(tempfile.mkdtemp(prefix="tasuki-bench-results-"))
        report.save(out_dir, results, info, settings, rounds)
        try:
            chart.draw(results, out_dir / "throughput.png", subtitle(info, settings, rounds))
        except Exception as exc:
            say(f"chart not drawn: {short_error(exc)}")
        print(f"\nresults: {out_dir}/results.json, latest.md, throughput.png")
    return 0
