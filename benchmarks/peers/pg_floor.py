"""The floor of shape (b): the job alone, no queue. `python -m benchmarks.peers.pg_floor
N K P C [async]` runs the jobs i < N with i % P == K (process K of P) on C threads
(`shape_jobs.run`) or, with `async`, C tasks on one event loop (`shape_jobs.arun`): what
the `SELECT 1` on its pool of 8 costs the client and the server with nothing around it.
It then waits for SIGTERM.
"""

from __future__ import annotations

import signal
import sys
import threading

from benchmarks.shape_jobs import arun, run


def threads(todo: list[int], conc: int) -> None:
    lock = threading.Lock()
    it = iter(todo)

    def work() -> None:
        while True:
            with lock:
                i = next(it, None)
            if i is None:
                return
            run(i)

    pool = [threading.Thread(target=work) for _ in range(conc)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


def tasks(todo: list[int], conc: int) -> None:
    import asyncio

    async def main() -> None:
        it = iter(todo)

        async def work() -> None:
            for i in it:
                await arun(i)

        await asyncio.gather(*(work() for _ in range(conc)))

    asyncio.run(main())


if __name__ == "__main__":
    n, k, p, c = map(int, sys.argv[1:5])
    todo = list(range(k, n, p))
    (tasks if sys.argv[5:] == ["async"] else threads)(todo, c)
    signal.pause()  # the pool's connections stay open until the harness has read them
