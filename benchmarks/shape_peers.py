"""Each system of the real-shape benchmark in each configuration of its sweep: the no-op
runners of `benchmarks/peers/`, pointed at their app's `shape` job and started with the
configuration's own knobs.

Every system gets the same grid at the machine's core count, processes 1 and 2 x threads
(or concurrency) 8 and 32, in its own words; Celery and Huey also get their
process pool of 2 (`--pool=prefork -c 2`, `-k process -w 2`), their usual way onto two
cores. Where a system has no flag for more processes (Celery's thread pool, Huey's
thread workers, arq, the raw floor), N copies of its worker command run side by side in
one session (`spawn`), as N containers of it would.

Shape io50 (a 50 ms wait) has a sweep of its own (`io_configs`), at the concurrency I/O
jobs are run at: threads 256, and async or greenlets 1,024, each with the Redis
connection-pool size a user of that system would set there (`Config.pool`; the app
modules say which setting and why). The drain of each is sized to IO_SECONDS of its
ideal rate, processes x concurrency / 50 ms (`io_messages`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.peers.base import Context, Peer, python_argv

PROCS = (1, 2)
THREADS = (8, 32)
#: shape io50: threads, and async tasks or greenlets, per process
IO_THREADS, IO_ASYNC = 256, 1024
#: shape io50: each drain is this many seconds of its configuration's ideal rate, so that
#: start-up and tail are a small share of it
IO_SECONDS = 8.0
#: connections a pool gets beyond the concurrency: the consumer's own fetch, heartbeat,
#: scheduler and maintenance connections
POOL_SPARE = 16


@dataclass(frozen=True)
class Config:
    system: str
    label: str
    procs: int
    conc: int
    kind: str = ""  # a system's own mode: "prefork", "process", "async", "gevent"...
    #: the Redis connection pool's size per process, for systems whose default is too
    #: small at this concurrency (0: the system's default)
    pool: int = 0


def spawn(procs: int, argv: Sequence[str]) -> list[str]:
    """`argv` as `procs` processes side by side in one session (killed as one)."""
    if procs == 1:
        return list(argv)
    loop = f'i=0; while [ $i -lt {procs} ]; do "$@" & i=$((i+1)); done; wait'
    return ["sh", "-c", loop, "sh", *argv]


def grid(system: str, label: Callable[[int, int], str]) -> list[Config]:
    return [Config(system, label(p, c), p, c) for p in PROCS for c in THREADS]


def configs(system: str) -> list[Config]:
    """The sweep of one system (see the module's docstring)."""
    if system == "tasuki":
        return grid(system, lambda p, c: f"--workers {p} -c {c}")
    if system == "celery":
        return [
            Config(system, "--pool=prefork -c 2", 2, 2, "prefork"),
            *grid(system, lambda p, c: f"{p} x --pool=threads -c {c}"),
        ]
    if system == "dramatiq":
        return grid(system, lambda p, c: f"--processes {p} --threads {c}")
    if system == "huey":
        return [
            Config(system, "-k process -w 2", 2, 2, "process"),
            *grid(system, lambda p, c: f"{p} x -k thread -w {c}"),
        ]
    if system == "arq":
        return grid(system, lambda p, c: f"{p} x max_jobs={c}")
    if system == "saq":
        return grid(system, lambda p, c: f"--workers {p}, concurrency={c}")
    if system == "taskiq":
        return grid(system, lambda p, c: f"--workers {p} --max-async-tasks {c}")
    if system == "raw":
        return [Config(system, f"{p} x one thread, batches of 256", p, 1) for p in PROCS]
    raise KeyError(system)


SYSTEMS = ("tasuki", "celery", "dramatiq", "huey", "arq", "saq", "taskiq")


def io_configs(system: str) -> list[Config]:
    """Shape io50's sweep of one system (see the module's docstring). The last of each is
    what `--quick` runs."""
    t, a, spare = IO_THREADS, IO_ASYNC, POOL_SPARE
    if system == "tasuki":
        # tasuki's Redis client keeps a pool of its own that grows with the threads and
        # tasks using it: no size to set.
        return [
            *(Config(system, f"--workers {p} -c {t}", p, t) for p in (2, 1)),
            *(Config(system, f"--workers {p} -c {a}, async def", p, a, "async") for p in (2, 1)),
        ]
    if system == "celery":
        return [
            Config(system, f"--pool=gevent -c {a}", 1, a, "gevent", a + spare),
            Config(system, f"--pool=threads -c {t}", 1, t, "threads", t + spare),
        ]
    if system == "dramatiq":
        return [Config(system, f"--processes 2 --threads {t}", 2, t, "", t + spare)]
    if system == "huey":
        return [
            Config(system, f"-k greenlet -w {a}", 1, a, "greenlet", a + spare),
            Config(system, f"-k thread -w {t}", 1, t, "thread", t + spare),
        ]
    labels = {
        "arq": lambda p, c: f"{p} x max_jobs={c}",
        "saq": lambda p, c: f"--workers {p}, concurrency={c}",
        "taskiq": lambda p, c: f"--workers {p} --max-async-tasks {c}",
    }
    if system in labels:
        # a dequeue or an ack per running job may hold a connection at once
        return [
            Config(system, labels[system](p, c), p, c, "", c + spare)
            for c in (a, t)
            for p in (2, 1)
        ]
    raise KeyError(system)


def io_ideal(cfg: Config) -> float:
    """Jobs/s of `cfg` if every slot always ran a 50 ms wait: processes x c / 50 ms."""
    from benchmarks.shape_jobs import IO_SLEEP

    return cfg.procs * cfg.conc / IO_SLEEP


def io_messages(cfg: Config) -> int:
    """Shape io50's drain for `cfg`: IO_SECONDS of its ideal rate, in thousands."""
    return max(1_000, int(round(io_ideal(cfg) * IO_SECONDS, -3)))


def make(cfg: Config, ctx: Context) -> Peer:
    """The runner of `cfg.system`, set to run the `shape` job in configuration `cfg`."""
    maker = _MAKERS[cfg.system]
    peer = maker(cfg, ctx)
    peer.settings = cfg.label
    return peer


def _tasuki(cfg: Config, ctx: Context) -> Peer:
    from benchmarks.peers.tasuki_runner import TasukiRedis

    class TasukiShape(TasukiRedis):
        def worker_argv(self) -> list[str]:
            return [*super().worker_argv(), "--workers", str(cfg.procs)]

    peer = TasukiShape(ctx, concurrency=cfg.conc)
    peer.job = peer.app.jobs["shape_async" if cfg.kind == "async" else "shape"]
    return peer


def _celery(cfg: Config, ctx: Context) -> Peer:
    from benchmarks.peers import celery_app
    from benchmarks.peers.celery_runner import CeleryPeer

    pool = cfg.kind if cfg.kind in ("prefork", "gevent") else "threads"

    class CeleryShape(CeleryPeer):
        def worker_argv(self) -> list[str]:
            argv = [a for a in super().worker_argv() if a != "--pool=solo"]
            return spawn(cfg.procs if pool == "threads" else 1,
                         [*argv, f"--pool={pool}", "-c", str(cfg.conc)])  # fmt: skip

        def worker_env(self) -> dict[str, str]:
            return {"BENCH_CELERY_POOL": str(cfg.pool)} if cfg.pool else {}

    peer = CeleryShape(ctx)
    peer.task = celery_app.shape
    return peer


def _dramatiq(cfg: Config, ctx: Context) -> Peer:
    from benchmarks.peers import dramatiq_app
    from benchmarks.peers.dramatiq_runner import DramatiqPeer

    class DramatiqShape(DramatiqPeer):
        def worker_argv(self) -> list[str]:
            return [
                self_argv0("dramatiq"), "benchmarks.peers.dramatiq_app",
                "--processes", str(cfg.procs), "--threads", str(cfg.conc),
            ]  # fmt: skip

        def worker_env(self) -> dict[str, str]:
            if not cfg.pool:
                return super().worker_env()
            # shape io50: Dramatiq's own prefetch (2 x threads), not the no-op table's 64,
            # which would leave three in four of 256 threads without a message
            return {"BENCH_DRAMATIQ_POOL": str(cfg.pool)}

    peer = DramatiqShape(ctx)
    peer.actor = dramatiq_app.shape
    return peer


def _huey(cfg: Config, ctx: Context) -> Peer:
    from benchmarks.peers import huey_app
    from benchmarks.peers.huey_runner import HueyPeer

    class HueyShape(HueyPeer):
        def worker_argv(self) -> list[str]:
            kind = cfg.kind if cfg.kind in ("process", "greenlet") else "thread"
            args = [
                "benchmarks.peers.huey_app.huey",
                "-k", kind, "-w", str(cfg.conc), "-n", "-C", "-q",
            ]  # fmt: skip
            if kind == "greenlet":
                # Huey's docs: greenlet workers need gevent's monkey-patch applied before
                # anything else is imported, by the program that starts the consumer.
                return python_argv("-c", GEVENT_HUEY, *args)
            argv = [self_argv0("huey_consumer"), *args]
            return argv if kind == "process" else spawn(cfg.procs, argv)

        def worker_env(self) -> dict[str, str]:
            return {"BENCH_HUEY_POOL": str(cfg.pool)} if cfg.pool else {}

    peer = HueyShape(ctx)
    peer.task = huey_app.shape
    return peer


GEVENT_HUEY = (
    "from gevent import monkey; monkey.patch_all(); import sys; "
    "sys.argv[0] = 'huey_consumer'; "
    "from huey.bin.huey_consumer import consumer_main; consumer_main()"
)


def _arq(cfg: Config, ctx: Context) -> Peer:
    from benchmarks.peers.arq_runner import ArqPeer

    class ArqShape(ArqPeer):
        async def aenqueue(self, i: int) -> None:
            await self.pool.enqueue_job("shape", i)

        def worker_argv(self) -> list[str]:
            return spawn(cfg.procs, super().worker_argv())

        def worker_env(self) -> dict[str, str]:
            env = {"BENCH_ARQ_MAX_JOBS": str(cfg.conc)}
            return {**env, "BENCH_ARQ_POOL": str(cfg.pool)} if cfg.pool else env

    return ArqShape(ctx)


def _saq(cfg: Config, ctx: Context) -> Peer:
    from benchmarks.peers.saq_runner import SaqPeer

    class SaqShape(SaqPeer):
        async def aenqueue(self, i: int) -> None:
            await self.queue.enqueue("shape", i=i)

        def worker_argv(self) -> list[str]:
            argv = super().worker_argv()
            argv[argv.index("--workers") + 1] = str(cfg.procs)
            return argv

        def worker_env(self) -> dict[str, str]:
            env = {"BENCH_SAQ_CONCURRENCY": str(cfg.conc)}
            return {**env, "BENCH_SAQ_POOL": str(cfg.pool)} if cfg.pool else env

    return SaqShape(ctx)


def _taskiq(cfg: Config, ctx: Context) -> Peer:
    from benchmarks.peers import taskiq_app
    from benchmarks.peers.taskiq_runner import TaskiqPeer

    class TaskiqShape(TaskiqPeer):
        def worker_argv(self) -> list[str]:
            argv = super().worker_argv()
            argv[argv.index("--workers") + 1] = str(cfg.procs)
            argv[argv.index("--max-async-tasks") + 1] = str(cfg.conc)
            return argv

        def worker_env(self) -> dict[str, str]:
            env = super().worker_env()
            return {**env, "BENCH_TASKIQ_POOL": str(cfg.pool)} if cfg.pool else env

    peer = TaskiqShape(ctx)
    peer.task = peer.broker.register_task(taskiq_app.shape.original_func, task_name="shape")
    return peer


def _raw(cfg: Config, ctx: Context) -> Peer:
    from benchmarks.peers.raw_runner import RawPeer
    from benchmarks.peers.raw_worker import READY, encode

    class RawShape(RawPeer):
        def enqueue(self, i: int) -> None:
            self.redis.rpush(READY, encode(i, "shape"))

        def enqueue_bulk(self, indices: Sequence[int]) -> None:
            self.redis.rpush(READY, *(encode(i, "shape") for i in indices))

        def worker_argv(self) -> list[str]:
            return spawn(cfg.procs, super().worker_argv())

    return RawShape(ctx)


def self_argv0(name: str) -> str:
    from benchmarks.peers.base import bin_path

    return bin_path(name)


_MAKERS: dict[str, Callable[[Config, Context], Any]] = {
    "tasuki": _tasuki,
    "celery": _celery,
    "dramatiq": _dramatiq,
    "huey": _huey,
    "arq": _arq,
    "saq": _saq,
    "taskiq": _taskiq,
    "raw": _raw,
}
