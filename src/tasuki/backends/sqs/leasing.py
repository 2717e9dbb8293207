"""Leasing: a lease is one or more ReceiveMessage calls; what comes back is admitted
(decoded, its attempt counted, its lease recorded with `locks=`) or, out of attempts,
dead-lettered at once."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from tasuki.backends.base import Delivery
from tasuki.backends.sqs.codec import Meta, delivery
from tasuki.backends.sqs.codec import received_meta as _received_meta
from tasuki.backends.sqs.durable import admit_copies
from tasuki.backends.sqs.limits import Parked
from tasuki.backends.sqs.options import RECORDS, SQS_BATCH, SQS_MAX_WAIT
from tasuki.backends.sqs.plumbing import Held, Move, Plumbing, log, whole_seconds
from tasuki.backends.sqs.queues import QueueInfo, level_token
from tasuki.backends.sqs.records.base import ACKED_TAKE, UNSENT_TAKE, Granted, IdFinish, LeaseTake
from tasuki.backends.sqs.records.listing import ListEntry, headers_json, listed_body
from tasuki.core.message import JOB_HEADER
from tasuki.core.reasons import ATTEMPTS_EXHAUSTED, LEASE_EXPIRED, exhausted

# ReceiveMessage calls one lease keeps in flight at once when a backlog fills them.
RECEIVES_IN_FLIGHT = 4
# With priority levels in use, an idle lease long-polls level 0 for at most this many
# seconds before asking the higher levels again (their latency when idle).
LEVEL_POLL = 5.0
# A long poll's messages are received for this long at most (seconds), then set to their
# lease once admitted. A long poll can outlive its process (SIGKILLed mid-poll, SQS still
# answers it): what it receives then is nobody's, and comes back after this, not after
# a whole lease. Short polls return at once and receive for the whole lease.
# 2 s: ample for the one request that follows, and within the chaos run's redelivery
# bound (5 s put a dead poll's messages past it).
LONG_POLL_HOLD = 2.0


def flying(leased: Delivery, now: float) -> ListEntry:
    """A delivery's in-flight entry (records/listing.py): listed until its lease ends."""
    info = orjson.dumps(
        {
            "attempt": leased.attempt,
            "max": leased.max_attempts,
            "fence": leased.fencing_token,
            "t": leased.enqueued_at,
        }
    ).decode()
    return ListEntry(
        leased.queue,
        leased.id,
        now + leased.visibility_timeout,
        leased.headers.get(JOB_HEADER, ""),
        leased.token,
        listed_body(leased.body),
        headers_json(dict(leased.headers)),
        info,
    )


class Leasing:
    def __init__(self, sqs: Plumbing) -> None:
        self.sqs = sqs
        self._pool: ThreadPoolExecutor | None = None  # lease_soon's
        self._receivers: ThreadPoolExecutor | None = None  # _receive_many's
        self._mutex_pool = threading.Lock()

    def lease(
        self, queue: str, max_messages: int, visibility_timeout: float, wait: float, aging: float
    ) -> list[Delivery]:
        """Up to `max_messages`, 10 per ReceiveMessage. The first receive is one call
        (a long poll when the caller waits), so an idle queue costs one request; once a
        reply comes back full (a backlog), the rest of the room is asked for by several
        receives in flight at once (at most RECEIVES_IN_FLIGHT). With priority levels
        in use, each level is such a lease in turn, in levels.py's order (`aging`: the
        backend's `priority_aging`)."""
        if max_messages <= 0:
            return []
        info = self.sqs.info(queue)
        levels = self.sqs.levels.in_use(queue)
        if levels == [0]:
            return self._lease_level(info, max_messages, visibility_timeout, wait)
        return self._lease_levels(info, max_messages, visibility_timeout, wait, aging)

    def _lease_levels(
        self,
        base: QueueInfo,
        max_messages: int,
        visibility_timeout: float,
        wait: float,
        aging: float,
    ) -> list[Delivery]:
        """Several levels in use: each asked in turn (levels.py: from the highest down,
        aged lower levels before), until the batch is full. Idle, one long poll of level
        0, at most LEVEL_POLL seconds, then the higher levels are asked again."""
        deadline = time.monotonic() + wait
        leased: list[Delivery] = []
        while True:
            for level in self.sqs.levels.order(base.name, aging):
                room = max_messages - len(leased)
                if room <= 0:
                    return leased
                info = base if level == 0 else self.sqs.info(base.name, level)
                leased.extend(self._lease_level(info, room, visibility_timeout, 0.0))
            remaining = deadline - time.monotonic()
            if leased or remaining < 0.5:
                return leased
            leased = self._lease_level(
                base, max_messages, visibility_timeout, min(remaining, LEVEL_POLL)
            )
            if leased:
                return leased

    def _lease_level(
        self, info: QueueInfo, max_messages: int, visibility_timeout: float, wait: float
    ) -> list[Delivery]:
        """The lease from one SQS queue (see lease)."""
        deadline = time.monotonic() + wait
        leased: list[Delivery] = []
        full = False
        while True:
            room = max_messages - len(leased)
            if full:
                asks = [
                    min(SQS_BATCH, room - n * SQS_BATCH)
                    for n in range(min(RECEIVES_IN_FLIGHT, math.ceil(room / SQS_BATCH)))
                ]
                hold: float | None = None
                replies = self._receive_many(info, asks, visibility_timeout)
                got = [m for reply in replies for m in reply]
                full = all(len(r) == a for r, a in zip(replies, asks, strict=True))
            else:
                remaining = deadline - time.monotonic()
                # SQS long-polls in whole seconds: a wait under a second is one 1-second
                # poll (never a loop of short polls, each of them a billed request).
                poll = (
                    0 if leased or remaining <= 0 else min(SQS_MAX_WAIT, max(1, round(remaining)))
                )
                asked = min(SQS_BATCH, room)
                hold = LONG_POLL_HOLD if poll and visibility_timeout > LONG_POLL_HOLD else None
                got = self._receive(info, asked, hold or visibility_timeout, poll)
                if poll and got and self._paused(info.name):
                    # Paused while the long poll waited: put back unleased (no attempt),
                    # so that a pause holds within a second however long the poll was.
                    self.sqs.visibility(info.url, [m["ReceiptHandle"] for m in got], 0)
                    return leased
                full = len(got) == asked
            admitted = self._admit(info, got, visibility_timeout, hold)
            leased.extend(admitted)
            if len(leased) >= max_messages:
                return leased
            # A full reply that admitted nothing more is a backlog over its limits (put
            # back): what this lease holds goes to run now rather than after the receives
            # that pass over the backlog, and the messages without limits behind it wait
            # for the next lease no longer than before.
            if (full and (admitted or not leased)) or (got and not admitted and not leased):
                continue
            if leased or deadline - time.monotonic() < 0.5:
                return leased

    def _paused(self, queue: str) -> bool:
        """Whether the queue is paused now (one read of the lock store's console records,
        made only when a long poll brought messages back)."""
        console = self.sqs.console
        return console is not None and queue in console.paused()

    def _receive(
        self, info: QueueInfo, asked: int, visibility_timeout: float, poll: int = 0
    ) -> list[dict[str, Any]]:
        got = list(
            self.sqs.call(
                "receive_message",
                QueueUrl=info.url,
                MaxNumberOfMessages=asked,
                VisibilityTimeout=whole_seconds(visibility_timeout),
                WaitTimeSeconds=poll,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
            ).get("Messages", [])
        )
        self.sqs.levels.asked(info.name, info.level, got, asked)
        return got

    def _receive_many(
        self, info: QueueInfo, asks: list[int], visibility_timeout: float
    ) -> list[list[dict[str, Any]]]:
        """Short-poll receives in flight at once, one per entry of `asks`; every reply is
        waited for (none is dropped: its messages are leased already)."""
        if len(asks) == 1:
            return [self._receive(info, asks[0], visibility_timeout)]
        with self._mutex_pool:
            if self._receivers is None:
                self._receivers = ThreadPoolExecutor(
                    RECEIVES_IN_FLIGHT - 1, thread_name_prefix="tasuki-sqs-receive"
                )
            pool = self._receivers
        others = [pool.submit(self._receive, info, a, visibility_timeout) for a in asks[1:]]
        replies: list[list[dict[str, Any]]] = []
        error: BaseException | None = None
        try:
            replies.append(self._receive(info, asks[0], visibility_timeout))
        except BaseException as exc:
            error = exc
        for future in others:
            try:
                replies.append(future.result())
            except BaseException as exc:
                error = error or exc
        if error is not None:
            # What the others received is leased by nobody: hand it back for another lease.
            handles = [m["ReceiptHandle"] for reply in replies for m in reply]
            if handles:
                self.sqs.visibility(info.url, handles, 0)
            raise error
        return replies

    def lease_soon(
        self, queue: str, max_messages: int, visibility_timeout: float, aging: float
    ) -> Callable[[], list[Delivery]]:
        """The receive goes out on a helper thread while the caller runs its jobs."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(2, thread_name_prefix="tasuki-sqs")
        future = self._pool.submit(self.lease, queue, max_messages, visibility_timeout, 0.0, aging)
        return future.result

    def close(self) -> None:
        """The helper threads end, once what they run is done."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._receivers is not None:
            self._receivers.shutdown(wait=True)
            self._receivers = None

    def _admit(
        self,
        info: QueueInfo,
        messages: list[dict[str, Any]],
        default_vt: float,
        held_for: float | None = None,
    ) -> list[Delivery]:
        """Deliveries from received messages; exhausted ones are dead-lettered.
        `held_for`: the visibility they were received with where shorter than
        `default_vt` (a long poll's LONG_POLL_HOLD): each delivery's is set to its lease's.

        With `locks=` every message's lease is recorded first: a duplicate delivery is
        refused there (not run, not counted), and the attempt is what the store counted
        (the leases it granted on the SQS message), not SQS's receive count, which also
        counts refused receives."""
        received: list[tuple[dict[str, Any], Meta, dict[str, Any], int]] = []
        for message in messages:
            meta, others = _received_meta(message)
            attrs = message.get("Attributes", {})
            received.append((message, meta, others, int(attrs.get("ApproximateReceiveCount", 1))))
        received = admit_copies(self.sqs, info, received)
        if self.sqs.admission is not None:
            received = self._admit_limits(info, received, default_vt)
        # SQS's counts, or what the records granted
        granted: list[Granted | None] = [
            Granted(meta.fence_before + count, count, False) for _, meta, _, count in received
        ]
        if self.sqs.records is not None and received:
            now = time.time()
            takes: list[LeaseTake] = []
            # Sent once (`LeaseTake.once`): no enqueue can have offered the id again while
            # an acked record refuses copies, as its window outlasts that record's grace
            # or the producer made it for this enqueue. Copies that are a new send (a
            # release's re-send, a redrive) meet a released or forgotten record, and run.
            acked_grace = self.sqs.records.lifetimes.acked
            for message, meta, _, count in received:
                attrs = message.get("Attributes", {})
                first = int(attrs.get("ApproximateFirstReceiveTimestamp", 0)) / 1000
                takes.append(
                    LeaseTake(
                        queue=info.name,
                        id=meta.id,
                        token=level_token(info.level, message["ReceiptHandle"]),
                        copy=str(message.get("MessageId", "")),
                        receive_count=count,
                        fence=meta.fence_before + count,
                        visibility=meta.visibility_timeout or default_vt,
                        fresh=first > 0 and now - first < RECORDS.lease,
                        once=meta.id_generated or meta.keep_id >= acked_grace,
                    )
                )
            granted = [
                self._unsent(info.name, meta.id) if given == UNSENT_TAKE else given
                for given, (_, meta, _, _) in zip(
                    self.sqs.records.take(takes), received, strict=True
                )
            ]
        now_at = time.time()
        deliveries: list[Delivery] = []
        dead: list[Move] = []
        cancelled: list[tuple[dict[str, Any], Meta]] = []
        own_vt: dict[float, list[str]] = {}
        received_for = default_vt if held_for is None else held_for
        unheld: list[str] = []  # admitted by its limits, yet not leased
        acked: list[tuple[dict[str, Any], Meta]] = []  # copies acked already
        for (message, meta, others, _), given in zip(received, granted, strict=True):
            # The acked copy again (ACKED_TAKE): its delete failed, or SQS delivered it
            # twice: deleted, not run. So is an acked workflow step's whose sends were
            # all made; one whose sends were cut short is refused like a held one, to
            # run again once the record's grace is over and send what is left
            # (UNSENT_TAKE, records/base.py: `_unsent`).
            if given is None:
                # SQS handed out a message another lease still holds: not delivered. It
                # comes back after its own visibility timeout, by when that lease has
                # lapsed unless kept alive, not after this receive's (often far longer).
                log.info("sqs: %s delivered again while leased: not run twice", meta.id)
                # (A long poll's hold is shorter than any lease: left as it is.)
                vt = meta.visibility_timeout or default_vt
                if held_for is None and whole_seconds(vt) != whole_seconds(default_vt):
                    own_vt.setdefault(vt, []).append(message["ReceiptHandle"])
                if meta.limits:
                    unheld.append(level_token(info.level, message["ReceiptHandle"]))
                continue
            if given == ACKED_TAKE:
                log.info("sqs: %s delivered again after its ack: deleted", meta.id)
                acked.append((message, meta))
                if meta.limits:
                    unheld.append(level_token(info.level, message["ReceiptHandle"]))
                continue
            if given.fence == -1:  # cancelled (CANCELLED_TAKE): deleted, never run
                cancelled.append((message, meta))
                if meta.limits:
                    unheld.append(level_token(info.level, message["ReceiptHandle"]))
                continue
            fence, receives, lapsed = given
            attempt = meta.attempts_before + receives
            used = attempt - 1
            if exhausted(used, meta.max_attempts):  # the leases before this one used them up
                reason = LEASE_EXPIRED if lapsed else ATTEMPTS_EXHAUSTED
                dead.append(
                    Move(message, self.sqs.dead_meta(meta, fence, reason, None, used), others)
                )
                if meta.limits:
                    unheld.append(level_token(info.level, message["ReceiptHandle"]))
                continue
            token = level_token(info.level, message["ReceiptHandle"])
            vt = meta.visibility_timeout or default_vt
            if whole_seconds(vt) != whole_seconds(received_for):
                own_vt.setdefault(vt, []).append(message["ReceiptHandle"])
            self.sqs.hold(
                token,
                Held(info, message, meta, others, attempt, fence, time.monotonic() + vt + 60),
            )
            deliveries.append(delivery(info.name, message, meta, attempt, fence, vt, token))
        refused: set[str] = set()
        for vt, handles in own_vt.items():
            changed = self.sqs.visibility(info.url, handles, vt)
            refused.update(h for h, ok in zip(handles, changed, strict=True) if not ok)
        if refused:
            # Received for a long poll's hold, which lapsed before its lease was set
            # (another receive may have it now): not leased here after all.
            gone = {level_token(info.level, h) for h in refused}
            for token in gone:
                self.sqs.take_held(token)
            unheld.extend(d.token for d in deliveries if d.token in gone)
            deliveries = [d for d in deliveries if d.token not in gone]
        if self.sqs.listing is not None and deliveries:
            self.sqs.list_flying([flying(d, now_at) for d in deliveries])
        if dead:
            self.sqs.dead_letter_moves(info, dead)
        if cancelled:
            self._drop_cancelled(info, cancelled)
        if acked:
            self._drop_acked(info, acked)
        self.sqs.free_limits(unheld)
        return deliveries

    def _drop_acked(self, info: QueueInfo, messages: list[tuple[dict[str, Any], Meta]]) -> None:
        """Delete received copies of messages acked already, and finish their ids as the
        ack's own delete would have."""
        done = self.sqs.delete(info.url, [m["ReceiptHandle"] for m, _ in messages])
        finished = [
            IdFinish(info.name, meta.id, meta.id_owner, meta.keep_id)
            for (_, meta), ok in zip(messages, done, strict=True)
            if ok
        ]
        self.sqs.dead_lettered([], finished)

    def _drop_cancelled(self, info: QueueInfo, messages: list[tuple[dict[str, Any], Meta]]) -> None:
        """Delete received copies of cancelled messages: never run."""
        done = self.sqs.delete(info.url, [m["ReceiptHandle"] for m, _ in messages])
        self.sqs.cancelled_gone(
            info.name, [(meta.id, meta) for (_, meta), ok in zip(messages, done, strict=True) if ok]
        )

    def _unsent(self, queue: str, id: str) -> Granted | None:
        """The copy of an acked step met again before its record said its sends were
        made: acked (deleted) if they were, else refused."""
        return ACKED_TAKE if self.sqs.flow_store().sends_made(queue, id) else None

    def _admit_limits(
        self,
        info: QueueInfo,
        received: list[tuple[dict[str, Any], Meta, dict[str, Any], int]],
        default_vt: float,
    ) -> list[tuple[dict[str, Any], Meta, dict[str, Any], int]]:
        """The received messages their limits let start (limits.py); the others are put
        back until a token or slot is expected, unleased, so they cost no attempt."""
        admission = self.sqs.admission
        assert admission is not None
        kept: list[tuple[dict[str, Any], Meta, dict[str, Any], int]] = []
        back: dict[float, list[str]] = {}
        parked: dict[tuple[str, float], list[Parked]] = {}
        waits: dict[str, float] = {}
        for item in received:
            message, meta = item[0], item[1]
            if not meta.limits:
                kept.append(item)
                continue
            handle = message["ReceiptHandle"]
            vt = meta.visibility_timeout or default_vt
            over = admission.admit(level_token(info.level, handle), meta.limits, vt, waits)
            if over is None:
                kept.append(item)
                continue
            wait, key = over
            back.setdefault(wait, []).append(handle)
            if key is not None:
                parked.setdefault((key, wait), []).append((info.name, info.level, handle))
        for wait, handles in back.items():
            self.sqs.visibility(info.url, handles, wait)
        for (key, wait), entries in parked.items():
            admission.park(key, entries, wait)
        return kept
