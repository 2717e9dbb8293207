"""Periodic jobs without a single "beat" process.

Every worker may run the scheduler. A tick's message id is derived from the job and the
tick time, and enqueue by id is idempotent, so however many workers enqueue the same tick
exactly one message exists for it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cronsim import CronSim, CronSimError

from tasuki.core.job import Job
from tasuki.errors import InvalidArgument


@dataclass(frozen=True)
class Periodic:
    job: Job[..., Any]
    cron: str | None = None
    every: float | None = None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def check_schedule(cron: str | None, every: timedelta | float | None) -> float | None:
        """Validate a schedule before anything is registered; returns `every` in seconds."""
        if (cron is None) == (every is None):
            raise InvalidArgument("a periodic job takes either a cron expression or every=...")
        if every is not None:
            seconds = every.total_seconds() if isinstance(every, timedelta) else float(every)
            if not math.isfinite(seconds) or seconds < 1:
                raise InvalidArgument(f"every must be at least 1 second, got {every!r}")
            return seconds
        try:
            CronSim(str(cron), datetime.now(UTC))
        except CronSimError as exc:
            raise InvalidArgument(f"invalid cron expression {cron!r}: {exc}") from exc
        return None

    @classmethod
    def create(
        cls,
        job: Job[..., Any],
        *,
        cron: str | None,
        every: timedelta | float | None,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Periodic:
        seconds = cls.check_schedule(cron, every)
        job.check_arguments(tuple(args), dict(kwargs or {}))
        return cls(job, cron=cron, every=seconds, args=tuple(args), kwargs=dict(kwargs or {}))

    def ticks(self, after: float, until: float) -> list[float]:
        """Tick times t with after < t <= until (epoch seconds, UTC for cron)."""
        if self.every is not None:
            first = math.floor(after / self.every) * self.every + self.every
            count = max(0, math.floor((until - first) / self.every) + 1)
            return [first + i * self.every for i in range(min(count, 1000))]
        assert self.cron is not None
        ticks: list[float] = []
        for moment in CronSim(self.cron, datetime.fromtimestamp(after, UTC)):
            t = moment.timestamp()
            if t > until or len(ticks) >= 1000:
                break
            if t > after:
                ticks.append(t)
        return ticks

    def message_id(self, tick: float) -> str:
        return f"periodic:{self.job.name}:{int(tick)}"
