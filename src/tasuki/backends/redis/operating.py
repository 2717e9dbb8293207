"""Operating a Redis queue: counts, dead letters, inspection, redrive and purge, each a
call of its read-only or chunked script, the reply read by `codec/`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from tasuki.backends.base import MessageInfo, QueueStats, Reliability, SettledTotals
from tasuki.backends.redis import codec
from tasuki.backends.redis.keys import FlowKeys
from tasuki.backends.redis.plumbing import CHUNK, RedisBase
from tasuki.backends.redis.slots import key_slot
from tasuki.core.flowrecords import flow_of
from tasuki.core.message import DeadLetter

# Messages removed per script call by purge / purge_dead / redrive-all.
PURGE_CHUNK = 1000


class Operating(RedisBase):
    def stats(self, queue: str) -> QueueStats:
        keys = self.keys.queue(queue)
        script_keys = [keys.waiting, keys.leased, keys.dead, keys.delayed]
        reply = self._eval("stats", script_keys, [keys.base])
        result: QueueStats = codec.stats(*reply)
        return result

    def queues(self) -> list[str]:
        names = sorted(m.decode() for m in self._command("SMEMBERS", self.keys.queues))
        if not names:
            return []
        exists = []
        for name in names:
            keys = self.keys.queue(name)
            exists.append(("EXISTS", keys.waiting, keys.leased, keys.dead, keys.delayed))
        counts = self._connection().pipeline(exists)
        return [name for name, n in zip(names, counts, strict=True) if n]

    def dead_letters(self, queue: str, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        keys = self.keys.queue(queue)
        reply = self._eval("dead_letters", [keys.dead], [keys.base, max(0, offset), limit])
        return codec.dead_letters(queue, reply)

    def dead_letter(self, queue: str, id: str) -> DeadLetter | None:
        keys = self.keys.queue(queue)
        reply = self._eval("dead_letter", [keys.dead], [keys.base, id])
        letters = codec.dead_letters(queue, reply)
        return letters[0] if letters else None

    def in_flight(self, queue: str, limit: int = 100) -> list[MessageInfo]:
        keys = self.keys.queue(queue)
        reply = self._eval("in_flight", [keys.leased], [keys.base, limit])
        return codec.leases_in_flight(queue, reply)

    def settled_totals(self, queue: str) -> SettledTotals:
        acked, dead = self._command("HMGET", self.keys.queue(queue).counts, "acked", "dead")
        return SettledTotals(int(acked or 0), int(dead or 0))

    def reliability(self, queue: str) -> Reliability:
        raw = self._command("HGETALL", self.keys.queue(queue).counts) or []
        fields = {raw[i].decode(): int(raw[i + 1]) for i in range(0, len(raw), 2)}
        return Reliability.from_meters(fields)

    def add_meters(self, queue: str, increments: Mapping[str, int]) -> None:
        args: list[Any] = []
        for name, value in increments.items():
            if value:
                args += [name, int(value)]
        if args:
            self._eval("add_meters", [self.keys.queue(queue).counts], args)

    def inspect(self, queue: str, id: str) -> MessageInfo:
        keys = self.keys.queue(queue)
        script_keys = [keys.waiting, keys.leased, keys.dead, keys.delayed]
        reply = self._eval("inspect", script_keys, [keys.base, id])
        return codec.message_info(queue, id, reply)

    def redrive(self, queue: str, ids: Sequence[str] | None = None) -> int:
        keys = self.keys.queue(queue)
        if ids is None:  # the oldest dead first, a chunk per call
            total = 0
            while True:
                found = self._command("ZRANGE", keys.dead, 0, PURGE_CHUNK - 1)
                total += self._redrive(queue, [i.decode() for i in found])
                if len(found) < PURGE_CHUNK:
                    return total
        return sum(
            self._redrive(queue, list(ids[start : start + CHUNK]))
            for start in range(0, len(ids), CHUNK)
        )

    def _redrive(self, queue: str, ids: list[str]) -> int:
        if not ids:
            return 0
        keys = self.keys.queue(queue)
        script_keys = [keys.waiting, keys.dead, keys.signal, keys.results, keys.limited]
        records = self._flow_records(queue, ids)
        flows = list(dict.fromkeys(r for r in records if r))
        script_keys += flows
        args: list[Any] = [keys.base, queue]
        for id, record in zip(ids, records, strict=True):
            args += [id, flows.index(record) + 6 if record else 0]
        n: int = self._eval("redrive", script_keys, args)
        return n

    def _flow_records(self, queue: str, ids: Sequence[str]) -> list[str]:
        """The record key of the flow each message is a step of ('' for none), read from
        its flow header (which never changes) and the flow's home: the redrive script
        resumes the flow whose failure the message is. On Redis Cluster a flow's keys
        share its steps' slot (`start_flow`); a key of another slot is left out."""
        keys = self.keys.queue(queue)
        connection = self._connection()
        headers = connection.pipeline([("HGET", f"{keys.base}m:{id}", "headers") for id in ids])
        flow_ids = [None if h is None else flow_of(orjson.loads(h)) for h in headers]
        named = sorted({f for f in flow_ids if f is not None})
        homes = connection.pipeline([("GET", self.keys.flow_home(f)) for f in named])
        slot = key_slot(keys.base.encode())
        records: dict[str, str] = {}
        for flow_id, home in zip(named, homes, strict=True):
            if home is None:
                continue
            base = self.keys.queue(home.decode()).base
            if not connection.cluster or key_slot(base.encode()) == slot:
                records[flow_id] = FlowKeys(base, flow_id).record
        return ["" if f is None else records.get(f, "") for f in flow_ids]

    def purge_dead(self, queue: str) -> int:
        keys = self.keys.queue(queue)
        return self._drain("purge_dead", [keys.dead, keys.keep], keys.base)

    def purge(self, queue: str) -> int:
        keys = self.keys.queue(queue)
        script_keys = [
            keys.waiting,
            keys.leased,
            keys.dead,
            keys.leases,
            keys.keep,
            keys.signal,
            keys.delayed,
            keys.results,
            keys.waiters,
            keys.limited,
        ]
        return self._drain("purge", script_keys, keys.base)

    def _drain(self, script: str, keys: list[str], base: str) -> int:
        """Call a chunked removal script until a call removes less than a full chunk."""
        total = 0
        while True:
            n: int = self._eval(script, keys, [base, PURGE_CHUNK])
            total += n
            if n < PURGE_CHUNK:
                return total
