"""Producing on SQS: enqueue (checked and encoded, then the id window's claims, the
unique claims and the pending result records, then one batch send per SQS queue), and
reading a result record back. A claim whose message was not sent is given back; a
message is never sent without its claims.

Workflow steps come through here too (`Flows.send_steps`, flows.py), their ids claimed
for the message that sends them instead of in the id window.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tasuki.backends.base import Enqueued, Envelope
from tasuki.backends.sqs.codec import Meta, attributes, attributes_size, encode_body, stored
from tasuki.backends.sqs.plumbing import Plumbing, log
from tasuki.backends.sqs.queues import QueueInfo
from tasuki.backends.sqs.records.base import IdClaim, IdFinish, LeaseRecords, ResultPut
from tasuki.core.flowrecords import ResultRecord
from tasuki.core.message import new_id
from tasuki.errors import BackendError, ConfigurationError, InvalidArgument, MessageTooLarge

# Seconds an enqueue-time unique claim lives before its message is sent (see
# _claim_unique): how long a producer that dies between claim and send blocks the key.
PENDING_CLAIM = 30.0


class Producing:
    def __init__(self, sqs: Plumbing) -> None:
        self.sqs = sqs

    def produce(self, envelopes: Sequence[Envelope], sender: str | None = None) -> list[Enqueued]:
        """`envelopes` sent per SQS queue, i.e. per (queue, priority level); `sender` as
        in `_enqueue_queue`."""
        results: list[Enqueued | None] = [None] * len(envelopes)
        by_queue: dict[tuple[str, int], list[int]] = {}
        for n, env in enumerate(envelopes):
            by_queue.setdefault((env.queue, env.priority), []).append(n)
        for (queue, level), positions in by_queue.items():
            info = self.sqs.info(queue, level)
            self.sqs.levels.used(queue, level)
            self._enqueue_queue(info, envelopes, positions, results, sender)
        return [r for r in results if r is not None]

    def _enqueue_queue(
        self,
        info: QueueInfo,
        envelopes: Sequence[Envelope],
        positions: list[int],
        results: list[Enqueued | None],
        sender: str | None = None,
    ) -> None:
        """`sender`: the workflow message (or flow start) these are the steps of; their
        ids are claimed for it (`FlowRecords.claim_sends`), and a claim it made but did
        not send is its own to send again (flows.py)."""
        records = self.sqs.records
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
            if env.delay > self.sqs.options.max_delay:
                raise InvalidArgument(
                    f"delay {env.delay:.0f} s on SQS queue {info.name} is over max_delay"
                    f" ({self.sqs.options.max_delay:.0f} s): the App's producer sends longer"
                    " delays in hops (the tasuki-not-before header)"
                )
            bodies[n] = encode_body(env.body)
        # 2. The id window: one batch of claims.
        owners = {n: new_id() if records is not None and sender is None else "" for n in positions}
        if sender is not None:
            known = self.sqs.flow_store().claim_sends(
                info.name, [envelopes[n].id for n in positions], sender
            )
        elif records is not None:
            known = records.claim_ids(
                [IdClaim(info.name, envelopes[n].id, owners[n]) for n in positions]
            )
        else:
            known = [True] * len(positions)
        entries: list[dict[str, Any]] = []
        pending: list[ResultPut] = []
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
                self.sqs.place(info, entry, meta, env.delay)
                entries.append(entry)
                if env.keep_result > 0:
                    pending.append(ResultPut(info.name, env.id, "pending", None, env.keep_result))
            if pending:  # before the send: a fast worker's settle finds it
                self.results_store().put_results(pending)
            failed = set(self.sqs.send(info.url, entries))
        except BaseException:
            for _, meta in claimed.values():
                self._unclaim(info, meta)
            self._unpend(pending, {p.id for p in pending})
            raise
        self._unpend(pending, {claimed[key][1].id for key in failed})
        if sender is not None:
            done = [meta.id for key, (_, meta) in claimed.items() if key not in failed]
            self.sqs.flow_store().sent(info.name, done, sender)
        for key, (n, meta) in claimed.items():
            if key in failed:
                self._unclaim(info, meta)
            else:
                results[n] = Enqueued(meta.id, "enqueued")
                self._confirm_unique(envelopes[n])
        if failed:
            ids = ", ".join(claimed[k][1].id for k in sorted(failed, key=int))
            raise BackendError(
                f"SQS refused {len(failed)} of {len(entries)} messages for queue {info.name}"
                f" (ids: {ids}); the others were enqueued: enqueue the same ids again"
            )

    def _unpend(self, pending: list[ResultPut], ids: set[str]) -> None:
        """The pending result records of messages that were not sent."""
        gone = [(p.queue, p.id) for p in pending if p.id in ids]
        if gone:
            self.results_store().drop_results(gone)

    def results_store(self) -> LeaseRecords:
        records = self.sqs.records
        if records is None or not records.controls:
            raise self.sqs.refusal(
                "results",
                "keep results",
                "give it a lock store: locks=sqlite:///... or redis://...",
            )
        return records

    def result(self, queue: str, id: str) -> ResultRecord | None:
        """Read from the lock store; `wait_result` polls it (Backend's default: 10 ms
        doubling to 1 s), as SQS has nothing to wait on."""
        return self.results_store().result(queue, id)

    def _claim_unique(self, env: Envelope) -> Enqueued | None:
        """Take the unique lock as a pending claim, before the send (SQS cannot take it
        atomically with the send: atomic_unique=False). It lives PENDING_CLAIM seconds,
        so a producer that dies before sending blocks the key that long, not for the
        claim's whole TTL; `_confirm_unique` gives it that TTL once the message is sent."""
        assert env.unique is not None
        locks = self.sqs.locks
        if locks is None:
            raise ConfigurationError(
                "unique jobs on sqs:// need a lock store: add locks=sqlite:///... or"
                " locks=redis://... to the URL"
            )
        if env.unique.replace:
            raise ConfigurationError(
                "unique on_conflict='replace' on sqs://: SQS cannot change a waiting"
                " message's body; use on_conflict='drop', 'raise' or 'reschedule'"
            )
        pending = min(PENDING_CLAIM, env.unique.ttl)
        for _ in range(3):
            if locks.acquire(env.unique.key, env.id, pending):
                return None
            holder = locks.holder(env.unique.key)
            if holder is not None:
                return Enqueued(holder.owner, "conflict")
        return Enqueued(env.id, "conflict")

    def _confirm_unique(self, env: Envelope) -> None:
        """The message is sent: its pending claim gets the claim's TTL. Refused only when
        the claim is no longer the message's: its run already started and freed it
        (`until_executing`), or the send outlasted PENDING_CLAIM (logged)."""
        if env.unique is None or self.sqs.locks is None:
            return
        self.sqs.note_unique(env.queue, env.id, env.unique.key, env.unique.ttl)
        if (
            env.unique.ttl > PENDING_CLAIM
            and not self.sqs.locks.renew([env.unique.key], env.id, env.unique.ttl)[0]
        ):
            log.info(
                "sqs: the unique claim %s of message %s was no longer pending when its send"
                " was confirmed (its run started, or the send took over %.0f s)",
                env.unique.key,
                env.id,
                PENDING_CLAIM,
            )

    def _unclaim(self, info: QueueInfo, meta: Meta) -> None:
        if self.sqs.records is None or self.sqs.locks is None:
            return
        if meta.id_owner:
            self.sqs.records.finish_ids([IdFinish(info.name, meta.id, meta.id_owner, 0.0)])
        if meta.unique_key is not None:
            self.sqs.locks.release(meta.unique_key, meta.id)
