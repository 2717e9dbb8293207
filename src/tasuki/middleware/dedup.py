"""The duplicate-delivery guard (`dedup=True` or `tasuki.Dedup(key=..., window=...)`).

At-least-once delivery (SQS standard queues, a lapsed lease, a producer retry) hands
the same work over twice. The guard is a lock per key:

* taking it as *processing* (owner: this delivery, TTL: the lease, renewed by the
  heartbeat) lets the run go ahead;
* finding it held by another live delivery defers this one (released without penalty)
  until that one settles: it must not ack, the other may still fail;
* finding it *done* skips the run: the message is acked without running;
* a failed run drops the guard, so the retry runs; a successful one turns it into
  *done* for `window` seconds, after which the key is forgotten.

*Done* follows the ack that landed, never the run alone: an ack that is lost (the lease
lapsed during an outage, say) must not leave the key done, or the redelivery would be
skipped as a duplicate and a kept result would read `null`. So the guard turns done from
the settler, once the backend has taken the ack (`Outcome.when_acked`); until then it is
held as *processing*, and a redelivery waits for it, then runs.

It sits outside `Retries`, so it sees the final decision: a run that ends in a retry, a
dead letter or the exhaustion handler never counts as done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tasuki import logs
from tasuki.errors import Defer, Skip
from tasuki.middleware.base import ExecuteHook, Middleware

if TYPE_CHECKING:
    from tasuki.core.context import Context
    from tasuki.core.job import Job
    from tasuki.core.policies import Dedup

DONE = "done"
MIN_DEFER, MAX_DEFER = 0.2, 1.0


def dedup_key(ctx: Context, policy: Dedup) -> str:
    """`{queue}dedup:<job>:<key>`: the tag keeps it in its queue's Redis Cluster slot."""
    job, message = ctx.job, ctx.message
    assert job is not None
    user_key = policy.key(message) if policy.key is not None else message.id
    return f"{{{job.queue}}}dedup:{job.name}:{user_key}"


class DedupGuard(Middleware):
    options = frozenset({"dedup"})

    def applies_to(self, job: Job[..., Any]) -> bool:
        return job.dedup is not None

    def execute(self, ctx: Context) -> ExecuteHook | None:
        job = ctx.job
        if job is None or job.dedup is None:
            return None
        return self._guard(ctx, job.dedup)

    def _guard(self, ctx: Context, policy: Dedup) -> ExecuteHook:
        job, message = ctx.job, ctx.message
        assert job is not None
        locks = ctx.locks
        key = dedup_key(ctx, policy)
        lease_token = message.lease.token if message.lease else ""
        owner = f"run:{message.id}:{lease_token}"
        ttl = job.visibility_timeout
        if not locks.acquire(key, owner, ttl):
            holder = locks.holder(key)
            if holder is not None and holder.owner == DONE:
                raise Skip("duplicate: already done")
            if holder is not None or not locks.acquire(key, owner, ttl):
                wait = holder.expires_in if holder is not None else MIN_DEFER
                raise Defer(
                    min(MAX_DEFER, max(MIN_DEFER, wait)),
                    reason="duplicate: another delivery is running it",
                )
        ctx.hold_lock(key, owner)
        outcome = yield
        ctx.drop_lock(key, owner)
        if outcome.action == "ack" and outcome.error is None:

            def acked(landed: bool) -> None:
                if not landed:
                    locks.release(key, owner)
                elif not locks.swap(key, owner, DONE, policy.window):
                    logs.logger.warning("dedup guard %s lapsed before the run's ack", key)

            outcome.when_acked(acked)
        else:
            locks.release(key, owner)
