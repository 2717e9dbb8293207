"""SAQ: `Queue.enqueue` one by one (no bulk API; `Queue.map` waits for results);
`saq --workers 1` with a concurrency of 100."""

from __future__ import annotations

from benchmarks.peers.base import AsyncPeer, Context, bin_path
from benchmarks.peers.saq_app import CONCURRENCY, make_queue


class SaqPeer(AsyncPeer):
    name = "saq"
    title = "SAQ"
    package = "saq"
    settings = (
        f"`saq settings --workers 1`, concurrency={CONCURRENCY} (default 10), "
        "BLMOVE dequeue, async job"
    )

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.queue = make_queue()
        self.run(self.queue.connect())

    async def aenqueue(self, i: int) -> None:
        await self.queue.enqueue("noop", i=i)

    def worker_argv(self) -> list[str]:
        return [bin_path("saq"), "benchmarks.peers.saq_app.settings", "--workers", "1", "-q"]

    async def apending(self) -> int:
        # A job stays in the `incomplete` sorted set until it has finished.
        return int(await self.queue.count("incomplete"))

    async def aclose(self) -> None:
        await self.queue.disconnect()
