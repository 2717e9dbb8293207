"""What a chaos run proves of what is built from messages: chords and concurrency limits.

- callbacks twice: a chord whose `gather` was fired more than once (a second life of its
  message: its attempts started over) or early (it started before every member had ended
  once). A redelivered `gather` after a fault is a duplicate like any other, which the
  causal checker explains or not;
- callbacks missing: a chord whose members all ended and whose `gather` never did, or got
  anything but its members' results in the group's order;
- limit exceeded: a run of `limited` that started while `LIMIT` other runs of its tenant
  held their slots. A run holds its slot from its start to its end, or, when its lease
  lapsed first (its worker was killed or frozen), to the earliest moment the records
  allow for that lapse: a zombie's slot went with its lease, and the check never counts
  against the backend a lapse it could have seen earlier. Clipped that way, a killed
  run counts for less than it held, so a violation is only ever under-counted;
- stuck slots: after the run, each tenant gets `LIMIT` jobs of a second and a half at
  once; a slot no run holds any more but the backend still counts shows as those jobs
  running one after another instead of together. Each slot short is one stuck.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import tasuki
from tests.chaos.checker import KEEPER_SHARE, SLACK, Report
from tests.chaos.jobs import LIMIT, TENANTS
from tests.chaos.recorder import Execution, executions


def check_flows(
    report: Report,
    flows: Mapping[int, Sequence[int]],
    runs: Mapping[int, list[Execution]],
    drained: bool = True,
) -> None:
    """`drained`: the queue was worked off. Until it is, a member that ended may still wait
    for a redelivery whose settle completes the set (its first ack was lost): a callback
    not run yet is then counted missing with that said, since nobody can tell it would
    have come (the undrained run fails on its own too: `Report.ok`)."""
    got = _gathered(runs)
    report.flows = len(flows)
    for n, members in flows.items():
        calls = sorted(runs.get(n, []), key=lambda e: e.fence)
        first_ends = [
            min((e.ended for e in runs.get(m, []) if e.ended), default=None) for m in members
        ]
        if any(end is None for end in first_ends):
            continue  # a member never ended: counted lost by the checker
        if not any(e.ended is not None for e in calls):
            report.callbacks_missing.append(
                f"chord {n}: every member ended, gather never did"
                + ("" if drained else " (the queue did not drain)")
            )
            continue
        wrong = [g for g in got.get(n, []) if g != list(members)]
        if wrong:
            report.callbacks_missing.append(
                f"chord {n}: gather got {wrong[0]}, not its members' results {list(members)}"
            )
        last_member = max(end for end in first_ends if end is not None)
        early = [e for e in calls if e.started < last_member]
        again = [b for a, b in itertools.pairwise(calls) if b.attempt <= a.attempt]
        if early or again:
            report.callbacks_twice.append(
                f"chord {n}: gather started {len(calls)} times, "
                f"{len(early)} before its last member ended at {last_member:.3f}, "
                f"{len(again)} as a new message (attempts started over)"
            )


def _gathered(runs: Mapping[int, list[Execution]]) -> dict[int, list[list[int]]]:
    return {n: [e.got for e in rs if e.got is not None] for n, rs in runs.items()}


def check_limits(
    report: Report,
    limited: Mapping[int, str],
    runs: Mapping[int, list[Execution]],
    floors: Mapping[tuple[str, int], float],
    vt: float,
) -> None:
    """`limited`: the number of each run of `limited` and its tenant; `floors`: the
    earliest each extended lease can lapse (`recorder.lease_floors`).

    Also takes the limited messages' redeliveries out of the redelivery figures: a
    redelivered limited message waits for a slot of its tenant like any other, which is
    the limit at work, not a lease coming back late."""
    strict: dict[str, list[tuple[float, float, int]]] = {}
    clipped: dict[str, list[tuple[float, float, int]]] = {}
    for n, tenant in limited.items():
        for e in sorted(runs.get(n, []), key=lambda e: e.fence):
            lapse = _lapse(e, floors, vt)
            end = min(e.ended, lapse) if e.ended is not None else lapse
            clipped.setdefault(tenant, []).append((e.started, end, n))
            strict.setdefault(tenant, []).append((e.started, e.ended or lapse, n))
    report.limited = sum(len(s) for s in clipped.values())
    over = {v for tenant, held in clipped.items() for v in _over(tenant, held)}
    report.limit_exceeded += sorted(over)
    # A run whose lease lapsed while its worker could not run (stopped, starved) and that
    # then went on to its end held no slot after the lapse: a third run of its tenant may
    # start meanwhile, the case the contract allows. Counted apart, never excused silently.
    lapsed = {v for tenant, held in strict.items() for v in _over(tenant, held)} - over
    report.notes += [f"  over the limit after a holder's lease lapsed: {v}" for v in sorted(lapsed)]
    kept = [(t, n, s) for t, n, s in report.redelivered if n not in limited]
    waited = len(report.redelivered) - len(kept)
    report.redelivered = kept
    report.redelivery = [t for t, _, _ in kept]
    if waited:
        report.notes.append(
            f"  redeliveries of limited messages, which wait for a slot (not counted): {waited}"
        )


def _over(tenant: str, held: list[tuple[float, float, int]]) -> list[str]:
    out = []
    for start, _, n in held:
        others = [m for s, end, m in held if s <= start < end - SLACK and (s, m) != (start, n)]
        if len(others) >= LIMIT:
            out.append(
                f"tenant {tenant}: message {n} started at {start:.3f} while "
                f"{sorted(others)} held its {LIMIT} slots"
            )
    return out


def _lapse(e: Execution, floors: Mapping[tuple[str, int], float], vt: float) -> float:
    """The earliest the run's lease can have lapsed: one lease after its keeper last
    asked to extend it, or without an extension, two thirds of a lease after its start
    (the keeper extends a third of a lease after the lease was taken, before the start or
    after). A run that goes on past it may have lost its slot with its lease. (Not the
    expiry written down once the answer came: a worker stopped between the backend's
    extension and that note wrote an expiry as late as its stop was long.)"""
    known = floors.get((e.id, e.fence))
    return known if known is not None else e.started + KEEPER_SHARE * vt - SLACK


PROBE_BASE = 2_000_000
PROBE_SLEEP = 1.5


def probe_slots(app: tasuki.App, log: Path, vt: float) -> tuple[int, list[str]]:
    """Stuck slots, and what each tenant's probes did: `LIMIT` probes per tenant at once."""
    numbers = {
        t: [PROBE_BASE + k * len(TENANTS) + i for k in range(LIMIT)] for i, t in enumerate(TENANTS)
    }
    for tenant, ns in numbers.items():
        for n in ns:
            app.jobs["limited"].options(message_id=f"p-{n}").enqueue(n, PROBE_SLEEP, tenant=tenant)
    deadline = time.monotonic() + LIMIT * PROBE_SLEEP + vt + 6.0
    want = {n for ns in numbers.values() for n in ns}
    while time.monotonic() < deadline:
        runs = executions(log)
        if all(any(e.ended for e in runs.get(n, [])) for n in want):
            break
        time.sleep(0.2)
    runs = executions(log)
    stuck, notes = 0, []
    for tenant, ns in numbers.items():
        spans = [(e.started, e.ended or time.time()) for n in ns for e in runs.get(n, [])[:1]]
        together = max((sum(1 for s, end in spans if s <= t < end) for t, _ in spans), default=0)
        stuck += LIMIT - together
        notes.append(f"{tenant}: {together} of {LIMIT} probes ran at once")
    return stuck, notes
