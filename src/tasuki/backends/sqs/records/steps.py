"""The durable steps SQS keeps in its `locks=` store (DESIGN §4c), beside the lease
records that fence them: each message's step records, the signals sent to it and not
yet consumed, and its wait (`StepRecords`). SQLite keeps them in tables of their own
(sqlite_steps.py), Redis as keys in each lease record's slot
(redis_steps.py), picked by `records.steps_in`; other stores keep none (the backend
refuses `durable_steps`).

A wait is numbered (`seq`, one more per suspend of the message) and its number rides
in the header `tasuki-wait` (`core/headers.WAIT_HEADER`) of the copy re-sent to sleep.
A signal that answers a wait sends a new copy of the message at once, from the send
entry kept with the wait, since SQS cannot make a delayed copy visible early; the
delayed copy, met later, is refused by its number (`admit`): the store says the wait it
slept for was answered.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Literal, NamedTuple

from tasuki.backends.base import SignalStatus
from tasuki.core.records import Receipt, StepRecord, Taken, Waiting

# A wait's state: recorded by a suspend whose copy is being re-sent ("pending"), then
# sent ("waiting"): a signal may wake it in either; its copy woke and runs ("ended"); a
# signal answered it and its new copy is being sent ("answered"); that copy was sent, so
# the delayed one is refused when met ("resent"); its copy was never sent ("void": the
# settle was refused, or the worker died and the copy it leased came back), so the
# message's older copy is its live one, and no signal wakes it.
WaitState = Literal["pending", "waiting", "ended", "answered", "resent", "void"]
# The states in which a signal may still wake the message.
LIVE_WAITS: tuple[WaitState, ...] = ("pending", "waiting")


class Wake(NamedTuple):
    """A new copy to send for a wait a signal answered: the SQS queue and the
    SendMessage entry (JSON) kept with the wait, and the wait's number."""

    seq: int
    url: str
    entry: str
    handle: str = ""  # the receipt handle of its hidden copy (FIFO), '' if none is known


class Hidden(NamedTuple):
    """A copy hidden until its wake-up (FIFO) whose message is gone: the SQS queue and
    its receipt handle, to make it visible now (it is then deleted as it is received)."""

    url: str
    handle: str


class CopyCheck(NamedTuple):
    """A received copy that slept for wait `seq`; `due`: its wake-up time has come (not a
    hop of a long delay), so the wait ends as it is taken. `handle`: on a FIFO queue, its
    receipt handle, kept with the wait if the copy is to be hidden ('' elsewhere: never
    hidden)."""

    queue: str
    id: str
    seq: int
    due: bool
    handle: str = ""
    url: str = ""  # its SQS queue's (FIFO), to count it as hidden (`hidden`)


class Verdict(NamedTuple):
    """What to do with a received copy that slept: run it (`run`), delete it, or (FIFO,
    `hide_until` > 0) hide it until its wake-up: it is not leased, and its handle is kept
    with the wait."""

    run: bool
    hide_until: float = 0.0


class StepRecords(ABC):
    """What the lock store keeps of a message's durable run, fenced by its lease record
    (its owner is the current lease's token) and dropped with the message.

    It also notes the messages whose runs in this process made a durable call
    (`touch`), so that an ack drops the records of those only: a plain job's ack costs
    no lock-store call more. A durable run makes such a call on every run (its first
    step reads the records); a message whose last run made none keeps its records until
    they expire (the id window)."""

    def __init__(self) -> None:
        self._touched: set[tuple[str, str]] = set()
        self._touched_mutex = threading.Lock()

    def touch(self, queue: str, id: str) -> None:
        with self._touched_mutex:
            self._touched.add((queue, id))

    def untouch(self, messages: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """Forget the notes of these messages (settled); those that had one."""
        with self._touched_mutex:
            had = [m for m in messages if m in self._touched]
            self._touched.difference_update(messages)
        return had

    @abstractmethod
    def steps(self, queue: str, id: str) -> list[StepRecord]:
        """The message's step records, oldest first."""

    @abstractmethod
    def record_step(self, receipt: Receipt, record: StepRecord) -> bool:
        """Store `record` if `receipt.token` is the current lease; False (nothing stored)
        if not."""

    @abstractmethod
    def take_signal(self, receipt: Receipt, name: str, occurrence: int) -> Taken:
        """Consume the oldest signal `name`, recorded as the step `tasuki:signal:<name>`,
        under the lease check (see `Backend.take_signal`)."""

    @abstractmethod
    def signal(
        self, queue: str, id: str, name: str, payload: bytes
    ) -> tuple[SignalStatus, Wake | None]:
        """Store a signal for a message whose id is live; "unknown" (nothing stored)
        if it is not. If the message's wait is for `name`, it is answered in the same
        step, and the copy to send is returned (then `resent`)."""

    @abstractmethod
    def resent(self, queue: str, id: str, seq: int) -> None:
        """The new copy for wait `seq` was sent: the delayed copy is refused from now."""

    @abstractmethod
    def unhidden(self, queue: str, id: str, seq: int) -> None:
        """The hidden copy of answered wait `seq` was made visible: it runs when received
        (the wait has ended)."""

    @abstractmethod
    def suspend(
        self, receipt: Receipt, signal: str, until: float, url: str, entry: str
    ) -> int | None:
        """Record the wait of a run that suspends, under the lease check: its number; 0
        (nothing recorded) if a signal `signal` is stored already (it is to be ready at
        once); None if the lease is stale."""

    @abstractmethod
    def placed(self, waits: Sequence[tuple[str, str, int]]) -> None:
        """The copies that sleep for these waits (queue, id, seq) were sent and the
        leased ones deleted: from now on the messages wait (`waiting`)."""

    @abstractmethod
    def void(self, waits: Sequence[tuple[str, str, int]]) -> None:
        """The settles that were to send the copies of these pending waits (queue, id,
        seq) were refused or failed: no copy carries them, and no signal wakes them."""

    @abstractmethod
    def waiting(self, queue: str, id: str) -> Waiting | None:
        """The message's wait, while a signal may still wake it."""

    @abstractmethod
    def admit(self, copies: Sequence[CopyCheck]) -> list[Verdict]:
        """Per copy that slept: not run if its wait was answered and a new copy sent (or a
        later wait superseded it): to be deleted. A due copy ends its wait. A later wait
        whose copy was never sent (still pending when an older copy comes back: its
        worker died before the re-send, or void) supersedes nothing: the older copy runs,
        and that wait is void from then on. A copy with a handle (FIFO) whose wait is its
        last, not woken, and not yet due is to be hidden until the wait's wake-up, and its
        handle is kept with the wait."""

    @abstractmethod
    def hidden(self, url: str) -> int:
        """How many copies in the SQS queue `url` are hidden until their wake-up (FIFO):
        in flight to SQS, but asleep to tasuki (`stats` counts them as delayed)."""

    @abstractmethod
    def drop(self, messages: Sequence[tuple[str, str]]) -> list[Hidden]:
        """The messages (queue, id) are gone (acked, cancelled, purged): their steps and
        signals go; of their wait only what refuses a delayed copy is kept, until it
        would have woken. Returned: the copies of those waits hidden until their wake-up
        (FIFO), which would otherwise hold their message groups until then."""
