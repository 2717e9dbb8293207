"""Settling and extending: with `locks=`, the lease records of the whole batch are
checked first, in one call (a stale receipt handle is refused before SQS sees it); then
the SQS calls, batched per queue; then what the records keep of the outcome."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from tasuki.backends.base import CancelStatus, Keep, LeaseStatus, Receipt, Settle
from tasuki.backends.sqs.codec import Meta
from tasuki.backends.sqs.durable import dropped, placed, prepare_suspends, settled
from tasuki.backends.sqs.options import SQS_MAX_VISIBILITY
from tasuki.backends.sqs.plumbing import Held, Move, Plumbing, SendSteps, log
from tasuki.backends.sqs.queues import split_token
from tasuki.backends.sqs.records.base import IdFinish, LeaseEnd, LeaseRecords, Settled
from tasuki.core.flowrecords import ResultState
from tasuki.core.message import NOT_BEFORE_HEADER


class Settling:
    def __init__(self, sqs: Plumbing, send_steps: SendSteps) -> None:
        """`send_steps`: flows.py's, which sends what a settled step enqueues."""
        self.sqs = sqs
        self._send_steps = send_steps

    def _claim(self, ends: Sequence[LeaseEnd]) -> tuple[list[Held | bool], list[bool]]:
        """Per lease: its Held (or True when held elsewhere) if current, else False; and
        whether its workflow effects go on (their steps to be sent before the delete).

        With a lock store every lease record is compare-and-settled here, in one call
        (kept a while as the record of an ack where `acked`), with the effects of the
        current ones where any has some, so a stale handle is refused before SQS sees
        it; a receipt repeated in one batch settles once.
        """
        seen: set[str] = set()
        first: list[int] = []
        for n, end in enumerate(ends):
            if end.receipt.token not in seen:
                seen.add(end.receipt.token)
                first.append(n)
        verdicts: list[Settled]
        if self.sqs.records is None:
            verdicts = [Settled(True)] * len(first)
        elif any(ends[n].effects is not None for n in first):
            verdicts = self.sqs.records.settle_steps([ends[n] for n in first])
        else:
            verdicts = [Settled(ok) for ok in self.sqs.records.settle([ends[n] for n in first])]
        current = [Settled(False)] * len(ends)
        for n, verdict in zip(first, verdicts, strict=True):
            current[n] = verdict
        out: list[Held | bool] = []
        for end, verdict in zip(ends, current, strict=True):
            held = self.sqs.take_held(end.receipt.token) if verdict.current else None
            out.append(held if held is not None else verdict.current)
        return out, [v.go_on for v in current]

    @staticmethod
    def _end(item: Settle) -> LeaseEnd:
        """The lease record's settle, with an ack's result value where it has one and a
        workflow step's effects (ack or dead). (A dead letter's result is written once
        the message is in the dead-letter queue: `_dead_lettered`.)"""
        acked = item.verdict == "ack"
        effects = item.effects
        result: tuple[ResultState, bytes] | None = None
        if acked and effects is not None and effects.result is not None:
            result = ("ok", effects.result)
        step = effects is not None and effects.flow is not None and item.verdict != "release"
        return LeaseEnd(item.receipt, acked, result, effects if step else None)

    def _go_on(self, items: Sequence[Settle], go_on: list[bool]) -> None:
        """Send what the workflow steps that go on enqueue, before their messages are
        deleted, each under its sender's claims (flows.py); then their lease records say
        so (`steps_sent`), so a copy of an acked one met again is deleted, not re-run."""
        done = []
        for item, yes in zip(items, go_on, strict=True):
            if yes and item.effects is not None and item.effects.enqueue:
                receipt = item.receipt
                self._send_steps(item.effects.enqueue, f"{receipt.queue}:{receipt.id}")
                if item.verdict == "ack":
                    done.append((receipt.queue, receipt.id))
        if done:
            self.sqs.flow_store().steps_sent(done)

    def settle(self, items: Sequence[Settle]) -> list[bool]:
        """The claims of the whole batch, then the SQS calls: deletes (acks), re-sends
        and visibility changes (releases), moves to the dead-letter queues; then the ids
        of acked messages are kept for their window, and the records and locks of dead
        ones dropped."""
        items, waits = prepare_suspends(self.sqs, items)
        claims, go_on = self._claim([self._end(item) for item in items])
        # Settled: no longer in flight, whatever SQS answers (the lease record is settled).
        self.sqs.unlist_flying(
            [
                (item.receipt.queue, item.receipt.id, item.receipt.token)
                for item, claim in zip(items, claims, strict=True)
                if claim is not False
            ]
        )
        self._go_on(items, go_on)
        results = [False] * len(items)
        now = time.time()
        # Per SQS queue: (tasuki queue, priority level), the level read from the token.
        deletes: dict[tuple[str, int], list[int]] = {}
        moves: dict[tuple[str, int, bool], list[tuple[int, Move]]] = {}  # (..., to dead)
        hide: dict[tuple[str, int, float], list[int]] = {}
        handles = [split_token(item.receipt.token)[1] for item in items]
        for n, (item, claim) in enumerate(zip(items, claims, strict=True)):
            if claim is False:
                continue
            queue = item.receipt.queue
            level = split_token(item.receipt.token)[0]
            if item.verdict == "ack":
                deletes.setdefault((queue, level), []).append(n)
            elif item.verdict == "release":
                move = self._release_move(item, claim, now)
                if move is not None:
                    moves.setdefault((queue, level, False), []).append((n, move))
                else:
                    delay = min(item.delay, SQS_MAX_VISIBILITY)
                    hide.setdefault((queue, level, delay), []).append(n)
            elif isinstance(claim, Held):
                meta = self.sqs.dead_meta(
                    claim.meta, claim.fence, item.reason, item.error, claim.attempt
                )
                moves.setdefault((queue, level, True), []).append(
                    (n, Move(claim.message, meta, claim.others))
                )
            else:
                log.error(
                    "sqs: cannot dead-letter message %s: it was leased by another process, and SQS"
                    " hands the body only to the receiver; it returns after its lease",
                    item.receipt.id,
                )
        finished: list[IdFinish] = []
        for (queue, level), positions in deletes.items():
            done = self.sqs.delete(self.sqs.info(queue, level).url, [handles[n] for n in positions])
            for n, ok in zip(positions, done, strict=True):
                results[n] = ok
                claim = claims[n]
                if ok and isinstance(claim, Held):
                    meta = claim.meta
                    finished.append(IdFinish(queue, meta.id, meta.id_owner, meta.keep_id))
                elif ok:
                    finished.append(IdFinish(queue, items[n].receipt.id, "", 0.0))
        moved: list[tuple[str, Meta]] = []
        for (queue, level, dead), part in moves.items():
            info = self.sqs.info(queue, level)
            target = info.dead_url if dead else info.url
            done = self.sqs.move(info, info.url, target, [m for _, m in part])
            for (n, move), ok in zip(part, done, strict=True):
                results[n] = ok
                if ok and dead:
                    moved.append((queue, move.meta))
            if dead:
                self.sqs.list_dead(queue, [m for (_, m), ok in zip(part, done, strict=True) if ok])
        for (queue, level, delay), positions in hide.items():
            url = self.sqs.info(queue, level).url
            done = self.sqs.visibility(url, [handles[n] for n in positions], delay)
            for n, ok in zip(positions, done, strict=True):
                results[n] = ok
        self.sqs.dead_lettered(moved, finished)
        settled(
            self.sqs,
            [(f.queue, f.id) for f in finished],
            [(i.receipt.queue, i.receipt.id) for i in items if i.verdict != "ack"],
        )
        placed(
            self.sqs,
            [wait for n, wait in waits.items() if results[n]],
            [wait for n, wait in waits.items() if not results[n]],
        )
        # The leases ended, whatever SQS answered: their concurrency slots go.
        self.sqs.free_limits(
            [item.receipt.token for item, c in zip(items, claims, strict=True) if c]
        )
        return results

    def _release_move(self, item: Settle, claim: Held | bool, now: float) -> Move | None:
        """The re-send a release needs (its attempt given back, or a delay longer than SQS
        keeps), or None for a visibility change, which only this message's receiver can
        avoid: SQS hands the body to it alone."""
        long_delay = (
            item.delay > self.sqs.options.max_delay and not self.sqs.info(item.receipt.queue).fifo
        )
        if isinstance(claim, Held) and (not item.penalty or long_delay):
            spent = claim.attempt - (0 if item.penalty else 1)
            headers = claim.meta.headers
            if long_delay:  # the first hop; the worker's receiver does the others
                headers = {**headers, NOT_BEFORE_HEADER: repr(now + item.delay)}
            meta = replace(
                claim.meta, attempts_before=spent, fence_before=claim.fence, headers=headers
            )
            return Move(claim.message, meta, claim.others, item.delay)
        if not item.penalty:
            log.warning(
                "sqs: message %s released without penalty by a process that did not lease"
                " it: its attempt is not given back",
                item.receipt.id,
            )
        return None

    def keep(self, items: Sequence[Keep]) -> list[LeaseStatus]:
        """With lease records that keep progress and cancels (`controls`): each batch of
        one visibility timeout is one records call (renew, store the progress, tell a
        cancelled lease), then ChangeMessageVisibilityBatch for the leases still held,
        and DeleteMessageBatch for the cancelled ones."""
        records = self.sqs.records
        assert records is not None and records.controls  # else the backend's default
        out: list[LeaseStatus] = ["lost"] * len(items)
        by_vt: dict[float, list[int]] = {}
        for n, item in enumerate(items):
            if self._slots_kept(item.receipt, item.visibility_timeout):
                by_vt.setdefault(item.visibility_timeout, []).append(n)
        for vt, positions in by_vt.items():
            kept = records.keep([(items[n].receipt, items[n].progress) for n in positions], vt)
            held = [n for n, status in zip(positions, kept, strict=True) if status == "held"]
            for n, status in zip(positions, kept, strict=True):
                out[n] = status
            # Fenced out: the slots just renewed are not its to keep.
            lost = [
                items[n].receipt.token for n, s in zip(positions, kept, strict=True) if s == "lost"
            ]
            self.sqs.free_limits(lost)
            changed = self._change([items[n].receipt for n in held], vt)
            for n, ok in zip(held, changed, strict=True):
                out[n] = "held" if ok else "lost"
            self._relist([items[n].receipt for n in held], vt)
        self._delete_cancelled([items[n].receipt for n, s in enumerate(out) if s == "cancelled"])
        return out

    def _delete_cancelled(self, receipts: list[Receipt]) -> None:
        """A cancelled lease's holder still has its receipt handle: its message is deleted
        now rather than when its lease lapses and SQS hands it out again."""
        by_queue: dict[tuple[str, int], list[Receipt]] = {}
        for receipt in receipts:
            by_queue.setdefault((receipt.queue, split_token(receipt.token)[0]), []).append(receipt)
        self.sqs.free_limits([r.token for r in receipts])
        for (queue, level), part in by_queue.items():
            url = self.sqs.info(queue, level).url
            done = self.sqs.delete(url, [split_token(r.token)[1] for r in part])
            gone = []
            for receipt, ok in zip(part, done, strict=True):
                held = self.sqs.take_held(receipt.token)
                if ok:
                    gone.append((receipt.id, None if held is None else held.meta))
            self.sqs.cancelled_gone(queue, gone)

    def _slots_kept(self, receipt: Receipt, vt: float) -> bool:
        """The lease's concurrency slots extended first, before its record and its
        visibility: a lease that lapsed or lost a slot (the slot may be another's now) is
        not kept, and the slots it still had go now."""
        if self.sqs.admission is None or self.sqs.admission.extend(receipt.token, vt):
            return True
        self.sqs.free_limits([receipt.token], lapsed=True)
        return False

    def _change(self, receipts: Sequence[Receipt], vt: float) -> list[bool]:
        """The visibility of each lease set to `vt` from now (batched per queue), and the
        `Held` of each one SQS took pushed out with it: one place for extend and keep, so
        a long job kept with progress is never pruned as a lapsed lease."""
        results = [False] * len(receipts)
        by_queue: dict[tuple[str, int], list[int]] = {}
        for n, receipt in enumerate(receipts):
            by_queue.setdefault((receipt.queue, split_token(receipt.token)[0]), []).append(n)
        for (queue, level), part in by_queue.items():
            url = self.sqs.info(queue, level).url
            done = self.sqs.visibility(url, [split_token(receipts[n].token)[1] for n in part], vt)
            for n, ok in zip(part, done, strict=True):
                results[n] = ok
            # A lease SQS refused holds no slot.
            self.sqs.free_limits(
                [receipts[n].token for n, ok in zip(part, done, strict=True) if not ok]
            )
        deadline = time.monotonic() + vt + 60
        with self.sqs.held_mutex:
            for receipt, ok in zip(receipts, results, strict=True):
                held = self.sqs.held.get(receipt.token)
                if ok and held is not None:
                    held.deadline = deadline
        return results

    def cancel(self, queue: str, id: str) -> CancelStatus:
        """Marked in the lease records (SQS cannot delete a message it did not receive):
        a waiting message is deleted the next time it is received, never run; a running
        one's lease is fenced out. Its uniqueness key goes now (SQS never shows the cancel
        its body: the key is noted in the lock store at enqueue, `note_unique`)."""
        status = self._controls().cancel(queue, id)
        if status != "unknown":
            self._cancelled(queue, [id], running=status == "signalled")
        return status

    def cancel_leases(self, queue: str, leases: Sequence[tuple[str, str]]) -> list[bool]:
        """Cancel each message (id, token) only while the lease `token` holds it (the
        lease records compare and cancel in one step: a lease settled or replaced
        meanwhile is not touched), as `cancel` does; True for each one cancelled."""
        done = self._controls().cancel_leases(queue, leases)
        self._cancelled(
            queue, [id for (id, _), ok in zip(leases, done, strict=True) if ok], running=True
        )
        return done

    def _controls(self) -> LeaseRecords:
        records = self.sqs.records
        if records is None or not records.controls:
            raise self.sqs.refusal(
                "cancel", "cancel a message", "give it a lock store: locks=sqlite or redis"
            )
        return records

    def _cancelled(self, queue: str, ids: Sequence[str], *, running: bool) -> None:
        """Messages cancelled: their unique keys, in-flight entries and step records go;
        `running` (their leases fenced out): the concurrency slots they hold go now where
        this process holds them (elsewhere, at the holder's next keep, or with the
        lease)."""
        if not ids:
            return
        for id in ids:
            self.sqs.free_unique(queue, id)
        self.sqs.unlist_flying([(queue, id, "") for id in ids])
        dropped(self.sqs, [(queue, id) for id in ids])
        if running and self.sqs.admission is not None:
            gone = set(ids)
            with self.sqs.held_mutex:
                held = self.sqs.held.items()
                tokens = [t for t, h in held if h.info.name == queue and h.meta.id in gone]
            self.sqs.free_limits(tokens)

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        results = [False] * len(receipts)
        kept = [n for n, r in enumerate(receipts) if self._slots_kept(r, visibility_timeout)]
        current = (
            self.sqs.records.renew([receipts[n] for n in kept], visibility_timeout)
            if self.sqs.records is not None
            else [True] * len(kept)
        )
        positions = [n for n, ok in zip(kept, current, strict=True) if ok]
        # Fenced out: the slots just renewed are not its to keep.
        self.sqs.free_limits(
            [receipts[n].token for n, ok in zip(kept, current, strict=True) if not ok]
        )
        changed = self._change([receipts[n] for n in positions], visibility_timeout)
        for n, ok in zip(positions, changed, strict=True):
            results[n] = ok
        self._relist([receipts[n] for n in positions], visibility_timeout)
        return results

    def _relist(self, receipts: Sequence[Receipt], vt: float) -> None:
        """Renewed leases: their in-flight entries move on to the new expiry."""
        if self.sqs.listing is not None and receipts:
            self.sqs.listing.renew([(r.queue, r.id, r.token) for r in receipts], time.time() + vt)
