"""Huey: calling the task enqueues it (no bulk API; `task.map` enqueues one by one);
one consumer process with a pool of worker threads."""

from __future__ import annotations

from benchmarks.peers.base import Context, SyncPeer, bin_path

WORKERS = 2  # 1, 4 and 8 threads were slower here (GIL contention)


class HueyPeer(SyncPeer):
    name = "huey"
    title = "Huey"
    package = "huey"
    settings = (
        f"`huey_consumer -k thread -w {WORKERS} -n -C`, RedisHuey(blocking=True, results=False)"
    )

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        from benchmarks.peers import huey_app

        self.huey = huey_app.huey
        self.task = huey_app.noop

    def enqueue(self, i: int) -> None:
        self.task(i)

    def worker_argv(self) -> list[str]:
        return [
            bin_path("huey_consumer"), "benchmarks.peers.huey_app.huey",
            "-k", "thread", "-w", str(WORKERS), "-n", "-C", "-q",
        ]  # fmt: skip

    def pending(self) -> int:
        # Huey pops a message before running it: an empty list plus every job marked is
        # the most it can tell.
        return int(self.huey.pending_count())
