"""Settling on Redis: one `settle.lua` call per queue (and per `CHUNK` items), whatever
the verdicts, a workflow step's effects in the same call (`lua/includes/flows.lua`);
`keep.lua`, the one script that extends a lease, for keep and extend."""

from __future__ import annotations

from collections.abc import Sequence

from tasuki.backends.base import Keep, LeaseStatus, Receipt, Settle
from tasuki.backends.redis import codec
from tasuki.backends.redis.flows import Flows
from tasuki.backends.redis.keys import QueueKeys
from tasuki.backends.redis.plumbing import CHUNK, Plumbing

# keep.lua's answers by code.
_LEASE_STATUS: tuple[LeaseStatus, ...] = ("lost", "held", "cancelled")


def settle(redis: Plumbing, flows: Flows, items: Sequence[Settle], aging: float) -> list[bool]:
    """A workflow step's effects are checked first (`Flows.check_effects`), so a settle
    that could not apply them atomically is refused before anything is written."""
    with_effects = any(item.effects is not None for item in items)
    if with_effects:
        flows.check_effects(items)

    def call(keys: QueueKeys, part: Sequence[Settle]) -> list[int]:
        args = codec.settle_args(keys.base, part)
        if with_effects:
            queue = part[0].receipt.queue
            args += codec.effects_args(
                part,
                lambda flow_id: flows.keys(flow_id, queue),
                redis.keys.queue,
                redis.keys.lock,
                aging,
            )
        reply: list[int] = redis.eval("settle", codec.settle_keys(keys), args)
        return reply

    return redis.per_queue(items, _receipt_of, call)


def keep(redis: Plumbing, items: Sequence[Keep]) -> list[LeaseStatus]:
    """Extend, store progress under the current lease only, and tell "held", "lost" or
    "cancelled"."""
    out: list[LeaseStatus] = ["lost"] * len(items)
    groups: dict[str, list[int]] = {}
    for n, item in enumerate(items):
        groups.setdefault(item.receipt.queue, []).append(n)
    for queue, indices in groups.items():
        keys = redis.keys.queue(queue)
        for start in range(0, len(indices), CHUNK):
            part = indices[start : start + CHUNK]
            args = codec.keep_args(keys.base, [items[n] for n in part])
            reply = redis.eval("keep", [keys.leased, keys.leases, keys.limited], args)
            for n, code in zip(part, reply, strict=True):
                out[n] = _LEASE_STATUS[code]
    return out


def extend(redis: Plumbing, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
    """`keep` without progress."""
    held = keep(redis, [Keep(r, visibility_timeout) for r in receipts])
    return [status == "held" for status in held]


def _receipt_of(item: Settle) -> Receipt:
    return item.receipt
