"""The worker a user of persist-queue or litequeue writes: neither ships one. THREADS
threads in one process, each taking a message, running the job and marking it done,
the way each library's README shows.

    python -m benchmarks.peers.embedded_loop persist-queue DB THREADS
    python -m benchmarks.peers.embedded_loop litequeue DB THREADS

- persist-queue: one `SQLiteAckQueue(multithreading=True)` shared by the threads (it is
  thread-safe, one process: `get` reads the row and marks it unacked in two statements
  under a lock of the process's own, so two processes could both take it); `get(raw=True)`,
  the job, `ack(id=...)`. Unacked rows go back to ready when a queue opens
  (`auto_resume`): recovery is a restart.
- litequeue: a `LiteQueue` (its own connection) per thread, `pop()` (an
  `UPDATE ... RETURNING` in an immediate transaction: it marks the row locked), the job,
  `done(message_id)`; safe across processes. Nothing re-queues a locked message by
  itself: the user calls `list_locked(seconds)` and `retry`.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.peers.embedded_jobs import run

#: how long a litequeue thread sleeps when it found nothing (it has no blocking pop)
IDLE = 0.01


def persist_queue(db: Path, threads: int, stop: threading.Event) -> list[threading.Thread]:
    from persistqueue import SQLiteAckQueue

    q = SQLiteAckQueue(str(db), multithreading=True)

    def loop() -> None:
        while not stop.is_set():
            item: Any = q.get(raw=True)
            run(item["data"])
            q.ack(id=item["pqid"])

    return [threading.Thread(target=loop, daemon=True) for _ in range(threads)]


def litequeue(db: Path, threads: int, stop: threading.Event) -> list[threading.Thread]:
    from litequeue import LiteQueue

    def loop() -> None:
        q = LiteQueue(str(db))
        while not stop.is_set():
            msg = q.pop()
            if msg is None:
                time.sleep(IDLE)
                continue
            run(int(msg.data))
            q.done(msg.message_id)

    return [threading.Thread(target=loop, daemon=True) for _ in range(threads)]


def main(argv: list[str]) -> int:
    system, db, threads = argv[0], Path(argv[1]), int(argv[2])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    start = {"persist-queue": persist_queue, "litequeue": litequeue}[system]
    workers = start(db, threads, stop)
    for t in workers:
        t.start()
    while not stop.wait(0.2):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
