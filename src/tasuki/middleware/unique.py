"""Job uniqueness (`unique=tasuki.Unique(mode, key, ttl, on_conflict)`).

Modes, and where each is enforced (docs/uniqueness.md has the table with crash cases):

* `until_executing` — one copy *waiting*: lock taken at enqueue, freed when a run starts.
* `until_executed` — one copy waiting or running: taken at enqueue, freed when it succeeds
  or dies; a retry keeps it.
* `while_executing` — one copy *running*: an execution lock taken by the worker.
* `until_and_while_executing` — at most one waiting and one running: a wait lock from
  enqueue to start, then an execution lock while running. A waiting copy that finds
  another running keeps its wait slot and is deferred without penalty until the
  running one finishes, so the one that waits always runs after the one that runs.
* `until_expired` — one copy per key until `ttl` passes, whatever happens to it.

Enqueue-time locks are claimed by the backend in the same atomic step as the enqueue
(one Lua script on Redis, one transaction on SQLite), so enqueue never blocks and never
leaves a lock without a message. SQS (`atomic_unique=False`) claims just before the send,
a pending claim confirmed after it (docs/uniqueness.md#on-sqs), and refuses `replace`.
`on_conflict` decides what a conflicting *enqueue* does: `drop` (returns the waiting
copy's id), `raise` (`DuplicateJob`), `replace` (the waiting copy gets the new
arguments), `reschedule` (it is enqueued after `reschedule_delay` and claims the lock
when it runs, waiting its turn). For `while_executing`, whose conflicts
happen at run time, `drop` skips the run, `raise` fails it with `DuplicateJob`, and
`reschedule`/`replace` defer it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from tasuki import logs
from tasuki.backends.base import UniqueClaim
from tasuki.core.headers import UNIQUE_HEADER, UNIQUE_PENDING_HEADER
from tasuki.core.message import Message
from tasuki.errors import Defer, DuplicateJob, InvalidArgument, Skip
from tasuki.middleware.base import EnqueueNext, ExecuteHook, Middleware, Outgoing

if TYPE_CHECKING:
    from tasuki.backends.base import Enqueued, LockStore
    from tasuki.core.context import Context
    from tasuki.core.job import Job
    from tasuki.core.policies import Unique

KEY_HEADER = UNIQUE_HEADER
PENDING_HEADER = UNIQUE_PENDING_HEADER
DEFAULT_TTL = 86400.0
ENQUEUE_MODES = frozenset(
    {"until_executing", "until_executed", "until_and_while_executing", "until_expired"}
)


def unique_key(job: Job[..., Any], message: Message) -> str:
    """`{queue}unique:<key>`; the default key is the job name with a digest of its arguments."""
    policy = job.unique
    assert policy is not None
    if policy.key is not None:
        custom = policy.key(message)
        if not isinstance(custom, str) or not custom:
            raise InvalidArgument(f"the unique key of job {job.name!r} must be a non-empty str")
    else:
        payload = orjson.dumps(
            [list(message.args), dict(message.kwargs)],
            option=orjson.OPT_SORT_KEYS,
            default=repr,
        )
        import hashlib  # loaded by the first unique job, not by every worker

        custom = f"{job.name}:{hashlib.blake2b(payload, digest_size=16).hexdigest()}"
    return f"{{{message.queue}}}unique:{custom}"


def _claim_key(base: str, mode: str) -> str:
    return f"{base}:wait" if mode == "until_and_while_executing" else base


def _run_key(base: str) -> str:
    return f"{base}:run"


class Uniqueness(Middleware):
    options = frozenset({"unique"})

    def applies_to(self, job: Job[..., Any]) -> bool:
        return job.unique is not None

    # -- enqueue ----------------------------------------------------------------------
    def enqueue(self, messages: list[Outgoing], call_next: EnqueueNext) -> list[Enqueued]:
        for d in messages:
            job = d.job
            if job is None or job.unique is None:
                continue
            policy = job.unique
            draft = Message(
                id=d.id,
                queue=d.queue,
                body=b"",
                headers=d.headers,
                job=job.name,
                args=d.args,
                kwargs=d.kwargs,
            )
            base = unique_key(job, draft)
            d.headers[KEY_HEADER] = base
            if policy.mode in ENQUEUE_MODES:
                ttl = policy.ttl or DEFAULT_TTL
                if policy.mode != "until_expired":
                    ttl += d.delay  # the lock must outlive the wait
                d.unique = UniqueClaim(
                    _claim_key(base, policy.mode), ttl, replace=policy.on_conflict == "replace"
                )
        results = call_next(messages)
        return self._settle_conflicts(messages, results, call_next)

    def _settle_conflicts(
        self, messages: list[Outgoing], results: list[Enqueued], call_next: EnqueueNext
    ) -> list[Enqueued]:
        out = list(results)
        later: list[tuple[int, Outgoing]] = []
        refused: list[str] = []
        for i, (d, r) in enumerate(zip(messages, results, strict=True)):
            if r.status not in ("conflict", "replaced") or d.job is None or d.job.unique is None:
                continue
            policy = d.job.unique
            fields = {"queue": d.queue, "job": d.job.name, "id": d.id, "existing": r.id}
            if r.status == "replaced":
                logs.logger.info("unique: replaced the arguments of waiting copy %s", r.id)
                continue
            if policy.on_conflict == "raise":
                refused.append(r.id)
            elif policy.on_conflict == "reschedule":
                d.unique = None
                d.headers[PENDING_HEADER] = "1"
                d.delay = policy.reschedule_delay
                later.append((i, d))
            else:
                logs.logger.info(
                    "unique: dropped a duplicate of waiting message %s",
                    r.id,
                    extra={"tasuki": fields},
                )
        if later:
            for (i, _), result in zip(later, call_next([d for _, d in later]), strict=True):
                out[i] = result
        if refused:
            raise DuplicateJob(
                f"a unique copy is already waiting: {', '.join(refused)}", refused[0]
            )
        return out

    # -- execute ----------------------------------------------------------------------
    def execute(self, ctx: Context) -> ExecuteHook | None:
        job = ctx.job
        if job is None or job.unique is None:
            return None
        return self._hold(ctx, job, job.unique)

    def _hold(self, ctx: Context, job: Job[..., Any], policy: Unique) -> ExecuteHook:
        m = ctx.message
        locks = ctx.locks
        base = m.headers.get(KEY_HEADER) or unique_key(job, m)
        pending = m.headers.get(PENDING_HEADER) == "1"
        mode = policy.mode
        vt = job.visibility_timeout
        waiting_ttl = policy.ttl or DEFAULT_TTL
        token = f"run:{m.id}:{m.lease.token if m.lease else ''}"

        if mode == "until_executing":
            if pending:
                self._take_turn(locks, base, m.id, waiting_ttl, policy)
            locks.release(base, m.id)
            yield
            return

        if mode == "until_expired":
            if pending:
                self._take_turn(locks, base, m.id, waiting_ttl, policy)
            yield
            return

        if mode == "until_executed":
            if locks.acquire(base, m.id, vt):
                ctx.hold_lock(base, m.id)
            elif pending:
                raise Defer(policy.reschedule_delay, reason="unique: another copy holds the key")
            else:
                logs.logger.warning(
                    "unique: the lock of %s lapsed and another copy took it; running anyway", m.id
                )
            outcome = yield
            ctx.drop_lock(base, m.id)
            if outcome.action in ("retry", "defer"):
                locks.swap(base, m.id, m.id, waiting_ttl + outcome.delay)
            else:
                locks.release(base, m.id)
            return

        run_key = _run_key(base)
        if mode == "while_executing":
            if not locks.acquire(run_key, token, vt):
                self._conflict_at_run(policy, m)
        else:  # until_and_while_executing
            wait_key = _claim_key(base, mode)
            if locks.acquire(run_key, token, vt):
                locks.release(wait_key, m.id)
            else:
                # Another copy runs: keep (or take) the waiting slot and come back later.
                if not locks.acquire(wait_key, m.id, waiting_ttl):
                    self._conflict_at_run(policy, m)
                raise Defer(policy.reschedule_delay, reason="unique: waiting for the running copy")
        ctx.hold_lock(run_key, token)
        yield
        ctx.drop_lock(run_key, token)
        locks.release(run_key, token)

    @staticmethod
    def _take_turn(locks: LockStore, key: str, owner: str, ttl: float, policy: Unique) -> None:
        """A rescheduled duplicate claims the key when it runs, or waits another round."""
        if not locks.acquire(key, owner, ttl):
            raise Defer(policy.reschedule_delay, reason="unique: waiting for the key")

    @staticmethod
    def _conflict_at_run(policy: Unique, message: Message) -> None:
        if policy.on_conflict == "drop":
            raise Skip("unique: another copy is running")
        if policy.on_conflict == "raise":
            raise DuplicateJob(f"another copy of {message.job} is running", None)
        raise Defer(policy.reschedule_delay, reason="unique: another copy is running")
