"""One asyncio event loop in its own thread: where async jobs run, as tasks on it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any


class EventLoopThread:
    """One asyncio loop in its own thread; async jobs are tasks on it."""

    def __init__(self, name: str = "tasuki-asyncio") -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._pending: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._pending_mutex = threading.Lock()
        self._scheduled = False
        self.tasks: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()
        self.loop.close()

    def submit(self, make: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Start a task; submissions made while the loop is busy are started together."""
        with self._pending_mutex:
            self._pending.append(make)
            if self._scheduled:
                return
            self._scheduled = True
        self.loop.call_soon_threadsafe(self._start_pending)

    def _start_pending(self) -> None:
        with self._pending_mutex:
            batch, self._pending = self._pending, []
            self._scheduled = False
        for make in batch:
            task = self.loop.create_task(make())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def call(self, fn: Callable[[], None]) -> None:
        self.loop.call_soon_threadsafe(fn)

    def stop(self, wait: float = 5.0) -> None:
        if self.loop.is_closed():
            return

        def _halt() -> None:
            for task in list(self.tasks):
                task.cancel()
            self.loop.call_later(0.05, self.loop.stop)

        self.loop.call_soon_threadsafe(_halt)
        self._thread.join(wait)
