"""Dead letters: browsed, redriven and purged by moving messages ourselves (receive from
the DLQ, send, delete, in batches of 10: send before delete), since
`StartMessageMoveTask` is not available everywhere."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tasuki.backends.sqs.codec import dead_letter
from tasuki.backends.sqs.codec import received_meta as _received_meta
from tasuki.backends.sqs.durable import dropped
from tasuki.backends.sqs.plumbing import Move, Plumbing
from tasuki.backends.sqs.queues import QueueInfo
from tasuki.backends.sqs.records.base import IdClaim, IdFinish, ResultPut
from tasuki.core.flowrecords import flow_of
from tasuki.core.message import DeadLetter, new_id


class DeadLetters:
    def __init__(self, sqs: Plumbing) -> None:
        self.sqs = sqs

    def _browse(self, info: QueueInfo) -> list[dict[str, Any]]:
        """Every dead letter SQS hands out now, each held briefly (see dead_letters)."""
        seen: dict[str, dict[str, Any]] = {}
        while True:
            got = self.sqs.receive_now(info.dead_url)
            if not got:
                return list(seen.values())
            for message in got:
                seen.setdefault(message["MessageId"], message)

    def _letters(self, info: QueueInfo) -> list[tuple[DeadLetter, dict[str, Any]]]:
        found = [(dead_letter(info.name, m, info.max_receive_count), m) for m in self._browse(info)]
        found.sort(key=lambda pair: -pair[0].died_at)
        return found

    def _show_again(self, info: QueueInfo, messages: list[dict[str, Any]]) -> None:
        if messages:
            self.sqs.visibility(info.dead_url, [m["ReceiptHandle"] for m in messages], 0)

    def dead_letters(self, queue: str, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        """Approximate on SQS: the DLQ is received (each letter hidden for a moment) and
        made visible again; AWS's short polls sample servers, so a page may miss some."""
        info = self.sqs.queues.get(queue, create=False)
        if info is None:
            return []
        found = self._letters(info)
        self._show_again(info, [m for _, m in found])
        return [letter for letter, _ in found[offset : offset + limit]]

    def redrive(self, queue: str, ids: Sequence[str] | None = None) -> int:
        return len(self.redriven(queue, ids))

    def redriven(self, queue: str, ids: Sequence[str] | None = None) -> list[str]:
        """Redrive the dead letters `ids` (all for None): the ids sent back."""
        info = self.sqs.queues.get(queue, create=False)
        if info is None:
            return []
        wanted = None if ids is None else set(ids)
        moves: list[Move] = []
        others: list[dict[str, Any]] = []
        for letter, message in self._letters(info):
            if wanted is not None and letter.id not in wanted:
                others.append(message)
                continue
            meta, extra = _received_meta(message)
            count = int(message.get("Attributes", {}).get("ApproximateReceiveCount", 0))
            fresh = replace(
                meta,
                attempts_before=0,
                fence_before=meta.fence_before + count,
                reason="",
                error=None,
                died_at=0.0,
                died_attempt=0,
            )
            moves.append(Move(message, fresh, extra))
        self._show_again(info, others)
        records = self.sqs.records
        if records is not None and moves:
            # Their ids live again (a redriven message can be cancelled): forgotten, then
            # claimed by their owners.
            records.finish_ids([IdFinish(queue, m.meta.id, "", 0.0) for m in moves])
            records.claim_ids(
                [IdClaim(queue, m.meta.id, m.meta.id_owner or new_id()) for m in moves]
            )
            if records.controls:
                self.sqs.drop_notes(queue, [m.meta.id for m in moves])
            kept = [ResultPut(queue, m.meta.id, "pending") for m in moves if m.meta.keep_result]
            if kept and records.controls:
                records.put_results(kept)
            # Before the sends, as the rest: a resumed step's flow is running again.
            steps = [(f, queue, m.meta.id) for m in moves if (f := flow_of(m.meta.headers))]
            if steps and self.sqs.capabilities().workflows:
                self.sqs.flow_store().resume_steps(steps)
        # Back to the priority level each came from (its SQS queue).
        by_level: dict[int, list[Move]] = {}
        for move in moves:
            by_level.setdefault(move.meta.priority, []).append(move)
        sent: list[str] = []
        for level, part in by_level.items():
            target = self.sqs.info(queue, level)
            entries = [self.sqs.entry(target, n, move) for n, move in enumerate(part)]
            failed = set(self.sqs.send(target.url, entries))
            done = [part[n] for n in range(len(part)) if str(n) not in failed]
            if done:
                self.sqs.levels.used(queue, level)
            self.sqs.delete(info.dead_url, [move.message["ReceiptHandle"] for move in done])
            self.sqs.unlist_dead(queue, [move.meta.id for move in done])
            sent.extend(move.meta.id for move in done)
        return sent

    def purge_dead(self, queue: str) -> int:
        """Every dead letter SQS hands out deleted, and the dead listing emptied (with the
        entries of any letter a short poll missed)."""
        gone = self._drop(queue, None)
        if self.sqs.listing is not None:
            self.sqs.listing.clear(queue, ("dead",))
        return len(gone)

    def remove(self, queue: str, ids: Sequence[str]) -> list[bool]:
        """Delete these dead letters (cancelled from the console): True for each one
        found in the dead-letter queue and deleted."""
        gone = set(self._drop(queue, set(ids)))
        return [id in gone for id in ids]

    def _drop(self, queue: str, wanted: set[str] | None) -> list[str]:
        """Delete the dead letters `wanted` (every one for None), the others shown again:
        the ids deleted."""
        info = self.sqs.queues.get(queue, create=False)
        if info is None:
            return []
        found = self._letters(info)
        if wanted is not None:
            self._show_again(info, [m for letter, m in found if letter.id not in wanted])
            found = [(letter, m) for letter, m in found if letter.id in wanted]
        done = self.sqs.delete(info.dead_url, [m["ReceiptHandle"] for _, m in found])
        self.sqs.unlist_dead(
            queue, [letter.id for (letter, _), ok in zip(found, done, strict=True) if ok]
        )
        if self.sqs.records is not None:
            if self.sqs.records.controls:
                gone = [letter.id for (letter, _), ok in zip(found, done, strict=True) if ok]
                self.sqs.drop_notes(queue, gone)
                dropped(self.sqs, [(queue, id) for id in gone])
            self.sqs.records.finish_ids(
                [
                    IdFinish(queue, letter.id, "", 0.0)
                    for (letter, message), ok in zip(found, done, strict=True)
                    if ok
                ]
            )
        return [letter.id for (letter, _), ok in zip(found, done, strict=True) if ok]
