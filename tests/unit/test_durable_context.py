"""`ctx.step` and friends on a real memory:// store, without a worker: what a run that
lost its lease, a process job and a backend without the capability are told."""

from __future__ import annotations

import time

import pytest

from tasuki.backends.base import Envelope, Settle
from tasuki.backends.memory import MemoryBackend
from tasuki.core.context import Context
from tasuki.core.message import Lease, Message
from tasuki.core.steps import Durable, durable_for
from tasuki.errors import InvalidArgument, LeaseLost, Unsupported


def _leased(backend: MemoryBackend, queue: str = "q") -> Context:
    backend.enqueue([Envelope(queue, "m1", b"x")])
    [d] = backend.lease(queue, 1, 30.0)
    message = Message(
        id=d.id,
        queue=d.queue,
        body=d.body,
        headers=d.headers,
        attempt=d.attempt,
        enqueued_at=d.enqueued_at,
        lease=Lease(d.token, d.fencing_token, 30.0),
        max_attempts=d.max_attempts,
    )
    durable = durable_for(backend, backend.capabilities, "memory", max_steps=3)
    return Context(message, durable=durable)


def test_a_step_of_a_run_whose_lease_was_lost_raises_and_asks_it_to_stop() -> None:
    backend = MemoryBackend()
    ctx = _leased(backend)
    assert ctx.step("first", int, 1) == 1
    backend.settle([Settle.release(ctx.receipt, penalty=False)])  # another run's now
    with pytest.raises(LeaseLost, match="step 'second'"):
        ctx.step("second", int, 2)
    assert ctx.lease_lost and ctx.should_stop and ctx.stop_reason == "lease lost"
    assert [r.name for r in backend.steps("q", "m1")] == ["first"]


def test_a_run_whose_lease_may_have_lapsed_does_not_start_a_step() -> None:
    """A worker frozen past its lease wakes: the step it reaches is not run (another
    worker may have run and recorded it meanwhile), and the run is told to stop."""
    backend = MemoryBackend()
    ctx = _leased(backend)
    ran: list[int] = []
    ctx.lease_until = time.time() - 0.1  # the last extension's hold has passed
    with pytest.raises(LeaseLost, match="step 'late' not run"):
        ctx.step("late", ran.append, 1)
    assert ran == [] and ctx.lease_lost and ctx.should_stop
    assert backend.steps("q", "m1") == []


def test_a_recorded_step_is_returned_without_running_and_as_its_json() -> None:
    backend = MemoryBackend()
    ctx = _leased(backend)
    calls: list[int] = []

    def make(n: int) -> tuple[int, int]:
        calls.append(n)
        return (n, n)

    assert ctx.step("pair", make, 1) == [1, 1]  # the recorded JSON, on the first run too
    again = Context(ctx.message, durable=ctx._durable)  # the next run of the message
    assert again.step("pair", make, 1) == [1, 1]
    assert again.step("pair", make, 2) == [2, 2]  # the second occurrence is another step
    assert calls == [1, 2]


def test_refusals_name_what_is_missing() -> None:
    backend = MemoryBackend()
    ctx = _leased(backend)
    with pytest.raises(Unsupported, match="transactional_steps"):
        ctx.step_in_transaction("t", lambda conn: 1)
    with pytest.raises(InvalidArgument, match="reserved"):
        ctx.step("tasuki:sleep", int, 1)
    for n in range(3):
        ctx.step("n", int, n)
    with pytest.raises(InvalidArgument, match="max_steps=3"):
        ctx.step("n", int, 4)
    process_job = Context(ctx.message)
    with pytest.raises(InvalidArgument, match="process job"):
        process_job.sleep(1.0)
    lacking = Context(ctx.message, durable=Durable(None, scheme="redis"))
    with pytest.raises(Unsupported, match="redis:// cannot record durable steps"):
        lacking.wait_for_signal("go")


def test_a_sleep_records_its_wake_up_and_suspends_for_what_is_left() -> None:
    backend = MemoryBackend()
    ctx = _leased(backend)
    with pytest.raises(Exception) as raised:
        ctx.sleep(60.0)
    assert type(raised.value).__name__ == "Suspend"
    assert 59.0 < raised.value.delay <= 60.0  # type: ignore[attr-defined]
    assert ctx.waiting is not None and ctx.waiting.signal == ""
    [record] = backend.steps("q", "m1")
    assert record.name == "tasuki:sleep" and float(record.result) > time.time() + 59.0
