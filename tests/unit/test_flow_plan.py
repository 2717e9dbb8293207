"""The plan of a flow, worked out once at enqueue (`core/flows.py`): which steps start it,
what each step's settle fills and enqueues, and what each step takes as its input."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

import tasuki
from tasuki.backends.memory import MemoryBackend
from tasuki.core.flows import StepPlan, draft, flow_value, plan, shaped
from tasuki.core.job import Step
from tasuki.core.message import FLOW_HEADER
from tasuki.errors import ConfigurationError, InvalidArgument, SerializationError


@pytest.fixture
def app() -> Iterator[tasuki.App]:
    app = tasuki.App("memory://")
    yield app
    app.close()


@pytest.fixture
def jobs(app: tasuki.App) -> dict[str, Any]:
    @app.job()
    def a(x: int = 0) -> int:
        return x

    @app.job(queue="other", priority=3)
    def b(x: int = 0, y: int = 0) -> int:
        return x + y

    @app.job()
    def alert(failure: tasuki.FlowFailure) -> None: ...

    return {"a": a, "b": b, "alert": alert}


def fills(p: StepPlan) -> tuple[tuple[str, int, int], ...]:
    """A plan's fills as (barrier, slot, size), the flow id left out."""
    assert all(f.flow == "F" for f in p.fills)
    return tuple((f.barrier, f.slot, f.size) for f in p.fills)


def header(spec: dict[str, Any], job: Any, on_failure: Any = None) -> StepPlan:
    outgoing = draft(spec, job, "F", 60.0, on_failure)
    return StepPlan.from_header(outgoing.headers[FLOW_HEADER])


def test_a_chain_starts_with_its_first_step_and_each_step_enqueues_the_next(
    jobs: dict[str, Any],
) -> None:
    a, b = jobs["a"], jobs["b"]
    worked = plan(tasuki.chain(a.step(1), b.step(y=2), a.step()), "F")
    [(first, step)] = worked.entries
    assert step.job is a and first["p"] == "0" and first["i"] is None
    assert [(s.path, s.job, s.queue, s.message_id) for s in worked.record.steps] == [
        ("0", "a", "default", "F.0"),
        ("1", "b", "other", "F.1"),
        ("2", "a", "default", "F.2"),
    ]
    p0 = header(first, a)
    assert (fills(p0), p0.final, [n["p"] for n in p0.next]) == ((), False, ["1"])
    second = p0.next[0]
    assert second["i"] == "prev" and second["k"] == {"y": 2}
    # The predecessor's result is prepended to the next step's arguments.
    out = draft(second, b, "F", 60.0, None, value=41)
    assert (out.id, out.args, out.kwargs, out.priority, out.queue) == (
        "F.1",
        (41,),
        {"y": 2},
        3,
        "other",
    )
    last = header(second, b).next[0]
    assert header(last, a).final is True


def test_group_members_fill_their_slot_and_the_chord_reads_the_barrier(
    jobs: dict[str, Any],
) -> None:
    a, b = jobs["a"], jobs["b"]
    worked = plan(tasuki.chain(tasuki.group(a.step(i) for i in range(3)), b.step(y=1)), "F")
    assert [spec["p"] for spec, _ in worked.entries] == ["0.0", "0.1", "0.2"]
    for i, (spec, step) in enumerate(worked.entries):
        p = header(spec, step.job)
        assert fills(p) == (("0", i, 3),) and not p.final
        [callback] = p.next
        assert callback["p"] == "1"
    callback_plan = header(callback, b)
    assert callback_plan.barrier == "0" and callback_plan.final
    # Its message is made without the value: the worker reads the group's when it runs.
    assert draft(callback, b, "F", 60.0, None, value="ignored").args == ()


def test_nested_groups_fill_inner_then_outer_and_a_root_group_is_final(
    jobs: dict[str, Any],
) -> None:
    a = jobs["a"]
    worked = plan(tasuki.group(a.step(0), tasuki.group(a.step(1), a.step(2))), "F")
    found = {spec["p"]: fills(header(spec, a)) for spec, _ in worked.entries}
    assert found == {
        "0": (("", 0, 2),),
        "1.0": (("1", 0, 2), ("", 1, 2)),
        "1.1": (("1", 1, 2), ("", 1, 2)),
    }
    assert all(header(spec, a).final for spec, _ in worked.entries)


def test_a_group_inside_a_chain_inside_a_group(jobs: dict[str, Any]) -> None:
    a = jobs["a"]
    inner = tasuki.chain(a.step(1), tasuki.group(a.step(), a.step()), a.step())
    worked = plan(tasuki.group(a.step(0), inner), "F")
    assert [spec["p"] for spec, _ in worked.entries] == ["0", "1.0"]
    head = header(worked.entries[1][0], a)
    assert fills(head) == () and [n["p"] for n in head.next] == ["1.1.0", "1.1.1"]
    assert all(n["i"] == "prev" for n in head.next)
    member = header(head.next[0], a)
    assert fills(member) == (("1.1", 0, 2),)
    [tail] = member.next
    tail_plan = header(tail, a)
    assert tail_plan.barrier == "1.1" and fills(tail_plan) == (("", 1, 2),) and tail_plan.final
    assert [s.path for s in worked.record.steps] == ["0", "1.0", "1.1.0", "1.1.1", "1.2"]


def test_an_empty_group_is_a_value_known_at_once(jobs: dict[str, Any]) -> None:
    # No step, no barrier: the flow's value is [] from the start.
    worked = plan(tasuki.group([]), "F")
    assert (worked.entries, worked.record.steps) == ((), ())
    assert flow_value(worked.record).result == b"[]"
    assert (
        flow_value(
            plan(tasuki.group(tasuki.group([]), tasuki.chain(tasuki.group([]))), "F").record
        ).result
        == b"[[],[]]"
    )


def test_what_follows_an_empty_group_starts_in_its_place_with_the_empty_list(
    jobs: dict[str, Any],
) -> None:
    a, b = jobs["a"], jobs["b"]
    worked = plan(tasuki.chain(tasuki.group([]), b.step(y=1)), "F")
    [(spec, _)] = worked.entries
    callback = header(spec, b)
    assert (spec["p"], spec["a"], callback.given, callback.final) == ("1", [[]], None, True)
    assert flow_value(worked.record) == worked.record  # its value is the callback's
    # In the middle of a chain: the step before it enqueues the one after, which takes [].
    worked = plan(tasuki.chain(a.step(1), tasuki.group([]), a.step()), "F")
    [(spec, _)] = worked.entries
    [after] = header(spec, a).next
    assert (after["p"], after["a"], after["i"]) == ("2", [[]], None)
    assert [s.path for s in worked.record.steps] == ["0", "2"]
    # At the end of a chain: the step before it ends the flow, whose value is [].
    worked = plan(tasuki.chain(a.step(1), tasuki.group([])), "F")
    [(spec, _)] = worked.entries
    assert header(spec, a).final and not header(spec, a).next
    assert flow_value(worked.record).result is None  # running: no value yet
    finished = dataclasses.replace(worked.record, result=b"1")
    assert flow_value(finished).result == b"[]"


def test_a_group_counts_only_its_members_with_steps_and_its_shape_puts_the_rest_back(
    jobs: dict[str, Any],
) -> None:
    a, b = jobs["a"], jobs["b"]
    members = tasuki.group(a.step(0), tasuki.group([]), tasuki.chain(a.step(1), tasuki.group([])))
    worked = plan(tasuki.chain(members, b.step()), "F")
    assert [spec["p"] for spec, _ in worked.entries] == ["0.0", "0.2.0"]
    assert [fills(header(spec, a)) for spec, _ in worked.entries] == [
        (("0", 0, 2),),
        (("0", 1, 2),),
    ]
    [callback] = header(worked.entries[0][0], a).next
    callback_plan = header(callback, b)
    assert callback_plan.barrier == "0"
    # The barrier holds [x, y] (the second member's chain ends with the empty group).
    assert shaped(callback_plan.shape, [5, 7]) == [5, [], []]
    # A root group of the same: the flow's stored result is read the same way.
    root = plan(members, "F").record
    assert flow_value(dataclasses.replace(root, result=b"[5,7]")).result == b"[5,[],[]]"


def test_on_failure_travels_with_every_step_and_takes_the_failure(
    jobs: dict[str, Any],
) -> None:
    a, alert = jobs["a"], jobs["alert"]
    worked = plan(tasuki.chain(a.step(1), a.step(), on_failure=alert.step()), "F")
    on_failure = worked.record.extra["on_failure"]
    assert worked.record.on_failure is not None
    assert worked.record.on_failure.message_id == "F.failure"
    first = header(worked.entries[0][0], a, on_failure)
    assert first.on_failure == on_failure
    alert_plan = header(on_failure, alert, on_failure)
    assert alert_plan.takes_failure and alert_plan.on_failure is None


def test_what_a_flow_refuses_when_it_is_made(app: tasuki.App, jobs: dict[str, Any]) -> None:
    a, b = jobs["a"], jobs["b"]
    with pytest.raises(InvalidArgument, match="at least one part"):
        tasuki.chain()
    with pytest.raises(InvalidArgument, match="knows no app"):
        tasuki.group([]).enqueue()
    with pytest.raises(InvalidArgument, match="takes steps"):
        tasuki.chain(a)  # the job, not a step
    with pytest.raises(InvalidArgument, match="wrong arguments"):
        a.step(1, 2, 3)
    with pytest.raises(InvalidArgument, match="message id derives"):
        a.options(message_id="x").step()
    with pytest.raises(InvalidArgument, match="outermost"):
        tasuki.chain(tasuki.group(a.step(), on_failure=a.step()), b.step())
    with pytest.raises(SerializationError, match="as JSON"):
        plan(tasuki.chain(a.step(object())), "F")
    with pytest.raises(InvalidArgument):
        tasuki.chain(a.step()).options(message_id="")
    step = a.options(queue="q2", priority=7, delay=5.0).step(1)
    assert isinstance(step, Step)
    assert (step.queue, step.priority, step.delay, step.args) == ("q2", 7, 5.0, (1,))


def test_flow_header_is_signed(jobs: dict[str, Any]) -> None:
    from tasuki.core.codec import Codec
    from tasuki.errors import SignatureError

    codec = Codec(signing_key=b"k" * 32)
    headers = {"tasuki-job": "a", FLOW_HEADER: orjson.dumps({"f": "F"}).decode()}
    codec.sign("default", headers, b"{}")
    codec.verify("default", headers, b"{}")
    tampered = {**headers, FLOW_HEADER: orjson.dumps({"f": "G"}).decode()}
    with pytest.raises(SignatureError):
        codec.verify("default", tampered, b"{}")
    stripped = {k: v for k, v in headers.items() if k != FLOW_HEADER}
    with pytest.raises(SignatureError):
        codec.verify("default", stripped, b"{}")


def test_backends_without_workflows_refuse_flows_naming_the_capability() -> None:
    backend = MemoryBackend()
    backend.capabilities = dataclasses.replace(backend.capabilities, workflows=False)  # type: ignore[misc]
    app = tasuki.App(backend=backend)
    try:

        @app.job()
        def one() -> None: ...

        with pytest.raises(ConfigurationError, match="lacks the workflows capability"):
            tasuki.chain(one.step()).enqueue()
        with pytest.raises(ConfigurationError, match="lacks the workflows capability"):
            app.flow("x")
        with pytest.raises(ConfigurationError, match="lacks the workflows capability"):
            app.cancel_flow("x")
    finally:
        app.close()
