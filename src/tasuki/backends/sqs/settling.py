"""Settling and extending: with `locks=`, the lease records of the whole batch are
checked first, in one call (a stale receipt handle is refused before SQS sees it); then
the SQS calls, batched per queue; then what the records keep of the outcome."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from tasuki.backends.base import Receipt, Settle
from tasuki.backends.sqs.codec import Meta
from tasuki.backends.sqs.options import SQS_MAX_VISIBILITY
from tasuki.backends.sqs.plumbing import SqsBase, _Held, _Move, log
from tasuki.core.locks import IdFinish, LeaseEnd
from tasuki.core.message import NOT_BEFORE_HEADER


class Settling(SqsBase):
    def _claim(self, ends: Sequence[LeaseEnd]) -> list[_Held | bool]:
        """Per lease: its _Held (or True when held elsewhere) if current, else False.

        With a lock store every lease record is compare-and-settled here, in one call
        (kept a while as the record of an ack where `acked`), so a stale handle is
        refused before SQS sees it; a receipt repeated in one batch settles once.
        """
        seen: set[str] = set()
        first: list[int] = []
        for n, end in enumerate(ends):
            if end.receipt.token not in seen:
                seen.add(end.receipt.token)
                first.append(n)
        verdicts = (
            self._records.settle([ends[n] for n in first])
            if self._records is not None
            else [True] * len(first)
        )
        current = [False] * len(ends)
        for n, ok in zip(first, verdicts, strict=True):
            current[n] = ok
        out: list[_Held | bool] = []
        for end, ok in zip(ends, current, strict=True):
            held = self._take_held(end.receipt.token) if ok else None
            out.append(held if held is not None else ok)
        return out

    def settle(self, items: Sequence[Settle]) -> list[bool]:
        """The claims of the whole batch, then the SQS calls: deletes (acks), re-sends
        and visibility changes (releases), moves to the dead-letter queues; then the ids
        of acked messages are kept for their window, and the records and locks of dead
        ones dropped."""
        claims = self._claim([LeaseEnd(item.receipt, item.verdict == "ack") for item in items])
        results = [False] * len(items)
        now = time.time()
        deletes: dict[str, list[int]] = {}
        moves: dict[tuple[str, bool], list[tuple[int, _Move]]] = {}  # (queue, to dead)
        hide: dict[tuple[str, float], list[int]] = {}
        for n, (item, claim) in enumerate(zip(items, claims, strict=True)):
            if claim is False:
                continue
            queue = item.receipt.queue
            if item.verdict == "ack":
                deletes.setdefault(queue, []).append(n)
            elif item.verdict == "release":
                move = self._release_move(item, claim, now)
                if move is not None:
                    moves.setdefault((queue, False), []).append((n, move))
                else:
                    hide.setdefault((queue, min(item.delay, SQS_MAX_VISIBILITY)), []).append(n)
            elif isinstance(claim, _Held):
                meta = self._dead_meta(
                    claim.meta, claim.fence, item.reason, item.error, claim.attempt
                )
                moves.setdefault((queue, True), []).append(
                    (n, _Move(claim.message, meta, claim.others))
                )
            else:
                log.error(
                    "sqs: cannot dead-letter message %s: it was leased by another process, and SQS"
                    " hands the body only to the receiver; it returns after its lease",
                    item.receipt.id,
                )
        finished: list[IdFinish] = []
        for queue, positions in deletes.items():
            done = self._delete(self._info(queue).url, [items[n].receipt.token for n in positions])
            for n, ok in zip(positions, done, strict=True):
                results[n] = ok
                claim = claims[n]
                if ok and isinstance(claim, _Held):
                    meta = claim.meta
                    finished.append(IdFinish(queue, meta.id, meta.id_owner, meta.keep_id))
                elif ok:
                    finished.append(IdFinish(queue, items[n].receipt.id, "", 0.0))
        moved: list[tuple[str, Meta]] = []
        for (queue, dead), part in moves.items():
            info = self._info(queue)
            target = info.dead_url if dead else info.url
            done = self._move(info, info.url, target, [m for _, m in part])
            for (n, move), ok in zip(part, done, strict=True):
                results[n] = ok
                if ok and dead:
                    moved.append((queue, move.meta))
        for (queue, delay), positions in hide.items():
            url = self._info(queue).url
            done = self._visibility(url, [items[n].receipt.token for n in positions], delay)
            for n, ok in zip(positions, done, strict=True):
                results[n] = ok
        if self._records is not None and finished:
            self._records.finish_ids(finished)
        self._dead_lettered(moved)
        return results

    def _release_move(self, item: Settle, claim: _Held | bool, now: float) -> _Move | None:
        """The re-send a release needs (its attempt given back, or a delay longer than SQS
        keeps), or None for a visibility change, which only this message's receiver can
        avoid: SQS hands the body to it alone."""
        long_delay = (
            item.delay > self._options.max_delay and not self._info(item.receipt.queue).fifo
        )
        if isinstance(claim, _Held) and (not item.penalty or long_delay):
            spent = claim.attempt - (0 if item.penalty else 1)
            headers = claim.meta.headers
            if long_delay:  # the first hop; the worker's receiver does the others
                headers = {**headers, NOT_BEFORE_HEADER: repr(now + item.delay)}
            meta = replace(
                claim.meta, attempts_before=spent, fence_before=claim.fence, headers=headers
            )
            return _Move(claim.message, meta, claim.others, item.delay)
        if not item.penalty:
            log.warning(
                "sqs: message %s released without penalty by a process that did not lease"
                " it: its attempt is not given back",
                item.receipt.id,
            )
        return None

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        results = [False] * len(receipts)
        by_queue: dict[str, list[int]] = {}
        current = (
            self._records.renew(receipts, visibility_timeout)
            if self._records is not None
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
