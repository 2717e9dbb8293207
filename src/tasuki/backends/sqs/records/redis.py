"""SQS's lease and id records on a Redis lock store (`LeaseRecords`, base.py): the lock
store's own keys, so `holder` reads them as locks, each batch written by one script call
(`lua/records_*.lua` here, run on the store's connection) instead of one or two calls
per record.

On a Redis Cluster the keys of one batch live in many slots, and a script may only touch
one: there a batch is one call per slot it spans.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from tasuki.backends.redis import RedisBackend
from tasuki.backends.redis.codec import ms, records
from tasuki.backends.redis.scripts import Script, load
from tasuki.backends.redis.slots import key_slot
from tasuki.backends.sqs.records.base import (
    ACKED_TAKE,
    CANCELLED_TAKE,
    UNSENT_TAKE,
    Granted,
    IdClaim,
    IdFinish,
    LeaseEnd,
    LeaseRecords,
    LeaseTake,
    RecordLifetimes,
    RecordView,
    ResultPut,
    progress_json,
    read_progress,
)
from tasuki.core.flowrecords import ResultRecord
from tasuki.core.records import CancelStatus, LeaseStatus, Progress, Receipt

# Records per script call: a bound on how long one call holds the Redis server.
CHUNK = 500


def granted(fence: int, receives: int, lapsed: int) -> Granted | None:
    """records_take.lua's `granted` record: None where the lease was refused."""
    if fence == -1:
        return CANCELLED_TAKE
    if fence == -2:
        return ACKED_TAKE
    if fence == -3:
        return UNSENT_TAKE
    return Granted(fence, receives, lapsed == 1) if fence > 0 else None


def result_slot_key(lease_key: str) -> str:
    """A message's result key, in its lease record's Cluster slot (so one script call
    settles both): the lease key's hash tag kept, or the lease key made the tag."""
    key = lease_key + ":result"
    if key_slot(key.encode()) == key_slot(lease_key.encode()):
        return key
    return "{" + lease_key + "}:result"


def result_record(raw: Any) -> ResultRecord | None:
    """A result record's text, "state\nkeep_ms\nexpires_ms\nvalue", read."""
    if raw is None:
        return None
    data = raw if isinstance(raw, bytes) else str(raw).encode()
    state, _, expires, value = data.split(b"\n", 3)
    if state == b"pending":
        return ResultRecord("pending")
    return ResultRecord("ok" if state == b"ok" else "failed", value, int(expires) / 1000)


KEPT: dict[int, LeaseStatus] = {0: "lost", 1: "held", 2: "cancelled"}


@cache
def script(name: str) -> Script:
    """`lua/<name>.lua` of this package, read once per process."""
    return load("tasuki.backends.sqs.records", name)


class RedisLeaseRecords(LeaseRecords):
    controls = True

    def __init__(self, backend: RedisBackend, namespace: str, lifetimes: RecordLifetimes) -> None:
        super().__init__(namespace, lifetimes)
        self._backend = backend

    def _run(
        self,
        name: str,
        keys: list[str],
        fields: Callable[[int], Sequence[Any]],
        head: Sequence[Any] = (),
        results: bool = False,
    ) -> list[Any]:
        """Script `name` over the records `keys`: ARGV is `head`, then `fields(i)` of each
        record i; KEYS the records' keys, then (`results`) their result keys. One call
        per CHUNK records (per slot on a Cluster); the replies' elements put back in the
        records' order."""
        if not keys:
            return []
        full = [self._backend.keys.lock(k) for k in keys]
        extra = [result_slot_key(k) for k in full] if results else []
        if self._backend._connection().cluster:
            groups: dict[int, list[int]] = {}
            for n, key in enumerate(full):
                groups.setdefault(key_slot(key.encode()), []).append(n)
            parts = list(groups.values())
        else:
            parts = [list(range(len(full)))]
        replies: list[list[Any]] = [[] for _ in keys]
        for part in parts:
            for start in range(0, len(part), CHUNK):
                chunk = part[start : start + CHUNK]
                args = list(head)
                for n in chunk:
                    args += fields(n)
                chunk_keys = [full[n] for n in chunk] + [extra[n] for n in chunk if extra]
                reply = self._backend._eval(script(name), chunk_keys, args)
                if not isinstance(reply, list):  # a script that answers nothing per record
                    continue
                width = len(reply) // len(chunk)
                for j, n in enumerate(chunk):
                    replies[n] = reply[j * width : (j + 1) * width]
        return [element for reply in replies for element in reply]

    def take(self, takes: Sequence[LeaseTake]) -> list[Granted | None]:
        keys = [self.lease_key(t.queue, t.id) for t in takes]

        def fields(n: int) -> tuple[Any, ...]:
            t = takes[n]
            fresh = t.first()
            return (t.token, ms(t.visibility), t.copy, t.receive_count, t.fence, fresh, int(t.once))

        reply = self._run("records_take", keys, fields, [ms(self.lifetimes.lease)])
        return list(records(reply, granted))

    def settle(self, ends: Sequence[LeaseEnd]) -> list[bool]:
        keys = [self.lease_key(r.queue, r.id) for r, *_ in ends]

        def fields(n: int) -> tuple[Any, ...]:
            end = ends[n]
            state, value = end.result if end.result is not None else ("", b"")
            return (end.receipt.token, 1 if end.acked else 0, state, value)

        head = [ms(self.lifetimes.acked), ms(self.lifetimes.lease)]
        reply = self._run("records_settle", keys, fields, head, results=True)
        return [r == 1 for r in reply]

    def put_results(self, puts: Sequence[ResultPut]) -> None:
        keys = [self.lease_key(p.queue, p.id) for p in puts]

        def fields(n: int) -> tuple[Any, ...]:
            p = puts[n]
            return (p.state, p.value or b"", "" if p.keep is None else ms(p.keep))

        self._run("records_put_results", keys, fields, [ms(self.lifetimes.id)], results=True)

    def result(self, queue: str, id: str) -> ResultRecord | None:
        key = result_slot_key(self._backend.keys.lock(self.lease_key(queue, id)))
        return result_record(self._backend._command("GET", key))

    def drop_results(self, messages: Sequence[tuple[str, str]]) -> None:
        full = [result_slot_key(self._backend.keys.lock(self.lease_key(q, i))) for q, i in messages]
        if full:
            self._backend._connection().pipeline([("DEL", key) for key in full])

    def renew(self, leases: Sequence[Receipt], visibility: float) -> list[bool]:
        keys = [self.lease_key(q, i) for q, i, _ in leases]
        head = [ms(self.lifetimes.lease), ms(visibility)]
        reply = self._run("records_renew", keys, lambda n: (leases[n].token,), head)
        return [r == 1 for r in reply]

    def keep(
        self, leases: Sequence[tuple[Receipt, Progress | None]], visibility: float
    ) -> list[LeaseStatus]:
        keys = [self.lease_key(q, i) for (q, i, _), _ in leases]

        def fields(n: int) -> tuple[Any, ...]:
            receipt, progress = leases[n]
            return (receipt.token, "" if progress is None else progress_json(progress))

        head = [ms(self.lifetimes.lease), ms(visibility)]
        return [KEPT[int(r)] for r in self._run("records_keep", keys, fields, head)]

    def cancel(self, queue: str, id: str) -> CancelStatus:
        """The id record first, then the lease record: two keys, in two slots on a
        Cluster, so two script calls (an id finished in between is caught by the lease
        record: acked a moment ago)."""
        id_key = self._backend.keys.lock(self.id_key(queue, id))
        owner = self._backend._command("GET", id_key)
        if not owner:
            return "unknown"
        ttl = max(int(self._backend._command("PTTL", id_key)), ms(self.lifetimes.lease))
        key = self._backend.keys.lock(self.lease_key(queue, id))
        done = int(
            self._backend._eval(script("records_cancel"), [key, result_slot_key(key)], [ttl])
        )
        if done == 0:
            return "unknown"
        self._backend._command("SET", id_key, "", "KEEPTTL", "XX")
        return "signalled" if done == 2 else "removed"

    def cancel_leases(self, queue: str, leases: Sequence[tuple[str, str]]) -> list[bool]:
        """The id records read in one round trip; then per message one script call that
        compares the lease record with the token and cancels in the same step (the lease
        records are in many slots on a Cluster); the id records finished in one more."""
        out = [False] * len(leases)
        named = [n for n, (_, token) in enumerate(leases) if token]
        if not named:
            return out
        backend = self._backend
        id_keys = {n: backend.keys.lock(self.id_key(queue, leases[n][0])) for n in named}
        read = backend._connection().pipeline(
            [c for n in named for c in (("GET", id_keys[n]), ("PTTL", id_keys[n]))]
        )
        finish: list[tuple[Any, ...]] = []
        for at, n in enumerate(named):
            if not read[2 * at]:  # unknown, or finished
                continue
            id, token = leases[n]
            ttl = max(int(read[2 * at + 1]), ms(self.lifetimes.lease))
            key = backend.keys.lock(self.lease_key(queue, id))
            done = int(
                backend._eval(script("records_cancel"), [key, result_slot_key(key)], [ttl, token])
            )
            if done == 2:
                out[n] = True
                finish.append(("SET", id_keys[n], "", "KEEPTTL", "XX"))
        if finish:
            backend._connection().pipeline(finish)
        return out

    def view(self, queue: str, id: str) -> RecordView:
        """Three reads (the two records are in two slots on a Cluster): the lease record
        (lease_record.lua's text), the id record and its time to live."""
        command = self._backend._command
        lease = command("GET", self._backend.keys.lock(self.lease_key(queue, id)))
        id_key = self._backend.keys.lock(self.id_key(queue, id))
        owner, ttl = command("GET", id_key), int(command("PTTL", id_key))
        id_owner = None if owner is None else bytes(owner).decode()
        id_until = time.time() + ttl / 1000 if id_owner is not None and ttl > 0 else None
        if lease is None:
            return RecordView(None, 0.0, 0, 0, None, id_owner, id_until)
        parts = bytes(lease).decode().split("\n", 5)
        if len(parts) < 5:  # an older record: a bare token, or without counts
            until = float(parts[1]) / 1000 if len(parts) > 1 and parts[1].isdigit() else 0.0
            return RecordView(parts[0], until, 0, 0, None, id_owner, id_until)
        progress = read_progress(parts[5]) if len(parts) > 5 else None
        return RecordView(
            parts[0],
            int(parts[1]) / 1000,
            int(parts[3]),
            int(parts[4]),
            progress,
            id_owner,
            id_until,
        )

    def forget(self, messages: Sequence[tuple[str, str]]) -> None:
        full = [self._backend.keys.lock(self.lease_key(q, i)) for q, i in messages]
        if full:
            self._backend._connection().pipeline([("DEL", key) for key in full])

    def claim_ids(self, claims: Sequence[IdClaim]) -> list[bool]:
        keys = [self.id_key(q, i) for q, i, _ in claims]
        head = [ms(self.lifetimes.id)]
        reply = self._run("records_claim_ids", keys, lambda n: (claims[n].owner,), head)
        return [r == 1 for r in reply]

    def finish_ids(self, done: Sequence[IdFinish]) -> None:
        keys = [self.id_key(d.queue, d.id) for d in done]

        def fields(n: int) -> tuple[Any, ...]:
            return (done[n].owner, ms(done[n].keep) if done[n].keep > 0 else 0)

        self._run("records_finish_ids", keys, fields)
