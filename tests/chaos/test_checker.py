"""The checker itself: it must flag what the chaos runs are meant to catch."""

from __future__ import annotations

from tests.chaos.checker import check
from tests.chaos.faults import Fault
from tests.chaos.recorder import Execution, KeeperNote, Stall

VT = 2.0


def run(n: int, fence: int, worker: str, start: float, end: float | None) -> Execution:
    return Execution(n, f"m-{n}", fence, fence, worker, 1, start, end)


def test_a_message_that_never_ended_is_lost() -> None:
    report = check(
        "x", [0, 1], {0: [run(0, 1, "w1", 10.0, 10.5)], 1: [run(1, 1, "w1", 10.0, None)]}, [], VT
    )
    assert report.lost == [1] and not report.ok
    assert report.line() == (
        "chaos x: jobs=2 faults=0 lost=1 duplicates=0 unexplained=0 p99_redelivery_s=0.00"
    )


def test_a_duplicate_without_a_fault_on_the_first_worker_is_unexplained() -> None:
    runs = {0: [run(0, 1, "w1", 10.0, 10.2), run(0, 2, "w2", 12.5, 12.6)]}
    elsewhere = Fault("kill", "kill", 11.0, 11.0, frozenset({"w3"}))
    report = check("x", [0], runs, [elsewhere], VT)
    assert report.duplicates == 1 and len(report.unexplained) == 1 and not report.ok


def test_a_duplicate_after_a_fault_on_the_first_worker_is_explained() -> None:
    runs = {0: [run(0, 1, "w1", 10.0, None), run(0, 2, "w2", 12.5, 12.6)]}
    killed = Fault("kill", "kill", 10.3, 10.3, frozenset({"w1"}))
    report = check("x", [0], runs, [killed], VT)
    assert report.ok and report.duplicates == 1
    assert report.redelivery == [12.5 - 10.3]


def test_a_frozen_worker_starting_late_is_ordered_by_fence_and_explained() -> None:
    # w1 leased (fence 1), froze before starting; w2 ran fence 2; w1 woke and started.
    runs = {0: [run(0, 2, "w2", 13.0, 13.1), run(0, 1, "w1", 15.0, 15.1)]}
    frozen = Fault("stop", "stop", 11.0, 14.9, frozenset({"w1"}))
    report = check("x", [0], runs, [frozen], VT)
    assert report.ok and report.stale_starts == 1


def test_a_repeated_fencing_token_fails_the_run() -> None:
    runs = {0: [run(0, 1, "w1", 10.0, None), run(0, 1, "w2", 12.5, 12.6)]}
    everyone = Fault("restart", "restart", 10.5, 11.0, None)
    report = check("x", [0], runs, [everyone], VT)
    assert report.fence_violations and not report.ok


def test_a_duplicate_after_a_measured_stall_of_its_worker_is_starved_not_unexplained() -> None:
    runs = {0: [run(0, 1, "w1", 10.0, 13.0), run(0, 2, "w2", 12.5, 12.9)]}
    stalled = [Stall("w1", 100, 10.3, 11.6)]
    report = check("x", [0], runs, [], VT, stalls=stalled)
    assert report.unexplained == [] and report.ok
    assert len(report.starved) == 1 and "w1 stalled 1.30s" in report.starved[0]
    assert report.redelivery == []  # not a fault of the run's: no redelivery time


def test_a_short_stall_or_one_on_another_worker_explains_nothing() -> None:
    runs = {0: [run(0, 1, "w1", 10.0, 13.0), run(0, 2, "w2", 12.5, 12.9)]}
    short = Stall("w1", 100, 10.3, 10.5)  # under a third of the lease
    other = Stall("w3", 101, 10.3, 12.0)
    late = KeeperNote("late", "w1", "m-0", 1, 11.5, 0.9)
    report = check("x", [0], runs, [], VT, stalls=[short, other], notes=[late])
    assert len(report.unexplained) == 1 and not report.ok
    assert "late 0.90s at 11.500" in report.unexplained[0]
