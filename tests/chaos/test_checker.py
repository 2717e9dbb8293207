"""The checker itself: it must flag what the chaos runs are meant to catch."""

from __future__ import annotations

from pathlib import Path

from tests.chaos.checker import check, lapse_margin
from tests.chaos.faults import Fault
from tests.chaos.recorder import Execution, KeeperNote, Stall, executions, read

VT = 2.0


def run(n: int, fence: int, worker: str, start: float, end: float | None) -> Execution:
    return Execution(n, f"m-{n}", fence, fence, worker, 1, start, end)


def test_a_message_that_never_ended_is_lost() -> None:
    report = check(
        "x", [0, 1], {0: [run(0, 1, "w1", 10.0, 10.5)], 1: [run(1, 1, "w1", 10.0, None)]}, [], VT
    )
    assert report.lost == [1] and not report.ok
    assert report.line() == (
        "chaos x: jobs=2 faults=0 lost=1 duplicates=0 unexplained=0 explained_coverage=0.00 "
        "p99_redelivery_s=0.00"
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
    # counted from the lapse (its start plus a lease, no extension recorded), not the kill
    assert report.redelivery == [12.5 - 12.0]


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


def test_a_global_fault_far_from_the_lapse_explains_nothing() -> None:
    # w1's lease was extended until 20.0 and lapsed then; w2 took the message at 20.3. A
    # server restart and a network drop long before the lapse reached every worker, and
    # the old checker took them for an explanation; neither can have caused this lapse.
    runs = {0: [run(0, 1, "w1", 10.0, None), run(0, 2, "w2", 20.3, 20.4)]}
    restart = Fault("restart", "restart", 12.0, 13.0, None)
    drop = Fault("drop", "net", 17.0, 17.0, None)
    assert drop.end < 20.0 - lapse_margin(VT)  # both end before the lapse's window opens
    report = check("x", [0], runs, [restart, drop], VT, expiries={("m-0", 1): 20.0})
    assert report.duplicates == 1 and len(report.unexplained) == 1 and not report.ok
    assert "lease lapsed 20.000" in report.unexplained[0]
    # the same restart, in effect when the lease lapsed, does explain it: the worker's
    # extensions could not reach the server
    during = Fault("restart", "restart", 18.8, 20.1, None)
    report = check("x", [0], runs, [during], VT, expiries={("m-0", 1): 20.0})
    assert report.ok and report.redelivery == [20.3 - 20.1]  # from the server's return


def test_a_kill_just_before_the_lapse_explains_it_and_one_after_does_not() -> None:
    runs = {0: [run(0, 1, "w1", 10.0, None), run(0, 2, "w2", 20.3, 20.4)]}
    expiries = {("m-0", 1): 20.0}  # its last extension, at 18.0
    before = Fault("kill", "kill", 18.2, 18.2, frozenset({"w1"}))
    report = check("x", [0], runs, [before], VT, expiries=expiries)
    assert report.ok and report.redelivery == [20.3 - 20.0]
    after = Fault("kill", "kill", 20.1, 20.1, frozenset({"w1"}))
    report = check("x", [0], runs, [after], VT, expiries=expiries)
    assert len(report.unexplained) == 1 and not report.ok
    elsewhere = Fault("kill", "killpg", 18.2, 18.2, frozenset({"w3"}))
    report = check("x", [0], runs, [elsewhere], VT, expiries=expiries)
    assert len(report.unexplained) == 1


def test_a_message_taken_ahead_of_its_run_lapses_at_its_last_recorded_expiry() -> None:
    # w7 took message 0 ahead of its run and kept its lease until 14.8; frozen from 13.1
    # to 16.3, it started the run at 16.35 and its keeper was told at once the lease was
    # lost. The lapse is 14.8, inside the stop, not the start plus a lease (18.35).
    runs = {0: [run(0, 1, "w7", 16.35, 16.42), run(0, 2, "w1", 20.6, 20.7)]}
    stop = Fault("stop", "stop", 13.1, 16.3, frozenset({"w7"}))
    lost = KeeperNote("lost", "w7", "m-0", 1, 16.35)
    report = check("x", [0], runs, [stop], VT, notes=[lost], expiries={("m-0", 1): 14.8})
    assert report.ok and report.redelivery == [20.6 - 14.8]
    # With no extension recorded (taken less than a third of a lease before the stop),
    # the lost note bounds the lapse: it came when the keeper ran again, at 16.35.
    report = check("x", [0], runs, [stop], VT, notes=[lost])
    assert report.ok and report.redelivery == [20.6 - 16.35]
    # Without either, the start plus a lease (18.35) is all there is, and the stop that
    # ended before 16.77 (18.35 - the window) is too early to explain it.
    report = check("x", [0], runs, [stop], VT)
    assert len(report.unexplained) == 1


def test_a_stall_explains_only_when_it_overlaps_the_lapse_on_that_worker() -> None:
    runs = {0: [run(0, 1, "w1", 10.0, None), run(0, 2, "w2", 20.3, 20.4)]}
    expiries = {("m-0", 1): 20.0}
    at_lapse = Stall("w1", 100, 19.0, 20.2, "runq", waited=1.1)
    report = check("x", [0], runs, [], VT, stalls=[at_lapse], expiries=expiries)
    assert report.ok and len(report.starved) == 1 and report.unexplained == []
    assert "w1 could not run (runq) for 1.10s" in report.starved[0]
    assert report.stalls == 1 and report.longest_stall == 1.1
    early = Stall("w1", 100, 12.0, 14.0, "runq", waited=2.0)  # long, but far from the lapse
    other = Stall("w3", 101, 19.0, 20.2, "D")  # at the lapse, on another worker
    report = check("x", [0], runs, [], VT, stalls=[early, other], expiries=expiries)
    assert len(report.unexplained) == 1 and report.starved == [] and not report.ok


def test_a_stopped_worker_the_runner_stopped_is_not_counted_as_a_stall() -> None:
    runs = {0: [run(0, 1, "w1", 10.0, 10.2)]}
    stop = Fault("stop", "stop", 11.0, 14.0, frozenset({"w1"}))
    stopped = Stall("w1", 100, 10.98, 14.02, "T")
    report = check("x", [0], runs, [stop], VT, stalls=[stopped])
    assert report.stalls == 0 and report.longest_stall == 0.0


def test_unparsable_record_lines_are_counted_and_fail_the_run(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    log.write_bytes(
        b'{"event":"start","n":0,"id":"m-0","attempt":1,"fence":1,"worker":"w1","pid":1,"t":1.0}\n'
        b'{"event":"start","n":1,"id":"m-1","att\n'  # a torn line: it could hide a start
        b'{"event":"end","n":0,"id":"m-0","attempt":1,"fence":1,"worker":"w1","pid":1,"t":1.5}\n'
        b'{"event":"end","n":1'  # a write still under way: not a record yet, not a broken one
    )
    records = read(log)
    assert records.unparsable == 1 and len(records) == 2
    report = check("x", [0], executions(records), [], VT, unparsable=records.unparsable)
    assert report.lost == [] and report.unparsable == 1 and not report.ok
    assert "  record lines that did not parse: 1" in report.details()


def test_explained_coverage_is_the_union_of_the_windows_over_the_run() -> None:
    runs = {0: [run(0, 1, "w1", 0.0, 0.1)], 1: [run(1, 1, "w1", 99.0, 100.0)]}
    stop = Fault("stop", "stop", 10.0, 13.0, frozenset({"w1"}))  # [10, 13 + margin]
    net = Fault("blackhole", "net", 12.0, 14.0, None)  # [12, 14 + margin]: overlaps it
    report = check("x", [0, 1], runs, [stop, net], VT)
    assert abs(report.coverage - (14.0 + lapse_margin(VT) - 10.0) / 100.0) < 1e-9
    assert f"explained_coverage={report.coverage:.2f}" in report.line()
    # w2 lived 0..100 and was never touched but by the blackhole: [12, 14 + margin]
    runs[2] = [run(2, 1, "w2", 0.0, 100.0)]
    report = check("x", [0, 1, 2], runs, [stop, net], VT)
    w1 = (14.0 + lapse_margin(VT) - 10.0) / 100.0
    w2 = (2.0 + lapse_margin(VT)) / 100.0
    assert abs(report.worker_coverage - (w1 + w2) / 2) < 1e-9


def test_a_duplicate_after_a_measured_stall_of_its_worker_is_starved_not_unexplained() -> None:
    runs = {0: [run(0, 1, "w1", 10.0, 13.0), run(0, 2, "w2", 12.5, 12.9)]}
    stalled = [Stall("w1", 100, 10.3, 11.6, "T")]
    report = check("x", [0], runs, [], VT, stalls=stalled)
    assert report.unexplained == [] and report.ok
    assert len(report.starved) == 1 and "w1 could not run (T) for 1.30s" in report.starved[0]
    assert report.redelivery == []  # not a fault of the run's: no redelivery time


def test_a_short_stall_or_one_on_another_worker_explains_nothing() -> None:
    runs = {0: [run(0, 1, "w1", 10.0, 13.0), run(0, 2, "w2", 12.5, 12.9)]}
    short = Stall("w1", 100, 10.3, 11.5, "runq", waited=0.2)  # under a third of the lease
    other = Stall("w3", 101, 10.3, 12.0, "T")
    late = KeeperNote("late", "w1", "m-0", 1, 11.5, 0.9)
    report = check("x", [0], runs, [], VT, stalls=[short, other], notes=[late])
    assert len(report.unexplained) == 1 and not report.ok
    assert "late 0.90s at 11.500" in report.unexplained[0]


def test_redelivery_is_counted_to_the_next_lease_not_to_the_run() -> None:
    # w1 ran attempt 1 and was killed; w2 leased attempt 2 at once, then died holding it
    # before it ran; w3 leased attempt 3 and waited 3 s for a free child process before
    # its run began. The message came back 0.25 s after w1's lease lapsed (at 12.0): the
    # rest is w2's own lapse and w3's wait, not a slow redelivery.
    runs = {0: [run(0, 1, "w1", 10.0, None), run(0, 3, "w3", 17.5, 17.6)]}
    killed = Fault("kill", "kill", 10.3, 10.3, frozenset({"w1"}))
    leased = {"m-0": [(9.9, 1, "w1"), (12.25, 2, "w2"), (14.5, 3, "w3")]}
    report = check("x", [0], runs, [killed], VT, leased=leased)
    assert report.ok and report.duplicates == 1
    assert report.redelivery == [0.25]
    assert report.local_wait == [3.0]
    # Without the lease records, the same run counts 5.5 s from the lapse to the run.
    assert check("x", [0], runs, [killed], VT).redelivery == [5.5]


def test_a_run_that_did_not_drain_fails_even_with_every_message_ended() -> None:
    report = check("x", [0], {0: [run(0, 1, "w1", 10.0, 10.5)]}, [], VT)
    assert report.ok
    report.drained = False
    assert not report.ok
    assert "drained=no" in report.line()


def test_an_end_that_was_never_settled_fails_the_run() -> None:
    # Every message reached its end record, yet the queue still held one: its run ended
    # and its ack never landed.
    report = check("x", [0, 1], {n: [run(n, 1, "w1", 10.0, 10.5)] for n in (0, 1)}, [], VT)
    report.drained, report.unsettled = False, 1
    assert not report.ok
    assert "unsettled=1" in report.line()
