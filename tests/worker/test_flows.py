"""Workflows as a user sees them (DESIGN §4b): chains pass results on, groups keep their
order, a chord runs once after all its members, a failure stops the flow and runs
on_failure once, a cancelled flow enqueues nothing more; on every backend with the
workflows capability (skipped, with the reason, on the others)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import tasuki
from tasuki.backends.base import Settle
from tasuki.core.envelope import Envelope
from tasuki.errors import FlowCancelled, JobFailed, ResultTimeout, UnknownFlow
from tasuki.runtime.flows import FlowSteps

pytestmark = pytest.mark.requires("workflows")


@pytest.fixture
def app(any_url: str) -> Iterator[tasuki.App]:
    app = tasuki.App(any_url)
    yield app
    app.close()


def drain(app: tasuki.App) -> None:
    app.worker(concurrency=4).run(until_idle=True, timeout=30.0)


class Calls:
    """What the jobs of a test saw, in the order they ran."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.seen: list[tuple[str, Any]] = []

    def add(self, name: str, value: Any) -> None:
        with self.mutex:
            self.seen.append((name, value))

    def of(self, name: str) -> list[Any]:
        with self.mutex:
            return [v for n, v in self.seen if n == name]


@pytest.fixture
def calls() -> Calls:
    return Calls()


def test_a_chain_passes_each_result_as_the_next_first_argument(
    app: tasuki.App, calls: Calls
) -> None:
    @app.job()
    def fetch(url: str) -> str:
        return f"<{url}>"

    @app.job()
    def parse(page: str, strip: str = "") -> list[str]:
        calls.add("parse", page)
        return [page.strip(strip)]

    @app.job()
    def store(rows: list[str], table: str) -> int:
        calls.add("store", (rows, table))
        return len(rows)

    flow_id = tasuki.chain(
        fetch.step("a.io"), parse.step(strip="<>"), store.step(table="pages")
    ).enqueue()
    drain(app)
    assert calls.of("parse") == ["<a.io>"]
    assert calls.of("store") == [(["a.io"], "pages")]
    assert app.flow_result(flow_id, timeout=5.0) == 1
    state = app.flow(flow_id)
    assert state.state == "succeeded" and state.result == 1 and state.error is None
    assert [(s.job, s.message_id, s.state) for s in state.steps] == [
        ("fetch", f"{flow_id}.0", "finished"),
        ("parse", f"{flow_id}.1", "finished"),
        ("store", f"{flow_id}.2", "finished"),
    ]


def test_a_group_is_the_list_of_its_results_in_its_order(app: tasuki.App) -> None:
    @app.job()
    def thumb(photo: str, size: int) -> str:
        time.sleep(0.01 * (3 - size // 256))  # the last members tend to finish first
        return f"{photo}@{size}"

    flow_id = tasuki.group(thumb.step("p", size=s) for s in (0, 256, 512, 768)).enqueue()
    drain(app)
    assert app.flow_result(flow_id, timeout=5.0) == ["p@0", "p@256", "p@512", "p@768"]


def test_a_chord_runs_once_after_all_its_members_with_their_results_in_order(
    app: tasuki.App, calls: Calls
) -> None:
    @app.job()
    def square(n: int) -> int:
        time.sleep(0.005 * (10 - n))
        calls.add("square", n)
        return n * n

    @app.job()
    def summarize(squares: list[int], label: str) -> str:
        calls.add("summarize", (squares, sorted(calls.of("square"))))
        return f"{label}={sum(squares)}"

    flow_id = tasuki.chain(
        tasuki.group(square.step(n) for n in range(10)), summarize.step(label="sum")
    ).enqueue()
    drain(app)
    # Once, after every member (all ten had run when it ran), in the group's order.
    assert calls.of("summarize") == [([n * n for n in range(10)], list(range(10)))]
    assert app.flow_result(flow_id, timeout=5.0) == "sum=285"


def test_an_empty_fan_out_runs_its_callback_once_with_the_empty_list(
    app: tasuki.App, calls: Calls
) -> None:
    @app.job()
    def thumb(photo: str) -> str:
        return f"t-{photo}"

    @app.job()
    def summarize(thumbs: list[Any], label: str) -> str:
        calls.add("summarize", thumbs)
        return f"{label}:{len(thumbs)}"

    photos: list[str] = []
    chord = tasuki.chain(tasuki.group(thumb.step(p) for p in photos), summarize.step(label="n"))
    flow_id = chord.enqueue()
    # A group of members, one of which is an empty group: [its value, []].
    mixed = tasuki.chain(
        tasuki.group(thumb.step("a"), tasuki.group(thumb.step(p) for p in photos)),
        summarize.step(label="m"),
    ).enqueue()
    alone = tasuki.group(thumb.step(p) for p in photos).enqueue(app=app)
    # At the end of a chain: the flow's value is [] once the step before it is done.
    tail = tasuki.chain(thumb.step("b"), tasuki.group(thumb.step(p) for p in photos)).enqueue()
    assert app.flow(tail).state == "running"
    drain(app)
    assert app.flow_result(tail, timeout=5.0) == []
    assert sorted(calls.of("summarize"), key=len) == [[], ["t-a", []]]
    assert app.flow_result(flow_id, timeout=5.0) == "n:0"
    assert app.flow_result(mixed, timeout=5.0) == "m:2"
    assert app.flow_result(alone, timeout=5.0) == []
    state = app.flow(alone)
    assert (state.state, state.result, state.steps) == ("succeeded", [], ())


def test_nested_shapes(app: tasuki.App, calls: Calls) -> None:
    @app.job()
    def num(n: int) -> int:
        return n

    def total(value: Any) -> int:
        return sum(total(v) for v in value) if isinstance(value, list) else int(value)

    @app.job()
    def add(a: Any, b: int) -> int:
        calls.add("add", a)
        return total(a) + b

    # A group inside a chain inside a group, and a chain after a group of groups.
    inner = tasuki.chain(num.step(1), tasuki.group(add.step(10), add.step(20)), add.step(0))
    flow_id = tasuki.group(num.step(0), inner, tasuki.group(num.step(5), num.step(6))).enqueue()
    deep = tasuki.chain(
        tasuki.group(tasuki.group(num.step(1), num.step(2)), tasuki.group(num.step(3))),
        add.step(100),
    ).enqueue()
    drain(app)
    assert app.flow_result(flow_id, timeout=5.0) == [0, 32, [5, 6]]
    assert [11, 21] in calls.of("add")
    assert app.flow_result(deep, timeout=5.0) == 106
    assert [[1, 2], [3]] in calls.of("add")


def test_a_dead_step_stops_the_flow_and_on_failure_runs_once_with_the_failure(
    app: tasuki.App, calls: Calls
) -> None:
    @app.job(retry=tasuki.Retry(max_attempts=1))
    def charge(order: str, card: str) -> str:
        raise RuntimeError(f"card {card} declined")

    @app.job()
    def ship(receipt: Any) -> None:
        calls.add("ship", receipt)

    @app.job()
    def alert(failure: tasuki.FlowFailure, channel: str) -> None:
        calls.add("alert", (failure, channel))

    # Two members of the group die: the flow fails once, on_failure runs once.
    flow_id = tasuki.chain(
        tasuki.group(charge.step("o-1", card="4242"), charge.step("o-1", card="1111")),
        ship.step(),
        on_failure=alert.step(channel="#ops"),
    ).enqueue()
    drain(app)
    assert calls.of("ship") == []
    [(failure, channel)] = calls.of("alert")
    assert channel == "#ops" and isinstance(failure, tasuki.FlowFailure)
    assert failure.flow_id == flow_id and failure.job == "charge"
    assert failure.step in ("0.0", "0.1") and failure.message_id == f"{flow_id}.{failure.step}"
    assert failure.error.type == "RuntimeError" and "declined" in failure.error.message
    state = app.flow(flow_id)
    assert state.state == "failed" and state.error == failure
    assert [s.job for s in state.steps] == ["charge", "charge", "ship", "alert"]
    assert [s.state for s in state.steps][:2] == ["dead", "dead"]
    with pytest.raises(JobFailed) as failed:
        app.flow_result(flow_id, timeout=5.0)
    assert failed.value.message_id == failure.message_id


@pytest.mark.parametrize("which", ["one", "all"])
def test_a_dead_step_in_a_chain_runs_nothing_after_it_and_a_redrive_resumes(
    app: tasuki.App, calls: Calls, which: str
) -> None:
    flaky = {"fail": True}

    @app.job(retry=tasuki.Retry(max_attempts=1))
    def step_a(x: int) -> int:
        if flaky["fail"]:
            raise ValueError("not yet")
        return x + 1

    @app.job()
    def step_b(x: int) -> int:
        calls.add("b", x)
        return x * 10

    flow_id = tasuki.chain(step_a.step(1), step_b.step()).enqueue()
    drain(app)
    assert calls.of("b") == []
    assert app.flow(flow_id).state == "failed"
    # Re-driving the dead step resumes the flow where it stopped.
    flaky["fail"] = False
    ids = [f"{flow_id}.0"] if which == "one" else None
    assert app.redrive("default", ids) == 1
    # The redrive put the flow back to running: every reader waits for the resumed flow
    # rather than answering with the failure it had.
    resumed = app.flow(flow_id)
    assert (resumed.state, resumed.error) == ("running", None)
    assert resumed.steps[0].state != "dead"  # SQS: its dead mark went with the redrive
    with pytest.raises(ResultTimeout):
        app.flow_result(flow_id, timeout=0.3)
    drain(app)
    assert calls.of("b") == [2]
    assert app.flow_result(flow_id, timeout=5.0) == 20
    assert app.flow(flow_id).state == "succeeded"


def test_a_step_whose_leases_lapsed_fails_its_flow(app: tasuki.App, calls: Calls) -> None:
    @app.job(visibility_timeout=0.3, retry=tasuki.Retry(max_attempts=2))
    def poison(n: int) -> int:
        calls.add("poison", n)
        return n

    @app.job()
    def alert(failure: tasuki.FlowFailure) -> None:
        calls.add("alert", failure)

    flow_id = tasuki.chain(poison.step(1), poison.step(), on_failure=alert.step()).enqueue()
    # Two workers take the first step and die with it: its leases lapse (SQS counts a
    # lease in whole seconds: timer_resolution).
    lapse = max(0.3, app.backend.capabilities.timer_resolution) + 0.05
    for _ in range(2):
        [taken] = app.backend.lease("default", 1, 0.3)
        assert taken.id == f"{flow_id}.0"
        time.sleep(lapse)
    drain(app)
    assert calls.of("poison") == []  # no third run: the job's limit is two
    [failure] = calls.of("alert")
    assert failure.step == "0" and failure.message_id == f"{flow_id}.0"
    assert app.flow(flow_id).state == "failed"
    [dead] = app.dead_letters()
    assert dead.id == f"{flow_id}.0" and "lease" in dead.reason


def test_a_flow_id_starts_the_flow_at_most_once(app: tasuki.App, calls: Calls) -> None:
    @app.job()
    def once(n: int) -> int:
        calls.add("once", n)
        return n

    flow = tasuki.chain(once.step(1), once.step())
    assert flow.options(message_id="order-7").enqueue() == "order-7"
    assert flow.options(message_id="order-7").enqueue() == "order-7"
    drain(app)
    assert flow.options(message_id="order-7").enqueue() == "order-7"  # after it finished
    drain(app)
    assert calls.of("once") == [1, 1]
    assert app.flow_result("order-7", timeout=1.0) == 1


def test_cancel_flow_stops_what_follows(app: tasuki.App, calls: Calls) -> None:
    started, go_on = threading.Event(), threading.Event()

    @app.job()
    def slow(n: int) -> int:
        started.set()
        ctx = tasuki.current()
        go_on.wait(10.0)
        calls.add("slow", ctx.cancelled)
        return n

    @app.job()
    def after(n: int) -> None:
        calls.add("after", n)

    flow_id = tasuki.chain(slow.step(1), tasuki.group(after.step(), after.step())).enqueue()
    worker = app.worker(concurrency=2)
    worker.start()
    try:
        assert started.wait(10.0)
        state = app.cancel_flow(flow_id)
        assert state.state == "cancelled"
        go_on.set()
        deadline = time.monotonic() + 10.0
        while not calls.of("slow") and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # what a wrongly enqueued successor would need to start
    finally:
        go_on.set()
        worker.stop(grace=5.0)
    assert calls.of("slow") and calls.of("after") == []
    with pytest.raises(FlowCancelled):
        app.flow_result(flow_id, timeout=1.0)


@pytest.mark.parametrize("how", ["one", "matching"])
def test_cancelling_a_waiting_step_cancels_its_flow(
    app: tasuki.App, calls: Calls, how: str
) -> None:
    """Else the flow waits for a step that never ends, `running` for ever."""
    if how == "matching" and not app.backend.capabilities.browse_waiting:
        pytest.skip("waiting messages cannot be listed here (browse_waiting)")

    @app.job()
    def first(n: int) -> int:
        calls.add("first", n)
        return n

    @app.job()
    def second(n: int) -> None:
        calls.add("second", n)

    flow_id = tasuki.chain(first.step(1), second.step()).enqueue()
    plain = first.enqueue(7)
    [step, _] = app.flow(flow_id).steps
    if how == "one":
        assert app.cancel(step.queue, step.message_id) == "removed"
    else:
        assert app.cancel_matching(step.queue, "ready", match={"0": 1}) == 1
    assert app.flow(flow_id).state == "cancelled"
    with pytest.raises(FlowCancelled):
        app.flow_result(flow_id, timeout=1.0)
    drain(app)
    assert calls.of("first") == [7] and calls.of("second") == []
    assert app.cancel("default", plain) == "unknown"


def test_a_redelivered_member_and_a_twin_never_fire_the_chord_twice(
    app: tasuki.App, calls: Calls
) -> None:
    @app.job(visibility_timeout=0.5)  # the zombie's lease below lapses this soon
    def member(n: int) -> int:
        calls.add("member", n)
        return n

    @app.job()
    def callback(values: list[int]) -> int:
        calls.add("callback", values)
        return sum(values)

    flow_id = tasuki.chain(
        tasuki.group(member.step(n) for n in range(3)), callback.step()
    ).enqueue()
    # A "zombie" takes member 0 under a short lease and goes silent; the worker gets it
    # again once the lease lapses. A twin of member 0 (a duplicate delivery, as SQS makes)
    # runs too.
    leased = app.backend.lease("default", 3, 0.5)
    assert len(leased) == 3
    [zombie] = [d for d in leased if d.id == f"{flow_id}.0.0"]
    others = [Settle.release(d.receipt, penalty=False) for d in leased if d is not zombie]
    assert app.backend.settle(others) == [True, True]
    twin = Envelope("default", "twin", zombie.body, dict(zombie.headers))
    app.backend.enqueue([twin])
    drain(app)
    assert calls.of("callback") == [[0, 1, 2]]
    assert sorted(calls.of("member")) == [0, 0, 1, 2]
    # The zombie wakes and settles with its follow-ups: refused, nothing changes.
    flows = FlowSteps(app.registry, app.backend, app.producer.sealer.seal)
    plan = FlowSteps.plan_of(zombie.headers)
    assert plan is not None
    effects = flows.done(plan, b"99")
    assert app.backend.settle([Settle.ack(zombie.receipt, effects)]) == [False]
    drain(app)
    assert calls.of("callback") == [[0, 1, 2]]
    assert app.flow_result(flow_id, timeout=1.0) == 3


def test_flow_answers_for_unknown_and_unfinished_flows(app: tasuki.App) -> None:
    @app.job()
    def idle(n: int) -> int:
        return n

    with pytest.raises(UnknownFlow):
        app.flow("no-such-flow")
    with pytest.raises(UnknownFlow):
        app.flow_result("no-such-flow", timeout=5.0)
    with pytest.raises(UnknownFlow):
        app.cancel_flow("no-such-flow")
    flow_id = tasuki.chain(idle.step(1)).enqueue()
    assert app.flow(flow_id).state == "running"
    with pytest.raises(ResultTimeout):
        app.flow_result(flow_id, timeout=0.1)


def test_a_signing_app_signs_the_plan(any_url: str) -> None:
    app = tasuki.App(any_url, signing_key=b"k" * 32)
    try:

        @app.job()
        def inc(n: int) -> int:
            return n + 1

        flow_id = tasuki.chain(inc.step(1), inc.step(), inc.step()).enqueue()
        drain(app)
        assert app.flow_result(flow_id, timeout=5.0) == 4
        assert app.dead_letters() == []
    finally:
        app.close()


def test_a_steps_attempts_read_as_its_jobs(app: tasuki.App) -> None:
    """A finished step shows the attempt it succeeded on, a waiting one `n of` its job's
    own limit (not the extra lease a step carries)."""
    tries: list[int] = []

    @app.job(retry=tasuki.Retry(max_attempts=10, backoff=tasuki.constant(0.0)))
    def flaky(x: int) -> int:
        tries.append(x)
        if len(tries) < 3:
            raise ConnectionError("again")
        return x

    @app.job(retry=tasuki.Retry(max_attempts=10))
    def last(x: int) -> int:
        return x

    flow_id = tasuki.chain(flaky.step(1), last.step()).enqueue()
    if app.backend.capabilities.inspection:
        waiting = app.inspect("default", f"{flow_id}.0")
        assert (waiting.attempt, waiting.max_attempts) == (0, 10)
    drain(app)
    assert app.flow_result(flow_id, timeout=5.0) == 1
    steps = app.flow(flow_id).steps
    assert [(s.job, s.state) for s in steps] == [("flaky", "finished"), ("last", "finished")]
    assert [s.attempt for s in steps] == [3, 1]
