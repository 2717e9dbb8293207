"""What a chaos run proves of durable jobs (DESIGN §4c), from the ledger alone.

A durable job (`jobs.durable`) takes steps `a`, then a durable sleep, `b`, a wait for the
signal `go` that the runner sends (early for some messages, late for others), on a SQL
backend a transactional step `charge` whose write goes into a table of the same
database, and `a` again (its second occurrence). Every call of a step's function writes
a `dstep` line (the message number, the step's name and occurrence, the run's fencing
token, and a token of its own that the function returns, so that the step's record
carries it); the run that gets to the end writes a `dend` line with every value its
steps returned: recorded values, so they name the one call whose record landed.

- steps rerun: a call of a step after the call whose record landed, under a newer lease
  (or the same one). A recorded step never runs again: any is a broken promise;
- steps again: a call under an older lease than the landed one, whose worker died or
  lost its lease while it ran (or, frozen, began it before it knew): allowed, counted;
  `stale` counts those that began after the landed call had begun (a zombie);
- lost: a durable message with no `dend` line;
- effects twice / missing: the rows the transactional step wrote into the database (the
  run reads them from there, not from the ledger): one per message, never two, never
  none for a message that ended;
- durable errors: a recorded value naming no call in the ledger, two ends that saw
  different recorded values, or a signal payload that is not the one sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.chaos.checker import Report

# The steps of a durable job in the order it takes them: (name, occurrence).
STEPS = (("a", 1), ("b", 1), ("charge", 1), ("a", 2))
TRANSACTIONAL = "charge"
# The transactional step's table, in the backend's own database (PostgreSQL: its schema).
EFFECTS = "chaos_effects"


def key(name: str, occurrence: int) -> str:
    """How a step is named in the job's `dend` line."""
    return f"{name}#{occurrence}"


def payload(n: int) -> dict[str, int]:
    """The signal the runner sends to message n."""
    return {"n": n}


@dataclass
class StepCall:
    """One call of a step's function, from its `dstep` line."""

    n: int
    step: str
    occurrence: int
    run: str  # the call's own token, returned by the function
    fence: int
    worker: str
    t: float


@dataclass
class DurableResult:
    """The durable jobs' part of a run's verdict (also on `Report.durable`)."""

    messages: int = 0
    transactional: int = 0
    steps: int = 0  # step calls in the ledger
    steps_rerun: list[str] = field(default_factory=list)
    steps_again: int = 0
    stale: int = 0
    effects_twice: list[str] = field(default_factory=list)
    effects_missing: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    early_signals: int = 0
    late_signals: int = 0

    @property
    def ok(self) -> bool:
        return not (self.steps_rerun or self.effects_twice or self.effects_missing or self.errors)

    def line(self) -> str:
        return (
            f"durable: messages={self.messages} steps={self.steps} "
            f"steps_rerun={len(self.steps_rerun)} steps_again={self.steps_again} "
            f"(stale {self.stale}) effects_twice={len(self.effects_twice)} "
            f"effects_missing={len(self.effects_missing)} errors={len(self.errors)} "
            f"signals early={self.early_signals} late={self.late_signals}"
        )

    def details(self) -> list[str]:
        return (
            [f"  STEP RERUN {s}" for s in self.steps_rerun[:20]]
            + [f"  EFFECT TWICE {s}" for s in self.effects_twice[:20]]
            + [f"  EFFECT MISSING {s}" for s in self.effects_missing[:20]]
            + [f"  DURABLE {s}" for s in self.errors[:20]]
        )


def calls(records: Sequence[Mapping[str, Any]]) -> list[StepCall]:
    return [
        StepCall(r["n"], r["step"], r["occ"], r["run"], r["fence"], r["worker"], r["t"])
        for r in records
        if r["event"] == "dstep"
    ]


def ends(records: Sequence[Mapping[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """What each durable message's steps returned, per run that got to its end."""
    out: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        if r["event"] == "dend":
            out.setdefault(r["n"], []).append(r["got"])
    return out


def check_durable(
    report: Report,
    durable: Mapping[int, bool],
    records: Sequence[Mapping[str, Any]],
    effects: Mapping[int, int] | None,
    signals: tuple[int, int] = (0, 0),
) -> DurableResult:
    """`durable`: each durable message's number -> whether it takes the transactional
    step; `effects`: the rows per message in the transactional step's table (None when
    no message takes it); `signals`: how many were sent (early, late)."""
    result = DurableResult(messages=len(durable))
    result.transactional = sum(durable.values())
    result.early_signals, result.late_signals = signals
    report.durable = result
    every = calls(records)
    result.steps = len(every)
    by_step: dict[tuple[int, str, int], list[StepCall]] = {}
    for c in every:
        by_step.setdefault((c.n, c.step, c.occurrence), []).append(c)
    finished = ends(records)
    for n, tx in durable.items():
        got = finished.get(n)
        if not got:
            report.lost.append(n)
            continue
        if any(g != got[0] for g in got[1:]):
            result.errors.append(f"message {n}: its ends saw different recorded values {got}")
        seen = got[0]
        if seen.get("signal") != payload(n):
            result.errors.append(f"message {n}: got signal {seen.get('signal')}, not {payload(n)}")
        for name, occ in STEPS:
            if name == TRANSACTIONAL and not tx:
                continue
            _check_step(result, n, name, occ, seen, by_step.get((n, name, occ), []))
        if tx:
            rows = (effects or {}).get(n, 0)
            if rows > 1:
                result.effects_twice.append(f"message {n}: {rows} rows of its transactional step")
            elif rows == 0:
                result.effects_missing.append(f"message {n}: ended, no row of its transaction")
    return result


def _check_step(
    result: DurableResult,
    n: int,
    name: str,
    occ: int,
    seen: Mapping[str, Any],
    made: list[StepCall],
) -> None:
    value = seen.get(key(name, occ))
    run = value.get("run") if isinstance(value, dict) else None
    landed = next((c for c in made if c.run == run), None)
    if landed is None:
        result.errors.append(
            f"message {n}: step {key(name, occ)} recorded {value!r}, no call of it in the ledger"
        )
        return
    for c in made:
        if c is landed:
            continue
        if c.fence >= landed.fence:
            result.steps_rerun.append(
                f"message {n}: step {key(name, occ)} recorded by fence {landed.fence} "
                f"({landed.worker} at {landed.t:.3f}), run again by fence {c.fence} "
                f"({c.worker} at {c.t:.3f})"
            )
        else:
            result.steps_again += 1
            if c.t > landed.t:
                result.stale += 1
