"""Chancy's side of the benchmark: an async no-op job (Chancy's async executor runs it on
the worker's event loop) and one worker, as `chancy worker start` runs it. The worker
runs `python -m benchmarks.peers.chancy_app`."""

from __future__ import annotations

import asyncio
import logging
import os

from chancy import Chancy, Worker

from benchmarks.marks import mark
from benchmarks.shape_jobs import arun

URL = os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


async def noop(i: int) -> None:
    mark(i)


async def shape(i: int) -> None:
    await arun(i)


def app() -> Chancy:
    # Chancy logs every job pulled and finished at INFO: not what is being measured.
    log = logging.getLogger("chancy.bench")
    log.setLevel(logging.WARNING)
    log.addHandler(logging.StreamHandler())
    return Chancy(URL, log=log)


async def main() -> None:
    async with app() as chancy, Worker(chancy) as worker:
        await worker.wait_for_shutdown()


if __name__ == "__main__":
    asyncio.run(main())
