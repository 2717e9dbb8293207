"""The announcer: every heartbeat, tells the backend who this worker is and what it runs
(`Backend.announce`), writes the job stats counted since the last one in the same call,
and learns whether it was asked to stop (`app.stop_worker`): then the worker drains and
exits as on SIGTERM.

A failed announce keeps its tallies for the next one; a worker that cannot announce for
three heartbeats is shown as gone, which is what it looks like from outside.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace

from tasuki import logs
from tasuki.backends.base import Backend
from tasuki.core.console import Running, Tallies, WorkerInfo
from tasuki.errors import TasukiError
from tasuki.runtime.outage import Outage

# Seconds between two announces (a worker is gone after three missed ones).
ANNOUNCE_EVERY = 5.0


def _version() -> str:
    """tasuki's version as installed (the package root, which says it too, sits above
    the runtime's layer)."""
    from importlib import metadata

    try:
        return metadata.version("tasuki")
    except metadata.PackageNotFoundError:
        return "unknown"


def new_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Announcer:
    def __init__(
        self,
        backend: Backend,
        *,
        queues: Sequence[str],
        concurrency: int,
        running: Callable[[], list[Running]],
        on_stop: Callable[[], None],
        tallies: Tallies,
        every: float = ANNOUNCE_EVERY,
        worker_id: str | None = None,
    ) -> None:
        self.backend = backend
        self.id = worker_id or new_worker_id()
        self.every = every
        self.running = running
        self.on_stop = on_stop
        self.tallies = tallies
        self.registry = backend.capabilities.worker_registry
        self.keeps_stats = backend.capabilities.job_stats
        self.info = WorkerInfo(
            id=self.id,
            host=socket.gethostname(),
            pid=os.getpid(),
            version=_version(),
            queues=tuple(queues),
            concurrency=concurrency,
            started_at=time.time(),
            heartbeat=every,
        )
        self.stop_asked = False
        self._stop = threading.Event()
        self._outage = Outage("announcing this worker")
        self._thread = threading.Thread(target=self._run, name="tasuki-announcer", daemon=True)

    def start(self) -> None:
        if self.registry:
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop announcing, after a last announce that writes the stats counted since."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        if self.registry:
            self.announce()

    def _run(self) -> None:
        while True:
            self.announce()
            if self._stop.wait(self.every):
                return

    def announce(self) -> None:
        tallies = self.tallies.take() if self.keeps_stats else []
        info = replace(self.info, running=tuple(self.running()))
        try:
            stop = self.backend.announce(info, tallies)
        except Exception as exc:
            if not isinstance(exc, TasukiError):
                # A bug, said with its traceback; announcing goes on, as after an outage.
                logs.logger.exception("internal error announcing this worker")
            self.tallies.put_back(tallies)
            self._outage.failed(exc, self.every)
            return
        self._outage.worked()
        if stop and not self.stop_asked:
            self.stop_asked = True
            self.on_stop()
