"""Taskiq: `task.kiq` one by one (no bulk API); `taskiq worker --workers 1`."""

from __future__ import annotations

import os

from benchmarks.peers.base import AsyncPeer, Context, bin_path

MAX_ASYNC_TASKS = 100  # taskiq's default


class TaskiqPeer(AsyncPeer):
    name = "taskiq"
    title = "Taskiq (stream)"
    package = "taskiq"
    kind = "stream"
    settings = (
        f"`taskiq worker --workers 1 --max-async-tasks {MAX_ASYNC_TASKS}`, taskiq-redis "
        "RedisStreamBroker (XREADGROUP count 100, XACK after the task), async task"
    )

    def __init__(self, ctx: Context) -> None:
        os.environ["BENCH_TASKIQ_BROKER"] = self.kind
        super().__init__(ctx)
        from benchmarks.peers import taskiq_app

        self.app = taskiq_app
        self.broker = taskiq_app.make_broker(self.kind)
        self.task = self.broker.register_task(taskiq_app.noop.original_func, task_name="noop")
        self.run(self.broker.startup())

    async def aenqueue(self, i: int) -> None:
        await self.task.kiq(i)

    def worker_argv(self) -> list[str]:
        return [
            bin_path("taskiq"), "worker", "benchmarks.peers.taskiq_app:broker",
            "--workers", "1", "--max-async-tasks", str(MAX_ASYNC_TASKS),
            "--log-level", "WARNING",
        ]  # fmt: skip

    def worker_env(self) -> dict[str, str]:
        return {"BENCH_TASKIQ_BROKER": self.kind}

    def reset(self) -> None:
        # FLUSHALL dropped the consumer group: declare it again before enqueueing.
        self.run(self.broker.startup())

    def pending(self) -> int:
        queue = self.app.QUEUE
        if not self.redis.exists(queue):
            return 0
        groups = self.redis.xinfo_groups(queue)
        # lag: entries the group has not been handed yet; pending: handed, not acked.
        return sum(int(g["lag"] or 0) + int(g["pending"]) for g in groups)

    async def aclose(self) -> None:
        await self.broker.shutdown()


class TaskiqListPeer(TaskiqPeer):
    name = "taskiq-list"
    title = "Taskiq (list)"
    kind = "list"
    settings = (
        f"`taskiq worker --workers 1 --max-async-tasks {MAX_ASYNC_TASKS}`, taskiq-redis "
        "ListQueueBroker (BRPOP, no ack), async task"
    )

    def pending(self) -> int:
        return int(self.redis.llen(self.app.QUEUE))
