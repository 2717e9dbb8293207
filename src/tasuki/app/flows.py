"""Reading and cancelling a running workflow (`app.flow`, `app.flow_result`,
`app.cancel_flow`): the backend's flow record, its steps' `inspect`, and the wait for
its end. How a flow is planned and advanced is `core/flows.py`."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import orjson

from tasuki.backends.base import Backend
from tasuki.core import flows
from tasuki.core.flowrecords import FlowRecord
from tasuki.core.flows import FlowState
from tasuki.core.job import check_message_id
from tasuki.core.records import MessageInfo
from tasuki.errors import FlowCancelled, InvalidArgument, JobFailed, ResultTimeout, UnknownFlow
from tasuki.producer import Producer


def state(backend: Backend, producer: Producer, flow_id: str) -> FlowState:
    """The flow's state, each step's from `inspect` (`Backend.flow_steps`: from what the
    backend keeps where it cannot inspect; see `App.flow`)."""
    record = flow_record(backend, producer, flow_id)
    steps = [*record.steps, *([record.on_failure] if record.on_failure else [])]
    infos = [_with_attempt(info) for info in backend.flow_steps(steps)]
    return flows.state_of(record, infos)


def result(backend: Backend, producer: Producer, flow_id: str, timeout: float | None) -> Any:
    """The flow's result, waiting on the backend's notifications (see `App.flow_result`)."""
    record = flow_record(backend, producer, flow_id)
    deadline = None if timeout is None else time.monotonic() + _seconds(timeout)
    while not _over(record):
        remaining = 3600.0 if deadline is None else deadline - time.monotonic()
        if remaining <= 0:
            raise ResultTimeout(f"flow {flow_id!r} had no result within {timeout}s")
        found = backend.wait_flow(flow_id, remaining)
        if found is None:
            raise UnknownFlow(f"flow {flow_id!r} is no longer kept")
        record = flows.flow_value(found)
    if record.result is not None:
        return orjson.loads(record.result)
    if record.cancelled:
        raise FlowCancelled(f"flow {flow_id!r} was cancelled")
    failure = record.failure
    assert failure is not None
    reason = f"step {failure.step} ({failure.job}) of flow {flow_id!r} was dead-lettered"
    raise JobFailed(failure.queue, failure.message_id, failure.error, reason)


def cancel(backend: Backend, producer: Producer, flow_id: str) -> FlowState:
    """Flag the flow cancelled, then cancel its steps (see `App.cancel_flow`)."""
    producer.check_workflows()
    if not backend.cancel_flow(check_message_id(flow_id)):
        raise UnknownFlow(f"no flow {flow_id!r}: never started, or no longer kept")
    record = flow_record(backend, producer, flow_id)
    if backend.capabilities.cancel:
        for step in record.steps:
            backend.cancel(step.queue, step.message_id)
    return state(backend, producer, flow_id)


def cancel_flow_of(backend: Backend, producer: Producer, queue: str, message_id: str) -> None:
    """Cancel the flow `message_id` is a step of, if it is one (its `on_failure` step
    is not: that runs when the flow has already failed). Cheap for other messages: an
    id without a step path reads no record."""
    if not backend.capabilities.workflows:
        return
    for flow_id, _path in flows.step_candidates(message_id):
        record = backend.flow(flow_id)
        if record is not None and any(
            (s.queue, s.message_id) == (queue, message_id) for s in record.steps
        ):
            if not (record.cancelled or record.failure or record.result is not None):
                cancel(backend, producer, flow_id)
            return


def place(backend: Backend, info: MessageInfo) -> MessageInfo:
    """`info` with the flow it is a step of and its place there, when it is one: its id
    reads as `<flow id>.<path>` and that flow's record lists it (see `step_candidates`)."""
    if not backend.capabilities.workflows or info.state == "unknown":
        return info
    for flow_id, path in flows.step_candidates(info.id):
        record = backend.flow(flow_id)
        steps = () if record is None else (*record.steps, record.on_failure)
        if any(s is not None and (s.queue, s.message_id) == (info.queue, info.id) for s in steps):
            # A step carries one lease more than its job's limit (`core/flows.py`, where
            # it is sealed): the limit a person reads is the job's own.
            limit = info.max_attempts
            return dataclasses.replace(
                _with_attempt(info),
                flow_id=flow_id,
                step=path,
                max_attempts=None if limit is None else max(1, limit - 1),
            )
    return info


def _with_attempt(info: MessageInfo) -> MessageInfo:
    """A finished step with the attempt its ack was made on: a backend forgets a
    message's attempt at the ack, but its lease history ends with that ack. Every lease
    took an attempt but a release without penalty; a release older than the history
    (`HISTORY_LIMIT` leases) is not seen, so the attempt may read high there."""
    if info.state != "finished" or info.attempt or not info.history:
        return info
    last = info.history[-1]
    if last.event != "acked" or last.fencing_token < 1:
        return info
    released = sum(1 for e in info.history if e.event == "released")
    return dataclasses.replace(info, attempt=max(1, last.fencing_token - released))


def flow_record(backend: Backend, producer: Producer, flow_id: str) -> FlowRecord:
    """The flow's record, its result as the flow's value (`flows.flow_value`);
    `UnknownFlow` if the backend keeps none."""
    producer.check_workflows()
    record = backend.flow(check_message_id(flow_id))
    if record is None:
        raise UnknownFlow(f"no flow {flow_id!r}: never started, or no longer kept")
    return flows.flow_value(record)


def _over(record: FlowRecord) -> bool:
    return record.result is not None or record.failure is not None or record.cancelled


def _seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise InvalidArgument(f"timeout must be a number of seconds >= 0, got {value!r}")
    return float(value)
