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
id records make enqueue idempotent.

Every settling call is batched by 10 (SQS's batch size). A message is always sent to
its new place before it is deleted from the old one, so a crash in between leaves a
duplicate, never a loss.

The parts: plumbing.py (the client, batch calls, moves), receiving.py (lease),
settling.py (settle, extend), dead_letters.py (browse, redrive, purge); besides
codec.py, queues.py and options.py. Here: producing and operating.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NoReturn

from tasuki.backends.base import (
    Enqueued,
    Envelope,
    LockHolder,
    LockStore,
    QueueStats,
    refuse_connection,
)
from tasuki.backends.sqs.codec import Meta, attributes, attributes_size, encode_body, stored
from tasuki.backends.sqs.codec import received_meta as _received_meta
from tasuki.backends.sqs.dead_letters import DeadLetters
from tasuki.backends.sqs.options import SQS_BATCH
from tasuki.backends.sqs.plumbing import BROWSE_VISIBILITY, _code, log
from tasuki.backends.sqs.queues import QueueInfo, tasuki_name
from tasuki.backends.sqs.receiving import Receiving
from tasuki.backends.sqs.settling import Settling
from tasuki.core.locks import IdClaim, IdFinish
from tasuki.core.message import new_id
from tasuki.errors import (
    BackendError,
    BackendUnavailable,
    ConfigurationError,
    InvalidArgument,
    MessageTooLarge,
)


class _MissingLocks(LockStore):
    def _refuse(self) -> NoReturn:
        raise ConfigurationError(
            "sqs:// has no lock store of its own: add locks=sqlite:///PATH or"
            " locks=redis://HOST to the URL (needed for dedup, uniqueness and locks)"
        )

    def acquire(self, key: str, owner: str, ttl: float) -> bool:
        self._refuse()

    def renew(self, keys: Sequence[str], owner: str, ttl: float) -> list[bool]:
        if not keys:
            return []
        self._refuse()

    def release(self, key: str, owner: str) -> bool:
        self._refuse()

    def swap(self, key: str, owner: str, new_owner: str, ttl: float) -> bool:
        self._refuse()

    def holder(self, key: str) -> LockHolder | None:
        self._refuse()


_NO_LOCKS = _MissingLocks()


class SqsBackend(Receiving, Settling, DeadLetters):
    """The Backend interface on SQS; `from_url` builds one. The parts: plumbing.py (the
    client and batch calls), receiving.py (lease), settling.py (settle, extend),
    dead_letters.py; here, producing and operating."""

    # -- producing -------------------------------------------------------------------
    def enqueue(
        self, envelopes: Sequence[Envelope], connection: object | None = None
    ) -> list[Enqueued]:
        refuse_connection(self, connection)
        results: list[Enqueued | None] = [None] * len(envelopes)
        by_queue: dict[str, list[int]] = {}
        for n, env in enumerate(envelopes):
            by_queue.setdefault(env.queue, []).append(n)
        for queue, positions in by_queue.items():
            self._enqueue_queue(self._info(queue), envelopes, positions, results)
        return [r for r in results if r is not None]

    def _enqueue_queue(
        self,
        info: QueueInfo,
        envelopes: Sequence[Envelope],
        positions: list[int],
        results: list[Enqueued | None],
    ) -> None:
        records = self._records
        now = time.time()
        # 1. Check and encode everything before taking any claim.
        bodies: dict[int, tuple[str, str]] = {}
        for n in positions:
            env = envelopes[n]
            if env.max_attempts >= info.max_receive_count:
                raise InvalidArgument(
                    f"max_attempts={env.max_attempts} on SQS queue {info.name}: its"
                    f" redrive policy moves a message after {info.max_receive_count}"
                    " receives; keep max_attempts below that"
                )
            if info.fifo and env.delay > 0:
                raise InvalidArgument(
                    f"delay on FIFO queue {info.name}: SQS has no per-message delay there"
                )
            if env.delay > self._options.max_delay:
                raise InvalidArgument(
                    f"delay {env.delay:.0f} s on SQS queue {info.name} is over max_delay"
                    f" ({self._options.max_delay:.0f} s): the App's producer sends longer"
                    " delays in hops (the tasuki-not-before header)"
                )
            bodies[n] = encode_body(env.body)
        # 2. The id window: one batch of claims.
        owners = {n: new_id() if records is not None else "" for n in positions}
        known = (
            records.claim_ids([IdClaim(info.name, envelopes[n].id, owners[n]) for n in positions])
            if records is not None
            else [True] * len(positions)
        )
        entries: list[dict[str, Any]] = []
        claimed: dict[str, tuple[int, Meta]] = {}
        try:
            for n, fresh in zip(positions, known, strict=True):
                env = envelopes[n]
                meta = stored(env, now, owners[n])
                if not fresh:
                    results[n] = Enqueued(env.id, "duplicate")
                    continue
                claimed[str(n)] = (n, meta)  # a failure below gives the claims back
                if env.unique is not None:
                    verdict = self._claim_unique(env)
                    if verdict is not None:
                        del claimed[str(n)]
                        self._unclaim(info, meta)
                        results[n] = verdict
                        continue
                    meta.unique_key = env.unique.key
                body, meta.encoding = bodies[n]
                entry: dict[str, Any] = {
                    "Id": str(n),
                    "MessageBody": body,
                    "MessageAttributes": attributes(meta),
                }
                size = len(body.encode()) + attributes_size(entry["MessageAttributes"])
                if size > info.max_message_size:
                    raise MessageTooLarge(
                        f"message {env.id} is {size} bytes encoded; SQS queue {info.name}"
                        f" takes at most {info.max_message_size} (MaximumMessageSize)"
                    )
                self._place(info, entry, meta, env.delay)
                entries.append(entry)
            failed = set(self._send(info.url, entries))
        except BaseException:
            for _, meta in claimed.values():
                self._unclaim(info, meta)
            raise
        for key, (n, meta) in claimed.items():
            if key in failed:
                self._unclaim(info, meta)
            else:
                results[n] = Enqueued(meta.id, "enqueued")
        if failed:
            ids = ", ".join(claimed[k][1].id for k in sorted(failed, key=int))
            raise BackendError(
                f"SQS refused {len(failed)} of {len(entries)} messages for queue {info.name}"
                f" (ids: {ids}); the others were enqueued: enqueue the same ids again"
            )

    def _claim_unique(self, env: Envelope) -> Enqueued | None:
        """Take the unique lock (not atomically with the send: atomic_unique=False)."""
        assert env.unique is not None
        locks = self._locks
        if locks is None:
            raise ConfigurationError(
                "unique jobs on sqs:// need a lock store: add locks=sqlite:///... or"
                " locks=redis://... to the URL"
            )
        for _ in range(3):
            if locks.acquire(env.unique.key, env.id, env.unique.ttl):
                return None
            holder = locks.holder(env.unique.key)
            if holder is not None:
                return Enqueued(holder.owner, "conflict")
        return Enqueued(env.id, "conflict")

    def _unclaim(self, info: QueueInfo, meta: Meta) -> None:
        if self._records is None or self._locks is None:
            return
        if meta.id_owner:
            self._records.finish_ids([IdFinish(info.name, meta.id, meta.id_owner, 0.0)])
        if meta.unique_key is not None:
            self._locks.release(meta.unique_key, meta.id)

    # -- operating -------------------------------------------------------------------
    def queue_arn(self, queue: str) -> str:
        """The ARN of `queue`'s SQS queue, created if needed: what an S3 bucket
        notification (or an SNS subscription) names to deliver into it."""
        info = self._info(queue)
        attrs = self._call("get_queue_attributes", QueueUrl=info.url, AttributeNames=["QueueArn"])
        return str(attrs["Attributes"]["QueueArn"])

    def _counts(self, url: str, names: list[str]) -> list[int]:
        attrs = self._call("get_queue_attributes", QueueUrl=url, AttributeNames=names)
        values = attrs.get("Attributes", {})
        return [int(values.get(name, 0)) for name in names]

    def stats(self, queue: str) -> QueueStats:
        info = self._queues.get(queue, create=False)
        if info is None:
            return QueueStats(0, 0, 0, 0, 0.0)
        ready, in_flight, delayed = self._counts(
            info.url,
            [
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )
        dead = sum(
            self._counts(
                info.dead_url,
                ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
            )
        )
        # SQS does not tell the age of the oldest message (CloudWatch's
        # ApproximateAgeOfOldestMessage does, per minute): reported as 0.
        return QueueStats(ready, in_flight, delayed, dead, 0.0)

    def queues(self) -> list[str]:
        names: list[str] = []
        paginator = self._client.get_paginator("list_queues")
        for page in paginator.paginate(QueueNamePrefix=self._options.prefix):
            for url in page.get("QueueUrls", []):
                name = tasuki_name(self._options, url.rsplit("/", 1)[-1])
                if name is None:
                    continue
                s = self.stats(name)
                if s.ready + s.in_flight + s.delayed + s.dead:
                    names.append(name)
        return sorted(names)

    def purge(self, queue: str) -> int:
        """Visible messages are received and deleted (their locks and ids freed); what is
        left (in flight, delayed) goes with PurgeQueue, which AWS allows once a minute."""
        info = self._queues.get(queue, create=False)
        if info is None:
            return 0
        before = self.stats(queue)
        total = before.ready + before.in_flight + before.delayed + before.dead
        records, locks = self._records, self._locks
        while True:
            got = self._call(
                "receive_message",
                QueueUrl=info.url,
                MaxNumberOfMessages=SQS_BATCH,
                VisibilityTimeout=BROWSE_VISIBILITY,
                WaitTimeSeconds=0,
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not got:
                break
            self._delete(info.url, [m["ReceiptHandle"] for m in got])
            if records is not None and locks is not None:
                metas = [_received_meta(message)[0] for message in got]
                records.finish_ids([IdFinish(queue, m.id, m.id_owner, 0.0) for m in metas])
                for meta in metas:
                    if meta.unique_key is not None:
                        locks.release(meta.unique_key, meta.id)
        with self._held_mutex:
            mine = [(t, h) for t, h in self._held.items() if h.info.name == queue]
            for token, _ in mine:
                del self._held[token]
        if records is not None:
            records.forget([(queue, held.meta.id) for _, held in mine])
        for url in (info.url, info.dead_url):
            try:
                self._call("purge_queue", QueueUrl=url)
            except Exception as exc:
                if "PurgeQueueInProgress" not in _code(exc):
                    raise
                log.warning("sqs: %s: a purge is already under way (AWS: once a minute)", url)
        return total

    @property
    def locks(self) -> LockStore:
        """The `locks=` store; without one, a store that refuses every call, so a worker
        that uses no lock starts, and the first feature that needs one fails loudly."""
        return _NO_LOCKS if self._locks is None else self._locks

    def ping(self) -> None:
        try:
            self._client.list_queues(QueueNamePrefix=self._options.prefix, MaxResults=1)
        except Exception as exc:
            raise BackendUnavailable(f"SQS at {self.url} is unreachable: {exc}") from exc

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._receivers is not None:
            self._receivers.shutdown(wait=True)
            self._receivers = None
        if self._records is not None:
            self._records.close()
        if self._lock_backend is not None:
            self._lock_backend.close()
        self._client.close()
