"""`memory://`'s result records, flow records and barriers (the reference for the others).

Held under the memory backend's one lock, like the rest of its state; every operation
here runs inside one of its operations, so an effect applies atomically with its settle.
Times are epoch seconds; expired entries are dropped when read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from tasuki.core.flowrecords import (
    Effects,
    FlowFailure,
    FlowRecord,
    ResultRecord,
    error_json,
    join_slots,
)
from tasuki.core.message import ErrorInfo
from tasuki.core.records import Envelope

# A pending result has no TTL of its own: it lives as long as its message.
PENDING_FOREVER = float("inf")


@dataclass(slots=True)
class _Barrier:
    size: int
    expires_at: float
    slots: dict[int, bytes] = field(default_factory=dict)
    value: bytes | None = None


@dataclass(slots=True)
class _Flow:
    record: FlowRecord
    expires_at: float


class FlowStore:
    """Results, flows and barriers, and the effects of a settle on them."""

    def __init__(self, changed: threading.Condition) -> None:
        # Woken whenever a result or a flow changes, for `wait_result` / `wait_flow`.
        self.changed = changed
        self._results: dict[tuple[str, str], tuple[ResultRecord, float]] = {}
        self._flows: dict[str, _Flow] = {}
        self._barriers: dict[tuple[str, str], _Barrier] = {}

    # -- results ---------------------------------------------------------------------
    def pending(self, queue: str, msg_id: str) -> None:
        self._results[(queue, msg_id)] = (ResultRecord("pending"), PENDING_FOREVER)
        self.changed.notify_all()

    def settled(
        self,
        env: Envelope,
        now: float,
        value: bytes | None,
        failed: bool,
        error: ErrorInfo | None = None,
        reason: str = "",
    ) -> None:
        """The message settled: its result record (if it keeps one) takes its outcome."""
        if env.keep_result <= 0:
            return
        until = now + env.keep_result
        if failed:
            record = ResultRecord("failed", error_json(error, reason), until)
        else:
            record = ResultRecord("ok", b"null" if value is None else value, until)
        self._results[(env.queue, env.id)] = (record, until)
        self.changed.notify_all()

    def forget(self, queue: str, msg_id: str) -> None:
        if self._results.pop((queue, msg_id), None) is not None:
            self.changed.notify_all()

    def result(self, queue: str, msg_id: str, now: float) -> ResultRecord | None:
        found = self._results.get((queue, msg_id))
        if found is None:
            return None
        if found[1] <= now:
            del self._results[(queue, msg_id)]
            return None
        return found[0]

    # -- flows -----------------------------------------------------------------------
    def start(self, record: FlowRecord, now: float) -> bool:
        if self.flow(record.id, now) is not None:
            return False
        self._flows[record.id] = _Flow(record, now + record.retention)
        return True

    def flow(self, flow_id: str, now: float) -> FlowRecord | None:
        found = self._flows.get(flow_id)
        if found is None:
            return None
        if found.expires_at <= now:
            del self._flows[flow_id]
            return None
        return found.record

    def cancel(self, flow_id: str, now: float) -> bool:
        found = self.flow(flow_id, now)
        if found is None:
            return False
        self._flows[flow_id].record = replace(found, cancelled=True)
        self.changed.notify_all()
        return True

    def resume(self, flow_id: str, queue: str, msg_id: str, now: float) -> None:
        """A dead step was re-driven: if it is the flow's failure, the flow runs again."""
        found = self.flow(flow_id, now)
        failure = None if found is None else found.failure
        if found is None or failure is None:
            return
        if (failure.queue, failure.message_id) == (queue, msg_id):
            self._flows[flow_id].record = replace(found, failure=None)
            self.changed.notify_all()

    def group_value(self, flow_id: str, barrier: str, now: float) -> bytes | None:
        found = self._barriers.get((flow_id, barrier))
        if found is None or found.expires_at <= now:
            return None
        return found.value

    def apply(
        self,
        effects: Effects,
        now: float,
        enqueue: Callable[[Sequence[Envelope]], object],
    ) -> None:
        """A settle's follow-ups, after its own verdict (the caller checked the token)."""
        if effects.failed is not None and effects.flow is not None:
            self._fail(effects.flow, effects.failed, now)
        if effects.flow is not None:
            flow = self.flow(effects.flow, now)
            if flow is not None and flow.cancelled:
                return
        value = b"null" if effects.result is None else effects.result
        for fill in effects.fills:
            key = (fill.flow, fill.barrier)
            barrier = self._barriers.get(key)
            if barrier is None or barrier.expires_at <= now:
                barrier = self._barriers[key] = _Barrier(fill.size, now + effects.ttl)
            barrier.slots.setdefault(fill.slot, value)  # first writer wins
            if len(barrier.slots) < barrier.size:
                return
            if barrier.value is None:
                barrier.value = join_slots([barrier.slots[i] for i in range(barrier.size)])
            value = barrier.value
        if effects.enqueue:
            enqueue(effects.enqueue)
        if effects.final and effects.flow is not None:
            self._finish(effects.flow, value, now)

    def _fail(self, flow_id: str, failure: FlowFailure, now: float) -> None:
        found = self.flow(flow_id, now)
        if found is not None and found.failure is None:
            self._flows[flow_id].record = replace(found, failure=failure)
            self.changed.notify_all()

    def _finish(self, flow_id: str, value: bytes, now: float) -> None:
        found = self.flow(flow_id, now)
        if found is not None and found.result is None:
            self._flows[flow_id].record = replace(found, result=value)
            self.changed.notify_all()
