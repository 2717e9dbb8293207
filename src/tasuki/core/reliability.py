"""Reliability counts a backend keeps per queue, so any process can read them.

Operators ask how reliable delivery is: deliveries that were redeliveries, leases lost,
how late heartbeats were, and how long a crashed worker's message waited between its
lease's expiry and its next start. The Prometheus middleware counts these inside each
worker; a dashboard is another process, so the backend keeps the same numbers beside
the messages:

- at `lease`, where the backend sees them for free: a lease of attempt 2 or later is a
  redelivery; a message taken back from an expired lease had its lease lost, and the
  time from that expiry to now is the expiry-to-start time (by the backend's clock);
- the heartbeat lag only the worker knows: its lease keeper adds its observations with
  `Backend.add_meters` every few seconds and when it stops (never on the hot path).

On the wire every backend stores flat integer *meters* per queue, named by `METERS`:
`redeliveries`, `leases_lost`, and for each histogram `<name>_us` (the sum of its
observations in microseconds) and `<name>_b<i>` (observations in bucket i: at most
`bounds[i]`, the last bucket above them all). Redis keeps them in the queue's
`counts` hash, the SQL backends in `tasuki_meters`, memory in a dict.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass

# Bounds in seconds, the same as the Prometheus middleware's buckets (without +Inf).
# `backends/redis/lua/includes/meters.lua` repeats RECOVERY_BOUNDS in µs (a test checks).
LAG_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RECOVERY_BOUNDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

LAG = "lag"
RECOVERY = "recovery"
REDELIVERIES = "redeliveries"
LEASES_LOST = "leases_lost"
_BOUNDS = {LAG: LAG_BOUNDS, RECOVERY: RECOVERY_BOUNDS}


def _histogram_meters(name: str, bounds: tuple[float, ...]) -> tuple[str, ...]:
    return (f"{name}_us", *(f"{name}_b{i}" for i in range(len(bounds) + 1)))


METERS: frozenset[str] = frozenset(
    (
        REDELIVERIES,
        LEASES_LOST,
        *_histogram_meters(LAG, LAG_BOUNDS),
        *_histogram_meters(RECOVERY, RECOVERY_BOUNDS),
    )
)


def observe(meters: dict[str, int], name: str, seconds: float) -> None:
    """Add one observation of histogram `name` (`lag` or `recovery`) to `meters`."""
    bounds = _BOUNDS[name]
    seconds = max(0.0, seconds)
    bucket = f"{name}_b{bisect.bisect_left(bounds, seconds)}"
    for key, step in ((f"{name}_us", round(seconds * 1e6)), (bucket, 1)):
        meters[key] = meters.get(key, 0) + step


def add(meters: dict[str, int], increments: Mapping[str, int]) -> None:
    """Add `increments` to `meters` in place."""
    for key, value in increments.items():
        meters[key] = meters.get(key, 0) + value


@dataclass(frozen=True, slots=True)
class Histogram:
    """Observations by bucket: `counts[i]` were at most `bounds[i]`; the last, above all."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    seconds: float  # the sum of the observations

    @property
    def count(self) -> int:
        return sum(self.counts)

    @property
    def mean(self) -> float | None:
        return self.seconds / self.count if self.count else None

    def quantile(self, q: float) -> float | None:
        """The upper bound of the bucket holding the q-th observation (inf: above all)."""
        total = self.count
        if not total:
            return None
        rank, seen = q * total, 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            seen += n
            if seen >= rank:
                return bound
        return float("inf")

    def buckets(self) -> list[tuple[str, int]]:
        """(label, count) per bucket: `≤ 0.5s` ..., `> 300s`."""
        labels = [f"≤ {b:g}s" for b in self.bounds] + [f"> {self.bounds[-1]:g}s"]
        return list(zip(labels, self.counts, strict=True))

    def as_dict(self) -> dict[str, object]:
        return {
            "count": self.count,
            "seconds": self.seconds,
            "buckets": {
                **{f"{b:g}": n for b, n in zip(self.bounds, self.counts, strict=False)},
                "+Inf": self.counts[-1],
            },
        }


@dataclass(frozen=True, slots=True)
class Reliability:
    """A queue's reliability counts since its store began (see the module docstring)."""

    redeliveries: int
    leases_lost: int
    expiry_to_start: Histogram
    heartbeat_lag: Histogram

    @classmethod
    def from_meters(cls, meters: Mapping[str, int]) -> Reliability:
        def histogram(name: str) -> Histogram:
            bounds = _BOUNDS[name]
            counts = tuple(int(meters.get(f"{name}_b{i}", 0)) for i in range(len(bounds) + 1))
            return Histogram(bounds, counts, int(meters.get(f"{name}_us", 0)) / 1e6)

        return cls(
            redeliveries=int(meters.get(REDELIVERIES, 0)),
            leases_lost=int(meters.get(LEASES_LOST, 0)),
            expiry_to_start=histogram(RECOVERY),
            heartbeat_lag=histogram(LAG),
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "redeliveries": self.redeliveries,
            "leases_lost": self.leases_lost,
            "lease_expiry_to_start": self.expiry_to_start.as_dict(),
            "heartbeat_lag": self.heartbeat_lag.as_dict(),
        }
