"""The durable jobs' checker: each count it keeps must flip the verdict on a made-up
ledger, and what DESIGN allows (a step run again after its worker died) must not."""

from __future__ import annotations

from typing import Any

from tests.chaos.checker import Report
from tests.chaos.durable import STEPS, check_durable, key, payload


def dstep(n: int, step: str, occ: int, run: str, fence: int, t: float) -> dict[str, Any]:
    return {
        "event": "dstep",
        "n": n,
        "step": step,
        "occ": occ,
        "run": run,
        "fence": fence,
        "worker": f"w{fence}",
        "t": t,
    }


def clean(n: int, tx: bool = True) -> list[dict[str, Any]]:
    """One message whose every step ran once, under fence 1, and ended."""
    steps = [(s, o) for s, o in STEPS if tx or s != "charge"]
    lines = [dstep(n, s, o, f"{n}-{s}{o}", 1, 10.0 + i) for i, (s, o) in enumerate(steps)]
    got: dict[str, Any] = {key(s, o): {"run": f"{n}-{s}{o}"} for s, o in steps}
    got["signal"] = payload(n)
    return [*lines, {"event": "dend", "n": n, "got": got}]


def verdict(
    records: list[dict[str, Any]], effects: dict[int, int], durable: dict[int, bool] | None = None
) -> Report:
    report = Report("x", 2, [])
    check_durable(report, durable or {0: True, 1: False}, records, effects, (1, 1))
    return report


def test_a_clean_ledger_passes() -> None:
    report = verdict(clean(0) + clean(1, tx=False), {0: 1})
    assert report.ok and report.durable is not None
    assert report.durable.steps == 7 and report.durable.steps_rerun == []
    assert "steps_rerun=0 effects_twice=0" in report.line()


def test_a_recorded_step_run_again_under_a_newer_lease_fails() -> None:
    again = dstep(0, "b", 1, "zzz", 2, 20.0)  # fence 2 ran b, whose record fence 1 made
    report = verdict([*clean(0), again, *clean(1, tx=False)], {0: 1})
    assert report.durable is not None and len(report.durable.steps_rerun) == 1
    assert "step b#1 recorded by fence 1" in report.durable.steps_rerun[0]
    assert not report.ok and "steps_rerun=1" in report.line()


def test_a_step_run_again_after_its_worker_died_is_allowed_and_counted() -> None:
    died = dstep(0, "a", 2, "dead", 0, 9.0)  # fence 0 began a#2, died; fence 1 recorded it
    zombie = dstep(0, "a", 1, "late", 0, 30.0)  # a frozen older lease began a#1 late
    report = verdict([died, zombie, *clean(0), *clean(1, tx=False)], {0: 1})
    assert report.ok and report.durable is not None
    assert report.durable.steps_again == 2 and report.durable.stale == 1


def test_a_transactional_write_made_twice_or_never_fails() -> None:
    twice = verdict(clean(0) + clean(1, tx=False), {0: 2})
    assert twice.durable is not None and len(twice.durable.effects_twice) == 1
    assert not twice.ok and "effects_twice=1" in twice.line()
    never = verdict(clean(0) + clean(1, tx=False), {})
    assert never.durable is not None and len(never.durable.effects_missing) == 1
    assert not never.ok


def test_a_durable_message_that_never_ended_is_lost() -> None:
    unfinished = [r for r in clean(1, tx=False) if r["event"] != "dend"]
    report = verdict(clean(0) + unfinished, {0: 1})
    assert report.lost == [1] and not report.ok


def test_a_recorded_value_no_call_made_or_a_wrong_signal_fails() -> None:
    forged = clean(0)
    forged[-1]["got"][key("a", 1)] = {"run": "nobody"}
    report = verdict(forged + clean(1, tx=False), {0: 1})
    assert report.durable is not None and "no call of it" in report.durable.errors[0]
    assert not report.ok
    wrong = clean(1, tx=False)
    wrong[-1]["got"]["signal"] = payload(7)
    report = verdict(clean(0) + wrong, {0: 1})
    assert report.durable is not None and "got signal" in report.durable.errors[0]
    assert not report.ok


def test_two_ends_that_saw_different_records_fail() -> None:
    first = clean(1, tx=False)
    second = clean(1, tx=False)[-1]
    second["got"] = {**second["got"], key("b", 1): {"run": "other"}}
    report = verdict(clean(0) + first + [second, dstep(1, "b", 1, "other", 0, 5.0)], {0: 1})
    assert report.durable is not None and "different recorded values" in report.durable.errors[0]
    assert not report.ok
