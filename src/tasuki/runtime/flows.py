"""A workflow step inside the worker: its first argument on the way in, and on the way
out the follow-ups its settle carries (`Effects`), applied by the backend with the ack.

Nothing here reads the flow's record: a step's message carries its part of the plan
(`core/flows.py`). The one read is a chord's: a step that follows a group takes the
group's results from the backend (`Backend.group_value`) when it runs, since only the
backend knows when the set is complete (the settle that completed it enqueued the step).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from tasuki import logs
from tasuki.backends.base import Backend
from tasuki.core import flows
from tasuki.core.envelope import Envelope
from tasuki.core.flowrecords import Effects, FlowFailure
from tasuki.core.flows import StepPlan
from tasuki.core.message import FLOW_HEADER, ErrorInfo
from tasuki.core.outgoing import Outgoing
from tasuki.core.registry import Registry
from tasuki.errors import TasukiError, UnknownJob


class FlowSteps:
    """Reads a step's plan and makes its settle's follow-ups, sealed like any enqueue."""

    def __init__(
        self, registry: Registry, backend: Backend, seal: Callable[[Outgoing], Envelope]
    ) -> None:
        self.registry = registry
        self.backend = backend
        self.seal = seal

    @staticmethod
    def plan_of(headers: Mapping[str, str]) -> StepPlan | None:
        """The step's plan, None for a message that is no step (ValueError if garbled)."""
        text = headers.get(FLOW_HEADER)
        if text is None:
            return None
        try:
            plan = StepPlan.from_header(text)
            if not (math.isfinite(plan.retention) and plan.retention >= 0):
                raise ValueError(f"retention {plan.retention!r} is no number of seconds")
            return plan
        except Exception as exc:  # any shape of garbage: a plan no step can follow
            raise ValueError(f"unreadable workflow plan: {type(exc).__name__}: {exc}") from exc

    def arguments(self, plan: StepPlan, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """The arguments the step runs with: a group's results first after a group, the
        `FlowFailure` for an on_failure step. ValueError if the group's value is gone
        (kept past its flow's retention)."""
        barrier = plan.barrier
        if barrier is not None:
            value = self.backend.group_value(plan.flow_id, barrier)
            if value is None:
                raise ValueError(
                    f"flow {plan.flow_id!r}: the results of group {barrier or '(root)'!r} "
                    "are no longer kept"
                )
            return (flows.shaped(plan.shape, orjson.loads(value)), *args)
        if plan.takes_failure and args:
            try:
                return (flows.failure_argument(args[0]), *args[1:])
            except (KeyError, TypeError, AttributeError) as exc:
                raise ValueError(f"flow {plan.flow_id!r}: unreadable flow failure: {exc}") from exc
        return args

    def done(self, plan: StepPlan, result: bytes) -> Effects:
        """The ack's follow-ups: fill the step's barriers, enqueue what follows (its
        result prepended where the next step takes it), the flow's result if it is last."""
        successors = plan.next
        if not successors:
            enqueue: tuple[Envelope, ...] = ()
        else:
            value = orjson.loads(result) if not plan.fills else None  # after a group: read
            enqueue = tuple([self._envelope(plan, spec, value) for spec in successors])
        return Effects(result, plan.flow_id, plan.fills, enqueue, plan.final, None, plan.retention)

    def failed(
        self, plan: StepPlan, job: str, queue: str, message_id: str, error: ErrorInfo | None
    ) -> Effects:
        """The dead letter's follow-ups: the flow's failure, and its on_failure step."""
        failure = FlowFailure(
            plan.flow_id,
            plan.path,
            job,
            queue,
            message_id,
            error or ErrorInfo("", ""),
            time.time(),
        )
        alert: tuple[Envelope, ...] = ()
        if plan.on_failure is not None:
            argument = orjson.loads(failure.to_json())
            try:
                alert = (self._envelope(plan, plan.on_failure, argument),)
            except TasukiError as exc:
                # The failure is still recorded: `app.flow(id)` tells it.
                logs.event("flow on_failure not enqueued", flow=plan.flow_id, error=f"{exc}")
        return Effects(flow=plan.flow_id, failed=failure, enqueue=alert, ttl=plan.retention)

    def _envelope(self, plan: StepPlan, spec: Mapping[str, Any], value: Any) -> Envelope:
        job = self.registry.jobs.get(spec["j"])
        if job is None or job.consumer:
            raise UnknownJob(
                f"flow {plan.flow_id!r}: the step after {plan.path!r} runs job {spec['j']!r}, "
                "which this worker's app does not know"
            )
        draft = flows.draft(spec, job, plan.flow_id, plan.retention, plan.on_failure, value)
        return self.seal(draft)
