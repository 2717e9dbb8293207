"""Which sync jobs the fetcher runs on its own thread instead of handing them to the pool.

Handing a delivery to a pool thread costs a queue put, a thread wake-up and the GIL
changing hands, several microseconds in all: more than a trivial job takes to run. So a
job that has shown it is fast runs on the thread that leased it, one batch at a time,
and the pool keeps the jobs that block.

Fast means the whole delivery (middleware included) in wall time, as a moving average
weighted 1/16 to the newest run: one run sixteen times over the line (3 ms, a trip over
the network) sends the job back to the pool at once, a streak of merely slow ones within
a few runs, and a stray wait for the GIL does not. It returns once enough fast runs in
the pool have brought the average back under the line. A fetcher also stops running a
batch itself after `BATCH_BUDGET` and hands the rest to the pool, so a job that turns
slow holds up at most the batch it was leased with.

Fast is not enough: a job that spends its 0.1 ms waiting on a network round trip (a
cache read, the dedup guard's lock) runs faster in the pool, where many waits overlap,
than one after another here. So one inline run in `SAMPLE` also measures the thread's
CPU time, and a job most of whose sampled runs spent less than half their time
computing goes back to the pool for good. Pool runs cannot tell: there a job that
computes also waits for the GIL.

Only thread jobs without a timeout qualify: a timeout is enforced by interrupting the
job's thread, which must not be the fetcher's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tasuki.core.job import Job

# A job runs inline while its average delivery takes less than this.
FAST = 0.0002
# Runs seen (in the pool) before a job may qualify.
QUALIFY = 32
# Weight of the newest run in the average.
ALPHA = 1.0 / 16.0
# A fetcher runs one batch inline for at most this long, then hands the rest to the pool.
BATCH_BUDGET = 0.005
# One inline run in SAMPLE measures CPU time too (reading it costs a system call).
SAMPLE = 8
# The share of an inline run's time a job must spend computing to stay inline.
BUSY = 0.5
# Sampled inline runs per judgement, and the share of them that must have mostly waited.
JUDGE = 8
MOSTLY = 0.75


class Pace:
    """Per job: runs seen, their average duration, and how busy its inline runs were
    (unlocked: a lost update under a race only nudges an estimate)."""

    def __init__(self, enabled: bool = True, fast: float = FAST) -> None:
        self.enabled = enabled
        self.fast = fast
        self._seen: dict[str, int] = {}
        self._average: dict[str, float] = {}
        # job name -> [sampled inline runs, how many of them mostly waited]
        self._sampled: dict[str, list[int]] = {}
        self._waits: set[str] = set()

    @staticmethod
    def eligible(job: Job[..., Any]) -> bool:
        return job.executor == "thread" and job.timeout is None

    def inline(self, job: Job[..., Any]) -> bool:
        name = job.name
        return (
            self.enabled
            and self._seen.get(name, 0) >= QUALIFY
            and self._average[name] < self.fast
            and name not in self._waits
            and self.eligible(job)
        )

    def record(self, job: Job[..., Any], seconds: float) -> None:
        name = job.name
        seen = self._seen.get(name, 0)
        if seen == 0:
            self._average[name] = seconds
        else:
            self._average[name] += (seconds - self._average[name]) * ALPHA
        if seen < QUALIFY:
            self._seen[name] = seen + 1

    def record_busy(self, job: Job[..., Any], seconds: float, cpu: float) -> None:
        """One sampled inline run: `seconds` of wall time, `cpu` of them computing.

        Judged by count, not by sums: a run of a few microseconds that another thread
        happened to interrupt is one sample of eight, not most of the time measured.
        """
        name = job.name
        sampled = self._sampled.setdefault(name, [0, 0])
        sampled[0] += 1
        if cpu < BUSY * seconds:
            sampled[1] += 1
        if sampled[0] >= JUDGE:
            if sampled[1] >= MOSTLY * JUDGE:
                self._waits.add(name)
            self._sampled[name] = [0, 0]

    def average(self, job: Job[..., Any]) -> float | None:
        return self._average.get(job.name)

    def waits(self, job: Job[..., Any]) -> bool:
        """Whether the job was found to wait more than compute when run inline."""
        return job.name in self._waits
