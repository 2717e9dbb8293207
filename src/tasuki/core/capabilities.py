"""What each backend can and cannot do, and the one way a missing capability is refused.

The App, the producer and the runtime read a backend's `Capabilities` instead of guessing
from its URL. A promise the backend cannot keep natively is kept another way (delay hops,
the `locks=` store) or refused, at configuration time where it can be, always through
`refusal` so every refusal names the scheme, what was asked and the capability it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from tasuki.errors import Unsupported


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a backend can and cannot do natively.

    The App and the runtime read these instead of guessing from a URL: a promise the
    backend cannot keep natively is kept another way (delay hops, the `locks=` store) or
    refused at configuration time with an error that names the missing capability.
    """

    # Largest body plus headers one message may have, in bytes (checked at enqueue).
    max_message_size: int
    # Several processes (and machines) can share the store.
    cross_process: bool = True
    # `lease(wait=...)` blocks until a message arrives, instead of the caller polling.
    blocking_wait: bool = True
    # Longest delay the backend stores in one go (None: unbounded); longer ones hop.
    max_delay: float | None = None
    # Longest lease one extension can grant (None: unbounded).
    max_visibility: float | None = None
    # `attempt` is counted exactly by the backend (not an approximate receive count).
    exact_attempts: bool = True
    # A release without penalty gives the attempt back.
    refundable_release: bool = True
    # Finished caller-given ids are remembered for the id window (idempotent enqueue).
    id_window: bool = True
    # A unique claim is taken atomically with the enqueue.
    atomic_unique: bool = True
    # Dead letters can be paged and looked up by id.
    dead_letter_browsing: bool = True
    # Enqueue can join the caller's own database transaction.
    transactional_enqueue: bool = False
    # The backend has a lock store of its own (else the App needs `locks=`).
    native_locks: bool = True
    # Stats are exact (else approximate, as the engine reports them).
    exact_stats: bool = True
    # A stale lease token is refused by ack, extend, release and dead.
    fencing: bool = True
    # Smallest step of delays and visibility timeouts the backend keeps, in seconds
    # (0: as fine as its clock; SQS: whole seconds).
    timer_resolution: float = 0.0
    # `inspect` tells one message's state and the history of its last leases, and
    # `in_flight` lists the current leases.
    inspection: bool = True
    # `settled_totals` counts acked and dead messages per queue (the dashboard's rates).
    settled_counts: bool = True
    # `reliability` counts redeliveries, lost leases, expiry-to-start times and the
    # heartbeat lag workers report with `add_meters` (`tasuki.core.reliability`).
    reliability_counts: bool = True
    # Result records (`Envelope.keep_result`, `Settle.effects.result`, `result`,
    # `wait_result`): the backend keeps jobs' return values.
    results: bool = False
    # Workflows: `start_flow`, `flow`, `wait_flow`, `cancel_flow`, `group_value`, and a
    # settle's effects (fills, successors, the flow's result and failure).
    workflows: bool = False
    # `Envelope.priority` orders the lease (rank = visible_at - priority x aging).
    priorities: bool = False
    # `Envelope.limits` of kind "rate" are admitted at lease time.
    rate_limits: bool = False
    # ... and those of kind "concurrency".
    concurrency_limits: bool = False
    # `cancel(queue, id)`, and `keep` answering "cancelled" to a cancelled lease.
    cancel: bool = False
    # `keep` stores a lease's `Progress` (fenced), shown by `inspect`.
    progress: bool = False
    # The console (`core/console.py`, DESIGN §4d): `pause` / `resume` / `paused` keep a
    # queue's pause in the backend, read by every worker.
    pause: bool = False
    # `browse` lists in-flight and dead messages, `cancel_many` acts on them.
    browsing: bool = False
    # ... and ready and delayed ones too, and `retry_now` / `retry_many` work (SQS cannot
    # see what waits without receiving it).
    browse_waiting: bool = False
    # `announce` / `workers` / `stop_worker`: the workers and what each runs.
    worker_registry: bool = False
    # The announce's job tallies kept in per-minute rollups, read by `job_stats`.
    job_stats: bool = False
    # Durable steps (DESIGN §4c): `steps`, `record_step`, `take_signal`, `signal`, and a
    # `Settle.suspend` that keeps what the message waits for.
    durable_steps: bool = False
    # `record_step_in_transaction`: a step's work runs in the transaction recording it.
    transactional_steps: bool = False


# What a refusal tells its reader to do, unless it knows better.
ANOTHER_BACKEND = "use a backend that has it"
# ... or, for a job option the backend cannot keep, without it.
DROP_IT = "drop the option or " + ANOTHER_BACKEND


def refusal(scheme: str, capability: str, what: str, advice: str = ANOTHER_BACKEND) -> Unsupported:
    """The error for something a backend cannot do: one wording for every refusal.

    `what` is a verb phrase ("cancel a message", "run job 'x' with priority="); `advice`
    says what to do instead.
    """
    if capability not in _NAMES:
        raise AssertionError(f"no capability called {capability!r}")
    return Unsupported(
        f"{scheme}:// cannot {what}: it lacks the {capability} capability; {advice}",
        capability=capability,
    )


def require(
    caps: Capabilities, scheme: str, capability: str, what: str, advice: str = ANOTHER_BACKEND
) -> None:
    """Raise `refusal(...)` unless `caps` has `capability`."""
    if not getattr(caps, capability):
        raise refusal(scheme, capability, what, advice)


_NAMES = frozenset(f.name for f in fields(Capabilities))
