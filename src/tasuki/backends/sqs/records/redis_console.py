"""SQS's console records on a Redis lock store (`ConsoleRecords`, console.py): keys of
their own under the store's lock prefix, all with one hash tag (one Cluster slot), so
that an announce and its tallies are one script call (`lua/records_announce.lua`).

The paused queues are a set; the workers a hash of announces beside a sorted set of
when each was seen (one not seen for `WORKER_KEPT` is dropped by the next announce or
listing) and a set of those asked to stop; a queue's tallies one hash per minute,
`job "\\n" name -> count`, which Redis expires after `STATS_KEPT`: nothing to prune.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from typing import Any

from tasuki.backends.base import Backend
from tasuki.backends.redis import RedisBackend
from tasuki.backends.redis.scripts import Script, load
from tasuki.backends.sqs.records.console import ConsoleRecords
from tasuki.core.console import MINUTE, STATS_KEPT, WORKER_KEPT, JobStats, JobTally, WorkerInfo
from tasuki.core.console import job_stats as stats_of


@cache
def script(name: str) -> Script:
    return load("tasuki.backends.sqs.records", name)


def console_in(store: Backend, namespace: str) -> RedisConsole | None:
    """The console records of the Redis backend `store`; None for any other store."""
    return RedisConsole(store, namespace) if isinstance(store, RedisBackend) else None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisConsole(ConsoleRecords):
    def __init__(self, backend: RedisBackend, namespace: str) -> None:
        super().__init__(namespace)
        self._backend = backend
        self._base = backend.keys.lock(
            "{" + namespace.replace("{", "").replace("}", "") + "console}:"
        )
        self._paused = self._base + "paused"
        self._workers = self._base + "workers"
        self._seen = self._base + "seen"
        self._stop = self._base + "stop"

    def _stats_key(self, queue: str, minute: float) -> str:
        return f"{self._base}stats:{int(minute)}:{queue}"

    def pause(self, queue: str) -> None:
        self._backend.redis.command("SADD", self._paused, queue)

    def resume(self, queue: str) -> None:
        self._backend.redis.command("SREM", self._paused, queue)

    def paused(self) -> set[str]:
        return {_text(q) for q in self._backend.redis.command("SMEMBERS", self._paused) or ()}

    def announce(self, info: WorkerInfo, tallies: Sequence[JobTally]) -> bool:
        keys = [self._workers, self._seen, self._stop]
        args: list[Any] = [
            info.id,
            info.to_json().decode(),
            int(WORKER_KEPT * 1000),
            int((STATS_KEPT + MINUTE) * 1000),
        ]
        for t in tallies:
            counts = [(name, n) for name, n in t.counts.items() if n]
            if not counts:
                continue
            keys.append(self._stats_key(t.queue, t.minute))
            args.append(len(counts))
            for name, n in counts:
                args += [f"{t.job}\n{name}", n]
        stop, _ = self._backend._eval(script("records_announce"), keys, args)
        return int(stop) == 1

    def workers(self) -> list[WorkerInfo]:
        reply = self._backend._eval(
            script("records_workers"),
            [self._workers, self._seen, self._stop],
            [int(WORKER_KEPT * 1000)],
        )
        now = int(reply[0]) / 1000
        found = []
        for n in range(1, len(reply), 3):
            wid, seen, info = _text(reply[n]), float(reply[n + 1]) / 1000, reply[n + 2]
            found.append(replace(WorkerInfo.from_json(info, seen, now), id=wid))
        return sorted(found, key=lambda w: w.id)

    def stop_worker(self, id: str) -> bool:
        reply = self._backend._eval(
            script("records_stop_worker"), [self._workers, self._stop], [id]
        )
        return int(reply) == 1

    def job_stats(self, queue: str, window: float) -> dict[str, JobStats]:
        now = self._clock()
        since = now - window
        minute = now - now % MINUTE
        keys: list[str] = []
        while minute + MINUTE > since and len(keys) <= STATS_KEPT / MINUTE:
            keys.append(self._stats_key(queue, minute))
            minute -= MINUTE
        reply = self._backend._eval(script("records_job_stats"), keys, [])
        sums: dict[str, dict[str, int]] = {}
        for n in range(0, len(reply), 2):
            job, _, name = _text(reply[n]).rpartition("\n")
            total = sums.setdefault(job, {})
            total[name] = total.get(name, 0) + int(reply[n + 1])
        return stats_of(sums)

    def _clock(self) -> float:
        seconds, micros = self._backend.redis.command("TIME")
        return int(seconds) + int(micros) / 1e6
