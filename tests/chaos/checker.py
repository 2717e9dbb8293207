"""What a chaos run proves, read from the execution records and the fault records alone.

- lost: a message whose enqueue succeeded and that never reached its end record;
- duplicate: an execution after the first of the same message (in the order of their
  fencing tokens, which is the order of the leases). It is *explained* when a fault
  reached the worker of the one before it (killed, frozen, cut off, or the server it
  spoke to went down) between that lease (at most one visibility timeout before either
  run started) and the duplicate's start; any other duplicate is a broken promise;
- redelivery: for each explained duplicate, the time from the latest fault that explains
  it to the duplicate's start. A fault on one worker (kill, stop) counts from when it
  began: the others should take over within a lease. A fault on the server or on every
  connection (restart, net) counts from when it ended: nobody can take over before.
- starved: a duplicate no injected fault explains, whose first run's worker measured
  itself frozen by the machine (its probe thread woke a third of a lease or more late:
  the process got no CPU or its threads no GIL, so its lease keeper could not run)
  between that lease and the duplicate's start. A lease that lapses while its worker
  cannot run is the contract's at-least-once case, the same as a SIGSTOP: counted apart
  and printed with the stall, never folded into the injected faults;
- fencing: no two leases of a message share a token, and in token order the attempts
  only grow. A frozen worker may still *start* its stale run after a newer one began
  (counted as stale starts): its token is the older one, which is what fencing is for.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from tests.chaos.faults import Fault
from tests.chaos.recorder import Execution, KeeperNote, Stall


@dataclass
class Report:
    backend: str
    jobs: int
    faults: list[Fault]
    lost: list[int] = field(default_factory=list)
    duplicates: int = 0
    unexplained: list[str] = field(default_factory=list)
    redelivery: list[float] = field(default_factory=list)
    # (seconds, message number, the duplicate's start) of each redelivery, for diagnosis
    redelivered: list[tuple[float, int, float]] = field(default_factory=list)
    fence_violations: list[str] = field(default_factory=list)
    dead: int = 0
    stale_starts: int = 0  # a run that began after a newer lease's run had begun
    starved: list[str] = field(default_factory=list)  # duplicates explained by a stall
    stalls: int = 0  # stalls of a third of a lease or more, on any worker
    longest_stall: float = 0.0
    late_extensions: int = 0
    leases_lost: int = 0
    notes: list[str] = field(default_factory=list)  # the runner's own observations

    @property
    def ok(self) -> bool:
        return not (self.lost or self.unexplained or self.fence_violations or self.dead)

    def p99(self) -> float:
        if not self.redelivery:
            return 0.0
        ordered = sorted(self.redelivery)
        return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]

    def line(self) -> str:
        return (
            f"chaos {self.backend}: jobs={self.jobs} faults={len(self.faults)} "
            f"lost={len(self.lost)} duplicates={self.duplicates} "
            f"unexplained={len(self.unexplained)} p99_redelivery_s={self.p99():.2f}"
        )

    def slowest(self, count: int = 3) -> list[tuple[float, int, float]]:
        return sorted(self.redelivered, reverse=True)[:count]

    def details(self) -> list[str]:
        kinds = Counter(f.kind for f in self.faults)
        out = [
            "  faults by kind: " + (", ".join(f"{k}={v}" for k, v in sorted(kinds.items())) or "-"),
            f"  redelivery: samples={len(self.redelivery)} "
            f"max_s={max(self.redelivery, default=0.0):.2f} p99_s={self.p99():.2f}",
            f"  fencing tokens only grew: {'yes' if not self.fence_violations else 'NO'}; "
            f"dead letters: {self.dead}; stale runs started after a newer one: "
            f"{self.stale_starts}",
            f"  measured on the workers: stalls>={STALL_SHARE:.2f}*lease={self.stalls} "
            f"(longest {self.longest_stall:.2f}s), late extensions={self.late_extensions}, "
            f"leases lost={self.leases_lost}, duplicates after a stall={len(self.starved)}",
        ]
        out += [f"  STARVED {s}" for s in self.starved[:20]]
        out += self.notes
        out += [f"  LOST message {n}" for n in self.lost[:20]]
        out += [f"  UNEXPLAINED {u}" for u in self.unexplained[:20]]
        out += [f"  FENCE {v}" for v in self.fence_violations[:20]]
        return out


def check(
    backend: str,
    enqueued: list[int],
    runs: dict[int, list[Execution]],
    faults: list[Fault],
    vt: float,
    dead: int = 0,
    stalls: Sequence[Stall] = (),
    notes: Sequence[KeeperNote] = (),
) -> Report:
    report = Report(backend, len(enqueued), faults, dead=dead)
    long_stalls = [s for s in stalls if s.end - s.start >= STALL_SHARE * vt]
    report.stalls = len(long_stalls)
    report.longest_stall = max((s.end - s.start for s in stalls), default=0.0)
    report.late_extensions = sum(1 for k in notes if k.event == "late")
    report.leases_lost = sum(1 for k in notes if k.event == "lost")
    for n in enqueued:
        executions = sorted(runs.get(n, []), key=lambda e: e.fence)  # the order of the leases
        if not any(e.ended is not None for e in executions):
            report.lost.append(n)
        for before, after in itertools.pairwise(executions):
            report.duplicates += 1
            if after.started < before.started:
                report.stale_starts += 1
            # `before` was leased at most a lease before either run started.
            since = min(before.started, after.started) - vt
            causes = [
                f
                for f in faults
                if f.reaches(before.worker) and f.start <= after.started and f.end >= since
            ]
            starved = [
                s
                for s in long_stalls
                if s.worker == before.worker and s.start <= after.started and s.end >= since
            ]
            what = (
                f"message {n}: ran on {before.worker} (fence {before.fence}, "
                f"{before.started:.3f}-{before.ended}, stop: {before.stop_reason or '-'}) "
                f"then on {after.worker} (fence {after.fence}, {after.started:.3f})"
            )
            if causes:
                took = after.started - max(_recovery_from(f) for f in causes)
                report.redelivery.append(took)
                report.redelivered.append((took, n, after.started))
            elif starved:
                worst = max(starved, key=lambda s: s.end - s.start)
                report.starved.append(
                    f"{what}; {before.worker} stalled {worst.end - worst.start:.2f}s "
                    f"from {worst.start:.3f}"
                )
            else:
                lag = [
                    f"{k.event}{f' {k.lag:.2f}s' if k.lag else ''} at {k.t:.3f}"
                    for k in notes
                    if k.id == before.id and k.fence == before.fence
                ]
                report.unexplained.append(
                    f"{what} with no fault on {before.worker} in between; its keeper: "
                    f"{', '.join(lag) or 'nothing late or lost'}"
                )
            if after.fence == before.fence or after.attempt <= before.attempt:
                report.fence_violations.append(
                    f"message {n}: fence {before.fence} (attempt {before.attempt}) then "
                    f"fence {after.fence} (attempt {after.attempt})"
                )
    return report


# A stall this long (a share of the lease) can make a lease lapse, with round trips.
STALL_SHARE = 1.0 / 3.0


def _recovery_from(f: Fault) -> float:
    return f.start if f.workers is not None else f.end
