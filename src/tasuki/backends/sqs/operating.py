"""Operating SQS: stats and the queue list (from SQS's approximate counts), purge, the
lock store the App falls back on, ping and close."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from tasuki.backends.base import LockHolder, LockStore, QueueStats
from tasuki.backends.sqs.codec import received_meta as _received_meta
from tasuki.backends.sqs.durable import dropped
from tasuki.backends.sqs.plumbing import Plumbing, error_code, log
from tasuki.backends.sqs.queues import QueueInfo, tasuki_name
from tasuki.backends.sqs.records.base import IdFinish
from tasuki.errors import BackendUnavailable, ConfigurationError


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


class Operating:
    def __init__(self, sqs: Plumbing) -> None:
        self.sqs = sqs

    def queue_arn(self, queue: str) -> str:
        """The ARN of `queue`'s SQS queue, created if needed: what an S3 bucket
        notification (or an SNS subscription) names to deliver into it."""
        info = self.sqs.info(queue)
        attrs = self.sqs.call(
            "get_queue_attributes", QueueUrl=info.url, AttributeNames=["QueueArn"]
        )
        return str(attrs["Attributes"]["QueueArn"])

    def _counts(self, url: str, names: list[str]) -> list[int]:
        attrs = self.sqs.call("get_queue_attributes", QueueUrl=url, AttributeNames=names)
        values = attrs.get("Attributes", {})
        return [int(values.get(name, 0)) for name in names]

    def _level_infos(self, queue: str) -> list[QueueInfo]:
        """The SQS queues of every priority level of `queue` that exists."""
        out = []
        for level in self.sqs.levels.in_use(queue):
            info = self.sqs.queues.get(queue, create=False, level=level)
            if info is not None:
                out.append(info)
        return out

    def stats(self, queue: str) -> QueueStats:
        info = self.sqs.queues.get(queue, create=False)
        if info is None:
            return QueueStats(0, 0, 0, 0, 0.0)
        ready = in_flight = delayed = 0
        for level in self._level_infos(queue):
            counts = self._counts(
                level.url,
                [
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                    "ApproximateNumberOfMessagesDelayed",
                ],
            )
            # A FIFO sleeper's copy hidden until its wake-up is in flight to SQS, but it
            # sleeps, holding no lease: counted as delayed, as a sleeper is elsewhere.
            hidden = 0
            if info.fifo and self.sqs.steps is not None:
                hidden = min(self.sqs.steps.hidden(level.url), counts[1])
            ready += counts[0]
            in_flight += counts[1] - hidden
            delayed += counts[2] + hidden
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
        for url in self.sqs.queues.urls(self.sqs.options.prefix):
            name = tasuki_name(self.sqs.options, url.rsplit("/", 1)[-1])
            if name is None:
                continue
            s = self.stats(name)
            if s.ready + s.in_flight + s.delayed + s.dead:
                names.append(name)
        return sorted(names)

    def purge(self, queue: str) -> int:
        """Visible messages are received and deleted (their locks and ids freed); what is
        left (in flight, delayed) goes with PurgeQueue, which AWS allows once a minute."""
        info = self.sqs.queues.get(queue, create=False)
        if info is None:
            return 0
        before = self.stats(queue)
        total = before.ready + before.in_flight + before.delayed + before.dead
        records = self.sqs.records
        levels = self._level_infos(queue)
        purged: list[str] = []
        for level in levels:
            purged.extend(self._purge_visible(level))
        with self.sqs.held_mutex:
            mine = [(t, h) for t, h in self.sqs.held.items() if h.info.name == queue]
            for token, held in mine:
                del self.sqs.held[token]
                purged.append(held.meta.id)
        if self.sqs.admission is not None:
            self.sqs.admission.release([token for token, _ in mine])
        if self.sqs.listing is not None:
            self.sqs.listing.clear(queue)
        if records is not None:
            records.forget([(queue, held.meta.id) for _, held in mine])
            if records.controls:
                records.drop_results([(queue, id) for id in purged])
            dropped(self.sqs, [(queue, id) for id in purged])
        for url in [level.url for level in levels] + [info.dead_url]:
            try:
                self.sqs.call("purge_queue", QueueUrl=url)
            except Exception as exc:
                if "PurgeQueueInProgress" not in error_code(exc):
                    raise
                log.warning("sqs: %s: a purge is already under way (AWS: once a minute)", url)
        return total

    def _purge_visible(self, info: QueueInfo) -> list[str]:
        """Receive and delete what is visible, freeing its ids and unique locks; the ids
        of what it deleted (with a lock store)."""
        records, locks, queue = self.sqs.records, self.sqs.locks, info.name
        purged: list[str] = []
        while True:
            got = self.sqs.receive_now(info.url)
            if not got:
                break
            self.sqs.delete(info.url, [m["ReceiptHandle"] for m in got])
            if records is not None and locks is not None:
                metas = [_received_meta(message)[0] for message in got]
                purged.extend(m.id for m in metas)
                records.finish_ids([IdFinish(queue, m.id, m.id_owner, 0.0) for m in metas])
                for meta in metas:
                    if meta.unique_key is not None:
                        locks.release(meta.unique_key, meta.id)
        return purged

    @property
    def locks(self) -> LockStore:
        """The `locks=` store; without one, a store that refuses every call, so a worker
        that uses no lock starts, and the first feature that needs one fails loudly."""
        return _NO_LOCKS if self.sqs.locks is None else self.sqs.locks

    def ping(self) -> None:
        try:
            self.sqs.client.list_queues(QueueNamePrefix=self.sqs.options.prefix, MaxResults=1)
        except Exception as exc:
            raise BackendUnavailable(f"SQS at {self.sqs.url} is unreachable: {exc}") from exc

    def close(self) -> None:
        """The records, the lock store and the client let go (the leasing threads end
        first: `SqsBackend.close`)."""
        if self.sqs.records is not None:
            self.sqs.records.close()
        if self.sqs.lock_backend is not None:
            self.sqs.lock_backend.close()
        self.sqs.client.close()
