"""The console's listings of SQS on a Redis lock store (`Listing`, listing.py): per queue
and state a sorted set of ids by time (and one per job), and a hash per entry, all under
one hash tag per queue (one Cluster slot); each write one script call per queue
(`lua/records_listing_*.lua`), each page one call."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tasuki.backends.redis.codec import ms
from tasuki.backends.sqs.records.listing import (
    FLIGHT_SLACK,
    ListedAt,
    ListedState,
    ListEntry,
    Listing,
)
from tasuki.backends.sqs.records.redis import RedisLeaseRecords, script


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _bytes(raw: Any) -> bytes:
    return bytes(raw) if isinstance(raw, (bytes, bytearray)) else str(raw).encode()


def _by_queue(items: Sequence[tuple[str, str, str]]) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for queue, id, token in items:
        out.setdefault(queue, []).append((id, token))
    return out


class RedisListing(Listing):
    def __init__(self, records: RedisLeaseRecords) -> None:
        super().__init__(records.namespace, records.lifetimes.id)
        self._backend = records._backend

    def _tag(self, queue: str) -> str:
        """The queue's listing tag: the hash tag every key of its listings starts with."""
        return "{" + self._backend.keys.lock(f"{self.namespace}listed:{queue}") + "}"

    def put(self, state: ListedState, entries: Sequence[ListEntry]) -> None:
        now = time.time()
        by_queue: dict[str, list[ListEntry]] = {}
        for e in entries:
            by_queue.setdefault(e.queue, []).append(e)
        swept = now - FLIGHT_SLACK if state == "in_flight" else now - self.dead_kept
        for queue, part in by_queue.items():
            args: list[Any] = [state, repr(swept)]
            for e in part:
                ttl = ms(e.at + FLIGHT_SLACK - now) if state == "in_flight" else ms(self.dead_kept)
                args += [e.id, repr(e.at), e.job, e.token, e.body, e.headers, e.info, max(ttl, 1)]
            self._backend._eval(script("records_listing_put"), [self._tag(queue)], args)

    def _drop(
        self, state: ListedState, items: Sequence[tuple[str, str, str]], head: list[Any]
    ) -> None:
        for queue, part in _by_queue(items).items():
            args: list[Any] = [state, *head]
            for id, token in part:
                args += [id, token]
            self._backend._eval(script("records_listing_drop"), [self._tag(queue)], args)

    def drop(self, state: ListedState, items: Sequence[tuple[str, str, str]]) -> None:
        self._drop(state, items, ["", 0])

    def renew(self, items: Sequence[tuple[str, str, str]], until: float) -> None:
        ttl = max(ms(until + FLIGHT_SLACK - time.time()), 1)
        self._drop("in_flight", items, [repr(until), ttl])

    def clear(self, queue: str, states: Sequence[ListedState] = ("in_flight", "dead")) -> None:
        for state in states:
            while True:
                entries, more = self.page(
                    state, queue, job=None, newest_first=False, limit=500, after=None,
                    now=0.0,
                )  # fmt: skip
                self.drop(state, [(queue, e.id, "") for e in entries])
                if not more or not entries:
                    break

    def find(self, state: ListedState, queue: str, id: str) -> ListEntry | None:
        key = f"{self._tag(queue)}:{state}:e:{id}"
        got = self._backend._command("HMGET", key, "at", "job", "token", "body", "headers", "info")
        if not got or got[0] is None:
            return None
        at, job, token, body, headers, info = got
        return ListEntry(
            queue, id, float(_text(at)), _text(job), _text(token), _bytes(body),
            _text(headers), _text(info),
        )  # fmt: skip

    def flying(self, queue: str, ids: Sequence[str], now: float) -> list[str]:
        """One pipelined round trip: each entry's lease token and time."""
        if not ids:
            return []
        tag = self._tag(queue)
        got = self._backend._connection().pipeline(
            [("HMGET", f"{tag}:in_flight:e:{id}", "token", "at") for id in ids]
        )
        return [
            _text(token) if token is not None and at is not None and float(_text(at)) > now
            else ""
            for token, at in got
        ]  # fmt: skip

    def page(
        self,
        state: ListedState,
        queue: str,
        *,
        job: str | None,
        newest_first: bool,
        limit: int,
        after: ListedAt | None,
        now: float,
    ) -> tuple[list[ListEntry], bool]:
        floor = now if state == "in_flight" else 0.0
        args = [
            state,
            job or "",
            "1" if newest_first else "0",
            limit,
            repr(floor),
            "" if after is None else repr(after.at),
            "" if after is None else after.id,
        ]
        reply = self._backend._eval(script("records_listing_page"), [self._tag(queue)], args)
        more = int(reply[0]) == 1
        rest = reply[1:]
        entries = [
            ListEntry(
                queue,
                _text(rest[n]),
                float(_text(rest[n + 1])),
                _text(rest[n + 2]),
                _text(rest[n + 3]),
                _bytes(rest[n + 4]),
                _text(rest[n + 5]),
                _text(rest[n + 6]),
            )
            for n in range(0, len(rest), 7)
        ]
        return entries, more
