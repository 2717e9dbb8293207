"""RQ: `Queue.enqueue` one by one, `Queue.enqueue_many` (one pipeline) in bulk, and a
`SimpleWorker`, which runs jobs in its own process (the default `Worker` forks a child
per job: far slower for tiny jobs, measured with `--only rq-fork`)."""

from __future__ import annotations

from collections.abc import Sequence

from rq import Queue

from benchmarks.peers.base import Context, SyncPeer, bin_path
from benchmarks.peers.rq_jobs import noop

QUEUE = "default"


class RQPeer(SyncPeer):
    name = "rq"
    title = "RQ"
    package = "rq"
    has_bulk = True
    drain_share = 0.25  # ~170 jobs/s: 5,000 of 20,000 still take ~30 s
    worker_class = "rq.SimpleWorker"
    settings = "`rq worker --worker-class rq.SimpleWorker`, default result_ttl, pickle"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.queue = Queue(QUEUE, connection=self.redis)

    def enqueue(self, i: int) -> None:
        self.queue.enqueue(noop, i)

    def enqueue_bulk(self, indices: Sequence[int]) -> None:
        self.queue.enqueue_many([Queue.prepare_data(noop, (i,)) for i in indices])

    def worker_argv(self) -> list[str]:
        return [
            bin_path("rq"), "worker", "--url", self.ctx.redis_url,
            "--worker-class", self.worker_class, "--quiet", QUEUE,
        ]  # fmt: skip

    def pending(self) -> int:
        return int(self.queue.count) + int(self.queue.started_job_registry.count)


class RQForkPeer(RQPeer):
    name = "rq-fork"
    title = "RQ (forking Worker)"
    worker_class = "rq.Worker"
    drain_share = 0.05  # ~35 jobs/s
    settings = "`rq worker` (default Worker: one fork per job), default result_ttl, pickle"
