"""Shape (b) of the real-shape benchmark: one PostgreSQL query (`SELECT 1` on a pool of
the worker process's own) for tasuki on PostgreSQL and the PostgreSQL queues, each over
the grid of `shape_peers.py` (processes 1/2 x concurrency 8/32), in its own words:
tasuki `--workers P -c C`; procrastinate `--concurrency C`; PgQueuer `batch_size=C`
(jobs per dequeue, each run as a task of its own: its `max_concurrent_tasks` cap, tried
first, ran about 32 jobs/s at 8 and timed out); Chancy the queue's `concurrency=C`
(async executor); Oban (oban-py, in `.venv-bench-3.12`) the queue's limit C; DBOS
queues the queue's `worker_concurrency=C` (a sync workflow on DBOS's threads). Where a
system has no flag for more processes, P copies of its worker run side by side (`spawn`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from benchmarks.peers.base import Context, Peer
from benchmarks.shape_peers import Config, grid, spawn

SYSTEMS = ("tasuki", "procrastinate", "pgqueuer", "chancy", "oban", "dbos")


def configs(system: str) -> list[Config]:
    labels: dict[str, Callable[[int, int], str]] = {
        "tasuki": lambda p, c: f"--workers {p} -c {c}",
        "procrastinate": lambda p, c: f"{p} x --concurrency {c}",
        "pgqueuer": lambda p, c: f"{p} x batch_size={c}",
        "chancy": lambda p, c: f"{p} x concurrency={c}",
        "oban": lambda p, c: f"{p} x queues={{'default': {c}}}",
        "dbos": lambda p, c: f"{p} x worker_concurrency={c}",
    }
    return grid(system, labels[system])


def make(cfg: Config, ctx: Context) -> Peer:
    peer: Peer = _MAKERS[cfg.system](cfg, ctx)
    peer.settings = cfg.label
    return peer


def _tasuki(cfg: Config, ctx: Context) -> Peer:
    from benchmarks.peers.tasuki_runner import POSTGRES_ENV, TasukiPostgres, postgres_url

    class TasukiShape(TasukiPostgres):
        def worker_argv(self) -> list[str]:
            return [*super().worker_argv(), "--workers", str(cfg.procs)]

        def worker_env(self) -> dict[str, str]:
            return {**super().worker_env(), POSTGRES_ENV: postgres_url()}

    peer = TasukiShape(ctx, concurrency=cfg.conc)
    peer.job = peer.app.jobs["shape_async" if cfg.kind == "async" else "shape"]
    return peer


def _procrastinate(cfg: Config, ctx: Context) -> Peer:
    from benchmarks.peers import procrastinate_app
    from benchmarks.peers.procrastinate_runner import ProcrastinatePeer

    class ProcrastinateShape(ProcrastinatePeer):
        def worker_argv(self) -> list[str]:
            argv = super().worker_argv()
            argv[argv.index("--concurrency") + 1] = str(cfg.conc)
            return spawn(cfg.procs, argv)

    peer = ProcrastinateShape(ctx)
    peer.task = procrastinate_app.shape
    return peer


def _pgqueuer(cfg: Config, ctx: Context) -> Peer:
    from benchmarks.peers.base import python_argv
    from benchmarks.peers.pgqueuer_runner import PgQueuerPeer

    class PgQueuerShape(PgQueuerPeer):
        entrypoint = "shape"

        def worker_argv(self) -> list[str]:
            argv = python_argv("-m", "benchmarks.peers.pgqueuer_app", cfg.conc)
            return spawn(cfg.procs, argv)

    return PgQueuerShape(ctx)


def _chancy(cfg: Config, ctx: Context) -> Peer:
    from chancy import Chancy, Job, Queue

    from benchmarks.peers import chancy_runner
    from benchmarks.peers.chancy_app import app, shape

    async def declare(chancy: Chancy) -> None:
        async with chancy:
            await chancy.declare(
                Queue(
                    "default",
                    concurrency=cfg.conc,
                    executor=Chancy.Executor.Async,
                    polling_interval=chancy_runner.POLL,
                    eager_polling=True,
                ),
                upsert=True,
            )

    class ChancyShape(chancy_runner.ChancyPeer):
        def enqueue(self, i: int) -> None:
            self.chancy.sync_push(Job.from_func(shape, kwargs={"i": i}))

        def enqueue_bulk(self, indices: Any) -> None:
            jobs = [Job.from_func(shape, kwargs={"i": i}) for i in indices]
            for _ in self.chancy.sync_push_many(jobs, batch_size=len(jobs)):
                pass

        def worker_argv(self) -> list[str]:
            return spawn(cfg.procs, super().worker_argv())

    peer = ChancyShape(ctx)
    asyncio.run(declare(app()))
    return peer


def _oban(cfg: Config, ctx: Context) -> Peer:
    from benchmarks.peers.oban_runner import ObanPeer

    class ObanShape(ObanPeer):
        entrypoint = "shape"

        def worker_argv(self) -> list[str]:
            return spawn(cfg.procs, super().worker_argv())

    return ObanShape(ctx, limit=cfg.conc)


def _dbos(cfg: Config, ctx: Context) -> Peer:
    from benchmarks.peers.dbos_runner import DBOSPeer

    class DBOSShape(DBOSPeer):
        workflow = "shape"

        def worker_argv(self) -> list[str]:
            return spawn(cfg.procs, super().worker_argv())

    return DBOSShape(ctx, concurrency=cfg.conc)


_MAKERS: dict[str, Callable[[Config, Context], Any]] = {
    "tasuki": _tasuki,
    "procrastinate": _procrastinate,
    "pgqueuer": _pgqueuer,
    "chancy": _chancy,
    "oban": _oban,
    "dbos": _dbos,
}
