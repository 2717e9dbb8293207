"""`inspect` on SQS, from what the `locks=` store keeps (SQS shows nothing of a message
it has not handed out): the lease record (its lease, fencing number, leases counted,
progress, cancel), the id record (known, finished, for how long), and a dead letter's
note (`Plumbing.note_dead`: reason, error, when), one lock written with the dead letter.

A message in flight or dead is shown with its job and arguments (`inspect_body`) from
the console's listing of it (records/listing.py); a waiting one without them.

What it cannot know, and so does not say: whether a waiting message is ready or delayed
(both are "ready", with no `visible_at`), its `enqueued_at` and `max_attempts` (in its
body, which SQS shows only to a receive), the history of its leases (a record per
settle would cost a lock-store write per message), and an acked message whose id has no
window (forgotten at its ack: "unknown").
"""

from __future__ import annotations

import time

import orjson

from tasuki.backends.sqs.plumbing import Plumbing
from tasuki.backends.sqs.records.base import CANCELLED_OWNER, UNSENT_OWNER
from tasuki.backends.sqs.records.listing import listed_headers
from tasuki.core.message import ErrorInfo
from tasuki.core.records import MessageInfo


class Inspecting:
    def __init__(self, sqs: Plumbing) -> None:
        self.sqs = sqs

    def inspect_body(self, queue: str, id: str) -> tuple[MessageInfo, bytes | None, dict[str, str]]:
        """`inspect`, with the body and headers of a message in flight or dead from the
        console's listing (records/listing.py); None and {} for a waiting one, whose body
        SQS shows only to a receive, and for one without an entry (a body over
        LISTED_BODY_MAX, a message SQS dead-lettered itself)."""
        info = self.inspect(queue, id)
        listing = self.sqs.listing
        if listing is None or info.state not in ("in_flight", "dead"):
            return info, None, {}
        entry = listing.find("in_flight" if info.state == "in_flight" else "dead", queue, id)
        if entry is None or not entry.body:
            return info, None, {}
        return info, entry.body, listed_headers(entry.headers)

    def inspect(self, queue: str, id: str) -> MessageInfo:
        records = self.sqs.records
        if records is None or not records.controls or self.sqs.locks is None:
            raise self.sqs.refusal(
                "inspection", "inspect a message", "give it a lock store: locks=sqlite or redis"
            )
        view = records.view(queue, id)
        owner = view.lease_owner
        if owner is not None and owner.startswith(CANCELLED_OWNER):
            return MessageInfo(
                queue, id, "cancelled", view.receives, fencing_token=view.fence,
                finished_until=view.id_until,
            )  # fmt: skip
        holder = self.sqs.locks.holder(self.sqs.dead_note(queue, id))
        if holder is not None:
            return dead_info(queue, id, holder.owner)
        leased = bool(owner) and not str(owner).startswith(UNSENT_OWNER)
        if leased and view.id_owner is not None and view.lease_until > time.time():
            return MessageInfo(
                queue, id, "in_flight", view.receives, fencing_token=view.fence,
                lease_expires_at=view.lease_until, progress=view.progress,
            )  # fmt: skip
        if view.id_owner is None:
            return MessageInfo(queue, id, "unknown")
        if view.id_owner == "":
            return MessageInfo(
                queue, id, "finished", view.receives, fencing_token=view.fence,
                finished_until=view.id_until,
            )  # fmt: skip
        return MessageInfo(queue, id, "ready", view.receives, fencing_token=view.fence)


def dead_info(queue: str, id: str, note: str) -> MessageInfo:
    """A dead letter as its note tells it (`Plumbing.dead_note_text`)."""
    try:
        doc = orjson.loads(note)
    except orjson.JSONDecodeError:
        doc = {}
    error = doc.get("error")
    return MessageInfo(
        queue,
        id,
        "dead",
        int(doc.get("attempt") or 0),
        max_attempts=doc.get("max"),
        fencing_token=int(doc.get("fence") or 0),
        enqueued_at=doc.get("t") or None,
        reason=str(doc.get("reason") or ""),
        error=None if not error else ErrorInfo(str(error[0]), str(error[1]), str(error[2])),
        died_at=doc.get("at") or None,
    )
