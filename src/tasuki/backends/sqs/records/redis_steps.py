"""SQS's durable steps on a Redis lock store (`StepRecords`, steps.py): per message a
hash of step records, a list of signals and a hash of its wait, all in its lease
record's Cluster slot, each call one script (`lua/records_durable_*.lua`) that checks
the lease record's token where it must. A signal reads the message's id record first
(another slot on a Cluster), then stores itself and answers the wait in one call."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tasuki.backends.base import SignalStatus
from tasuki.backends.redis.codec import ms
from tasuki.backends.redis.slots import key_slot
from tasuki.backends.sqs.records.redis import RedisLeaseRecords, script
from tasuki.backends.sqs.records.steps import CopyCheck, Hidden, StepRecords, Verdict, Wake
from tasuki.core.records import Receipt, StepRecord, Taken, Waiting


def slot_key(lease_key: str, suffix: str) -> str:
    """A key of the message's in its lease record's slot (as `result_slot_key`)."""
    key = f"{lease_key}:{suffix}"
    if key_slot(key.encode()) == key_slot(lease_key.encode()):
        return key
    return "{" + lease_key + "}:" + suffix


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


class RedisDurableRecords(StepRecords):
    def __init__(self, records: RedisLeaseRecords) -> None:
        super().__init__()
        self.records = records
        self._backend = records._backend

    def _keys(self, queue: str, id: str) -> tuple[str, str, str, str]:
        """The lease record, step records, signals and wait of the message."""
        lease = self._backend.keys.lock(self.records.lease_key(queue, id))
        return lease, slot_key(lease, "steps"), slot_key(lease, "signals"), slot_key(lease, "wait")

    def _hidden_key(self, url: str) -> str:
        """The copies hidden in the SQS queue `url` (ZSET: id by wake-up time); a second
        key, outside the lease records' slots, so written by its own call (hides are
        rare: a FIFO sleeper received early)."""
        return self._backend.keys.lock(f"{self.records.namespace}hidden:{url}")

    def hidden(self, url: str) -> int:
        key, now = self._hidden_key(url), repr(time.time())
        self._backend._command("ZREMRANGEBYSCORE", key, "-inf", now)
        return int(self._backend._command("ZCOUNT", key, f"({now}", "+inf") or 0)

    def _ttl(self) -> int:
        return ms(self.records.lifetimes.id)

    def _eval(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        return self._backend._eval(script(name), list(keys), list(args))

    def steps(self, queue: str, id: str) -> list[StepRecord]:
        raw = self._backend._command("HGETALL", self._keys(queue, id)[1]) or []
        pairs = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2], strict=True)
        out = []
        for field, value in pairs:
            name, _, occurrence = _text(field).rpartition("\n")
            started, duration, result = bytes(value).split(b"\n", 2)
            out.append(StepRecord(name, int(occurrence), result, float(started), float(duration)))
        return sorted(out, key=lambda r: (r.started_at, r.name, r.occurrence))

    def record_step(self, receipt: Receipt, record: StepRecord) -> bool:
        lease, steps, _, _ = self._keys(receipt.queue, receipt.id)
        field = f"{record.name}\n{record.occurrence}"
        value = f"{record.started_at!r}\n{record.duration!r}\n".encode() + record.result
        done = self._eval(
            "records_durable_step", [lease, steps], [receipt.token, field, value, self._ttl()]
        )
        return int(done) == 1

    def take_signal(self, receipt: Receipt, name: str, occurrence: int) -> Taken:
        lease, steps, signals, _ = self._keys(receipt.queue, receipt.id)
        reply = self._eval(
            "records_durable_take_signal",
            [lease, steps, signals],
            [receipt.token, name, occurrence, repr(time.time()), self._ttl()],
        )
        if int(reply[0]) == 0:
            return Taken(False, None)
        return Taken(True, bytes(reply[1]) if len(reply) > 1 else None)

    def signal(
        self, queue: str, id: str, name: str, payload: bytes
    ) -> tuple[SignalStatus, Wake | None]:
        owner = self._backend._command(
            "GET", self._backend.keys.lock(self.records.id_key(queue, id))
        )
        if not owner:
            return "unknown", None
        _, _, signals, wait = self._keys(queue, id)
        reply = self._eval(
            "records_durable_signal",
            [signals, wait],
            [name, payload, self._ttl(), repr(time.time())],
        )
        if len(reply) < 4:
            return "delivered", None
        handle = _text(reply[4]) if len(reply) > 4 else ""
        wake = Wake(int(reply[1]), _text(reply[2]), _text(reply[3]), handle)
        if handle:  # woken: hidden no more (visible now, or its wait refuses it)
            self._backend._command("ZREM", self._hidden_key(wake.url), id)
        return "delivered", wake

    def resent(self, queue: str, id: str, seq: int) -> None:
        self._eval("records_durable_wait", [self._keys(queue, id)[3]], ["resent", seq, 0])

    def unhidden(self, queue: str, id: str, seq: int) -> None:
        self._eval("records_durable_wait", [self._keys(queue, id)[3]], ["unhidden", seq, 0])

    def suspend(
        self, receipt: Receipt, signal: str, until: float, url: str, entry: str
    ) -> int | None:
        lease, _, signals, wait = self._keys(receipt.queue, receipt.id)
        ttl = max(self._ttl(), ms(until - time.time() + 3600))
        seq = int(
            self._eval(
                "records_durable_suspend",
                [lease, signals, wait],
                [receipt.token, signal, repr(until), url, entry if signal else "", ttl],
            )
        )
        return None if seq < 0 else seq

    def placed(self, waits: Sequence[tuple[str, str, int]]) -> None:
        for queue, id, seq in waits:
            self._eval("records_durable_wait", [self._keys(queue, id)[3]], ["placed", seq, 0])

    def void(self, waits: Sequence[tuple[str, str, int]]) -> None:
        for queue, id, seq in waits:
            self._eval("records_durable_wait", [self._keys(queue, id)[3]], ["void", seq, 0])

    def waiting(self, queue: str, id: str) -> Waiting | None:
        state, signal, until = self._backend._command(
            "HMGET", self._keys(queue, id)[3], "state", "signal", "until"
        )
        if state is None or _text(state) != "waiting":
            return None
        return Waiting(_text(signal or b""), float(_text(until)))

    def admit(self, copies: Sequence[CopyCheck]) -> list[Verdict]:
        out: list[Verdict] = []
        for c in copies:
            reply = self._eval(
                "records_durable_wait",
                [self._keys(c.queue, c.id)[3]],
                ["admit", c.seq, 1 if c.due else 0, c.handle, repr(time.time())],
            )
            if isinstance(reply, (bytes, str)):  # to hide until its wake-up
                until = float(_text(reply))
                if c.url:
                    self._backend._command("ZADD", self._hidden_key(c.url), repr(until), c.id)
                out.append(Verdict(False, until))
            else:
                out.append(Verdict(int(reply) == 1))
        return out

    def drop(self, messages: Sequence[tuple[str, str]]) -> list[Hidden]:
        hidden: list[Hidden] = []
        for queue, id in messages:
            _, steps, signals, wait = self._keys(queue, id)
            reply = self._eval("records_durable_drop", [steps, signals, wait], [])
            if isinstance(reply, list):
                hidden.append(Hidden(_text(reply[0]), _text(reply[1])))
                self._backend._command("ZREM", self._hidden_key(hidden[-1].url), id)
        return hidden
