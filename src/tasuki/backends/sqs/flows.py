"""Workflows on SQS: flow records and barriers in the lock store (`FlowRecords`, kept
beside the lease records: `locks=sqlite://`, or `locks=redis://` on one Redis server,
not a Cluster), the steps sent by the backend.

A step's settle applies its effects in the lease records, in the same step as its token
check (`LeaseRecords.settle_steps`): a first failure, the group slots it fills (first
writer wins, by slot), the flow's result. When those say to go on, the steps it
enqueues are sent before its message is deleted, under ids derived from the flow and
the step's place (`core/flows.py`), each claimed for its sender, the settling message
(`FlowRecords.claim_sends`): a re-run of the same message after a crash between its
settle and its delete sends only what was not sent, and any other message meeting a set
already complete sends nothing. The settling message's lease record lists the ids it is
to send until it says they were sent: a copy met after a crash between the two finds
them sent and is deleted, not run (`FlowRecords.sends_made`). What is left: a crash
between a send and the record of it (one lock-store write) sends that step twice
(docs/backends/sqs.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from tasuki.backends.base import Envelope
from tasuki.backends.sqs.plumbing import Plumbing, SendSteps
from tasuki.core.flowrecords import FlowRecord, FlowStep
from tasuki.core.records import MessageInfo


class Flows:
    def __init__(self, sqs: Plumbing, produce: SendSteps) -> None:
        """`produce`: producing.py's, which sends the steps."""
        self.sqs = sqs
        self._produce = produce

    def send_steps(self, envelopes: Sequence[Envelope], sender: str) -> None:
        """Send the steps `sender` enqueues, each id claimed for it (see the module)."""
        self._produce(envelopes, sender)

    def start_flow(self, record: FlowRecord, envelopes: Sequence[Envelope]) -> bool:
        """The flow's record, then its first steps, claimed for the flow: a start that
        stopped between the two sends them when the same flow is started again."""
        new = self.sqs.flow_store().start_flow(record)
        self.send_steps(envelopes, f"flow:{record.id}")
        return new

    def flow(self, flow_id: str) -> FlowRecord | None:
        return self.sqs.flow_store().flow(flow_id)

    def cancel_flow(self, flow_id: str) -> bool:
        return self.sqs.flow_store().cancel_flow(flow_id)

    def group_value(self, flow_id: str, barrier: str) -> bytes | None:
        return self.sqs.flow_store().group_value(flow_id, barrier)

    def flow_steps(self, steps: Sequence[FlowStep]) -> list[MessageInfo]:
        """From the lock store: SQS tells nothing of one message (`inspection=False`)."""
        states = self.sqs.flow_store().step_states([(s.queue, s.message_id) for s in steps])
        return [
            MessageInfo(s.queue, s.message_id, state, attempt)
            for s, (state, attempt) in zip(steps, states, strict=True)
        ]
