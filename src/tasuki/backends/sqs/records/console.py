"""The console's records SQS keeps in its `locks=` store (DESIGN §4d): the paused queues,
the worker registry and the per-minute job tallies, which SQS has no place for.

On SQLite they are the SQLite backend's own console tables (its `pause`, `announce`,
`job_stats`: one statement each, pruned by its console maintenance service), under
names carrying the records' namespace, so that a database that is also a queue store
keeps the two apart; on Redis they are keys of their own (redis_console.py). Any other
store keeps none (`console_for` answers None and SQS refuses by capability).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace

from tasuki.backends.base import Backend, MaintenanceService
from tasuki.backends.urls import scheme_of
from tasuki.core.console import JobStats, JobTally, WorkerInfo

REDIS_SCHEMES = ("redis", "rediss", "unix")


class ConsoleRecords(ABC):
    """Pauses, workers and job tallies under one namespace of a lock store."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace

    @abstractmethod
    def pause(self, queue: str) -> None: ...

    @abstractmethod
    def resume(self, queue: str) -> None: ...

    @abstractmethod
    def paused(self) -> set[str]:
        """One read: the queues paused now."""

    @abstractmethod
    def announce(self, info: WorkerInfo, tallies: Sequence[JobTally]) -> bool:
        """Store the announce (seen now, by the store's clock) and add the tallies; True
        if a stop was asked of the worker."""

    @abstractmethod
    def workers(self) -> list[WorkerInfo]: ...

    @abstractmethod
    def stop_worker(self, id: str) -> bool: ...

    @abstractmethod
    def job_stats(self, queue: str, window: float) -> dict[str, JobStats]: ...

    def maintenance(self) -> Sequence[MaintenanceService]:
        """The chores that prune these records; none where they expire by themselves."""
        return ()


def console_for(store: Backend, namespace: str) -> ConsoleRecords | None:
    """The console records under `namespace` in the lock store `store`, or None where the
    store keeps none. The store's module is imported only when its scheme is used."""
    scheme = scheme_of(store.url)
    if scheme == "sqlite" and store.capabilities.worker_registry:
        return DelegatedConsole(store, namespace)
    if scheme in REDIS_SCHEMES:
        from tasuki.backends.sqs.records import redis_console

        return redis_console.console_in(store, namespace)
    return None


class DelegatedConsole(ConsoleRecords):
    """The console of a store that keeps one itself (SQLite's): its calls, with queue
    names and worker ids under the namespace, and its console maintenance service."""

    def __init__(self, store: Backend, namespace: str) -> None:
        super().__init__(namespace)
        self.store = store

    def pause(self, queue: str) -> None:
        self.store.pause(self.namespace + queue)

    def resume(self, queue: str) -> None:
        self.store.resume(self.namespace + queue)

    def paused(self) -> set[str]:
        n = len(self.namespace)
        return {q[n:] for q in self.store.paused() if q.startswith(self.namespace)}

    def announce(self, info: WorkerInfo, tallies: Sequence[JobTally]) -> bool:
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
        return [s for s in self.store.maintenance() if s.name == "console"]
