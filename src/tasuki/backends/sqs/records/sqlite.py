"""SQS's records on a SQLite lock store (`LeaseRecords` and `FlowRecords`, base.py): a
table of their own in the lock store's database (`tasuki_sqs_records`, its named queries
in `sqlite.sql`; the workflow tables in sqlite_flows.py), one transaction per batch.

The records have a connection of their own, in WAL with synchronous=NORMAL: a power cut
may lose the last records, which makes the current holder's settle refused (the
message runs again: never lost) or lets an id be enqueued again (a duplicate, as
without records).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from tasuki.backends.base import Backend
from tasuki.backends.sqlfiles import load_queries
from tasuki.backends.sqlite import SQLiteBackend
from tasuki.backends.sqlite.files import create_private
from tasuki.backends.sqs.records import sqlite_flows as flows
from tasuki.backends.sqs.records.base import (
    ACKED_TAKE,
    CANCELLED_OWNER,
    CANCELLED_TAKE,
    UNSENT_OWNER,
    UNSENT_TAKE,
    FlowRecords,
    Granted,
    IdClaim,
    IdFinish,
    LeaseEnd,
    LeaseRecords,
    LeaseTake,
    RecordLifetimes,
    RecordView,
    ResultPut,
    Settled,
    grant,
    progress_json,
    read_progress,
    unsent_owner,
    unsent_sends,
)
from tasuki.backends.sqs.records.plain import PlainLeaseRecords
from tasuki.core.flowrecords import FlowRecord, ResultRecord
from tasuki.core.records import CancelStatus, LeaseStatus, MessageState, Progress, Receipt

QUERY_NAMES = (
    "create_table",
    "columns",
    "add_copy",
    "add_receives",
    "add_progress",
    "add_value",
    "sweep",
    "read_lease",
    "write_lease",
    "settle_acked",
    "mark_unsent",
    "steps_sent",
    "settle_released",
    "renew_lease",
    "keep_lease",
    "read_record",
    "cancel_lease",
    "finish_id",
    "forget",
    "claim_id",
    "keep_id",
    "drop_id",
    "pend_result",
    "reopen_result",
    "settle_result",
    "read_result",
    "view",
)
SQL = load_queries("tasuki.backends.sqs.records", "sqlite.sql", QUERY_NAMES)
# Expired records are swept every this many writes.
SWEEP_EVERY = 2000

# Named parameters of one run of a query.
Params = Mapping[str, object]


def records_in(
    store: Backend, namespace: str, lifetimes: RecordLifetimes
) -> SQLiteLeaseRecords | PlainLeaseRecords:
    """The records in the database of the SQLite backend `store` (any other store's: its
    plain locks)."""
    if isinstance(store, SQLiteBackend):
        return SQLiteLeaseRecords(store.path, namespace, lifetimes)
    return PlainLeaseRecords(store.locks, namespace, lifetimes)


class SQLiteLeaseRecords(LeaseRecords, FlowRecords):
    controls = True
    flows = True

    def __init__(self, path: str, namespace: str, lifetimes: RecordLifetimes) -> None:
        super().__init__(namespace, lifetimes)
        create_private(path)
        self._db = sqlite3.connect(
            path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(SQL["create_table"])
        columns = {row["name"] for row in self._db.execute(SQL["columns"])}
        for column in ("copy", "receives", "progress", "value"):
            if column not in columns:  # a table made before the column
                self._db.execute(SQL[f"add_{column}"])
        flows.make_tables(self._db)
        self._mutex = threading.Lock()
        self._writes = 0

    def _write(self, query: str, rows: Sequence[Params]) -> list[bool]:
        """Run the named query once per row in one transaction; True where it changed a
        row."""
        if not rows:
            return []
        with self._transaction(len(rows)) as db:
            return [db.execute(SQL[query], row).rowcount > 0 for row in rows]

    @contextmanager
    def _transaction(self, rows: int) -> Iterator[sqlite3.Connection]:
        """One write transaction of `rows` rows; every SWEEP_EVERY rows, expired ones go."""
        with self._mutex:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                self._writes += rows
                if self._writes >= SWEEP_EVERY:
                    self._writes = 0
                    db.execute(SQL["sweep"], {"now": time.time()})
                    flows.sweep(db, time.time())
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def take(self, takes: Sequence[LeaseTake]) -> list[Granted | None]:
        if not takes:
            return []
        now = time.time()
        granted: list[Granted | None] = []
        with self._transaction(len(takes)) as db:
            for take in takes:
                key = self.lease_key(take.queue, take.id)
                row = db.execute(SQL["read_lease"], {"key": key}).fetchone()
                if row is not None and row["expires"] <= now:
                    row = None  # expired: no record
                if row is not None and row["owner"].startswith(CANCELLED_OWNER):
                    granted.append(CANCELLED_TAKE)
                    continue
                if (
                    row is not None
                    and row["lease_until"] > now
                    and row["owner"].startswith(UNSENT_OWNER)
                    and row["copy"] == take.copy
                ):
                    granted.append(UNSENT_TAKE)
                    continue
                # A live lease holds it (even one of the same receipt handle: SQS never
                # hands one handle to two receives, but a server that did, as moto's
                # threads can, would give two workers one lease), or (no owner) this
                # very copy was acked, or another copy of a message sent once
                # (`LeaseTake.once`): either way a duplicate delivery, not to run.
                if (
                    row is not None
                    and row["lease_until"] > now
                    and (row["owner"] or row["copy"] == take.copy or take.once)
                ):
                    granted.append(None if row["owner"] else ACKED_TAKE)
                    continue
                last = (
                    None
                    if row is None
                    else (row["fence"], row["owner"], row["copy"], row["receives"])
                )
                fence, receives = grant(take, last)
                db.execute(
                    SQL["write_lease"],
                    {
                        "key": key,
                        "owner": take.token,
                        "expires": now + self.lifetimes.lease,
                        "fence": fence,
                        "lease_until": now + take.visibility,
                        "copy": take.copy,
                        "receives": receives,
                    },
                )
                lapsed = row is not None and row["owner"] != ""
                granted.append(Granted(fence, receives, lapsed))
        return granted

    def settle(self, ends: Sequence[LeaseEnd]) -> list[bool]:
        return [s.current for s in self.settle_steps(ends)]

    def settle_steps(self, ends: Sequence[LeaseEnd]) -> list[Settled]:
        if not ends:
            return []
        now = time.time()
        until = now + self.lifetimes.acked
        expires = now + self.lifetimes.lease
        with self._transaction(len(ends)) as db:
            out: list[Settled] = []
            for end in ends:
                receipt = end.receipt
                key = self.lease_key(receipt.queue, receipt.id)
                params = {"key": key, "owner": receipt.token, "now": now}
                if end.acked:
                    cursor = db.execute(SQL["settle_acked"], {**params, "until": until})
                else:
                    cursor = db.execute(SQL["settle_released"], {**params, "expires": expires})
                if cursor.rowcount == 0:
                    out.append(Settled(False))
                    continue
                if end.result is not None:
                    self._settle_result(db, receipt.queue, receipt.id, end.result, now)
                go_on = end.effects is not None and flows.apply(
                    db, end.effects, self.namespace, f"{receipt.queue}:{receipt.id}", now
                )
                if go_on and end.acked and end.effects is not None:
                    sends = [(e.queue, e.id) for e in end.effects.enqueue]
                    params = {"key": key, "unsent": unsent_owner(sends), "expires": expires}
                    db.execute(SQL["mark_unsent"], params)
                out.append(Settled(True, go_on))
            return out

    def _settle_result(
        self, db: sqlite3.Connection, queue: str, id: str, result: tuple[str, bytes], now: float
    ) -> None:
        state, value = result
        db.execute(
            SQL["settle_result"],
            {"key": self.result_key(queue, id), "state": state, "value": value, "now": now},
        )

    def put_results(self, puts: Sequence[ResultPut]) -> None:
        if not puts:
            return
        now = time.time()
        with self._transaction(len(puts)) as db:
            for queue, id, state, value, keep in puts:
                key = self.result_key(queue, id)
                expires = now + self.lifetimes.id
                if state != "pending":
                    self._settle_result(db, queue, id, (state, value or b""), now)
                elif keep is not None:
                    db.execute(SQL["pend_result"], {"key": key, "expires": expires, "keep": keep})
                else:
                    db.execute(SQL["reopen_result"], {"key": key, "expires": expires, "now": now})

    def result(self, queue: str, id: str) -> ResultRecord | None:
        with self._mutex:
            row = self._db.execute(
                SQL["read_result"], {"key": self.result_key(queue, id), "now": time.time()}
            ).fetchone()
        if row is None:
            return None
        if row["owner"] == "pending":
            return ResultRecord("pending")
        return ResultRecord(row["owner"], bytes(row["value"] or b""), row["expires"])

    def drop_results(self, messages: Sequence[tuple[str, str]]) -> None:
        self._write("forget", [{"key": self.result_key(q, i)} for q, i in messages])

    def renew(self, leases: Sequence[Receipt], visibility: float) -> list[bool]:
        now = time.time()
        expires, until = now + self.lifetimes.lease, now + visibility
        return self._write(
            "renew_lease",
            [
                {
                    "expires": expires,
                    "until": until,
                    "key": self.lease_key(q, i),
                    "owner": t,
                    "now": now,
                }
                for q, i, t in leases
            ],
        )

    def keep(
        self, leases: Sequence[tuple[Receipt, Progress | None]], visibility: float
    ) -> list[LeaseStatus]:
        if not leases:
            return []
        now = time.time()
        expires, until = now + self.lifetimes.lease, now + visibility
        out: list[LeaseStatus] = []
        with self._transaction(len(leases)) as db:
            for (queue, id, token), progress in leases:
                key = self.lease_key(queue, id)
                params = {
                    "expires": expires,
                    "until": until,
                    "key": key,
                    "owner": token,
                    "now": now,
                    "progress": None if progress is None else progress_json(progress),
                }
                if db.execute(SQL["keep_lease"], params).rowcount > 0:
                    out.append("held")
                    continue
                row = db.execute(SQL["read_record"], {"key": key, "now": now}).fetchone()
                cancelled = row is not None and row["owner"] == CANCELLED_OWNER + token
                out.append("cancelled" if cancelled and token else "lost")
        return out

    def cancel(self, queue: str, id: str) -> CancelStatus:
        with self._transaction(1) as db:
            return self._cancel(db, queue, id, None, time.time())

    def cancel_leases(self, queue: str, leases: Sequence[tuple[str, str]]) -> list[bool]:
        """One transaction for the batch: each lease compared and cancelled in it."""
        if not leases:
            return []
        now = time.time()
        with self._transaction(len(leases)) as db:
            return [
                bool(token) and self._cancel(db, queue, id, token, now) == "signalled"
                for id, token in leases
            ]

    def _cancel(
        self, db: sqlite3.Connection, queue: str, id: str, token: str | None, now: float
    ) -> CancelStatus:
        """Cancel the message within the transaction `db`; with a `token`, only if that
        lease holds it now (else "unknown", nothing changed)."""
        id_key = self.id_key(queue, id)
        known = db.execute(SQL["read_record"], {"key": id_key, "now": now}).fetchone()
        if known is None or known["owner"] == "":
            return "unknown"
        key = self.lease_key(queue, id)
        row = db.execute(SQL["read_lease"], {"key": key}).fetchone()
        if row is not None and row["expires"] <= now:
            row = None
        if token is not None and (
            row is None or row["owner"] != token or row["lease_until"] <= now
        ):  # not (or no longer) the lease named: settled, lapsed or another's
            return "unknown"
        if row is not None and (
            row["owner"].startswith(CANCELLED_OWNER)
            or (
                (row["owner"] == "" or row["owner"].startswith(UNSENT_OWNER))
                and row["lease_until"] > now
            )  # acked
        ):
            return "unknown"
        running = row is not None and row["owner"] != "" and row["lease_until"] > now
        holder, until = (row["owner"], row["lease_until"]) if row and running else ("", 0.0)
        db.execute(
            SQL["cancel_lease"],
            {
                "key": key,
                "owner": CANCELLED_OWNER + holder,
                "expires": max(known["expires"], now + self.lifetimes.lease),
                "until": until,
            },
        )
        db.execute(SQL["finish_id"], {"key": id_key})
        db.execute(SQL["forget"], {"key": self.result_key(queue, id)})  # keeps none
        return "signalled" if running else "removed"

    def forget(self, messages: Sequence[tuple[str, str]]) -> None:
        self._write("forget", [{"key": self.lease_key(q, i)} for q, i in messages])

    def claim_ids(self, claims: Sequence[IdClaim]) -> list[bool]:
        now = time.time()
        expires = now + self.lifetimes.id
        return self._write(
            "claim_id",
            [
                {"key": self.id_key(q, i), "owner": owner, "expires": expires, "now": now}
                for q, i, owner in claims
            ],
        )

    def finish_ids(self, done: Sequence[IdFinish]) -> None:
        now = time.time()
        keep = [
            {"expires": now + d.keep, "key": self.id_key(d.queue, d.id), "owner": d.owner}
            for d in done
            if d.keep > 0
        ]
        drop = [{"key": self.id_key(d.queue, d.id), "owner": d.owner} for d in done if d.keep <= 0]
        self._write("keep_id", keep)
        self._write("drop_id", drop)

    # -- workflows (`FlowRecords`, sqlite_flows.py) ---------------------------------------
    def start_flow(self, record: FlowRecord) -> bool:
        with self._transaction(1) as db:
            return flows.start(db, self.namespace + record.id, record, time.time())

    def flow(self, flow_id: str) -> FlowRecord | None:
        with self._mutex:
            return flows.read(self._db, self.namespace + flow_id, time.time())

    def cancel_flow(self, flow_id: str) -> bool:
        with self._transaction(1) as db:
            return flows.cancel(db, self.namespace + flow_id, time.time())

    def group_value(self, flow_id: str, barrier: str) -> bytes | None:
        with self._mutex:
            return flows.group_value(self._db, self.namespace + flow_id, barrier, time.time())

    def view(self, queue: str, id: str) -> RecordView:
        params = {"lease": self.lease_key(queue, id), "id": self.id_key(queue, id)}
        with self._mutex:
            row = self._db.execute(SQL["view"], {**params, "now": time.time()}).fetchone()
        return RecordView(
            row["lease_owner"],
            float(row["lease_until"] or 0.0),
            int(row["receives"] or 0),
            int(row["fence"] or 0),
            read_progress(row["progress"] or ""),
            row["id_owner"],
            None if row["id_until"] is None else float(row["id_until"]),
        )

    def step_states(self, steps: Sequence[tuple[str, str]]) -> list[tuple[MessageState, int]]:
        now = time.time()
        with self._mutex:
            return [
                flows.step_state(
                    self._db,
                    self.namespace,
                    self.lease_key(queue, id),
                    self.id_key(queue, id),
                    f"{queue}:{id}",
                    now,
                )
                for queue, id in steps
            ]

    def resume_steps(self, steps: Sequence[tuple[str, str, str]]) -> None:
        if steps:
            now = time.time()
            with self._transaction(len(steps)) as db:
                for flow_id, queue, id in steps:
                    flows.resume(db, self.namespace, flow_id, queue, id, now)

    def claim_sends(self, queue: str, ids: Sequence[str], sender: str) -> list[bool]:
        if not ids:
            return []
        now = time.time()
        expires = now + self.lifetimes.id
        with self._transaction(len(ids)) as db:
            return [flows.claim_send(db, self.id_key(queue, i), sender, expires, now) for i in ids]

    def sent(self, queue: str, ids: Sequence[str], sender: str) -> None:
        if ids:
            with self._transaction(len(ids)) as db:
                for i in ids:
                    flows.mark_sent(db, self.id_key(queue, i), sender)

    def sends_made(self, queue: str, id: str) -> bool:
        now = time.time()
        key = self.lease_key(queue, id)
        claim = flows.SENDING + f"{queue}:{id}"
        with self._transaction(1) as db:
            row = db.execute(SQL["read_lease"], {"key": key}).fetchone()
            if row is None or row["expires"] <= now:
                return False
            sends = unsent_sends(row["owner"])
            if sends is None:
                return bool(row["owner"] == "")  # said sent meanwhile: an acked record
            for q, i in sends:
                known = db.execute(SQL["read_record"], {"key": self.id_key(q, i), "now": now})
                got = known.fetchone()
                if got is None or got["owner"] == claim:
                    return False  # never claimed, or claimed and perhaps not sent
            db.execute(SQL["steps_sent"], {"key": key, "unsent": UNSENT_OWNER})
            return True

    def steps_sent(self, messages: Sequence[tuple[str, str]]) -> None:
        if messages:
            with self._transaction(len(messages)) as db:
                for queue, id in messages:
                    params = {"key": self.lease_key(queue, id), "unsent": UNSENT_OWNER}
                    db.execute(SQL["steps_sent"], params)

    def close(self) -> None:
        with self._mutex:
            self._db.close()
