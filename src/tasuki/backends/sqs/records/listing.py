"""The listings SQS keeps in its `locks=` store for the console (DESIGN §4d): the
messages in flight and the dead letters of each queue, which SQS cannot list without
receiving them (a receive hides a message from the workers and counts against its
attempts). Waiting messages (ready, delayed) are not listed: nothing sees them before a
receive (`browse_waiting` is refused).

An entry per message and state, `ListEntry`, with what a listing shows: the job, the body
and headers the console decodes, and what `MessageInfo` tells of it.

- In flight: put by the receive that leased the message (one call per batch received,
  after the lease records granted the leases), its time the lease's expiry, moved on by
  each renewal of the current lease; dropped by the settle of the current lease (ack,
  release, dead letter), by a cancel and by a purge. An entry whose lease lapsed (its
  worker died) is past its time: never listed, and gone with the next lease of the
  message or when it expires.
- Dead: put when the worker moves the message to the dead-letter queue (its reason,
  error and time), dropped by its redrive and by a purge of the dead letters, kept as
  long as its id record. A message SQS moved there itself (the queue's redrive policy,
  `maxReceiveCount`: a worker that never settled its last receive) has no entry: it is
  not listed, though `tasuki dead list` (which receives the dead-letter queue) shows it
  and a redrive or a purge moves it as any other.

Ordered by the entry's time, then its id; paged by a cursor that names the last entry
shown (`after`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Literal, NamedTuple

import orjson

from tasuki.errors import InvalidArgument

ListedState = Literal["in_flight", "dead"]
# A body larger than this is listed without it (no arguments shown): the lock store is
# not a second copy of large messages.
LISTED_BODY_MAX = 64 * 1024
# An in-flight entry outlives its lease's expiry by this much (then it is swept).
FLIGHT_SLACK = 60.0


class ListEntry(NamedTuple):
    """A listed message: its time (in flight: when its lease expires; dead: when it
    died), its job, the token of the lease that put it ('' for a dead letter), its body,
    its headers (JSON) and what `MessageInfo` shows (JSON, `info_json`)."""

    queue: str
    id: str
    at: float
    job: str
    token: str
    body: bytes
    headers: str
    info: str


class ListedAt(NamedTuple):
    """Where a listing stands: the last entry shown. Its text is the page's cursor."""

    at: float
    id: str

    def cursor(self) -> str:
        return f"{self.at!r}:{self.id}"

    @staticmethod
    def parse(cursor: str | None) -> ListedAt | None:
        if cursor is None:
            return None
        at, sep, id = cursor.partition(":")
        try:
            if not sep:
                raise ValueError(cursor)
            return ListedAt(float(at), id)
        except ValueError:
            raise InvalidArgument(f"not a listing cursor: {cursor!r}") from None


def headers_json(headers: dict[str, str]) -> str:
    return orjson.dumps(headers).decode()


def listed_headers(text: str) -> dict[str, str]:
    """An entry's headers, read back (any that are not a JSON object: none)."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return {str(k): str(v) for k, v in doc.items()} if isinstance(doc, dict) else {}


def listed_body(body: bytes) -> bytes:
    """What an entry keeps of a body: all of it, or nothing past LISTED_BODY_MAX."""
    return body if len(body) <= LISTED_BODY_MAX else b""


class Listing(ABC):
    """The listed messages under one namespace of a lock store (one call per queue and
    batch for each write; one per page for a read)."""

    def __init__(self, namespace: str, dead_kept: float) -> None:
        self.namespace = namespace
        # How long a dead letter's entry is kept (as its id record is).
        self.dead_kept = dead_kept

    @abstractmethod
    def put(self, state: ListedState, entries: Sequence[ListEntry]) -> None:
        """Enter (or replace) each message's entry in `state`."""

    @abstractmethod
    def drop(self, state: ListedState, items: Sequence[tuple[str, str, str]]) -> None:
        """Drop the entries (queue, id, token) in `state`: where `token` is not '', only
        an entry put by that lease (a newer lease's entry stays)."""

    @abstractmethod
    def renew(self, items: Sequence[tuple[str, str, str]], until: float) -> None:
        """The leases (queue, id, token) renewed until `until`: their in-flight entries
        (the ones those leases put) move on to it."""

    @abstractmethod
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
        """Up to `limit` entries of the queue in `state` (of `job` only, if given) after
        `after`, in order; in flight only those whose lease has not expired by `now`.
        And whether more follow."""

    @abstractmethod
    def find(self, state: ListedState, queue: str, id: str) -> ListEntry | None:
        """The message's entry in `state`, or None (one read)."""

    def flying(self, queue: str, ids: Sequence[str], now: float) -> list[str]:
        """For each id, the token of the lease its in-flight entry names, '' where it has
        none or its lease expired by `now` (stores may read them all in one call)."""
        out: list[str] = []
        for id in ids:
            entry = self.find("in_flight", queue, id)
            out.append(entry.token if entry is not None and entry.at > now else "")
        return out

    @abstractmethod
    def clear(self, queue: str, states: Sequence[ListedState] = ("in_flight", "dead")) -> None:
        """Drop every entry of the queue in `states` (purged)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the listing holds of its own."""
