"""`sqs://` — Amazon SQS (or any server that speaks its API), on boto3.

The mapping of the message lifecycle onto SQS, and what SQS cannot promise, is in
docs/backends/sqs.md. In short: a lease is a ReceiveMessage (10 per call, long-polled
when the caller waits), its token the receipt handle; the attempt is SQS's
ApproximateReceiveCount plus the attempts of earlier copies of the message, carried in
the `tasuki` attribute, so a release without penalty (which re-sends the message and
deletes the old copy) gives its attempt back. Delays beyond `max_delay` are the
runtime's: the producer and, for a long release, this backend's re-send stamp the
`tasuki-not-before` header, and the worker's receiver hands an early copy back without
penalty for the next hop. tasuki dead-letters a message itself (send to the dead-letter
queue with reason and error, then delete); the queue's redrive policy is only a
backstop. With `locks=`, lease records kept in that lock store
(`LockStore.lease_records`, tasuki/core/locks.py) refuse stale receipt handles, and its
id records make enqueue idempotent; on SQLite and Redis they also keep cancels,
progress and result records (docs/backends/sqs.md).

Every settling call is batched by 10 (SQS's batch size). A message is always sent to
its new place before it is deleted from the old one, so a crash in between leaves a
duplicate, never a loss.

The parts, one concern each, joined here into `SqsBackend`: producing.py (enqueue, its
claims, result records), receiving.py (lease), settling.py (settle, extend), flows.py
(workflows), dead_letters.py (browse, redrive, purge), operating.py (stats, purge,
ping, close); under them plumbing.py (the client, batch calls, moves), and codec.py,
queues.py, levels.py, limits.py and options.py.
"""

from __future__ import annotations

from tasuki.backends.sqs.dead_letters import DeadLetters
from tasuki.backends.sqs.operating import Operating
from tasuki.backends.sqs.producing import PENDING_CLAIM
from tasuki.backends.sqs.receiving import Receiving
from tasuki.backends.sqs.settling import Settling

__all__ = ["PENDING_CLAIM", "SqsBackend"]


class SqsBackend(Receiving, Settling, DeadLetters, Operating):
    """The Backend interface on SQS; `from_url` builds one. Each base is one concern (see
    the module); producing comes in under settling, as Settling builds on Flows (a step's
    settle sends its successors) and Flows on Producing (steps are sent as any message)."""
