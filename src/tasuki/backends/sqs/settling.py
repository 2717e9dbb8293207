"""Settling: ack, extend, release and bury, each checked against the lease records first
with `locks=` (a stale receipt handle is refused before SQS sees it), each batched."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from tasuki.backends.base import Bury, Receipt, Release
from tasuki.backends.sqs.options import SQS_MAX_VISIBILITY
from tasuki.backends.sqs.plumbing import SqsBase, _Held, _Move, log
from tasuki.core.message import NOT_BEFORE_HEADER


class Settling(SqsBase):
    def _claim(self, receipts: Sequence[Receipt], acked: bool = False) -> list[_Held | bool | None]:
        """Per receipt: its _Held (or True when held elsewhere) if current, else False.

        With a lock store the lease record is compare-and-deleted here (kept a while as
        the record of an ack when `acked`), so a stale handle is refused before SQS sees
        it; a receipt repeated in one batch settles once.
        """
        out: list[_Held | bool | None] = []
        seen: set[str] = set()
        first: list[int] = []
        for n, receipt in enumerate(receipts):
            if receipt.token not in seen:
                seen.add(receipt.token)
                first.append(n)
        current = [False] * len(receipts)
        verdicts = (
            self._fences.settle([receipts[n] for n in first], acked)
            if self._fences is not None
            else [True] * len(first)
        )
        for n, ok in zip(first, verdicts, strict=True):
            current[n] = ok
        for n, receipt in enumerate(receipts):
            if not current[n]:
                out.append(False)
                continue
            held = self._take_held(receipt.token)
            out.append(held if held is not None else True)
        return out

    def ack(self, receipts: Sequence[Receipt]) -> list[bool]:
        claims = self._claim(receipts, acked=True)
        results = [False] * len(receipts)
        by_queue: dict[str, list[int]] = {}
        for n, claim in enumerate(claims):
            if claim is not False:
                by_queue.setdefault(receipts[n].queue, []).append(n)
        for queue, positions in by_queue.items():
            info = self._info(queue)
            done = self._delete(info.url, [receipts[n].token for n in positions])
            finished: list[tuple[str, str, float]] = []
            for n, ok in zip(positions, done, strict=True):
                results[n] = ok
                claim = claims[n]
                if ok and isinstance(claim, _Held):
                    meta = claim.meta
                    finished.append((meta.id, meta.id_owner, meta.keep_id))
                elif ok:
                    finished.append((receipts[n].id, "", 0.0))
            if self._fences is not None:
                self._fences.finish_ids(queue, finished)
        return results

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        results = [False] * len(receipts)
        by_queue: dict[str, list[int]] = {}
        current = (
            self._fences.current(receipts, visibility_timeout)
            if self._fences is not None
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

    def release(self, releases: Sequence[Release]) -> list[bool]:
        claims = self._claim([r.receipt for r in releases])
        results = [False] * len(releases)
        now = time.time()
        # (queue) -> positions to re-send / to change visibility, by delay
        resend: dict[str, list[tuple[int, _Move]]] = {}
        hide: dict[tuple[str, float], list[int]] = {}
        for n, (item, claim) in enumerate(zip(releases, claims, strict=True)):
            if claim is False:
                continue
            queue = item.receipt.queue
            long_delay = item.delay > self._options.max_delay and not self._info(queue).fifo
            if isinstance(claim, _Held) and (not item.penalty or long_delay):
                spent = claim.attempt - (0 if item.penalty else 1)
                headers = claim.meta.headers
                if long_delay:  # the first hop; the worker's receiver does the others
                    headers = {**headers, NOT_BEFORE_HEADER: repr(now + item.delay)}
                meta = replace(
                    claim.meta, attempts_before=spent, fence_before=claim.fence, headers=headers
                )
                resend.setdefault(queue, []).append(
                    (n, _Move(claim.message, meta, claim.others, item.delay))
                )
            else:
                if not item.penalty:
                    log.warning(
                        "sqs: message %s released without penalty by a process that did"
                        " not lease it: its attempt is not given back",
                        item.receipt.id,
                    )
                hide.setdefault((queue, min(item.delay, SQS_MAX_VISIBILITY)), []).append(n)
        for queue, moves in resend.items():
            info = self._info(queue)
            done = self._move(info, info.url, info.url, [m for _, m in moves])
            for (n, _), ok in zip(moves, done, strict=True):
                results[n] = ok
        for (queue, delay), positions in hide.items():
            info = self._info(queue)
            done = self._visibility(info.url, [releases[n].receipt.token for n in positions], delay)
            for n, ok in zip(positions, done, strict=True):
                results[n] = ok
        return results

    def bury(self, burials: Sequence[Bury]) -> list[bool]:
        claims = self._claim([b.receipt for b in burials])
        results = [False] * len(burials)
        by_queue: dict[str, list[tuple[int, _Move]]] = {}
        for n, (item, claim) in enumerate(zip(burials, claims, strict=True)):
            if claim is False:
                continue
            if not isinstance(claim, _Held):
                log.error(
                    "sqs: cannot bury message %s: it was leased by another process, and SQS"
                    " hands the body only to the receiver; it returns after its lease",
                    item.receipt.id,
                )
                continue
            meta = self._dead_meta(claim.meta, claim.fence, item.reason, item.error, claim.attempt)
            by_queue.setdefault(item.receipt.queue, []).append(
                (n, _Move(claim.message, meta, claim.others))
            )
        for queue, moves in by_queue.items():
            info = self._info(queue)
            done = self._bury_moves(info, [m for _, m in moves])
            for (n, _), ok in zip(moves, done, strict=True):
                results[n] = ok
        return results
