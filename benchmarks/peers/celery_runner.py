"""Celery: `apply_async` one by one (no bulk publish API); a `solo` pool worker, which ran
the no-op faster than `--pool=threads` at 2 or 8 threads (see README)."""

from __future__ import annotations

from benchmarks.peers.base import Context, SyncPeer, bin_path

QUEUE = "celery"


class CeleryPeer(SyncPeer):
    name = "celery"
    title = "Celery"
    package = "celery"
    settings = (
        "`celery worker --pool=solo`, prefetch multiplier 32, "
        "`--without-gossip --without-mingle --without-heartbeat`, ignore_result, early ack"
    )

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        from benchmarks.peers import celery_app

        self.app = celery_app.app
        self.task = celery_app.noop

    def enqueue(self, i: int) -> None:
        self.task.apply_async((i,))

    def worker_argv(self) -> list[str]:
        return [
            bin_path("celery"), "-A", "benchmarks.peers.celery_app", "worker",
            "--pool=solo", "-Q", QUEUE,
            "--without-gossip", "--without-mingle", "--without-heartbeat",
            "--loglevel=WARNING",
        ]  # fmt: skip

    def pending(self) -> int:
        # kombu's Redis transport: the queue is a list, delivered-but-unacked messages
        # wait in the `unacked` hash until the task is acked.
        return int(self.redis.llen(QUEUE)) + int(self.redis.hlen("unacked"))
