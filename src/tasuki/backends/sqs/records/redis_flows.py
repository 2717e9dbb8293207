"""Workflow records on a Redis lock store for SQS (`FlowRecords`, base.py):
flows, barriers with their filled count and slots, dead-step marks and send claims as
the lock store's own keys (`lua/includes/flow_records.lua` lists them), kept for the
flow's retention; a step's settle checks its lease record and applies its effects in
one script call (`lua/records_settle_steps.lua`).

A single Redis server only. On a Cluster, one script may touch one hash slot, and a
step's settle must touch its lease record (keyed by queue and message id, in any slot)
with its flow's record and barriers: a step's flow cannot be told from its id alone
(a flow id may hold dots, a step's path does), so the lease record cannot be placed in
its flow's slot when it is taken. There the records keep no flows (`flows` False) and
SQS refuses workflows by its capability.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tasuki.backends.base import Backend
from tasuki.backends.redis import RedisBackend
from tasuki.backends.redis.codec import ms, records
from tasuki.backends.sqs.records.base import (
    FlowRecords,
    LeaseEnd,
    RecordLifetimes,
    Settled,
    unsent_owner,
    unsent_sends,
)
from tasuki.backends.sqs.records.plain import PlainLeaseRecords
from tasuki.backends.sqs.records.redis import CHUNK, RedisLeaseRecords, result_slot_key, script
from tasuki.core.flowrecords import FlowRecord
from tasuki.core.records import MessageState
from tasuki.errors import BackendUnavailable, InvalidArgument

SENDING = "~send~"  # the owner of an id claimed by a sender that has not sent it yet
SENT = "~sent~"  # and once it was sent
KNOWN: dict[int, MessageState] = {0: "unknown", 1: "ready", 2: "finished"}
ON_CLUSTER = (
    "a Redis Cluster lock store keeps no workflows: a step's lease record and its flow's"
    " records live in different slots, which no one script can settle together (use"
    " locks=sqlite:///... or one Redis server)"
)


def step(dead: int, leased: int, receives: int, known: int) -> tuple[MessageState, int]:
    """records_steps.lua's `step` record: a step's state, and the leases counted on it:
    dead (marked by its settle), in flight (a live lease), else what its id tells."""
    if dead:
        return "dead", int(receives)
    if leased:
        return "in_flight", int(receives)
    return KNOWN[int(known)], int(receives)


def records_in(
    store: Backend, namespace: str, lifetimes: RecordLifetimes
) -> RedisStepRecords | PlainLeaseRecords:
    """The records as the Redis backend `store`'s own keys (any other store's: its plain
    locks)."""
    if isinstance(store, RedisBackend):
        return RedisStepRecords(store, namespace, lifetimes)
    return PlainLeaseRecords(store.locks, namespace, lifetimes)


class RedisStepRecords(RedisLeaseRecords, FlowRecords):
    """`RedisLeaseRecords` that keep workflows too, where the lock store is one server."""

    def __init__(self, backend: RedisBackend, namespace: str, lifetimes: RecordLifetimes) -> None:
        super().__init__(backend, namespace, lifetimes)
        self.flows = self._one_server()

    def _one_server(self) -> bool:
        """Whether the store is one server, asked once, when SQS builds its capabilities:
        the URL's `cluster=` says so, or (`auto`) the server, connected to find out. A
        store that cannot be reached then is taken for one server (a worker may start
        before its lock store), and every workflow call checks again (`_single`)."""
        mode = self._backend._options.cluster
        if mode != "auto":
            return mode == "no"
        try:
            return not self._backend._connection().cluster
        except BackendUnavailable:
            return True

    def _single(self) -> None:
        """Refuse a workflow call on a Cluster (see the module)."""
        if not self.flows or self._backend._connection().cluster:
            raise InvalidArgument(ON_CLUSTER)

    def _key(self, name: str) -> str:
        return self._backend.keys.lock(self.namespace + name)

    def _flow_key(self, flow_id: str) -> str:
        return self._key(f"flow:{flow_id}")

    def _dead_key(self, queue: str, id: str) -> str:
        return self._key(f"dead:{queue}:{id}")

    def settle_steps(self, ends: Sequence[LeaseEnd]) -> list[Settled]:
        """`settle` with each current step's effects, one script call per CHUNK leases."""
        self._single()
        out: list[Settled] = []
        head = [ms(self.lifetimes.acked), ms(self.lifetimes.lease)]
        for start in range(0, len(ends), CHUNK):
            keys: list[str] = []
            args: list[Any] = list(head)
            for end in ends[start : start + CHUNK]:
                self._end_args(end, keys, args)
            reply = self._backend._eval(script("records_settle_steps"), keys, args)
            out += [Settled(c == 1, g == 1) for c, g in zip(reply[::2], reply[1::2], strict=True)]
        return out

    def _end_args(self, end: LeaseEnd, keys: list[str], args: list[Any]) -> None:
        """One lease's keys and fields for records_settle_steps.lua, appended."""
        queue, id, token = end.receipt
        lease = self._backend.keys.lock(self.lease_key(queue, id))
        keys += [lease, result_slot_key(lease)]
        state, value = end.result if end.result is not None else ("", b"")
        effects = end.effects
        if effects is None or effects.flow is None:
            args += [token, 1 if end.acked else 0, state, value, ""]
            return
        args += [token, 1 if end.acked else 0, state, value, f"{queue}:{id}"]
        keys += [self._dead_key(queue, id), self._flow_key(effects.flow)]
        keys += [self._key(f"fb:{f.barrier}:{f.flow}") for f in effects.fills]
        args += [
            ms(effects.ttl),
            "" if effects.failed is None else effects.failed.to_json(),
            1 if effects.final else 0,
            1 if effects.enqueue else 0,
            b"null" if effects.result is None else effects.result,
            len(effects.fills),
        ]
        for fill in effects.fills:
            args += [fill.slot, fill.size]
        args.append(unsent_owner([(e.queue, e.id) for e in effects.enqueue]))

    def start_flow(self, record: FlowRecord) -> bool:
        self._single()
        args = [record.static_json(), ms(record.retention)]
        return bool(
            self._backend._eval(script("records_start_flow"), [self._flow_key(record.id)], args)
        )

    def flow(self, flow_id: str) -> FlowRecord | None:
        self._single()
        fields = ("static", "result", "failure", "cancelled")
        static, result, failure, cancelled = self._backend._command(
            "HMGET", self._flow_key(flow_id), *fields
        )
        if static is None:
            return None
        return FlowRecord.from_parts(static, result, failure, cancelled is not None)

    def cancel_flow(self, flow_id: str) -> bool:
        self._single()
        return bool(
            self._backend._eval(script("records_cancel_flow"), [self._flow_key(flow_id)], [])
        )

    def group_value(self, flow_id: str, barrier: str) -> bytes | None:
        self._single()
        value = self._backend._command("HGET", self._key(f"fb:{barrier}:{flow_id}"), "value")
        return None if value is None else bytes(value)

    def step_states(self, steps: Sequence[tuple[str, str]]) -> list[tuple[MessageState, int]]:
        self._single()
        if not steps:
            return []
        lock = self._backend.keys.lock
        keys: list[str] = []
        for queue, id in steps:
            keys += [self._dead_key(queue, id), lock(self.lease_key(queue, id))]
            keys.append(lock(self.id_key(queue, id)))
        return list(records(self._backend._eval(script("records_steps"), keys, []), step))

    def resume_steps(self, steps: Sequence[tuple[str, str, str]]) -> None:
        self._single()
        keys: list[str] = []
        args: list[str] = []
        for flow_id, queue, id in steps:
            keys += [self._flow_key(flow_id), self._dead_key(queue, id)]
            args += [queue, id]
        if steps:
            self._backend._eval(script("records_resume_steps"), keys, args)

    def claim_sends(self, queue: str, ids: Sequence[str], sender: str) -> list[bool]:
        self._single()
        if not ids:
            return []
        keys = [self._backend.keys.lock(self.id_key(queue, i)) for i in ids]
        args = [ms(self.lifetimes.id), SENDING + sender]
        return [r == 1 for r in self._backend._eval(script("records_claim_sends"), keys, args)]

    def sent(self, queue: str, ids: Sequence[str], sender: str) -> None:
        if ids:
            keys = [self._backend.keys.lock(self.id_key(queue, i)) for i in ids]
            self._backend._eval(script("records_sent"), keys, [SENDING + sender, SENT + sender])

    def sends_made(self, queue: str, id: str) -> bool:
        self._single()
        lock = self._backend.keys.lock
        lease = lock(self.lease_key(queue, id))
        record = self._backend._command("GET", lease)
        if record is None:
            return False
        owner = bytes(record).split(b"\n", 1)[0].decode()
        sends = unsent_sends(owner)
        if sends is None:
            return owner == ""  # said sent meanwhile: an acked record
        keys = [lease, *(lock(self.id_key(q, i)) for q, i in sends)]
        args = [owner, SENDING + f"{queue}:{id}"]
        return bool(self._backend._eval(script("records_sends_made"), keys, args) == 1)

    def steps_sent(self, messages: Sequence[tuple[str, str]]) -> None:
        if messages:
            keys = [self._backend.keys.lock(self.lease_key(q, i)) for q, i in messages]
            self._backend._eval(script("records_steps_sent"), keys, [])
