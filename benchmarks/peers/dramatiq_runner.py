"""Dramatiq: `actor.send` one by one (no bulk API); one worker process with 8 threads."""

from __future__ import annotations

from benchmarks.peers.base import Context, SyncPeer, bin_path

THREADS = 8
PREFETCH = 64


class DramatiqPeer(SyncPeer):
    name = "dramatiq"
    title = "Dramatiq"
    package = "dramatiq"
    settings = (
        f"`dramatiq --processes 1 --threads {THREADS}`, queue prefetch {PREFETCH} "
        "(`dramatiq_queue_prefetch`), default middleware"
    )

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        from benchmarks.peers import dramatiq_app

        self.actor = dramatiq_app.noop

    def enqueue(self, i: int) -> None:
        self.actor.send(i)

    def worker_argv(self) -> list[str]:
        return [
            bin_path("dramatiq"), "benchmarks.peers.dramatiq_app",
            "--processes", "1", "--threads", str(THREADS),
        ]  # fmt: skip

    def worker_env(self) -> dict[str, str]:
        return {"dramatiq_queue_prefetch": str(PREFETCH)}

    def pending(self) -> int:
        # Every message lives in the `.msgs` hash from enqueue until its ack removes it.
        return int(self.redis.hlen("dramatiq:default.msgs"))
