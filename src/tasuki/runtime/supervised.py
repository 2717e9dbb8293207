"""The worker's side of `tasuki worker --workers N` (`runtime/supervisor.py`): what a
child learns from the environment its supervisor gave it, and what it serves back.

Light on purpose: every `tasuki worker` reads `Supervised.from_env()` at start, and a
worker run alone should not pay for the supervisor's imports.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tasuki import logs

if TYPE_CHECKING:
    from tasuki.backends.base import Backend
    from tasuki.middleware.base import MiddlewareChain
    from tasuki.runtime.worker import Worker

# Set by the supervisor for each child.
DIR_ENV = "TASUKI_SUPERVISOR_DIR"  # its run directory (probe ports, metrics files)
INDEX_ENV = "TASUKI_WORKER_INDEX"  # this child's number in the group, from 1
SERVES_ENV = "TASUKI_SUPERVISOR_SERVES"  # "health", "health,metrics" or ""
PID_ENV = "TASUKI_SUPERVISOR_PID"  # the supervisor (a child may start after it died)


@dataclass(frozen=True, slots=True)
class Supervised:
    """What a worker started by a supervisor learns from its environment."""

    run_dir: Path
    index: int
    parent: int
    health: bool
    metrics: bool

    @classmethod
    def from_env(cls) -> Supervised | None:
        run_dir = os.environ.get(DIR_ENV)
        if not run_dir:
            return None
        serves = set(os.environ.get(SERVES_ENV, "").split(","))
        index = int(os.environ.get(INDEX_ENV, "0"))
        parent = int(os.environ.get(PID_ENV, str(os.getppid())))
        return cls(Path(run_dir), index, parent, "health" in serves, "metrics" in serves)

    def announce(self, port: int) -> None:
        """Tell the supervisor where this child's probes are (a rename: never half-read)."""
        final = self.run_dir / f"probes-{os.getpid()}"
        partial = final.with_suffix(".partial")
        partial.write_text(str(port))
        partial.replace(final)

    def watch_parent(self, stop: Callable[[], None], interval: float = 1.0) -> None:
        """Stop gracefully if the supervisor is gone (killed with SIGKILL): a worker
        without its supervisor would run on with nobody to stop it."""
        parent = self.parent

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(interval)
            logs.logger.error("the supervisor (pid %d) is gone: stopping gracefully", parent)
            stop()

        threading.Thread(target=watch, name="tasuki-parent-watch", daemon=True).start()


def serve_child_endpoints(
    supervised: Supervised,
    worker: Worker,
    chain: MiddlewareChain,
    backend: Backend,
    *,
    stuck_after: float,
) -> None:
    """What a child serves its supervisor on a private port: `/livez` and `/readyz`, and
    with metrics, the queue gauges on `/metrics` (its counters go to the multiprocess
    files, which the supervisor reads itself)."""
    supervised.watch_parent(worker.request_stop)
    if not supervised.health:
        return
    from tasuki.runtime.health import WorkerHealth
    from tasuki.runtime.probes import WSGIApp, serve, wsgi_app

    fallback: WSGIApp | None = None
    if supervised.metrics:
        from prometheus_client import CollectorRegistry, make_wsgi_app

        from tasuki.middleware.metrics import QueueCollector, install

        install(chain, backend, queues=lambda: worker.queues, queue_gauges=False)
        gauges = CollectorRegistry()
        gauges.register(QueueCollector(backend, lambda: worker.queues))
        fallback = make_wsgi_app(gauges)
    server = serve(wsgi_app(WorkerHealth(worker, stuck_after), fallback), "127.0.0.1", 0, "probes")
    supervised.announce(server.server_port)
