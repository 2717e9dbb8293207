"""Where job code runs: a thread pool for sync jobs, one event loop for async jobs.

Both take plain callables from the runtime and know nothing about messages. The process
pool for CPU-bound jobs is in `processes.py`; its calls run on the thread pool, so the
middleware around a process job runs in the worker like any other.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
from collections.abc import Callable, Coroutine
from queue import SimpleQueue
from typing import Any

_STOP = None


class ThreadPool:
    """A fixed-size pool of daemon threads, started on demand.

    Unlike `concurrent.futures`, no future is made per call: the runtime settles each
    message itself, and at tens of thousands of jobs a second the future is overhead.
    """

    def __init__(self, size: int, name: str = "tasuki-job") -> None:
        self._size = size
        self._name = name
        self._queue: SimpleQueue[Callable[[], None] | None] = SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._busy = 0
        self._mutex = threading.Lock()

    def submit(self, fn: Callable[[], None]) -> None:
        with self._mutex:
            self._busy += 1
            if self._busy > len(self._threads) and len(self._threads) < self._size:
                t = threading.Thread(
                    target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(t)
                t.start()
        self._queue.put(fn)

    def _work(self) -> None:
        while True:
            fn = self._queue.get()
            if fn is _STOP:
                return
            try:
                fn()
            finally:
                with self._mutex:
                    self._busy -= 1

    def shutdown(self, wait: float = 0.0) -> None:
        for _ in self._threads:
            self._queue.put(_STOP)
        if wait > 0:
            for t in self._threads:
                t.join(wait)


def raise_in_thread(thread_id: int, exc_type: type[BaseException] | None) -> bool:
    """Raise `exc_type` asynchronously in another thread (None clears a pending one).

    CPython checks for it between bytecodes, so pure-Python code stops promptly; a
    thread blocked inside a C call sees it when the call returns.
    """
    exc = ctypes.py_object(exc_type) if exc_type is not None else None
    return bool(ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), exc))


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
