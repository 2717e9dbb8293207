"""Lease and id records on Redis (`tasuki.core.locks.LeaseRecords`): the lock store's own
keys, so `holder` reads them as locks, each batch written by one script call
(`lua/records_*.lua`) instead of one or two calls per record.

On a Redis Cluster the keys of one batch live in many slots, and a script may only touch
one: there a batch is one call per slot it spans.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tasuki.backends.redis.codec import ms, records
from tasuki.backends.redis.plumbing import RedisBase
from tasuki.backends.redis.slots import key_slot
from tasuki.core.locks import (
    Granted,
    IdClaim,
    IdFinish,
    LeaseEnd,
    LeaseRecords,
    LeaseTake,
    RecordLifetimes,
)
from tasuki.core.records import Receipt

# Records per script call: a bound on how long one call holds the Redis server.
CHUNK = 500


def granted(fence: int, receives: int, lapsed: int) -> Granted | None:
    """records_take.lua's `granted` record: None where the lease was refused."""
    return Granted(fence, receives, lapsed == 1) if fence > 0 else None


class RedisLeaseRecords(LeaseRecords):
    def __init__(self, backend: RedisBase, namespace: str, lifetimes: RecordLifetimes) -> None:
        super().__init__(namespace, lifetimes)
        self._backend = backend

    def _run(
        self,
        script: str,
        keys: list[str],
        fields: Callable[[int], Sequence[Any]],
        head: Sequence[Any] = (),
    ) -> list[Any]:
        """`script` over the records `keys`: ARGV is `head`, then `fields(i)` of each
        record i. One call per CHUNK records (per slot on a Cluster); the replies'
        elements put back in the records' order."""
        if not keys:
            return []
        full = [self._backend.keys.lock(k) for k in keys]
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
                reply = self._backend._eval(script, [full[n] for n in chunk], args)
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
            return (t.token, ms(t.visibility), t.copy, t.receive_count, t.fence, t.first())

        reply = self._run("records_take", keys, fields, [ms(self.lifetimes.lease)])
        return list(records(reply, granted))

    def settle(self, ends: Sequence[LeaseEnd]) -> list[bool]:
        keys = [self.lease_key(r.queue, r.id) for r, _ in ends]

        def fields(n: int) -> tuple[Any, ...]:
            receipt, acked = ends[n]
            return (receipt.token, 1 if acked else 0)

        head = [ms(self.lifetimes.acked), ms(self.lifetimes.lease)]
        return [r == 1 for r in self._run("records_settle", keys, fields, head)]

    def renew(self, leases: Sequence[Receipt], visibility: float) -> list[bool]:
        keys = [self.lease_key(q, i) for q, i, _ in leases]
        head = [ms(self.lifetimes.lease), ms(visibility)]
        reply = self._run("records_renew", keys, lambda n: (leases[n].token,), head)
        return [r == 1 for r in reply]

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
