"""What every part of the SQS backend stands on: the boto3 client, the batch calls by
receipt handle, sends in batches, and the move (send, then delete) that re-sends,
dead-letters and redrives are made of, and the lock store's parts. `SqsBackend`
(backend.py) is this plus its producing, receiving, settling, flow, dead-letter and
operating parts, each a module of its own.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from tasuki.backends.base import Backend, Capabilities, LockStore
from tasuki.backends.sqs.codec import Meta, attributes, attributes_size
from tasuki.backends.sqs.levels import Levels
from tasuki.backends.sqs.limits import Admission
from tasuki.backends.sqs.options import (
    RECORDS,
    SQS_BATCH,
    SQS_MAX_VISIBILITY,
    SQS_MAX_WAIT,
    SqsOptions,
)
from tasuki.backends.sqs.queues import DEFAULT_MAX_SIZE, QueueInfo, Queues, unreachable
from tasuki.core.flowrecords import FlowRecords, error_json
from tasuki.core.locks import IdFinish, LeaseRecords, ResultPut
from tasuki.core.message import GROUP_HEADER, JOB_HEADER, ErrorInfo
from tasuki.core.records import CANCELLED_WINDOW

log = logging.getLogger("tasuki.sqs")

# A batch call may carry at most this many bytes of messages in all (SQS quota).
BATCH_BYTES = 262_144
# Visibility of a dead letter while the DLQ is browsed (it is made visible again after).
BROWSE_VISIBILITY = 30
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


class SqsBase(Backend):
    """The state and plumbing the parts share (never used alone)."""

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
        self._levels = Levels(self._queues.levels)
        # With `locks=`: its lock store (unique claims) and the lease and id records
        # SQS cannot keep, in that store (fencing, the id window).
        self._lock_backend: Backend | None = None
        self._locks: LockStore | None = None
        self._records: LeaseRecords | None = None
        if options.locks:
            from tasuki.backends.urls import backend_from_url

            self._lock_backend = backend_from_url(options.locks)
            self._locks = self._lock_backend.locks
            self._records = self._locks.lease_records(f"tasuki-sqs:{options.prefix}", RECORDS)
        kept = self._records is not None
        # Limits are admitted in the lock store after the receive (limits.py).
        self._admission = (
            Admission(self._locks, f"tasuki-sqs:{options.prefix}")
            if self._locks is not None
            else None
        )
        # Cancel and progress need lease records that keep them (SQLite's, Redis's).
        controls = self._records is not None and self._records.controls
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
            # No per-message history, settled or reliability counts: SQS keeps none,
            # and a lock-store record per settle would double the requests per message.
            inspection=False,
            settled_counts=False,
            reliability_counts=False,
            cancel=controls,
            progress=controls,
            results=controls,
            # Flow records and barriers in the lock store (SQLite's; Redis's, one server).
            workflows=self._records is not None and self._records.flows,
            # One SQS queue per level in use (levels.py).
            priorities=True,
            rate_limits=kept,
            concurrency_limits=kept,
        )
        self._held: dict[str, _Held] = {}
        self._held_mutex = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._receivers: ThreadPoolExecutor | None = None
        self._mutex_pool = threading.Lock()

    # -- plumbing --------------------------------------------------------------------
    def _info(self, queue: str, level: int = 0) -> QueueInfo:
        """The SQS queue of `queue`'s priority `level`, created on first use."""
        info = self._queues.get(queue, level=level)
        assert info is not None
        return info

    def _call(self, name: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._client, name)(**kwargs)
        except Exception as exc:
            down = unreachable(exc, self.url)
            if down is not None:
                raise down from exc
            raise

    def _receive_now(self, url: str) -> list[dict[str, Any]]:
        """One ReceiveMessage that neither waits nor holds long (BROWSE_VISIBILITY): how
        dead letters are browsed and visible messages purged."""
        got: list[dict[str, Any]] = self._call(
            "receive_message",
            QueueUrl=url,
            MaxNumberOfMessages=SQS_BATCH,
            VisibilityTimeout=BROWSE_VISIBILITY,
            WaitTimeSeconds=0,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
        return got

    def _flow_store(self) -> FlowRecords:
        """The lock store's flow records, which producing, settling and flows share."""
        records: Any = self._records
        if records is None or not records.flows:
            raise self.refusal(
                "workflows",
                "run workflows",
                "give it a lock store: locks=sqlite:///... or locks=redis://... on one Redis"
                " server (on a Redis Cluster a step's lease record and its flow's records"
                " live in different slots, which no one script can settle together)",
            )
        store: FlowRecords = records
        return store

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

    def _free_limits(self, tokens: Sequence[str], lapsed: bool = False) -> None:
        """Leases ended (`lapsed`: their keeper came too late): their concurrency slots go,
        and one message put back per slot freed is made visible at once (limits.py)."""
        if self._admission is None or not tokens:
            return
        by_queue: dict[tuple[str, int], list[str]] = {}
        for queue, level, handle in self._admission.free(tokens, lapsed):
            by_queue.setdefault((queue, level), []).append(handle)
        for (queue, level), handles in by_queue.items():
            self._visibility(self._info(queue, level).url, handles, 0)

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

    def _dead_letter_moves(self, info: QueueInfo, moves: list[_Move]) -> list[bool]:
        done = self._move(info, info.url, info.dead_url, moves)
        self._dead_lettered([(info.name, m.meta) for m, ok in zip(moves, done, strict=True) if ok])
        return done

    def _cancelled_gone(self, queue: str, gone: Sequence[tuple[str, Meta | None]]) -> None:
        """Cancelled messages (id, meta where known) deleted from SQS: their ids stay
        known for their window (at least CANCELLED_WINDOW), their uniqueness locks go."""
        if self._records is None or self._locks is None or not gone:
            return
        self._records.finish_ids(
            [
                IdFinish(queue, id, "", max(meta.keep_id if meta else 0.0, CANCELLED_WINDOW))
                for id, meta in gone
            ]
        )
        for id, meta in gone:
            if meta is not None and meta.unique_key is not None:
                self._locks.release(meta.unique_key, id)

    def _dead_lettered(
        self, gone: Sequence[tuple[str, Meta]], finished: Sequence[IdFinish] = ()
    ) -> None:
        """Messages now in a dead-letter queue: their lease records go (a redrive sends a
        new copy), their ids are finished (still known while SQS keeps the dead letter:
        nothing to cancel), their results fail, and the uniqueness locks they hold go;
        with the ids `finished` by the caller, in the same call. The result is written
        once the dead letter is there, so a waiter told "failed" finds it; only this
        message's receiver can move it, under its lease."""
        if self._records is None or self._locks is None or not (gone or finished):
            return
        self._records.finish_ids(
            [*finished, *(IdFinish(queue, meta.id, "", RECORDS.id) for queue, meta in gone)]
        )
        if not gone:
            return
        failed = [
            ResultPut(queue, meta.id, "failed", error_json(meta.error, meta.reason))
            for queue, meta in gone
            if meta.keep_result > 0
        ]
        if failed and self._records.controls:
            self._records.put_results(failed)
        self._records.forget([(queue, meta.id) for queue, meta in gone])
        for _, meta in gone:
            if meta.unique_key is not None:
                self._locks.release(meta.unique_key, meta.id)
