"""Workflow records on SQLite for SQS (`FlowRecords`, base.py, which `SQLiteLeaseRecords`
implements with these, sqlite.py): flows, barriers and their slots in tables of their
own in the lock store's database (`sqlite_flows.sql`), each call inside one of
the lease records' transactions (`db`), flow ids prefixed with the records' namespace.

A settle's effects (`apply`) run inside the transaction that compared and settled the
step's lease record, so they happen only under the current lease. A barrier's slot
names the message that wrote it: that message's re-run (a crash between its settle and
its sends) goes on again, where any other message meeting a filled slot stops. What goes
on is sent by the SQS backend under ids claimed for their sender (`claim_sends`, `sent`),
so that re-run sends only what was not sent.
"""

from __future__ import annotations

import sqlite3

from tasuki.backends.sqlfiles import load_queries
from tasuki.backends.sqs.records.base import CANCELLED_OWNER
from tasuki.core.flowrecords import Effects, FlowRecord, join_slots
from tasuki.core.records import MessageState

QUERY_NAMES = (
    "create_flows",
    "create_barriers",
    "create_slots",
    "flow_start",
    "flow",
    "flow_cancel",
    "flow_fail",
    "flow_resume",
    "flow_finish",
    "barrier",
    "fill",
    "slot_writer",
    "slot_taken",
    "slot_count",
    "slots",
    "barrier_value",
    "group_value",
    "claim_send",
    "sent",
    "mark_dead",
    "unmark_dead",
    "step_state",
    "sweep_flows",
    "sweep_barriers",
    "sweep_slots",
)
SQL = load_queries("tasuki.backends.sqs.records", "sqlite_flows.sql", QUERY_NAMES)
SENDING = "~send~"  # the owner of an id claimed by a sender that has not sent it yet
SENT = "~sent~"  # and once it was sent


def make_tables(db: sqlite3.Connection) -> None:
    for name in ("create_flows", "create_barriers", "create_slots"):
        db.execute(SQL[name])


def sweep(db: sqlite3.Connection, now: float) -> None:
    for name in ("sweep_flows", "sweep_barriers", "sweep_slots"):
        db.execute(SQL[name], {"now": now})


def start(db: sqlite3.Connection, flow_id: str, record: FlowRecord, now: float) -> bool:
    params = {
        "id": flow_id,
        "static": record.static_json(),
        "expires": now + record.retention,
        "now": now,
    }
    return db.execute(SQL["flow_start"], params).rowcount == 1


def read(db: sqlite3.Connection, flow_id: str, now: float) -> FlowRecord | None:
    row = db.execute(SQL["flow"], {"id": flow_id, "now": now}).fetchone()
    if row is None:
        return None
    return FlowRecord.from_parts(
        row["static"], row["result"], row["failure"], bool(row["cancelled"])
    )


def cancel(db: sqlite3.Connection, flow_id: str, now: float) -> bool:
    return db.execute(SQL["flow_cancel"], {"id": flow_id, "now": now}).rowcount == 1


def group_value(db: sqlite3.Connection, flow_id: str, barrier: str, now: float) -> bytes | None:
    params = {"flow": flow_id, "barrier": barrier, "now": now}
    row = db.execute(SQL["group_value"], params).fetchone()
    return None if row is None or row["value"] is None else bytes(row["value"])


def apply(
    db: sqlite3.Connection, effects: Effects, namespace: str, writer: str, now: float
) -> bool:
    """A current lease's effects, in its settle's transaction, in the order `Effects`
    gives; True if what it enqueues is to be sent. `writer` names the settling message
    (QUEUE:ID): a slot it wrote before is its own, so its re-run goes on again. A dead
    step is marked dead (what `app.flow` shows; SQS keeps no state of a message), and
    the mark goes when it settles again (re-driven)."""
    flow = None if effects.flow is None else namespace + effects.flow
    dead = {"key": f"{namespace}dead:{writer}", "expires": now + effects.ttl}
    if effects.failed is not None:
        db.execute(SQL["mark_dead"], dead)
    else:
        db.execute(SQL["unmark_dead"], dead)
    if flow is not None and effects.failed is not None:
        params = {"id": flow, "failure": effects.failed.to_json().decode(), "now": now}
        db.execute(SQL["flow_fail"], params)
    if flow is not None:
        row = db.execute(SQL["flow"], {"id": flow, "now": now}).fetchone()
        if row is not None and row["cancelled"]:
            return False
    value = b"null" if effects.result is None else effects.result
    expires = now + effects.ttl
    for fill in effects.fills:
        key = {"flow": namespace + fill.flow, "barrier": fill.barrier}
        db.execute(SQL["barrier"], {**key, "size": fill.size, "expires": expires, "now": now})
        slot = {**key, "slot": fill.slot}
        params = {**slot, "value": value, "writer": writer, "expires": expires}
        if db.execute(SQL["fill"], params).rowcount == 1:
            db.execute(SQL["slot_taken"], key)
        else:
            row = db.execute(SQL["slot_writer"], slot).fetchone()
            if row is None or row["writer"] != writer:
                return False  # another message's slot: that settle went on, if any did
        [filled] = db.execute(SQL["slot_count"], key).fetchone()
        if filled < fill.size:
            return False
        value = join_slots([bytes(r["value"]) for r in db.execute(SQL["slots"], key)])
        db.execute(SQL["barrier_value"], {**key, "value": value})
    if effects.final and flow is not None:
        db.execute(SQL["flow_finish"], {"id": flow, "value": value, "now": now})
    return bool(effects.enqueue)


def resume(
    db: sqlite3.Connection, namespace: str, flow_id: str, queue: str, id: str, now: float
) -> None:
    """A dead step re-driven: its dead mark goes, and if it is its flow's first failure
    the flow runs again."""
    db.execute(SQL["unmark_dead"], {"key": f"{namespace}dead:{queue}:{id}"})
    params = {"id": namespace + flow_id, "queue": queue, "message_id": id, "now": now}
    db.execute(SQL["flow_resume"], params)


def claim_send(db: sqlite3.Connection, key: str, sender: str, expires: float, now: float) -> bool:
    params = {"key": key, "owner": SENDING + sender, "expires": expires, "now": now}
    return db.execute(SQL["claim_send"], params).rowcount > 0


def mark_sent(db: sqlite3.Connection, key: str, sender: str) -> None:
    db.execute(SQL["sent"], {"key": key, "owner": SENDING + sender, "sent": SENT + sender})


def step_state(
    db: sqlite3.Connection, namespace: str, lease: str, id_key: str, writer: str, now: float
) -> tuple[MessageState, int]:
    """A step's state from the records, and the leases counted on it: dead (marked by
    its settle), in flight (a live lease), finished (its id finished), ready (its id
    live: SQS has it, delayed or not), or unknown."""
    params = {"dead": f"{namespace}dead:{writer}", "lease": lease, "id": id_key, "now": now}
    row = db.execute(SQL["step_state"], params).fetchone()
    receives = int(row["receives"] or 0)
    if row["dead"]:
        return "dead", receives
    if row["leased"] and not str(row["leased"]).startswith(CANCELLED_OWNER):
        return "in_flight", receives
    if row["known"] is None:
        return "unknown", receives
    return ("finished" if row["known"] == "" else "ready"), receives
