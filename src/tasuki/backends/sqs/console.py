"""The console on SQS (DESIGN §4d), as far as the engine allows: pauses, the worker
registry and per-job stats live in the `locks=` store (records/console.py), since SQS
has no place for them; so do the listings of messages in flight and dead
(records/listing.py: put by the lease and the dead-lettering, dropped by the settle,
the redrive and the purge), which `browse` pages and `cancel_many` acts on
(`browsing`): a bulk cancel cancels a message only while the lease its entry
names holds it. Waiting messages cannot be listed without receiving them (which would
hide them from the workers and count a receive), so listing "ready" and "delayed" and
`retry_now` are refused by the `browse_waiting` capability.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import orjson

from tasuki.backends.sqs.inspecting import dead_info
from tasuki.backends.sqs.plumbing import Plumbing
from tasuki.backends.sqs.records.console import StoreConsole
from tasuki.backends.sqs.records.listing import ListedAt, ListEntry, listed_headers
from tasuki.core.console import (
    BrowseState,
    JobStats,
    JobTally,
    Listed,
    Page,
    WorkerInfo,
    check_limit,
)
from tasuki.core.records import MessageInfo

LOCKS_ADVICE = "give it a lock store that keeps them: locks=sqlite or redis"


class Console:
    def __init__(self, sqs: Plumbing) -> None:
        self.sqs = sqs

    def _records(self, capability: str, what: str) -> StoreConsole:
        if self.sqs.console is None:
            raise self.sqs.refusal(capability, what, LOCKS_ADVICE)
        return self.sqs.console

    def refuse_browse(self, state: BrowseState) -> Exception | None:
        """Why a listing is refused, or None: waiting messages (ready, delayed) by the
        engine, named by `browse_waiting`; in-flight and dead ones without a lock store
        that lists them (`browsing`)."""
        if state in ("ready", "delayed"):
            return self.sqs.refusal(
                "browse_waiting",
                f"list {state} messages (SQS shows a waiting message only by receiving it)",
                "count them with `stats`, or inspect one by id",
            )
        if self.sqs.listing is None:
            return self.sqs.refusal("browsing", f"list {state} messages", LOCKS_ADVICE)
        return None

    def browse(
        self,
        queue: str,
        state: BrowseState,
        *,
        job: str | None,
        newest_first: bool,
        limit: int,
        cursor: str | None,
    ) -> Page[Listed]:
        """A page of the queue's in-flight messages (by lease expiry; only leases not
        expired) or dead letters (by when they died), from the lock store's listings."""
        check_limit(limit)
        refused = self.refuse_browse(state)
        listing = self.sqs.listing
        if refused is not None or listing is None or state not in ("in_flight", "dead"):
            raise refused or self.sqs.refusal("browsing", f"list {state} messages", LOCKS_ADVICE)
        entries, more = listing.page(
            state,
            queue,
            job=job,
            newest_first=newest_first,
            limit=limit,
            after=ListedAt.parse(cursor),
            now=time.time(),
        )
        items = [
            Listed(_info(state, entry), entry.body, listed_headers(entry.headers), _cursor(entry))
            for entry in entries
        ]
        return Page(items, items[-1].cursor if more and items else None)

    def listed_leases(self, queue: str, ids: Sequence[str]) -> list[tuple[str, str]]:
        """Each message (id, token of the lease its in-flight entry names): '' where it
        is not listed in flight, or its lease expired."""
        listing = self.sqs.listing
        tokens = [""] * len(ids) if listing is None else listing.flying(queue, ids, time.time())
        return list(zip(ids, tokens, strict=True))

    def pause(self, queue: str) -> None:
        self._records("pause", "pause a queue").pause(queue)

    def resume(self, queue: str) -> None:
        self._records("pause", "pause a queue").resume(queue)

    def paused(self) -> set[str]:
        return self._records("pause", "pause a queue").paused()

    def announce(self, info: WorkerInfo, tallies: Sequence[JobTally]) -> bool:
        return self._records("worker_registry", "keep a registry of workers").announce(
            info, tallies
        )

    def workers(self) -> list[WorkerInfo]:
        return self._records("worker_registry", "keep a registry of workers").workers()

    def stop_worker(self, id: str) -> bool:
        return self._records("worker_registry", "keep a registry of workers").stop_worker(id)

    def job_stats(self, queue: str, window: float) -> dict[str, JobStats]:
        return self._records("job_stats", "keep per-job stats").job_stats(queue, window)


def _info(state: BrowseState, entry: ListEntry) -> MessageInfo:
    if state == "dead":
        return dead_info(entry.queue, entry.id, entry.info)
    try:
        doc = orjson.loads(entry.info)
    except orjson.JSONDecodeError:
        doc = {}
    return MessageInfo(
        entry.queue,
        entry.id,
        "in_flight",
        int(doc.get("attempt") or 0),
        max_attempts=doc.get("max"),
        fencing_token=int(doc.get("fence") or 0),
        enqueued_at=doc.get("t") or None,
        lease_expires_at=entry.at,
    )


def _cursor(entry: ListEntry) -> str:
    return ListedAt(entry.at, entry.id).cursor()
