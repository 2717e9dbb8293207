"""What every part of the SQS backend stands on (`Plumbing`): the boto3 client, the
batch calls by receipt handle, sends in batches, and the move (send, then delete) that
re-sends, dead-letters and redrives are made of; the `locks=` store, its records and
what a message's end changes there. `SqsBackend` (backend.py) hands one to each of its
parts: producing, leasing, settling, flows, dead letters and operating.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from tasuki.backends.base import Backend, Capabilities, Envelope, LockStore
from tasuki.backends.sqs.codec import Meta, attributes, attributes_size, decode_body
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
from tasuki.backends.sqs.records import (
    LeaseRecords,
    Listing,
    StepRecords,
    listing_in,
    records_for,
    steps_in,
)
from tasuki.backends.sqs.records.base import FlowRecords, IdFinish, ResultPut
from tasuki.backends.sqs.records.console import StoreConsole, console_for
from tasuki.backends.sqs.records.listing import ListEntry, headers_json, listed_body
from tasuki.core.flowrecords import error_json
from tasuki.core.message import GROUP_HEADER, JOB_HEADER, ErrorInfo
from tasuki.core.records import CANCELLED_WINDOW

log = logging.getLogger("tasuki.sqs")

# How one part sends the messages that a sender (a workflow step, a flow's start)
# enqueues, each id claimed for that sender: `Producing.produce`, handed to flows.py, and
# flows.py's `send_steps`, handed to settling.py, so each part imports only this module.
SendSteps = Callable[[Sequence[Envelope], str], object]

# A batch call may carry at most this many bytes of messages in all (SQS quota).
BATCH_BYTES = 262_144
# Visibility of a dead letter while the DLQ is browsed (it is made visible again after).
BROWSE_VISIBILITY = 30
# Errors of a whole batch call that settle none of its entries (the others are raised).
_REFUSED_BATCH = {"InvalidParameterValue", "ReceiptHandleIsInvalid", "MessageNotInflight"}


# A dead letter's note (`note_dead`) keeps this much of its traceback.
TRACEBACK_KEPT = 4000


def whole_seconds(value: float) -> int:
    """SQS counts delays and visibility timeouts in whole seconds: round up."""
    return max(0, min(int(SQS_MAX_VISIBILITY), math.ceil(value - 1e-9)))


def _chunks(items: Sequence[Any], size: int = SQS_BATCH) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def error_code(error: Exception) -> str:
    return str(getattr(error, "response", {}).get("Error", {}).get("Code", ""))


@dataclass(slots=True)
class Held:
    """A message this process leased: what settling it needs beyond the receipt."""

    info: QueueInfo
    message: dict[str, Any]
    meta: Meta
    others: dict[str, Any]
    attempt: int
    fence: int
    deadline: float


@dataclass(slots=True)
class Move:
    """Re-send `message` (with `meta`) to `url`, then delete the old copy from `source`."""

    message: dict[str, Any]
    meta: Meta
    others: dict[str, Any]
    delay: float = 0.0


class Plumbing:
    """What the parts of `SqsBackend` share: the client, the queues and their levels, the
    `locks=` store with the records SQS keeps there and the limits admitted in it, and
    the leases this process holds. `refusal(capability, what, advice)` is the backend's
    (`Backend.refusal`), so a part refuses what SQS lacks in the one wording."""

    def __init__(self, options: SqsOptions, refusal: Callable[[str, str, str], Exception]) -> None:
        import boto3
        from botocore.config import Config

        self.url = options.url
        self.options = options
        self.refusal = refusal
        config = Config(
            retries={"max_attempts": 5, "mode": "standard"},
            max_pool_connections=32,
            connect_timeout=5,
            read_timeout=SQS_MAX_WAIT + 10,
        )
        self.client: Any = boto3.session.Session().client(
            "sqs", region_name=options.region, endpoint_url=options.endpoint_url, config=config
        )
        self.queues = Queues(self.client, options)
        self.levels = Levels(self.queues.levels)
        # With `locks=`: its lock store (unique claims) and the lease and id records
        # SQS cannot keep, in that store (fencing, the id window).
        self.lock_backend: Backend | None = None
        self.locks: LockStore | None = None
        self.records: LeaseRecords | None = None
        self.steps: StepRecords | None = None  # durable steps (durable.py)
        # The console's listings of messages in flight and dead (records/listing.py).
        self.listing: Listing | None = None
        # The console's records there (pauses, workers, job tallies), where it keeps them.
        self.console: StoreConsole | None = None
        if options.locks:
            from tasuki.backends.urls import backend_from_url

            self.lock_backend = backend_from_url(options.locks)
            self.locks = self.lock_backend.locks
            self.records = records_for(self.lock_backend, f"tasuki-sqs:{options.prefix}", RECORDS)
            self.steps = steps_in(self.records)
            self.listing = listing_in(self.records)
            self.console = console_for(self.lock_backend, f"tasuki-sqs:{options.prefix}")
        # Limits are admitted in the lock store after the receive (limits.py).
        self.admission = (
            Admission(self.locks, f"tasuki-sqs:{options.prefix}")
            if self.locks is not None
            else None
        )
        self.held: dict[str, Held] = {}
        self.held_mutex = threading.Lock()

    def capabilities(self) -> Capabilities:
        """What SQS can do with the `locks=` store it has (or without one)."""
        kept = self.records is not None
        # Cancel and progress need lease records that keep them (SQLite's, Redis's).
        controls = self.records is not None and self.records.controls
        console = self.console is not None
        return Capabilities(
            max_message_size=DEFAULT_MAX_SIZE,
            max_delay=self.options.max_delay,
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
            workflows=self.records is not None and self.records.flows,
            # One SQS queue per level in use (levels.py).
            priorities=True,
            rate_limits=kept,
            concurrency_limits=kept,
            # Step records, signals and waits in the lock store (SQLite's, Redis's).
            durable_steps=self.steps is not None,
            # The console's records in the lock store (records/console.py); waiting
            # messages cannot be listed without receiving them (docs/backends/sqs.md).
            pause=console,
            worker_registry=console,
            job_stats=console,
            # In flight and dead from the listings there (records/listing.py).
            browsing=self.listing is not None,
            browse_waiting=False,
        )

    # -- plumbing --------------------------------------------------------------------
    def info(self, queue: str, level: int = 0) -> QueueInfo:
        """The SQS queue of `queue`'s priority `level`, created on first use."""
        info = self.queues.get(queue, level=level)
        assert info is not None
        return info

    def call(self, name: str, **kwargs: Any) -> Any:
        try:
            return getattr(self.client, name)(**kwargs)
        except Exception as exc:
            down = unreachable(exc, self.url)
            if down is not None:
                raise down from exc
            raise

    def receive_now(self, url: str) -> list[dict[str, Any]]:
        """One ReceiveMessage that neither waits nor holds long (BROWSE_VISIBILITY): how
        dead letters are browsed and visible messages purged."""
        got: list[dict[str, Any]] = self.call(
            "receive_message",
            QueueUrl=url,
            MaxNumberOfMessages=SQS_BATCH,
            VisibilityTimeout=BROWSE_VISIBILITY,
            WaitTimeSeconds=0,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
        return got

    def flow_store(self) -> FlowRecords:
        """The lock store's flow records, which producing, settling and flows share."""
        records: Any = self.records
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

    def hold(self, token: str, held: Held) -> None:
        with self.held_mutex:
            if len(self.held) > 10_000:
                now = time.monotonic()
                for stale in [t for t, h in self.held.items() if h.deadline < now]:
                    del self.held[stale]
            self.held[token] = held

    def take_held(self, token: str) -> Held | None:
        with self.held_mutex:
            return self.held.pop(token, None)

    def entry(self, info: QueueInfo, n: int, move: Move) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "Id": str(n),
            "MessageBody": move.message["Body"],
            "MessageAttributes": attributes(move.meta, move.others),
        }
        self.place(info, entry, move.meta, move.delay, move.message)
        return entry

    def place(
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
            entry["DelaySeconds"] = whole_seconds(min(delay, self.options.max_delay))

    def send(self, url: str, entries: list[dict[str, Any]]) -> list[str]:
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
        reply = self.call("send_message_batch", QueueUrl=url, Entries=batch)
        failures = reply.get("Failed") or []
        for failure in failures:
            log.error(
                "sqs: send of entry %s failed: %s %s",
                failure.get("Id"),
                failure.get("Code"),
                failure.get("Message"),
            )
        return [str(f["Id"]) for f in failures]

    def delete(self, url: str, handles: Sequence[str]) -> list[bool]:
        return self._by_handle("delete_message_batch", "delete", url, handles)

    def visibility(self, url: str, handles: Sequence[str], seconds: float) -> list[bool]:
        return self._by_handle(
            "change_message_visibility_batch",
            "visibility change",
            url,
            handles,
            VisibilityTimeout=whole_seconds(seconds),
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
                reply = self.call(call, QueueUrl=url, Entries=entries)
            except Exception as exc:
                if error_code(exc) not in _REFUSED_BATCH:
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

    def move(self, info: QueueInfo, source: str, target: str, moves: list[Move]) -> list[bool]:
        """Send each message to `target`, then delete it from `source`: never lost."""
        if not moves:
            return []
        entries = [self.entry(info, n, move) for n, move in enumerate(moves)]
        failed = set(self.send(target, entries))
        sent = [n for n in range(len(moves)) if str(n) not in failed]
        deleted = self.delete(source, [moves[n].message["ReceiptHandle"] for n in sent])
        ok = dict(zip(sent, deleted, strict=True))
        return [ok.get(n, False) for n in range(len(moves))]

    def free_limits(self, tokens: Sequence[str], lapsed: bool = False) -> None:
        """Leases ended (`lapsed`: their keeper came too late): their concurrency slots go,
        and one message put back per slot freed is made visible at once (limits.py)."""
        if self.admission is None or not tokens:
            return
        by_queue: dict[tuple[str, int], list[str]] = {}
        for queue, level, handle in self.admission.free(tokens, lapsed):
            by_queue.setdefault((queue, level), []).append(handle)
        for (queue, level), handles in by_queue.items():
            self.visibility(self.info(queue, level).url, handles, 0)

    def dead_meta(
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

    def dead_letter_moves(self, info: QueueInfo, moves: list[Move]) -> list[bool]:
        done = self.move(info, info.url, info.dead_url, moves)
        gone = [m for m, ok in zip(moves, done, strict=True) if ok]
        self.dead_lettered([(info.name, m.meta) for m in gone])
        self.unlist_flying([(info.name, m.meta.id, "") for m in gone])  # its lapsed lease
        self.list_dead(info.name, gone)
        return done

    def list_flying(self, entries: Sequence[ListEntry]) -> None:
        """Messages just leased: listed in flight (records/listing.py)."""
        if self.listing is not None and entries:
            self.listing.put("in_flight", entries)

    def unlist_flying(self, leases: Sequence[tuple[str, str, str]]) -> None:
        """Leases (queue, id, token) settled or cancelled ('' for any): no longer listed
        in flight."""
        if self.listing is not None and leases:
            self.listing.drop("in_flight", leases)

    def list_dead(self, queue: str, moves: Sequence[Move]) -> None:
        """Messages this process moved to the dead-letter queue: listed dead, with what
        `inspect` tells of them (its note, `note_dead`)."""
        if self.listing is None or not moves:
            return
        entries = []
        for move in moves:
            meta = move.meta
            entries.append(
                ListEntry(
                    queue,
                    meta.id,
                    meta.died_at,
                    meta.headers.get(JOB_HEADER, ""),
                    "",
                    listed_body(decode_body(move.message["Body"], meta.encoding)),
                    headers_json(meta.headers),
                    self.dead_note_text(meta),
                )
            )
        self.listing.put("dead", entries)

    def unlist_dead(self, queue: str, ids: Sequence[str]) -> None:
        """Dead letters redriven or purged: no longer listed dead."""
        if self.listing is not None and ids:
            self.listing.drop("dead", [(queue, id, "") for id in ids])

    def dead_note(self, queue: str, id: str) -> str:
        """The lock whose owner tells `inspect` of a dead letter (inspecting.py)."""
        return f"tasuki-sqs:{self.options.prefix}dead-of:{queue}:{id}"

    @staticmethod
    def dead_note_text(meta: Meta) -> str:
        """What a dead letter's note keeps (JSON; inspecting.py reads it)."""
        error = meta.error
        return orjson.dumps(
            {
                "reason": meta.reason,
                "error": None
                if error is None
                else [error.type, error.message, error.traceback[-TRACEBACK_KEPT:]],
                "at": meta.died_at,
                "attempt": meta.died_attempt,
                "max": meta.max_attempts,
                "fence": meta.fence_before,
                "t": meta.enqueued_at,
            }
        ).decode()

    def note_dead(self, gone: Sequence[tuple[str, Meta]]) -> None:
        """Dead-lettered: what `inspect` tells of each (kept as long as its id)."""
        locks = self.locks
        if locks is None:
            return
        for queue, meta in gone:
            note = self.dead_note_text(meta)
            key = self.dead_note(queue, meta.id)
            if not locks.acquire(key, note, RECORDS.id):
                holder = locks.holder(key)
                if holder is not None:
                    locks.swap(key, holder.owner, note, RECORDS.id)

    def drop_notes(self, queue: str, ids: list[str]) -> None:
        """Redriven or purged: no longer dead."""
        locks = self.locks
        if locks is None:
            return
        for id in ids:
            key = self.dead_note(queue, id)
            holder = locks.holder(key)
            if holder is not None:
                locks.release(key, holder.owner)

    def unique_note(self, queue: str, id: str) -> str:
        """The lock whose owner is the unique key message `id` claimed (`note_unique`):
        a cancel, which never sees the message's body, reads its key there."""
        return f"tasuki-sqs:{self.options.prefix}unique-of:{queue}:{id}"

    def note_unique(self, queue: str, id: str, key: str, ttl: float) -> None:
        """Note the unique key a sent message holds, for as long as its claim lives."""
        if self.locks is not None and self.records is not None and self.records.controls:
            note = self.unique_note(queue, id)
            if not self.locks.acquire(note, key, ttl):  # the same id sent again
                holder = self.locks.holder(note)
                if holder is not None:
                    self.locks.swap(note, holder.owner, key, ttl)

    def free_unique(self, queue: str, id: str) -> None:
        """A cancelled message's unique key goes with it (where the message still holds
        it: a key taken since by another message is not freed)."""
        if self.locks is None:
            return
        note = self.unique_note(queue, id)
        holder = self.locks.holder(note)
        if holder is not None:
            self.locks.release(holder.owner, id)
            self.locks.release(note, holder.owner)

    def cancelled_gone(self, queue: str, gone: Sequence[tuple[str, Meta | None]]) -> None:
        """Cancelled messages (id, meta where known) deleted from SQS: their ids stay
        known for their window (at least CANCELLED_WINDOW), their uniqueness locks go."""
        if self.records is None or self.locks is None or not gone:
            return
        self.records.finish_ids(
            [
                IdFinish(queue, id, "", max(meta.keep_id if meta else 0.0, CANCELLED_WINDOW))
                for id, meta in gone
            ]
        )
        for id, meta in gone:
            if meta is not None and meta.unique_key is not None:
                self.locks.release(meta.unique_key, id)

    def dead_lettered(
        self, gone: Sequence[tuple[str, Meta]], finished: Sequence[IdFinish] = ()
    ) -> None:
        """Messages now in a dead-letter queue: their lease records go (a redrive sends a
        new copy), their ids are finished (still known while SQS keeps the dead letter:
        nothing to cancel), their results fail, and the uniqueness locks they hold go;
        with the ids `finished` by the caller, in the same call. The result is written
        once the dead letter is there, so a waiter told "failed" finds it; only this
        message's receiver can move it, under its lease."""
        if self.records is None or self.locks is None or not (gone or finished):
            return
        self.records.finish_ids(
            [*finished, *(IdFinish(queue, meta.id, "", RECORDS.id) for queue, meta in gone)]
        )
        if not gone:
            return
        failed = [
            ResultPut(queue, meta.id, "failed", error_json(meta.error, meta.reason))
            for queue, meta in gone
            if meta.keep_result > 0
        ]
        if failed and self.records.controls:
            self.records.put_results(failed)
        self.records.forget([(queue, meta.id) for queue, meta in gone])
        if self.records.controls:
            self.note_dead(gone)
        for _, meta in gone:
            if meta.unique_key is not None:
                self.locks.release(meta.unique_key, meta.id)
