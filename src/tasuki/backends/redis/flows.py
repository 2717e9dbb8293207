"""Workflows on Redis: a flow's record and first steps stored by `start_flow.lua`, read,
waited on and cancelled here; a step's effects go with its settle (`settle.lua`,
`lua/includes/flows.lua`), checked here first. A flow's keys live in the slot of its
home queue, its first step's, which `<prefix>flow:<id>` names; `Flows` remembers the
homes it met."""

from __future__ import annotations

import time
from collections.abc import Sequence

from tasuki.backends.base import Envelope, Settle
from tasuki.backends.redis import codec, producing
from tasuki.backends.redis.codec import ms, us
from tasuki.backends.redis.keys import FlowKeys
from tasuki.backends.redis.plumbing import Plumbing
from tasuki.backends.redis.slots import key_slot
from tasuki.core.flowrecords import FlowRecord
from tasuki.errors import InvalidArgument

# How many flows' home queues a process remembers (they never change); then it forgets
# them all and starts again.
FLOW_HOMES = 10_000


class Flows:
    """The flows of one backend, and the home queues of those it met."""

    def __init__(self, redis: Plumbing) -> None:
        self._redis = redis
        self._homes: dict[str, str] = {}

    def home(self, flow_id: str) -> str | None:
        """A flow's home queue, where its keys are (`<prefix>flow:<id>` names it, for the
        flow's retention); None for a flow unknown, expired or never started."""
        home = self._homes.get(flow_id)
        if home is None:
            found = self._redis.command("GET", self._redis.keys.flow_home(flow_id))
            if found is None:
                return None
            home = found.decode()
            self._remember(flow_id, home)
        return home

    def _remember(self, flow_id: str, home: str) -> None:
        if len(self._homes) >= FLOW_HOMES:
            self._homes.clear()
        self._homes[flow_id] = home

    def _learn_homes(self, items: Sequence[Settle]) -> None:
        """The home queues of a settle's flows this process has not met yet, in one
        round trip, whatever the number of flows in the batch."""
        unknown: set[str] = set()
        for item in items:
            effects = item.effects
            if effects is None:
                continue
            flow_ids = [fill.flow for fill in effects.fills]
            if effects.flow is not None:
                flow_ids.append(effects.flow)
            unknown.update(f for f in flow_ids if f not in self._homes)
        if len(unknown) < 2:
            return  # none, or one: `home` reads it by itself
        names = sorted(unknown)
        redis = self._redis
        found = redis.connection().pipeline([("GET", redis.keys.flow_home(f)) for f in names])
        for flow_id, home in zip(names, found, strict=True):
            if home is not None:
                self._remember(flow_id, home.decode())

    def keys(self, flow_id: str, fallback: str) -> FlowKeys:
        """A flow's keys; those of an unknown flow under `fallback`, the settling step's
        queue (its fills and successors still apply, as on every backend)."""
        home = self.home(flow_id)
        return FlowKeys(self._redis.keys.queue(fallback if home is None else home).base, flow_id)

    def check_effects(self, items: Sequence[Settle]) -> None:
        """Refuse effects a settle could not apply atomically: on Redis Cluster, all of a
        step's keys (its queue, its flow's, its successors') must share one slot."""
        redis = self._redis
        cluster = redis.connection().cluster
        self._learn_homes(items)
        for item in items:
            effects = item.effects
            if effects is None or item.verdict == "release":
                continue
            producing.check(redis, effects.enqueue)
            for env in effects.enqueue:
                producing.announce(redis, env.queue)
            if cluster:
                queues = [env.queue for env in effects.enqueue]
                queue = item.receipt.queue
                home = None
                if effects.flow is not None:
                    home = self.keys(effects.flow, queue).base
                self._same_slot(queue, queues, home)

    def _same_slot(self, queue: str, queues: Sequence[str], base: str | None = None) -> None:
        keys = self._redis.keys
        slot = key_slot(keys.queue(queue).base.encode())
        others = [q for q in queues if key_slot(keys.queue(q).base.encode()) != slot]
        if base is not None and key_slot(base.encode()) != slot:
            others.append(base)
        if others:
            raise InvalidArgument(
                f"a flow on Redis Cluster keeps all its steps in one hash slot, that of the "
                f"queue of its first step ({queue!r}): {sorted(set(others))} are elsewhere; "
                "run the flow's steps on that queue (or one of its slot)"
            )

    def start(self, record: FlowRecord, envelopes: Sequence[Envelope], aging: float) -> bool:
        """The record and the first steps in one start_flow.lua call, in the slot of the
        flow's home queue (its first step's), after `<prefix>flow:<id>` names that queue.
        On Redis Cluster every step (and on_failure) must be of that slot."""
        redis = self._redis
        # A flow of no step (an empty group) has nothing to settle: any home will do.
        home = (
            record.steps[0].queue
            if record.steps
            else envelopes[0].queue
            if envelopes
            else "default"
        )
        producing.check(redis, envelopes)
        if redis.connection().cluster:
            queues = [step.queue for step in record.steps] + [env.queue for env in envelopes]
            if record.on_failure is not None:
                queues.append(record.on_failure.queue)
            self._same_slot(home, queues)
        locator = redis.keys.flow_home(record.id)
        retention = ms(record.retention)
        if redis.command("SET", locator, home, "NX", "PX", retention) is None:
            home = redis.command("GET", locator).decode()
        for queue in dict.fromkeys(env.queue for env in envelopes):
            producing.announce(redis, queue)
        keys = FlowKeys(redis.keys.queue(home).base, record.id)
        args = [record.static_json(), retention, us(aging)]
        args += codec.sections(redis.keys.queue, redis.keys.lock, envelopes)
        started = bool(redis.eval("start_flow", [keys.record], args) == 1)
        self._remember(record.id, home)
        return started

    def read(self, flow_id: str) -> FlowRecord | None:
        home = self.home(flow_id)
        if home is None:
            return None
        keys = FlowKeys(self._redis.keys.queue(home).base, flow_id)
        static, result, failure, cancelled = self._redis.command(
            "HMGET", keys.record, "static", "result", "failure", "cancelled"
        )
        if static is None:
            return None
        return FlowRecord.from_parts(static, result, failure, cancelled is not None)

    def wait(self, flow_id: str, timeout: float) -> FlowRecord | None:
        """Block on the flow's notify list (`fn:<id>`, pushed when its result, its first
        failure or its cancelled flag is set) between reads, as `results.wait` does."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.read(flow_id)
            remaining = deadline - time.monotonic()
            if found is None or remaining <= 0:
                return found
            if found.result is not None or found.failure is not None or found.cancelled:
                return found
            self._redis.wait_on(self.keys(flow_id, "").notify, remaining)

    def cancel(self, flow_id: str) -> bool:
        home = self.home(flow_id)
        if home is None:
            return False
        keys = FlowKeys(self._redis.keys.queue(home).base, flow_id)
        return bool(self._redis.eval("cancel_flow", [keys.record, keys.notify], []) == 1)

    def group_value(self, flow_id: str, barrier: str) -> bytes | None:
        home = self.home(flow_id)
        if home is None:
            return None
        value: bytes | None = self._redis.command(
            "GET", FlowKeys(self._redis.keys.queue(home).base, flow_id).value(barrier)
        )
        return value
