"""`await job.enqueue_async(...)`: an enqueue from async code that does not block its loop."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import tasuki


def test_enqueue_async_enqueues_off_the_event_loop(tmp_path: Path) -> None:
    app = tasuki.App(f"sqlite:///{tmp_path / 'q.db'}")
    ran: list[tuple[str, int]] = []
    enqueued_on: list[str] = []

    @app.job(queue="mail")
    def send(to: str, n: int) -> None:
        ran.append((to, n))

    original = app.producer.enqueue_calls

    def spy(*args: object, **kwargs: object) -> list[str]:
        enqueued_on.append(threading.current_thread().name)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    app.producer.enqueue_calls = spy  # type: ignore[method-assign]

    async def produce() -> list[str]:
        first = await send.enqueue_async("a@example.com", n=1)
        second = await send.options(priority=3).enqueue_async("b@example.com", 2)
        return [first, second]

    ids = asyncio.run(produce())
    assert len(set(ids)) == 2 and app.stats("mail")["ready"] == 2
    assert threading.main_thread().name not in enqueued_on, "the event loop's thread blocked"
    app.worker(concurrency=1).run(until_idle=True, timeout=30)
    assert sorted(ran) == [("a@example.com", 1), ("b@example.com", 2)]
    app.close()


def test_in_a_callers_transaction_it_stays_on_the_connections_thread(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    app = tasuki.App(f"sqlite:///{path}")

    @app.job
    def send(to: str) -> None: ...

    conn = sqlite3.connect(path, isolation_level=None)  # refuses other threads
    try:
        conn.execute("BEGIN")

        async def produce() -> str:
            return await send.options(connection=conn).enqueue_async("a@example.com")

        asyncio.run(produce())
        conn.execute("ROLLBACK")
    finally:
        conn.close()
    assert app.stats()["ready"] == 0, "the enqueue was not in the rolled-back transaction"
    app.close()
