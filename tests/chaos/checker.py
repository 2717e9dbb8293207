"""What a chaos run proves, read from the execution records and the fault records alone.

- lost: a message whose enqueue succeeded and that never reached its end record;
- duplicate: an execution after the first of the same message (in the order of their
  fencing tokens, which is the order of the leases). It is *explained* only by a fault
  that caused the lease of the run before it to lapse: one in effect during that lease's
  last `margin` seconds (`lapse_window`) that touched that run's worker (killed, frozen,
  or a worker caught holding SQLite's write lock), its connection (a network fault of the
  proxy every worker speaks through) or the server it used (a restart). The lapse is the
  last expiry the worker's keeper recorded (an extension's answer plus one lease; a
  message taken ahead of its run is kept too, so this may precede the run's start), or
  the run's start plus one lease when it recorded none; never later than when the keeper
  was told the lease was lost, nor than the duplicate's start (nobody else could lease it
  before). A kill stays in effect from the signal on:
  a dead worker extends nothing, so it explains a lapse that comes after it. Any other
  duplicate is a broken promise;
- redelivery: for each explained duplicate, the time from when another worker could take
  the message over (the lapse, or the end of the server or network fault that explains it
  when that came later) to the message's next lease (the first lease of a later attempt
  any worker recorded; the duplicate's start when none was recorded). Not to the
  duplicate's start: a worker may lease a message ahead of its run and keep it while it
  waits for a free thread or child process, and a worker may die holding a lease it never
  ran, which is a lapse of its own. Both were counted as slow redeliveries once (a
  process-pool job waited 3.4 s for the worker's one child; 13 s went by over three such
  leases). The wait in the worker is reported apart (`local wait`);
- starved: a duplicate no injected fault explains, whose first run's worker could not run
  (stopped, in uninterruptible sleep, or waiting for a CPU) for a third of a lease or
  more during the same window, as measured from outside it by the sampler. That is the
  contract's at-least-once case, counted apart and printed with the stall, never folded
  into the injected faults. The probe inside each worker excuses nothing;
- explained coverage: the share of the run's wall time in which a lapse would have been
  explained by some fault (the union of every fault's explanation window). The lower it
  is, the more an `unexplained=0` means; it counts every worker's windows at once, so it
  over-states what any one worker was given;
- fencing: no two leases of a message share a token, and in token order the attempts
  only grow. A frozen worker may still *start* its stale run after a newer one began
  (counted as stale starts): its token is the older one, which is what fencing is for;
- unparsable: a whole line of the record that did not parse. It could hide a run's
  start, so any fails the run;
- drained: the queue was worked off after the faults. A run that did not drain proves
  nothing of what was still to come (a callback, a redelivery) and fails;
- unsettled: messages the queue still held once every message had reached its end record:
  a run that ended and was never settled (its ack lost for good). Any fails the run.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tests.chaos.faults import Fault
from tests.chaos.recorder import Execution, KeeperNote, Probe, Stall

if TYPE_CHECKING:
    from tests.chaos.durable import DurableResult


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
    # From a redelivered message's lease to its run's start, in the worker that leased it.
    local_wait: list[float] = field(default_factory=list)
    fence_violations: list[str] = field(default_factory=list)
    dead: int = 0
    stale_starts: int = 0  # a run that began after a newer lease's run had begun
    starved: list[str] = field(default_factory=list)  # duplicates explained by a stall
    stalls: int = 0  # sampler stalls of a third of a lease or more, outside injected stops
    longest_stall: float = 0.0  # of the sampler's stalls outside injected stops
    probes: int = 0  # late wake-ups the workers' own probes measured (diagnosis only)
    longest_probe: float = 0.0
    late_extensions: int = 0
    leases_lost: int = 0
    coverage: float = 0.0  # share of the run's wall time inside an explanation window
    worker_coverage: float = 0.0  # the same per worker, its own faults and the global ones
    unparsable: int = 0
    drained: bool = True
    unsettled: int = 0
    # Chords and limits (tests/chaos/composite.py), where the backend has them; None: not run.
    flows: int | None = None
    callbacks_twice: list[str] = field(default_factory=list)
    callbacks_missing: list[str] = field(default_factory=list)
    limited: int | None = None  # runs of `limited`
    limit_exceeded: list[str] = field(default_factory=list)
    stuck_slots: int = 0
    notes: list[str] = field(default_factory=list)  # the runner's own observations
    # Redeliveries whose message had others ready ahead of it when it ran again (the
    # runner's depth samples): a queue's wait as much as a lease's lapse.
    queued: list[float] = field(default_factory=list)
    # Durable jobs (tests/chaos/durable.py), where asked and the backend has them.
    durable: DurableResult | None = None

    @property
    def ok(self) -> bool:
        return self.drained and not (
            self.unsettled
            or self.lost
            or self.unexplained
            or self.fence_violations
            or self.dead
            or self.unparsable
            or self.callbacks_twice
            or self.callbacks_missing
            or self.limit_exceeded
            or self.stuck_slots
            or (self.durable is not None and not self.durable.ok)
        )

    def p99(self, skip_queued: bool = False) -> float:
        """The 99th percentile of the redeliveries; `skip_queued`: of those with nothing
        ready ahead of them."""
        samples = list(self.redelivery)
        if skip_queued:
            for took in self.queued:
                if took in samples:
                    samples.remove(took)
        if not samples:
            return 0.0
        ordered = sorted(samples)
        return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]

    def line(self) -> str:
        return (
            f"chaos {self.backend}: jobs={self.jobs} faults={len(self.faults)} "
            f"lost={len(self.lost)} duplicates={self.duplicates} "
            f"unexplained={len(self.unexplained)} explained_coverage={self.coverage:.2f} "
            f"p99_redelivery_s={self.p99():.2f}"
            + ("" if self.drained else " drained=no")
            + (f" unsettled={self.unsettled}" if self.unsettled else "")
            + (
                ""
                if self.flows is None
                else f" callbacks_twice={len(self.callbacks_twice)} "
                f"callbacks_missing={len(self.callbacks_missing)}"
            )
            + (
                ""
                if self.limited is None
                else f" limit_exceeded={len(self.limit_exceeded)} stuck_slots={self.stuck_slots}"
            )
            + (
                ""
                if self.durable is None
                else f" steps_rerun={len(self.durable.steps_rerun)} "
                f"effects_twice={len(self.durable.effects_twice)}"
            )
        )

    def slowest(self, count: int = 3) -> list[tuple[float, int, float]]:
        return sorted(self.redelivered, reverse=True)[:count]

    def details(self) -> list[str]:
        kinds = Counter(f.kind for f in self.faults)
        out = [
            "  faults by kind: " + (", ".join(f"{k}={v}" for k, v in sorted(kinds.items())) or "-"),
            f"  redelivery: samples={len(self.redelivery)} "
            f"max_s={max(self.redelivery, default=0.0):.2f} p99_s={self.p99():.2f} "
            f"(to the next lease); local wait from that lease to the run: "
            f"max_s={max(self.local_wait, default=0.0):.2f}",
            f"  explanation windows cover {self.coverage:.2f} of the run (any worker), "
            f"{self.worker_coverage:.2f} of a worker's life (its faults and the global ones)",
            f"  fencing tokens only grew: {'yes' if not self.fence_violations else 'NO'}; "
            f"dead letters: {self.dead}; stale runs started after a newer one: "
            f"{self.stale_starts}",
            f"  measured from outside the workers (sampler), outside injected stops: "
            f"stalls>={STALL_SHARE:.2f}*lease={self.stalls} "
            f"(longest {self.longest_stall:.2f}s); duplicates after a stall="
            f"{len(self.starved)}",
            f"  measured inside the workers: late wake-ups={self.probes} "
            f"(longest {self.longest_probe:.2f}s, explains nothing), late extensions="
            f"{self.late_extensions}, leases lost={self.leases_lost}",
            f"  record lines that did not parse: {self.unparsable}",
        ]
        if self.flows is not None:
            out.append(f"  chords: {self.flows}")
        if self.limited is not None:
            out.append(f"  runs under a concurrency limit: {self.limited}")
        if self.durable is not None:
            out.append("  " + self.durable.line())
            out += self.durable.details()
        out += [f"  STARVED {s}" for s in self.starved[:20]]
        out += self.notes
        out += [f"  LOST message {n}" for n in self.lost[:20]]
        out += [f"  UNEXPLAINED {u}" for u in self.unexplained[:20]]
        out += [f"  FENCE {v}" for v in self.fence_violations[:20]]
        out += [f"  CALLBACK TWICE {c}" for c in self.callbacks_twice[:20]]
        out += [f"  CALLBACK MISSING {c}" for c in self.callbacks_missing[:20]]
        out += [f"  OVER LIMIT {c}" for c in self.limit_exceeded[:20]]
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
    expiries: Mapping[tuple[str, int], float] | None = None,
    unparsable: int = 0,
    probes: Sequence[Probe] = (),
    leased: Mapping[str, Sequence[tuple[float, int, str]]] | None = None,
) -> Report:
    report = Report(backend, len(enqueued), faults, dead=dead, unparsable=unparsable)
    expiries = expiries or {}
    margin = lapse_margin(vt)
    stops = [f for f in faults if f.kind == "stop"]
    own = [s for s in stalls if not any(_injected(s, f) for f in stops)]
    report.stalls = sum(1 for s in own if s.length >= STALL_SHARE * vt)
    report.longest_stall = max((s.length for s in own), default=0.0)
    long_stalls = [s for s in stalls if s.length >= STALL_SHARE * vt]
    report.probes = len(probes)
    report.longest_probe = max((p.end - p.start for p in probes), default=0.0)
    report.late_extensions = sum(1 for k in notes if k.event == "late")
    report.leases_lost = sum(1 for k in notes if k.event == "lost")
    lost: dict[tuple[str, int], float] = {}
    for k in notes:
        if k.event == "lost":
            lost[(k.id, k.fence)] = min(lost.get((k.id, k.fence), k.t), k.t)
    report.coverage = coverage(runs, faults, vt)
    report.worker_coverage = worker_coverage(runs, faults, vt)
    for n in enqueued:
        executions = sorted(runs.get(n, []), key=lambda e: e.fence)  # the order of the leases
        if not any(e.ended is not None for e in executions):
            report.lost.append(n)
        for before, after in itertools.pairwise(executions):
            report.duplicates += 1
            if after.started < before.started:
                report.stale_starts += 1
            lapse = lapse_of(before, after, vt, expiries, lost)
            since, until = lapse_window(before, lapse, margin)
            causes = [
                f
                for f in faults
                if f.reaches(before.worker) and f.start <= until and in_effect_until(f, vt) >= since
            ]
            starved = [
                s
                for s in long_stalls
                if s.worker == before.worker and s.start <= until and s.end >= since
            ]
            what = (
                f"message {n}: ran on {before.worker} (fence {before.fence}, "
                f"{before.started:.3f}-{before.ended}, stop: {before.stop_reason or '-'}, "
                f"lease lapsed {lapse:.3f}) then on {after.worker} (fence {after.fence}, "
                f"{after.started:.3f})"
            )
            if causes:
                # Nobody could take over before the lapse, nor before a server or network
                # fault that explains it was over.
                free = max([lapse] + [f.end for f in causes if f.workers is None])
                taken = next_lease(before, after, (leased or {}).get(before.id, ()))
                took = max(0.0, taken - free)
                report.redelivery.append(took)
                report.local_wait.append(max(0.0, after.started - own_lease(after, leased)))
                report.redelivered.append((took, n, after.started))
            elif starved:
                worst = max(starved, key=lambda s: s.length)
                report.starved.append(
                    f"{what}; {before.worker} could not run ({worst.kind}) for "
                    f"{worst.length:.2f}s from {worst.start:.3f}"
                )
            else:
                lag = [
                    f"{k.event}{f' {k.lag:.2f}s' if k.lag else ''} at {k.t:.3f}"
                    for k in notes
                    if k.id == before.id and k.fence == before.fence
                ]
                report.unexplained.append(
                    f"{what} with no fault on {before.worker}, its connection or its server "
                    f"from {since:.3f} to {until:.3f}; its keeper: "
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
# The keeper extends a lease a third of a lease after the last extension, then retries
# until the lease lapses: a fault can only have made it lapse by being in effect during
# the last two thirds of the lease. SLACK covers how much later than the store's own
# the lapse the records give can be: an extension is written down once its answer came
# back, a start once the job began, after its lease was taken (a round trip, a thread
# handing it over; a quarter second is far more than either on loopback).
KEEPER_SHARE = 2.0 / 3.0
SLACK = 0.25


def lapse_margin(vt: float) -> float:
    """How long before a lapse a fault can have caused it."""
    return KEEPER_SHARE * vt + SLACK


def lapse_of(
    before: Execution,
    after: Execution,
    vt: float,
    expiries: Mapping[tuple[str, int], float],
    lost: Mapping[tuple[str, int], float] | None = None,
) -> float:
    """When `before`'s lease lapsed: the last expiry its keeper recorded (a worker keeps
    the leases of messages it has taken but not started yet, so that may come before the
    run's start), or its start plus one lease when the keeper recorded none. Never later
    than the moment its keeper was told the lease was lost, nor than the start of the run
    that took the message over."""
    key = (before.id, before.fence)
    known = expiries.get(key, before.started + vt)
    return min(known, (lost or {}).get(key, known), after.started)


def next_lease(
    before: Execution, after: Execution, leased: Sequence[tuple[float, int, str]]
) -> float:
    """When the message was next leased after `before`'s lease: the first recorded lease
    of a later attempt (attempts only grow from lease to lease), no later than `after`'s
    start; `after`'s start when no lease was recorded."""
    later = [t for t, attempt, _ in leased if attempt > before.attempt]
    return min([after.started, *later])


def own_lease(
    after: Execution, leased: Mapping[str, Sequence[tuple[float, int, str]]] | None
) -> float:
    """When `after`'s worker leased the message for that run (its start if unrecorded)."""
    mine = [
        t
        for t, attempt, worker in (leased or {}).get(after.id, ())
        if worker == after.worker and attempt == after.attempt and t <= after.started
    ]
    return max(mine, default=after.started)


def lapse_window(before: Execution, lapse: float, margin: float) -> tuple[float, float]:
    """The moments a fault must touch to have caused the lapse: the lease's last `margin`
    seconds, and for a run that ended, everything from its end on (its ack was lost)."""
    since = lapse - margin
    if before.ended is not None:
        since = min(since, before.ended)
    return since, lapse


def in_effect_until(f: Fault, vt: float) -> float:
    """A dead worker's leases lapse at most one lease after its death (its last extension
    came before): a kill counts until then. Any other fault, a server restart included,
    ends when it is undone: the workers are back within a second of the server (a lapse
    that soon after is inside the lapse's own window), and a worker that is not is what
    this checker is for. (It once allowed a restart 5 s more: PostgreSQL's pool sleeps 1
    and 2 s between failed checks of idle connections a restart had broken, and waited
    out its 5 s checkout; tasuki now checks them itself, `postgres/dialect.py`.)"""
    if f.kind in KILLS:
        return f.start + vt + SLACK
    return f.end


KILLS = ("kill", "killpg", "writer-kill")


def coverage(runs: dict[int, list[Execution]], faults: Sequence[Fault], vt: float) -> float:
    """The share of the run's wall time in which a lapse would have been explained: the
    union over faults of [start, in effect until + margin], over the span from the first
    record to the last."""
    times = [t for rs in runs.values() for e in rs for t in (e.started, e.ended) if t is not None]
    times += [t for f in faults for t in (f.start, f.end)]
    if not times:
        return 0.0
    return _covered(min(times), max(times), faults, vt)


def worker_coverage(runs: dict[int, list[Execution]], faults: Sequence[Fault], vt: float) -> float:
    """The same share for each worker, from its first record to its last and counting only
    the faults that reached it, averaged over the workers weighted by those spans: how
    much of a worker's life a lapse of its leases had an excuse."""
    spans: dict[str, tuple[float, float]] = {}
    for rs in runs.values():
        for e in rs:
            first, last = spans.get(e.worker, (e.started, e.started))
            spans[e.worker] = (min(first, e.started), max(last, e.ended or e.started))
    total = sum(last - first for first, last in spans.values())
    if total <= 0:
        return 0.0
    covered = 0.0
    for worker, (first, last) in spans.items():
        mine = [f for f in faults if f.reaches(worker)]
        covered += _covered(first, last, mine, vt) * (last - first)
    return covered / total


def _covered(first: float, last: float, faults: Sequence[Fault], vt: float) -> float:
    if last <= first:
        return 0.0
    margin = lapse_margin(vt)
    windows = sorted(
        (max(first, f.start), min(last, in_effect_until(f, vt) + margin)) for f in faults
    )
    covered, reach = 0.0, first
    for start, end in windows:
        if end > max(start, reach):
            covered += end - max(start, reach)
            reach = end
    return covered / (last - first)


def _injected(s: Stall, stop: Fault) -> bool:
    """A worker found stopped (`T`) during a stop the runner did."""
    return (
        s.kind == "T"
        and stop.reaches(s.worker)
        and s.start <= stop.end + SLACK
        and s.end >= stop.start
    )
