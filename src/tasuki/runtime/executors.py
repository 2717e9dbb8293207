"""Where sync job code runs: a thread pool, and the means to interrupt one of its threads.

The pool takes plain callables from the runtime and knows nothing about messages. Async
jobs run on one event loop (`eventloop.py`, imported only by workers that have async
jobs: asyncio takes a tenth of a second to import on a slow machine). The process pool
for CPU-bound jobs is in `processes.py`; its calls run on the thread pool, so the
middleware around a process job runs in the worker like any other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from queue import SimpleQueue

from tasuki import logs

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
            except Exception:
                # The runtime settles its own failures: this is a bug, and the thread must
                # outlive it (the delivery's lease lapses and it is delivered again).
                logs.logger.exception("internal error in a worker thread")
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
    import ctypes  # needed only by jobs with a timeout

    exc = ctypes.py_object(exc_type) if exc_type is not None else None
    return bool(ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), exc))
