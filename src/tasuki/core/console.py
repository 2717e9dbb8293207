"""The operations console's values: pages of messages, workers, per-job stats.

What crosses the backend seam for the console (DESIGN §4d): a `Page` of `Listed`
messages with an opaque cursor, the `WorkerInfo` each worker announces, the per-minute
`JobTally` rows a worker adds to its job's stats, and the `JobStats` read back over a
window. Backends store these; the decoding of arguments and the `match` filter happen
above them (`app/console.py`), with the app's serializer.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, NamedTuple, TypeVar

import orjson

from tasuki.core.records import MessageInfo
from tasuki.errors import InvalidArgument

T = TypeVar("T")

# The states a queue's messages can be browsed in: waiting and due, waiting for a time
# (a delay or a retry's backoff), leased now, dead-lettered.
BrowseState = Literal["ready", "delayed", "in_flight", "dead"]
BROWSE_STATES: tuple[BrowseState, ...] = ("ready", "delayed", "in_flight", "dead")

# A worker not seen for this many of its heartbeats is shown as gone; after
# `WORKER_KEPT` seconds it is dropped.
MISSED_HEARTBEATS = 3
WORKER_KEPT = 86400.0
# Per-minute job stats are kept this long (pruned by a maintenance service).
STATS_KEPT = 86400.0
MINUTE = 60.0


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing; pass `cursor` back for the next one (None: the end)."""

    items: list[T]
    cursor: str | None = None


class Position(NamedTuple):
    """Where a listing stands: the state's time of the last item shown, and its order of
    enqueue (ties broken by it). Its text is the cursor a `Page` carries."""

    at: float
    seq: int

    def cursor(self) -> str:
        return f"{self.at!r}:{self.seq}"

    @staticmethod
    def parse(cursor: str | None) -> Position | None:
        if cursor is None:
            return None
        try:
            at, seq = cursor.split(":")
            return Position(float(at), int(seq))
        except ValueError:
            raise InvalidArgument(f"not a listing cursor: {cursor!r}") from None

    def after(self, at: float, seq: int, newest_first: bool) -> bool:
        """Whether an item at (at, seq) comes after this position in the listing."""
        return (at, seq) < self if newest_first else (at, seq) > self


class Listed(NamedTuple):
    """A browsed message as the backend has it: what it knows of it, the body and headers
    the console decodes (with the app's serializer, never blindly), and the cursor that
    continues the listing right after it (a filter may stop within a page)."""

    info: MessageInfo
    body: bytes
    headers: Mapping[str, str]
    cursor: str


def check_state(state: str) -> BrowseState:
    if state not in BROWSE_STATES:
        raise InvalidArgument(f"state must be one of {', '.join(BROWSE_STATES)}, got {state!r}")
    return state


def check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise InvalidArgument(f"limit must be an int from 1 to 1000, got {limit!r}")
    return limit


# -- workers ------------------------------------------------------------------------------
class Running(NamedTuple):
    """What a worker runs now: one message, its job and since when (epoch seconds)."""

    queue: str
    message_id: str
    job: str
    started_at: float


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker as it announces itself with each heartbeat (`heartbeat` seconds apart).

    `gone` is set by the backend when reading: not seen for `MISSED_HEARTBEATS`
    heartbeats. `seen_at` is the backend's clock at the last announce.
    """

    id: str
    host: str
    pid: int
    version: str
    queues: tuple[str, ...]
    concurrency: int
    started_at: float
    seen_at: float = 0.0
    running: tuple[Running, ...] = ()
    heartbeat: float = 5.0
    gone: bool = False

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "id": self.id,
                "host": self.host,
                "pid": self.pid,
                "version": self.version,
                "queues": list(self.queues),
                "concurrency": self.concurrency,
                "started_at": self.started_at,
                "running": [list(r) for r in self.running],
                "heartbeat": self.heartbeat,
            }
        )

    @staticmethod
    def from_json(data: bytes | str, seen_at: float, now: float) -> WorkerInfo:
        d = orjson.loads(data)
        heartbeat = float(d["heartbeat"])
        return WorkerInfo(
            id=d["id"],
            host=d["host"],
            pid=int(d["pid"]),
            version=d["version"],
            queues=tuple(d["queues"]),
            concurrency=int(d["concurrency"]),
            started_at=float(d["started_at"]),
            seen_at=seen_at,
            running=tuple(Running(q, i, j, float(s)) for q, i, j, s in d["running"]),
            heartbeat=heartbeat,
            gone=is_gone(seen_at, heartbeat, now),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "host": self.host,
            "pid": self.pid,
            "version": self.version,
            "queues": list(self.queues),
            "concurrency": self.concurrency,
            "started_at": self.started_at,
            "seen_at": self.seen_at,
            "running": [r._asdict() for r in self.running],
            "heartbeat": self.heartbeat,
            "gone": self.gone,
        }


def is_gone(seen_at: float, heartbeat: float, now: float) -> bool:
    return now - seen_at > MISSED_HEARTBEATS * heartbeat


# -- job stats ----------------------------------------------------------------------------
# Run times are counted in buckets whose upper bounds grow by 10^(1/8) (about 33 %) from
# 1 ms to 10,000 s, so a percentile read back is within a third of the true one, and a
# minute of one job is at most a few dozen numbers however many runs it had.
DURATION_BOUNDS: tuple[float, ...] = tuple(0.001 * 10 ** (k / 8) for k in range(57))
OUTCOMES = ("succeeded", "failed", "retried", "dead")
Outcome = Literal["succeeded", "failed", "retried", "dead"]


def bucket_of(seconds: float) -> int:
    return min(bisect.bisect_left(DURATION_BOUNDS, seconds), len(DURATION_BOUNDS) - 1)


class JobTally(NamedTuple):
    """What one worker adds to one job's stats for one minute: counts by name (the
    outcomes, and "d<bucket>" for run times), added to what the backend has."""

    queue: str
    job: str
    minute: float
    counts: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class JobStats:
    """One job's runs over a window: outcomes counted, run-time percentiles in seconds
    (None without a run). `failed` counts runs that raised; of those, `retried` were
    scheduled again and `dead` went to the dead letters."""

    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    dead: int = 0
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "succeeded": self.succeeded,
            "failed": self.failed,
            "retried": self.retried,
            "dead": self.dead,
            "p50": self.p50,
            "p95": self.p95,
            "p99": self.p99,
        }


def job_stats(counts: Mapping[str, Mapping[str, int]]) -> dict[str, JobStats]:
    """Each job's `JobStats` from its counts summed over a window (name -> total)."""
    return {job: _stats_of(c) for job, c in sorted(counts.items())}


def _stats_of(counts: Mapping[str, int]) -> JobStats:
    buckets = [0] * len(DURATION_BOUNDS)
    for name, n in counts.items():
        if name[:1] == "t" and name[1:].isdigit():
            buckets[int(name[1:])] += n
    return JobStats(
        *(int(counts.get(o, 0)) for o in OUTCOMES),
        *(_percentile(buckets, q) for q in (0.50, 0.95, 0.99)),
    )


def _percentile(buckets: Sequence[int], q: float) -> float | None:
    total = sum(buckets)
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for index, n in enumerate(buckets):
        seen += n
        if seen >= rank:
            return DURATION_BOUNDS[index]
    return DURATION_BOUNDS[-1]


class Tallies:
    """A worker's job stats not yet written: counted where runs end (from any thread),
    taken by the announcer each heartbeat and written with its announce (one round trip)."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str, float], dict[str, int]] = {}
        self._mutex = threading.Lock()

    def add(self, queue: str, job: str, outcome: Outcome, seconds: float, now: float) -> None:
        """One run ended: "succeeded", or "retried" / "dead" (both also count "failed")."""
        minute = now - now % MINUTE
        names = [outcome, f"t{bucket_of(seconds)}"]
        if outcome != "succeeded":
            names.append("failed")
        with self._mutex:
            counts = self._counts.setdefault((queue, job, minute), {})
            for name in names:
                counts[name] = counts.get(name, 0) + 1

    def take(self) -> list[JobTally]:
        with self._mutex:
            taken, self._counts = self._counts, {}
        return [JobTally(q, j, m, c) for (q, j, m), c in taken.items()]

    def put_back(self, tallies: Sequence[JobTally]) -> None:
        """An announce that failed: its tallies wait for the next one."""
        with self._mutex:
            for t in tallies:
                counts = self._counts.setdefault((t.queue, t.job, t.minute), {})
                for name, n in t.counts.items():
                    counts[name] = counts.get(name, 0) + n
