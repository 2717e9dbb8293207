"""The chord and limit checks: each must flag what it is there to catch."""

from __future__ import annotations

from tests.chaos.checker import Report
from tests.chaos.composite import check_flows, check_limits
from tests.chaos.recorder import Execution, Records, lease_floors

VT = 2.0


def run(
    n: int, fence: int, start: float, end: float | None, attempt: int | None = None
) -> Execution:
    return Execution(n, f"m-{n}", fence if attempt is None else attempt, fence, "w1", 1, start, end)


def gather(
    n: int, fence: int, start: float, got: list[int], attempt: int | None = None
) -> Execution:
    e = run(n, fence, start, start + 0.1, attempt)
    e.got = got
    return e


MEMBERS = {5: [105, 106]}
DONE = {105: [run(105, 1, 10.0, 10.5)], 106: [run(106, 1, 10.0, 11.0)]}


def test_a_chord_whose_gather_ran_once_after_its_members_passes() -> None:
    report = Report("x", 3, [])
    check_flows(report, MEMBERS, {**DONE, 5: [gather(5, 1, 11.2, [105, 106])]})
    assert report.ok and report.flows == 1
    assert report.line().endswith("callbacks_twice=0 callbacks_missing=0")


def test_a_gather_redelivered_after_a_fault_is_not_a_second_firing() -> None:
    # Its lease lapsed and it ran again under a newer fence: the causal checker's business.
    calls = [gather(5, 1, 11.2, [105, 106]), gather(5, 2, 14.0, [105, 106])]
    report = Report("x", 3, [])
    check_flows(report, MEMBERS, {**DONE, 5: calls})
    assert report.callbacks_twice == [] and report.ok


def test_a_gather_fired_twice_is_flagged() -> None:
    # The second is a new message: its attempts started over.
    calls = [gather(5, 1, 11.2, [105, 106]), gather(5, 2, 11.3, [105, 106], attempt=1)]
    report = Report("x", 3, [])
    check_flows(report, MEMBERS, {**DONE, 5: calls})
    assert len(report.callbacks_twice) == 1 and not report.ok


def test_a_gather_fired_before_its_last_member_ended_is_flagged() -> None:
    report = Report("x", 3, [])
    check_flows(report, MEMBERS, {**DONE, 5: [gather(5, 1, 10.7, [105, 106])]})
    assert len(report.callbacks_twice) == 1 and not report.ok


def test_a_gather_that_never_ran_or_got_the_wrong_results_is_missing() -> None:
    report = Report("x", 3, [])
    check_flows(report, MEMBERS, {**DONE})
    assert len(report.callbacks_missing) == 1 and not report.ok
    report = Report("x", 3, [])
    check_flows(report, MEMBERS, {**DONE, 5: [gather(5, 1, 11.2, [106, 105])]})
    assert "not its members' results" in report.callbacks_missing[0]


def test_a_third_run_while_two_hold_the_tenants_slots_is_over_the_limit() -> None:
    runs = {1: [run(1, 1, 10.0, 11.0)], 2: [run(2, 1, 10.1, 11.0)], 3: [run(3, 1, 10.5, 10.9)]}
    report = Report("x", 3, [])
    check_limits(report, {1: "t0", 2: "t0", 3: "t0"}, runs, {}, VT)
    assert len(report.limit_exceeded) == 1 and not report.ok
    # Another tenant's run at the same time is no one's business.
    report = Report("x", 3, [])
    check_limits(report, {1: "t0", 2: "t0", 3: "t1"}, runs, {}, VT)
    assert report.limit_exceeded == [] and report.limited == 3


def test_a_run_after_a_slot_was_freed_by_an_end_is_within_the_limit() -> None:
    runs = {1: [run(1, 1, 10.0, 10.4)], 2: [run(2, 1, 10.1, 11.0)], 3: [run(3, 1, 10.5, 10.9)]}
    report = Report("x", 3, [])
    check_limits(report, {1: "t0", 2: "t0", 3: "t0"}, runs, {}, VT)
    assert report.limit_exceeded == []


def test_a_killed_run_holds_its_slot_only_until_its_lease_can_have_lapsed() -> None:
    # Message 1's worker died at once; its lease lapsed by its recorded expiry 12.0 at the
    # latest, so message 3 taking the slot at 12.5 is within the limit...
    runs = {
        1: [run(1, 1, 10.0, None), run(1, 2, 13.0, 13.5)],
        2: [run(2, 1, 10.1, 14.0)],
        3: [run(3, 1, 12.5, 12.9)],
    }
    kept = {("m-1", 1): 12.0, ("m-2", 1): 15.0}
    report = Report("x", 3, [])
    check_limits(report, {1: "t0", 2: "t0", 3: "t0"}, runs, kept, VT)
    assert report.limit_exceeded == []
    # ... while at 11.0 it still held it.
    runs[3] = [run(3, 1, 11.0, 11.5)]
    report = Report("x", 3, [])
    check_limits(report, {1: "t0", 2: "t0", 3: "t0"}, runs, kept, VT)
    assert len(report.limit_exceeded) == 1


def test_a_holder_whose_lease_lapsed_while_it_was_stopped_is_counted_apart() -> None:
    # Message 1's worker was stopped past its lease (last expiry 11.0), woke and finished
    # at 13.0 without anyone taking its message over: its slot went at the lapse, so
    # message 3 starting at 12.0 is within the limit, and said so.
    runs = {
        1: [run(1, 1, 10.0, 13.0)],
        2: [run(2, 1, 10.1, 14.0)],
        3: [run(3, 1, 12.0, 12.5)],
    }
    kept = {("m-1", 1): 11.0, ("m-2", 1): 15.0}
    report = Report("x", 3, [])
    check_limits(report, {1: "t0", 2: "t0", 3: "t0"}, runs, kept, VT)
    assert report.limit_exceeded == [] and report.ok
    assert any("after a holder's lease lapsed" in note for note in report.notes)


def test_a_holder_stopped_before_its_extension_was_written_down_holds_until_it_asked() -> None:
    # Message 1's keeper asked at 9.0 (floor 11.0); its worker was stopped before it
    # wrote the answer down at 12.2 (expires 14.2). The lease lapsed at 11.0 at the
    # earliest, so message 3 starting at 12.0 is within the limit: the written expiry
    # would have counted it over.
    records = Records(
        [{"event": "extended", "id": "m-1", "fence": 1, "t": 12.2, "expires": 14.2,
          "floor": 11.0}]
    )  # fmt: skip
    runs = {
        1: [run(1, 1, 8.5, 13.0)],
        2: [run(2, 1, 10.1, 14.0)],
        3: [run(3, 1, 12.0, 12.5)],
    }
    report = Report("x", 3, [])
    floors = lease_floors(records) | {("m-2", 1): 15.0}
    check_limits(report, {1: "t0", 2: "t0", 3: "t0"}, runs, floors, VT)
    assert report.limit_exceeded == [] and report.ok
    report = Report("x", 3, [])
    written = {("m-1", 1): 14.2, ("m-2", 1): 15.0}
    check_limits(report, {1: "t0", 2: "t0", 3: "t0"}, runs, written, VT)
    assert len(report.limit_exceeded) == 1


def test_a_limited_message_waiting_for_a_slot_is_no_slow_redelivery() -> None:
    report = Report("x", 3, [])
    report.redelivered = [(4.0, 1, 20.0), (0.5, 7, 21.0)]
    report.redelivery = [4.0, 0.5]
    check_limits(report, {1: "t0"}, {}, {}, VT)
    assert report.redelivery == [0.5] and report.redelivered == [(0.5, 7, 21.0)]


def test_a_gather_missing_from_a_run_that_did_not_drain_is_still_missing() -> None:
    """Skipped when the queue did not drain, the check could never fail such a run."""
    report = Report("x", 3, [])
    report.drained = False
    check_flows(report, MEMBERS, DONE, drained=False)
    assert report.callbacks_missing == [
        "chord 5: every member ended, gather never did (the queue did not drain)"
    ]
    assert not report.ok
