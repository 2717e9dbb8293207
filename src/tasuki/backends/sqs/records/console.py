"""The console's records SQS keeps in its `locks=` store (DESIGN §4d): the paused queues,
the worker registry and the per-minute job tallies, which SQS has no place for.

They are the lock store's own console (SQLite's tables, Redis's keys, PostgreSQL's
tables: its `pause`, `announce`, `job_stats`, each one statement or script, pruned as
that store prunes its own: SQLite's and PostgreSQL's `console` maintenance service,
Redis's expiring keys), under queue names and worker ids that carry the records'
namespace, so that a store that is also a queue store keeps the two apart. A store
without a console keeps none (`console_for` answers None, and SQS refuses by
capability).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tasuki.backends.base import Backend, MaintenanceService
from tasuki.core.console import JobStats, JobTally, WorkerInfo


def console_for(store: Backend, namespace: str) -> StoreConsole | None:
    """The console records under `namespace` in the lock store `store`, or None where the
    store keeps no console of its own."""
    caps = store.capabilities
    if caps.pause and caps.worker_registry and caps.job_stats:
        return StoreConsole(store, namespace)
    return None


class StoreConsole:
    """Pauses, workers and job tallies under one namespace of a lock store's console."""

    def __init__(self, store: Backend, namespace: str) -> None:
        self.store = store
        self.namespace = namespace

    def pause(self, queue: str) -> None:
        self.store.pause(self.namespace + queue)

    def resume(self, queue: str) -> None:
        self.store.resume(self.namespace + queue)

    def paused(self) -> set[str]:
        """One read of the store: the queues paused now."""
        n = len(self.namespace)
        return {q[n:] for q in self.store.paused() if q.startswith(self.namespace)}

    def announce(self, info: WorkerInfo, tallies: Sequence[JobTally]) -> bool:
        """Store the announce (seen now, by the store's clock) and add the tallies; True
        if a stop was asked of the worker."""
        ns = self.namespace
        return self.store.announce(
            replace(info, id=ns + info.id), [t._replace(queue=ns + t.queue) for t in tallies]
        )

    def workers(self) -> list[WorkerInfo]:
        n = len(self.namespace)
        return [
            replace(w, id=w.id[n:]) for w in self.store.workers() if w.id.startswith(self.namespace)
        ]

    def stop_worker(self, id: str) -> bool:
        return self.store.stop_worker(self.namespace + id)

    def job_stats(self, queue: str, window: float) -> dict[str, JobStats]:
        return self.store.job_stats(self.namespace + queue, window)

    def maintenance(self) -> Sequence[MaintenanceService]:
        """The store's chore that prunes its console, where it needs one."""
        return [s for s in self.store.maintenance() if s.name == "console"]
