"""Durable steps on SQS (DESIGN §4c), kept in the `locks=` store (records/steps.py):
step records and signals fenced by the lease record's token; a suspend is a release
without penalty (a re-send with its delay, hops past `max_delay` through the not-before
header: no lease held, no attempt spent) with its wait recorded; a signal to a waiting
message sends a new copy at once (SQS cannot make a delayed copy visible early), and the
delayed copy is refused when it is received (`admit_copies`).

A FIFO queue has no per-message delay: the sleeping copy is visible at once, so the
worker that receives it before its wake-up hides it (a visibility change for the time
left, never a lease: no attempt, no run) and keeps its receipt handle with the wait; a
signal then makes that copy visible at once rather than send a new one."""

from __future__ import annotations

import base64
import math
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson

from tasuki.backends.base import SignalStatus
from tasuki.backends.sqs.codec import Meta
from tasuki.backends.sqs.options import SQS_MAX_VISIBILITY
from tasuki.backends.sqs.plumbing import Move, Plumbing, log
from tasuki.backends.sqs.queues import QueueInfo
from tasuki.backends.sqs.records.steps import CopyCheck, Hidden, StepRecords, Wake
from tasuki.core.headers import WAIT_HEADER
from tasuki.core.message import NOT_BEFORE_HEADER
from tasuki.core.records import Receipt, Settle, StepRecord, Taken, Waiting

# A received message as leasing.py admits it: (message, meta, other attributes, count).
Received = tuple[dict[str, Any], Meta, dict[str, Any], int]
# A copy whose not-before time is this close is due, not a hop (SQS counts whole seconds).
DUE_MARGIN = 1.0
# A hidden copy's visibility stops this far short of SQS's 12-hour ceiling (counted from
# the copy's first receive, which SQS's clock and ours see a little apart); a copy closer
# to it than a second is re-sent instead.
CEILING_MARGIN = 60.0


class Durable:
    """The Backend's durable-steps calls on SQS."""

    def __init__(self, sqs: Plumbing) -> None:
        self.sqs = sqs

    def store(self) -> StepRecords:
        if self.sqs.steps is None:
            raise self.sqs.refusal(
                "durable_steps",
                "record durable steps",
                "give it a SQLite lock store: locks=sqlite:///...",
            )
        return self.sqs.steps

    def steps(self, queue: str, id: str) -> list[StepRecord]:
        store = self.store()
        store.touch(queue, id)
        return store.steps(queue, id)

    def record_step(self, receipt: Receipt, record: StepRecord) -> bool:
        store = self.store()
        store.touch(receipt.queue, receipt.id)
        return store.record_step(receipt, record)

    def take_signal(self, receipt: Receipt, name: str, occurrence: int) -> Taken:
        store = self.store()
        store.touch(receipt.queue, receipt.id)
        return store.take_signal(receipt, name, occurrence)

    def waiting(self, queue: str, id: str) -> Waiting | None:
        return None if self.sqs.steps is None else self.sqs.steps.waiting(queue, id)

    def signal(self, queue: str, id: str, name: str, payload: bytes) -> SignalStatus:
        """Stored in the lock store; a wait it answers gets its new copy now."""
        store = self.store()
        status, wake = store.signal(queue, id, name, payload)
        if wake is not None:
            self._wake(store, queue, id, wake)
        return status

    def _wake(self, store: StepRecords, queue: str, id: str, wake: Wake) -> None:
        """The hidden copy (FIFO) made visible now where its handle is known and SQS takes
        it; else send the new copy, then say so: the delayed copy is refused from then on.
        A send that fails leaves the delayed copy to wake the message at its time."""
        if wake.handle and self.sqs.visibility(wake.url, [wake.handle], 0) == [True]:
            store.unhidden(queue, id, wake.seq)
            return
        entry = decode_entry(wake.entry)
        entry["Id"] = "0"
        if "MessageDeduplicationId" in entry:  # FIFO: not the sleeping copy's send again
            entry["MessageDeduplicationId"] += f".wake{wake.seq}"
        if self.sqs.send(wake.url, [entry]):
            log.warning("sqs: the copy that wakes %s could not be sent: it wakes at its time", id)
            return
        store.resent(queue, id, wake.seq)


def prepare_suspends(
    sqs: Plumbing, items: Sequence[Settle]
) -> tuple[list[Settle], dict[int, tuple[str, str, int]]]:
    """Record the wait of each suspend whose lease this process holds, before the
    settle re-sends it: the copy it re-sends carries the wait's number (WAIT_HEADER),
    and the wait keeps the entry of a copy to send at once if a signal answers it. A
    suspend for a signal stored already is made a release with no delay (ready now).
    Also the wait recorded per position, for `placed` once its copy is re-sent."""
    store = sqs.steps
    waits: dict[int, tuple[str, str, int]] = {}
    if store is None or not any(item.wait is not None for item in items):
        return list(items), waits
    out: list[Settle] = []
    now = time.time()
    for n, item in enumerate(items):
        if item.wait is None:
            out.append(item)
            continue
        with sqs.held_mutex:
            held = sqs.held.get(item.receipt.token)
        if held is None:
            out.append(item)
            continue
        headers = {
            k: v for k, v in held.meta.headers.items() if k not in (WAIT_HEADER, NOT_BEFORE_HEADER)
        }
        woken = replace(
            held.meta, attempts_before=held.attempt - 1, fence_before=held.fence, headers=headers
        )
        entry = sqs.entry(held.info, 0, Move(held.message, woken, held.others, 0.0))
        seq = store.suspend(
            item.receipt, item.wait.signal, now + item.delay, held.info.url, encode_entry(entry)
        )
        if seq == 0:
            out.append(item._replace(delay=0.0, wait=None))
            continue
        if seq is not None:
            held.meta = replace(held.meta, headers={**headers, WAIT_HEADER: str(seq)})
            waits[n] = (item.receipt.queue, item.receipt.id, seq)
        out.append(item)
    return out, waits


def placed(
    sqs: Plumbing, waits: Sequence[tuple[str, str, int]], failed: Sequence[tuple[str, str, int]]
) -> None:
    """The suspended messages' sleeping copies were sent: they wait from now on. Those of
    `failed` were not (the lease was lost, or SQS refused): no copy carries their waits,
    so no signal may wake them (it would send a copy of a message that runs elsewhere,
    or whose leased copy comes back)."""
    if sqs.steps is not None and waits:
        sqs.steps.placed(waits)
    if sqs.steps is not None and failed:
        sqs.steps.void(failed)


def admit_copies(sqs: Plumbing, info: QueueInfo, received: list[Received]) -> list[Received]:
    """The received messages to go on with: a copy that slept for a wait a signal
    answered (a new copy was sent for it) is deleted, not run; one whose wake-up came
    ends its wait (a signal no longer wakes it). On a FIFO queue a copy received before
    its wake-up is hidden until then (`_hide`), not run."""
    store = sqs.steps
    if store is None:
        return received
    now = time.time()
    checks: list[tuple[int, CopyCheck]] = []
    for n, (message, meta, _, _) in enumerate(received):
        seq = _wait_of(meta)
        if seq is not None:
            handle, url = (message["ReceiptHandle"], info.url) if info.fifo else ("", "")
            checks.append((n, CopyCheck(info.name, meta.id, seq, _due(meta, now), handle, url)))
    if not checks:
        return received
    verdicts = store.admit([check for _, check in checks])
    stale = [
        n for (n, _), v in zip(checks, verdicts, strict=True) if not v.run and not v.hide_until
    ]
    hidden = {n: v.hide_until for (n, _), v in zip(checks, verdicts, strict=True) if v.hide_until}
    if not stale and not hidden:
        return received
    for n in stale:
        log.info("sqs: %s: the copy of a wait a signal answered: deleted", received[n][1].id)
    if stale:
        sqs.delete(info.url, [received[n][0]["ReceiptHandle"] for n in stale])
    if hidden:
        _hide(sqs, info, [(received[n], until) for n, until in hidden.items()])
    gone = set(stale) | set(hidden)
    return [r for n, r in enumerate(received) if n not in gone]


def _hide(sqs: Plumbing, info: QueueInfo, copies: Sequence[tuple[Received, float]]) -> None:
    """Copies received before their wake-up (FIFO): each hidden for the time left, as far
    as SQS's 12-hour ceiling from its first receive lets (past it, it comes back and is
    hidden again); one at the ceiling is re-sent (a new copy, the same wait) and deleted.
    Not leased: no attempt, no lease record. While hidden it holds its message group."""
    now = time.time()
    by_vt: dict[float, list[str]] = {}
    resend: list[Received] = []
    for item, until in copies:
        message = item[0]
        first = int(message.get("Attributes", {}).get("ApproximateFirstReceiveTimestamp", 0))
        ceiling = (first / 1000 if first else now) + SQS_MAX_VISIBILITY - CEILING_MARGIN - now
        vt = min(until - now, ceiling)
        if vt < 1.0 and ceiling < until - now:
            resend.append(item)
            continue
        log.debug("sqs: %s: asleep until %.3f: hidden, not run", item[1].id, until)
        by_vt.setdefault(float(max(1, math.ceil(vt))), []).append(message["ReceiptHandle"])
    for vt, handles in by_vt.items():
        sqs.visibility(info.url, handles, vt)
    if resend:
        entries = []
        for n, (message, meta, others, _) in enumerate(resend):
            entry = sqs.entry(info, n, Move(message, meta, others, 0.0))
            if "MessageDeduplicationId" in entry:  # not the copy it replaces again
                entry["MessageDeduplicationId"] += f".h{int(now)}"
            entries.append(entry)
        failed = set(sqs.send(info.url, entries))
        sqs.delete(
            info.url,
            [m["ReceiptHandle"] for n, (m, _, _, _) in enumerate(resend) if str(n) not in failed],
        )


def dropped(sqs: Plumbing, messages: Sequence[tuple[str, str]]) -> None:
    """Messages (queue, id) gone for good (cancelled, purged): their step records and
    signals go. A copy hidden until its wake-up (FIFO) is made visible now, so that it is
    received and deleted (the lease records refuse it) and its message group goes on,
    rather than wait for a wake-up that may be hours away."""
    if sqs.steps is not None and messages:
        sqs.steps.untouch(messages)
        _unhide(sqs, sqs.steps.drop(messages))


def _unhide(sqs: Plumbing, hidden: Sequence[Hidden]) -> None:
    by_url: dict[str, list[str]] = {}
    for copy in hidden:
        by_url.setdefault(copy.url, []).append(copy.handle)
    for url, handles in by_url.items():
        # A handle SQS refuses (the copy was received again, or purged) is left alone:
        # the copy it named is deleted when next received either way.
        sqs.visibility(url, handles, 0)


def settled(
    sqs: Plumbing, acked: Sequence[tuple[str, str]], others: Sequence[tuple[str, str]]
) -> None:
    """Messages (queue, id) settled: the records of the acked ones whose run here made a
    durable call go (`StepRecords.touch`); the others' notes are forgotten (their next
    run notes them again)."""
    if sqs.steps is None:
        return
    sqs.steps.untouch(others)
    durable = sqs.steps.untouch(acked)
    if durable:
        _unhide(sqs, sqs.steps.drop(durable))


def _wait_of(meta: Meta) -> int | None:
    raw = meta.headers.get(WAIT_HEADER)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def _due(meta: Meta, now: float) -> bool:
    raw = meta.headers.get(NOT_BEFORE_HEADER)
    if raw is None:
        return True
    try:
        return float(raw) <= now + DUE_MARGIN
    except ValueError:
        return True


def encode_entry(entry: dict[str, Any]) -> str:
    """A SendMessage entry as JSON (binary attribute values in base64)."""
    attrs = {}
    for name, value in entry.get("MessageAttributes", {}).items():
        binary = value.get("BinaryValue")
        attrs[name] = (
            value
            if binary is None
            else {**value, "BinaryValue": base64.b64encode(binary).decode(), "Base64": True}
        )
    return orjson.dumps({**entry, "MessageAttributes": attrs}).decode()


def decode_entry(text: str) -> dict[str, Any]:
    entry: dict[str, Any] = orjson.loads(text)
    for value in entry.get("MessageAttributes", {}).values():
        if value.pop("Base64", False):
            value["BinaryValue"] = base64.b64decode(value["BinaryValue"])
    entry.pop("DelaySeconds", None)
    return entry
