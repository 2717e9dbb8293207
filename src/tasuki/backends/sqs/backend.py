"""`sqs://` — Amazon SQS (or any server that speaks its API), on boto3.

The mapping of DESIGN §2 onto SQS, and what SQS cannot promise, is in
docs/backends/sqs.md.
In short: a lease is a ReceiveMessage (10 per call, long-polled when the caller waits),
its token the receipt handle; the attempt is SQS's ApproximateReceiveCount plus the
attempts of earlier copies of the message, carried in the `tasuki` attribute, so a
release without penalty (which re-sends the message and deletes the old copy) gives its
attempt back. Delays beyond `max_delay` are the runtime's: the producer and, for a long
release, this backend's re-send stamp the `tasuki-not-before` header, and the worker's
receiver hands an early copy back without penalty for the next hop. tasuki dead-letters a
message itself (send to the dead-letter queue with reason and error, then delete); the
queue's redrive policy is only a backstop. With `locks=`, lease records refuse stale
receipt handles and the id window makes enqueue idempotent (see fencing.py).

Every settling call is batched by 10 (SQS's batch size). A message is always sent to
its new place before it is deleted from the old one, so a crash in between leaves a
duplicate, never a loss.

Long (some 970 lines) because every lifecycle operation here is several SQS calls plus
the bookkeeping SQS lacks (attempt compensation, hops, dead-letter moves); the pieces
that stand alone are split out already (codec, queues, fencing, options). Splitting the
lifecycle itself is the next step.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, NoReturn

from tasuki.backends.base import (
    DEFAULT_VISIBILITY_TIMEOUT,
    Backend,
    Bury,
    Capabilities,
    Delivery,
    Enqueued,
    Envelope,
    LockHolder,
    LockStore,
    QueueStats,
    Receipt,
    Release,
    refuse_connection,
)
from tasuki.backends.sqs.codec import Meta, attributes, attributes_size, encode_body
from tasuki.backends.sqs.codec import decode_body as _decode_body
from tasuki.backends.sqs.codec import received_meta as _received_meta
from tasuki.backends.sqs.fencing import Fences, fences_for
from tasuki.backends.sqs.options import (
    SQS_BATCH,
    SQS_MAX_VISIBILITY,
    SQS_MAX_WAIT,
    SqsOptions,
)
from tasuki.backends.sqs.queues import DEFAULT_MAX_SIZE, QueueInfo, Queues, tasuki_name
from tasuki.core.message import (
    GROUP_HEADER,
    JOB_HEADER,
    NOT_BEFORE_HEADER,
    DeadLetter,
    ErrorInfo,
    new_id,
)
from tasuki.errors import (
    BackendError,
    BackendUnavailable,
    ConfigurationError,
    InvalidArgument,
    MessageTooLarge,
)

log = logging.getLogger("tasuki.sqs")

# A batch call may carry at most this many bytes of messages in all (SQS quota).
BATCH_BYTES = 262_144
# Visibility of a dead letter while the DLQ is browsed (it is made visible again after).
BROWSE_VISIBILITY = 30
# ReceiveMessage calls one lease keeps in flight at once when a backlog fills them.
RECEIVES_IN_FLIGHT = 4
# Errors of a whole batch call that settle none of its entries (the others are raised).
_REFUSED_BATCH = {"InvalidParameterValue", "ReceiptHandleIsInvalid", "MessageNotInflight"}


def _seconds(value: float) -> int:
    """SQS counts delays and visibility timeouts in whole seconds: round up."""
    return max(0, min(int(SQS_MAX_VISIBILITY), math.ceil(value - 1e-9)))


def _chunks(items: Sequence[Any], size: int = SQS_BATCH) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _code(error: Exception) -> str:
    return str(getattr(error, "response", {}).get("Error", {}).get("Code", ""))


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


@dataclass(slots=True)
class _Held:
    """A message this process leased: what settling it needs beyond the receipt."""

    info: QueueInfo
    message: dict[str, Any]
    meta: Meta
    others: dict[str, Any]
    attempt: int
    fence: int
    deadline: float


@dataclass(slots=True)
class _Move:
    """Re-send `message` (with `meta`) to `url`, then delete the old copy from `source`."""

    message: dict[str, Any]
    meta: Meta
    others: dict[str, Any]
    delay: float = 0.0


class SqsBackend(Backend):
    """The Backend interface on SQS; `from_url` builds one."""

    def __init__(self, options: SqsOptions) -> None:
        import boto3
        from botocore.config import Config

        self.url = options.url
        self._options = options
        config = Config(
            retries={"max_attempts": 5, "mode": "standard"},
            max_pool_connections=32,
            connect_timeout=5,
            read_timeout=SQS_MAX_WAIT + 10,
        )
        self._client: Any = boto3.session.Session().client(
            "sqs", region_name=options.region, endpoint_url=options.endpoint_url, config=config
        )
        self._queues = Queues(self._client, options)
        self._lock_backend: Backend | None = None
        self._fences: Fences | None = None
        if options.locks:
            from tasuki.backends.urls import backend_from_url

            self._lock_backend = backend_from_url(options.locks)
            self._fences = fences_for(self._lock_backend, self._lock_backend.locks, options.prefix)
        kept = self._fences is not None
        self.capabilities = Capabilities(
            max_message_size=DEFAULT_MAX_SIZE,
            max_delay=options.max_delay,
            max_visibility=SQS_MAX_VISIBILITY,
            exact_attempts=False,
            refundable_release=True,
            id_window=kept,
            atomic_unique=False,
            dead_letter_browsing=False,
            native_locks=kept,
            exact_stats=False,
            fencing=kept,
            timer_resolution=1.0,
            # No per-message history or settled counts: SQS keeps neither, and a
            # lock-store record per settle would double the requests per message.
            inspection=False,
            settled_counts=False,
        )
        self._held: dict[str, _Held] = {}
        self._held_mutex = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._receivers: ThreadPoolExecutor | None = None
        self._mutex_pool = threading.Lock()

    # -- plumbing --------------------------------------------------------------------
    def _info(self, queue: str) -> QueueInfo:
        info = self._queues.get(queue)
        assert info is not None
        return info

    def _call(self, name: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._client, name)(**kwargs)
        except Exception as exc:
            if type(exc).__name__ in {"EndpointConnectionError", "ConnectionClosedError"}:
                raise BackendUnavailable(f"SQS at {self.url} is unreachable: {exc}") from exc
            raise

    def _hold(self, token: str, held: _Held) -> None:
        with self._held_mutex:
            if len(self._held) > 10_000:
                now = time.monotonic()
                for stale in [t for t, h in self._held.items() if h.deadline < now]:
                    del self._held[stale]
            self._held[token] = held

    def _take_held(self, token: str) -> _Held | None:
        with self._held_mutex:
            return self._held.pop(token, None)

    def _entry(self, info: QueueInfo, n: int, move: _Move) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "Id": str(n),
            "MessageBody": move.message["Body"],
            "MessageAttributes": attributes(move.meta, move.others),
        }
        self._place(info, entry, move.meta, move.delay, move.message)
        return entry

    def _place(
        self,
        info: QueueInfo,
        entry: dict[str, Any],
        meta: Meta,
        delay: float,
        message: dict[str, Any] | None = None,
    ) -> None:
        if info.fifo:
            group = (message or {}).get("Attributes", {}).get("MessageGroupId") or (
                meta.headers.get(GROUP_HEADER) or meta.headers.get(JOB_HEADER) or "default"
            )
            entry["MessageGroupId"] = group
            entry["MessageDeduplicationId"] = f"{meta.id}.{meta.fence_before}"
        elif delay > 0:
            entry["DelaySeconds"] = _seconds(min(delay, self._options.max_delay))

    def _send(self, url: str, entries: list[dict[str, Any]]) -> list[str]:
        """SendMessageBatch in batches of 10 (and BATCH_BYTES); the Ids that failed."""
        failed: list[str] = []
        batch: list[dict[str, Any]] = []
        size = 0
        for entry in entries:
            weight = len(entry["MessageBody"].encode()) + attributes_size(
                entry["MessageAttributes"]
            )
            if batch and (len(batch) == SQS_BATCH or size + weight > BATCH_BYTES):
                failed.extend(self._send_one_batch(url, batch))
                batch, size = [], 0
            batch.append(entry)
            size += weight
        if batch:
            failed.extend(self._send_one_batch(url, batch))
        return failed

    def _send_one_batch(self, url: str, batch: list[dict[str, Any]]) -> list[str]:
        reply = self._call("send_message_batch", QueueUrl=url, Entries=batch)
        failures = reply.get("Failed") or []
        for failure in failures:
            log.error(
                "sqs: send of entry %s failed: %s %s",
                failure.get("Id"),
                failure.get("Code"),
                failure.get("Message"),
            )
        return [str(f["Id"]) for f in failures]

    def _delete(self, url: str, handles: Sequence[str]) -> list[bool]:
        return self._by_handle("delete_message_batch", "delete", url, handles)

    def _visibility(self, url: str, handles: Sequence[str], seconds: float) -> list[bool]:
        return self._by_handle(
            "change_message_visibility_batch",
            "visibility change",
            url,
            handles,
            VisibilityTimeout=_seconds(seconds),
        )

    def _by_handle(
        self, call: str, what: str, url: str, handles: Sequence[str], **fields: Any
    ) -> list[bool]:
        """One batch call per 10 receipt handles (`fields` added to every entry); per
        handle, whether SQS took it. A handle SQS refuses is False, never an error."""
        results: list[bool] = []
        for chunk in _chunks(handles):
            entries = [{"Id": str(n), "ReceiptHandle": h, **fields} for n, h in enumerate(chunk)]
            try:
                reply = self._call(call, QueueUrl=url, Entries=entries)
            except Exception as exc:
                if _code(exc) not in _REFUSED_BATCH:
                    raise
                log.warning("sqs: %s refused: %s", what, exc)
                results.extend([False] * len(chunk))
                continue
            failures = reply.get("Failed") or []
            for failure in failures:
                log.warning(
                    "sqs: %s refused: %s %s", what, failure.get("Code"), failure.get("Message")
                )
            failed = {f["Id"] for f in failures}
            results.extend(str(n) not in failed for n in range(len(chunk)))
        return results

    def _move(self, info: QueueInfo, source: str, target: str, moves: list[_Move]) -> list[bool]:
        """Send each message to `target`, then delete it from `source`: never lost."""
        if not moves:
            return []
        entries = [self._entry(info, n, move) for n, move in enumerate(moves)]
        failed = set(self._send(target, entries))
        sent = [n for n in range(len(moves)) if str(n) not in failed]
        deleted = self._delete(source, [moves[n].message["ReceiptHandle"] for n in sent])
        ok = dict(zip(sent, deleted, strict=True))
        return [ok.get(n, False) for n in range(len(moves))]

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
        fences = self._fences
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
        owners = {n: new_id() if fences is not None else "" for n in positions}
        known = (
            fences.claim_ids([(info.name, envelopes[n].id, owners[n]) for n in positions])
            if fences is not None
            else [True] * len(positions)
        )
        entries: list[dict[str, Any]] = []
        claimed: dict[str, tuple[int, Meta]] = {}
        try:
            for n, fresh in zip(positions, known, strict=True):
                env = envelopes[n]
                meta = Meta(
                    id=env.id,
                    headers=dict(env.headers),
                    max_attempts=env.max_attempts,
                    visibility_timeout=env.visibility_timeout,
                    keep_id=env.keep_id,
                    enqueued_at=now,
                    id_owner=owners[n],
                )
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
        if self._fences is None:
            raise ConfigurationError(
                "unique jobs on sqs:// need a lock store: add locks=sqlite:///... or"
                " locks=redis://... to the URL"
            )
        locks = self._fences.locks
        for _ in range(3):
            if locks.acquire(env.unique.key, env.id, env.unique.ttl):
                return None
            holder = locks.holder(env.unique.key)
            if holder is not None:
                return Enqueued(holder.owner, "conflict")
        return Enqueued(env.id, "conflict")

    def _unclaim(self, info: QueueInfo, meta: Meta) -> None:
        if self._fences is None:
            return
        if meta.id_owner:
            self._fences.finish_ids(info.name, [(meta.id, meta.id_owner, 0.0)])
        if meta.unique_key is not None:
            self._fences.locks.release(meta.unique_key, meta.id)

    # -- consuming -------------------------------------------------------------------
    def lease(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        wait: float = 0.0,
    ) -> list[Delivery]:
        """Up to `max_messages`, 10 per ReceiveMessage. The first receive is one call
        (a long poll when the caller waits), so an idle queue costs one request; once a
        reply comes back full (a backlog), the rest of the room is asked for by several
        receives in flight at once (at most RECEIVES_IN_FLIGHT)."""
        if max_messages <= 0:
            return []
        info = self._info(queue)
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
                got = self._receive(info, asked, visibility_timeout, poll)
                full = len(got) == asked
            admitted = self._admit(info, got, visibility_timeout)
            leased.extend(admitted)
            if len(leased) >= max_messages:
                return leased
            if full or (got and not admitted and not leased):
                continue
            if leased or deadline - time.monotonic() < 0.5:
                return leased

    def _receive(
        self, info: QueueInfo, asked: int, visibility_timeout: float, poll: int = 0
    ) -> list[dict[str, Any]]:
        return list(
            self._call(
                "receive_message",
                QueueUrl=info.url,
                MaxNumberOfMessages=asked,
                VisibilityTimeout=_seconds(visibility_timeout),
                WaitTimeSeconds=poll,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
            ).get("Messages", [])
        )

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
                self._visibility(info.url, handles, 0)
            raise error
        return replies

    def lease_soon(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
    ) -> Callable[[], list[Delivery]]:
        """The receive goes out on a helper thread while the caller runs its jobs."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(2, thread_name_prefix="tasuki-sqs")
        future = self._pool.submit(self.lease, queue, max_messages, visibility_timeout)
        return future.result

    def _admit(
        self, info: QueueInfo, messages: list[dict[str, Any]], default_vt: float
    ) -> list[Delivery]:
        """Deliveries from received messages; exhausted ones are buried."""
        deliveries: list[Delivery] = []
        dead: list[_Move] = []
        own_vt: dict[float, list[str]] = {}
        takes: list[tuple[str, str, str]] = []
        counted: list[int] = []
        fences = self._fences
        for message in messages:
            meta, others = _received_meta(message)
            count = int(message.get("Attributes", {}).get("ApproximateReceiveCount", 1))
            attempt = meta.attempts_before + count
            fence = meta.fence_before + count
            if attempt > meta.max_attempts:
                used = attempt - 1
                if fences is not None and fences.lapsed(info.name, meta.id):
                    reason = f"lease expired {used} times"
                else:
                    reason = f"attempts exhausted ({used} of {meta.max_attempts})"
                dead.append(
                    _Move(message, self._dead_meta(meta, fence, reason, None, used), others)
                )
                continue
            token = message["ReceiptHandle"]
            takes.append((info.name, meta.id, token))
            counted.append(fence)
            vt = meta.visibility_timeout or default_vt
            if meta.visibility_timeout and _seconds(vt) != _seconds(default_vt):
                own_vt.setdefault(vt, []).append(token)
            self._hold(
                token,
                _Held(info, message, meta, others, attempt, fence, time.monotonic() + vt + 60),
            )
            deliveries.append(
                Delivery(
                    queue=info.name,
                    id=meta.id,
                    body=_decode_body(message["Body"], meta.encoding),
                    headers=meta.headers,
                    attempt=attempt,
                    max_attempts=meta.max_attempts,
                    enqueued_at=meta.enqueued_at,
                    token=token,
                    fencing_token=fence,
                    visibility_timeout=vt,
                )
            )
        if fences is not None and takes:
            granted = fences.take(takes, counted, [d.visibility_timeout for d in deliveries])
            kept: list[Delivery] = []
            for given, number in zip(deliveries, granted, strict=True):
                if number is None:
                    # SQS handed out a message another lease still holds: not delivered.
                    log.info("sqs: %s delivered again while leased: not run twice", given.id)
                    self._take_held(given.token)
                    continue
                if number != given.fencing_token:
                    held = self._held.get(given.token)
                    if held is not None:
                        held.fence = number
                kept.append(given._replace(fencing_token=number))
            deliveries = kept
        for vt, tokens in own_vt.items():
            self._visibility(info.url, tokens, vt)
        if dead:
            self._bury_moves(info, dead)
        return deliveries

    def _dead_meta(
        self, meta: Meta, fence: int, reason: str, error: ErrorInfo | None, attempt: int
    ) -> Meta:
        return replace(
            meta,
            fence_before=fence,
            reason=reason,
            error=error,
            died_at=time.time(),
            died_attempt=attempt,
        )

    def _bury_moves(self, info: QueueInfo, moves: list[_Move]) -> list[bool]:
        done = self._move(info, info.url, info.dead_url, moves)
        if self._fences is not None:
            gone = [move.meta for move, ok in zip(moves, done, strict=True) if ok]
            self._fences.forget_leases(info.name, [meta.id for meta in gone])
            for meta in gone:
                if meta.unique_key is not None:
                    self._fences.locks.release(meta.unique_key, meta.id)
        return done

    # -- settling --------------------------------------------------------------------
    def _claim(self, receipts: Sequence[Receipt]) -> list[_Held | bool | None]:
        """Per receipt: its _Held (or True when held elsewhere) if current, else False.

        With a lock store the lease record is compare-and-deleted here, so a stale
        handle is refused before SQS sees it; a receipt repeated in one batch settles once.
        """
        out: list[_Held | bool | None] = []
        seen: set[str] = set()
        first: list[int] = []
        for n, receipt in enumerate(receipts):
            if receipt.token not in seen:
                seen.add(receipt.token)
                first.append(n)
        current = [False] * len(receipts)
        verdicts = (
            self._fences.settle([receipts[n] for n in first])
            if self._fences is not None
            else [True] * len(first)
        )
        for n, ok in zip(first, verdicts, strict=True):
            current[n] = ok
        for n, receipt in enumerate(receipts):
            if not current[n]:
                out.append(False)
                continue
            held = self._take_held(receipt.token)
            out.append(held if held is not None else True)
        return out

    def ack(self, receipts: Sequence[Receipt]) -> list[bool]:
        claims = self._claim(receipts)
        results = [False] * len(receipts)
        by_queue: dict[str, list[int]] = {}
        for n, claim in enumerate(claims):
            if claim is not False:
                by_queue.setdefault(receipts[n].queue, []).append(n)
        for queue, positions in by_queue.items():
            info = self._info(queue)
            done = self._delete(info.url, [receipts[n].token for n in positions])
            finished: list[tuple[str, str, float]] = []
            for n, ok in zip(positions, done, strict=True):
                results[n] = ok
                claim = claims[n]
                if ok and isinstance(claim, _Held):
                    meta = claim.meta
                    finished.append((meta.id, meta.id_owner, meta.keep_id))
                elif ok:
                    finished.append((receipts[n].id, "", 0.0))
            if self._fences is not None:
                self._fences.finish_ids(queue, finished)
        return results

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        results = [False] * len(receipts)
        by_queue: dict[str, list[int]] = {}
        current = (
            self._fences.current(receipts, visibility_timeout)
            if self._fences is not None
            else [True] * len(receipts)
        )
        for n, receipt in enumerate(receipts):
            if current[n]:
                by_queue.setdefault(receipt.queue, []).append(n)
        for queue, positions in by_queue.items():
            info = self._info(queue)
            done = self._visibility(
                info.url, [receipts[n].token for n in positions], visibility_timeout
            )
            for n, ok in zip(positions, done, strict=True):
                results[n] = ok
        deadline = time.monotonic() + visibility_timeout + 60
        with self._held_mutex:
            for n, ok in enumerate(results):
                held = self._held.get(receipts[n].token)
                if ok and held is not None:
                    held.deadline = deadline
        return results

    def release(self, releases: Sequence[Release]) -> list[bool]:
        claims = self._claim([r.receipt for r in releases])
        results = [False] * len(releases)
        now = time.time()
        # (queue) -> positions to re-send / to change visibility, by delay
        resend: dict[str, list[tuple[int, _Move]]] = {}
        hide: dict[tuple[str, float], list[int]] = {}
        for n, (item, claim) in enumerate(zip(releases, claims, strict=True)):
            if claim is False:
                continue
            queue = item.receipt.queue
            long_delay = item.delay > self._options.max_delay and not self._info(queue).fifo
            if isinstance(claim, _Held) and (not item.penalty or long_delay):
                spent = claim.attempt - (0 if item.penalty else 1)
                headers = claim.meta.headers
                if long_delay:  # the first hop; the worker's receiver does the others
                    headers = {**headers, NOT_BEFORE_HEADER: repr(now + item.delay)}
                meta = replace(
                    claim.meta, attempts_before=spent, fence_before=claim.fence, headers=headers
                )
                resend.setdefault(queue, []).append(
                    (n, _Move(claim.message, meta, claim.others, item.delay))
                )
            else:
                if not item.penalty:
                    log.warning(
                        "sqs: message %s released without penalty by a process that did"
                        " not lease it: its attempt is not given back",
                        item.receipt.id,
                    )
                hide.setdefault((queue, min(item.delay, SQS_MAX_VISIBILITY)), []).append(n)
        for queue, moves in resend.items():
            info = self._info(queue)
            done = self._move(info, info.url, info.url, [m for _, m in moves])
            for (n, _), ok in zip(moves, done, strict=True):
                results[n] = ok
        for (queue, delay), positions in hide.items():
            info = self._info(queue)
            done = self._visibility(info.url, [releases[n].receipt.token for n in positions], delay)
            for n, ok in zip(positions, done, strict=True):
                results[n] = ok
        return results

    def bury(self, burials: Sequence[Bury]) -> list[bool]:
        claims = self._claim([b.receipt for b in burials])
        results = [False] * len(burials)
        by_queue: dict[str, list[tuple[int, _Move]]] = {}
        for n, (item, claim) in enumerate(zip(burials, claims, strict=True)):
            if claim is False:
                continue
            if not isinstance(claim, _Held):
                log.error(
                    "sqs: cannot bury message %s: it was leased by another process, and SQS"
                    " hands the body only to the receiver; it returns after its lease",
                    item.receipt.id,
                )
                continue
            meta = self._dead_meta(claim.meta, claim.fence, item.reason, item.error, claim.attempt)
            by_queue.setdefault(item.receipt.queue, []).append(
                (n, _Move(claim.message, meta, claim.others))
            )
        for queue, moves in by_queue.items():
            info = self._info(queue)
            done = self._bury_moves(info, [m for _, m in moves])
            for (n, _), ok in zip(moves, done, strict=True):
                results[n] = ok
        return results

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

    def _browse(self, info: QueueInfo) -> list[dict[str, Any]]:
        """Every dead letter SQS hands out now, each held briefly (see dead_letters)."""
        seen: dict[str, dict[str, Any]] = {}
        while True:
            got = self._call(
                "receive_message",
                QueueUrl=info.dead_url,
                MaxNumberOfMessages=SQS_BATCH,
                VisibilityTimeout=BROWSE_VISIBILITY,
                WaitTimeSeconds=0,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
            ).get("Messages", [])
            if not got:
                return list(seen.values())
            for message in got:
                seen.setdefault(message["MessageId"], message)

    def _letter(self, info: QueueInfo, message: dict[str, Any]) -> DeadLetter:
        meta, _ = _received_meta(message)
        attrs = message.get("Attributes", {})
        if meta.reason:
            reason, attempt, died_at = meta.reason, meta.died_attempt, meta.died_at
        else:
            count = int(attrs.get("ApproximateReceiveCount", 0))
            attempt = meta.attempts_before + count
            reason = (
                f"moved by the SQS redrive policy after {info.max_receive_count} receives"
                " (not by tasuki)"
            )
            died_at = float(attrs.get("SentTimestamp", 0)) / 1000.0
        return DeadLetter(
            id=meta.id,
            queue=info.name,
            body=_decode_body(message["Body"], meta.encoding),
            headers=meta.headers,
            attempt=attempt,
            reason=reason,
            error=meta.error,
            died_at=died_at,
            enqueued_at=meta.enqueued_at,
        )

    def _letters(self, info: QueueInfo) -> list[tuple[DeadLetter, dict[str, Any]]]:
        found = [(self._letter(info, m), m) for m in self._browse(info)]
        found.sort(key=lambda pair: -pair[0].died_at)
        return found

    def _show_again(self, info: QueueInfo, messages: list[dict[str, Any]]) -> None:
        if messages:
            self._visibility(info.dead_url, [m["ReceiptHandle"] for m in messages], 0)

    def dead_letters(self, queue: str, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        """Approximate on SQS: the DLQ is received (each letter hidden for a moment) and
        made visible again; AWS's short polls sample servers, so a page may miss some."""
        info = self._queues.get(queue, create=False)
        if info is None:
            return []
        found = self._letters(info)
        self._show_again(info, [m for _, m in found])
        return [letter for letter, _ in found[offset : offset + limit]]

    def redrive(self, queue: str, ids: Sequence[str] | None = None) -> int:
        info = self._queues.get(queue, create=False)
        if info is None:
            return 0
        wanted = None if ids is None else set(ids)
        moves: list[_Move] = []
        others: list[dict[str, Any]] = []
        for letter, message in self._letters(info):
            if wanted is not None and letter.id not in wanted:
                others.append(message)
                continue
            meta, extra = _received_meta(message)
            count = int(message.get("Attributes", {}).get("ApproximateReceiveCount", 0))
            fresh = replace(
                meta,
                attempts_before=0,
                fence_before=meta.fence_before + count,
                reason="",
                error=None,
                died_at=0.0,
                died_attempt=0,
            )
            moves.append(_Move(message, fresh, extra))
        self._show_again(info, others)
        entries = [self._entry(info, n, move) for n, move in enumerate(moves)]
        failed = set(self._send(info.url, entries))
        sent = [n for n in range(len(moves)) if str(n) not in failed]
        self._delete(info.dead_url, [moves[n].message["ReceiptHandle"] for n in sent])
        return len(sent)

    def purge_dead(self, queue: str) -> int:
        info = self._queues.get(queue, create=False)
        if info is None:
            return 0
        found = self._letters(info)
        done = self._delete(info.dead_url, [m["ReceiptHandle"] for _, m in found])
        if self._fences is not None:
            self._fences.finish_ids(
                queue,
                [
                    (letter.id, _received_meta(message)[0].id_owner, 0.0)
                    for (letter, message), ok in zip(found, done, strict=True)
                    if ok
                ],
            )
        return sum(done)

    def purge(self, queue: str) -> int:
        """Visible messages are received and deleted (their locks and ids freed); what is
        left (in flight, delayed) goes with PurgeQueue, which AWS allows once a minute."""
        info = self._queues.get(queue, create=False)
        if info is None:
            return 0
        before = self.stats(queue)
        total = before.ready + before.in_flight + before.delayed + before.dead
        fences = self._fences
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
            if fences is not None:
                metas = [_received_meta(message)[0] for message in got]
                fences.finish_ids(queue, [(meta.id, meta.id_owner, 0.0) for meta in metas])
                for meta in metas:
                    if meta.unique_key is not None:
                        fences.locks.release(meta.unique_key, meta.id)
        with self._held_mutex:
            mine = [(t, h) for t, h in self._held.items() if h.info.name == queue]
            for token, _ in mine:
                del self._held[token]
        if fences is not None:
            fences.forget_leases(queue, [held.meta.id for _, held in mine])
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
        if self._fences is None:
            return _NO_LOCKS
        return self._fences.locks

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
        if self._fences is not None:
            self._fences.close()
        if self._lock_backend is not None:
            self._lock_backend.close()
        self._client.close()
