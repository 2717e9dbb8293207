"""Each system of the real-shape benchmark in each configuration of its sweep: the no-op
runners of `benchmarks/peers/`, pointed at their app's `shape` job and started with the
configuration's own knobs.

Every system gets the same grid at the machine's core count, processes 1 and 2 x threads
(or concurrency) 8 and 32, in its own words; Celery and Huey also get their
process pool of 2 (`--pool=prefork -c 2`, `-k process -w 2`), their usual way onto two
cores. Where a system has no flag for more processes (Celery's thread pool, Huey's
thread workers, arq, the raw floor), N copies of its worker command run side by side in
one session (`spawn`), as N containers of it would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.peers.base import Context, Peer

PROCS = (1, 2)
THREADS = (8, 32)


@dataclass(frozen=True)
class Config:
    system: str
    label: str
    procs: int
    conc: int
    kind: str = ""  # a system's own mode: "prefork", "process", "async"


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

    pool = "prefork" if cfg.kind == "prefork" else "threads"

    class CeleryShape(CeleryPeer):
        def worker_argv(self) -> list[str]:
            argv = [a for a in super().worker_argv() if a != "--pool=solo"]
            return spawn(cfg.procs if pool == "threads" else 1,
                         [*argv, f"--pool={pool}", "-c", str(cfg.conc)])  # fmt: skip

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

    peer = DramatiqShape(ctx)
    peer.actor = dramatiq_app.shape
    return peer


def _huey(cfg: Config, ctx: Context) -> Peer:
    from benchmarks.peers import huey_app
    from benchmarks.peers.huey_runner import HueyPeer

    class HueyShape(HueyPeer):
        def worker_argv(self) -> list[str]:
            kind = "process" if cfg.kind == "process" else "thread"
            argv = [
                self_argv0("huey_consumer"), "benchmarks.peers.huey_app.huey",
                "-k", kind, "-w", str(cfg.conc), "-n", "-C", "-q",
            ]  # fmt: skip
            return argv if kind == "process" else spawn(cfg.procs, argv)

    peer = HueyShape(ctx)
    peer.task = huey_app.shape
    return peer


def _arq(cfg: Config, ctx: Context) -> Peer:
    from benchmarks.peers.arq_runner import ArqPeer

    class ArqShape(ArqPeer):
        async def aenqueue(self, i: int) -> None:
            await self.pool.enqueue_job("shape", i)

        def worker_argv(self) -> list[str]:
            return spawn(cfg.procs, super().worker_argv())

        def worker_env(self) -> dict[str, str]:
            return {"BENCH_ARQ_MAX_JOBS": str(cfg.conc)}

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
            return {"BENCH_SAQ_CONCURRENCY": str(cfg.conc)}

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
