"""SQS's durable steps on a SQLite lock store (`StepRecords`, steps.py): three tables
beside the lease records in the lock database (`sqlite_steps.sql`), each call one
transaction of the lease records' connection, so the lease check and the write are one
atomic step."""

from __future__ import annotations

import time
from collections.abc import Sequence

from tasuki.backends.base import SignalStatus
from tasuki.backends.sqlfiles import load_queries
from tasuki.backends.sqs.records.sqlite import SQLiteLeaseRecords
from tasuki.backends.sqs.records.steps import (
    LIVE_WAITS,
    CopyCheck,
    Hidden,
    StepRecords,
    Verdict,
    Wake,
)
from tasuki.core.records import Receipt, StepRecord, Taken, Waiting

QUERY_NAMES = (
    "create_steps",
    "create_signals",
    "create_signals_index",
    "create_waits",
    "add_waits_handle",
    "waits_columns",
    "lease_current",
    "id_live",
    "read_steps",
    "put_step",
    "first_signal",
    "drop_signal",
    "put_signal",
    "read_wait",
    "put_wait",
    "set_wait",
    "put_handle",
    "count_hidden",
    "placed",
    "drop_steps",
    "drop_signals",
    "end_wait",
    "sweep_steps",
    "sweep_signals",
    "sweep_waits",
)
SQL = load_queries("tasuki.backends.sqs.records", "sqlite_steps.sql", QUERY_NAMES)
# Expired step records, signals and waits are swept every this many drops.
SWEEP_EVERY = 500


class SQLiteStepRecords(StepRecords):
    def __init__(self, records: SQLiteLeaseRecords) -> None:
        super().__init__()
        self.records = records
        self._drops = 0
        with records._transaction(0) as db:
            for name in ("create_steps", "create_signals", "create_signals_index", "create_waits"):
                db.execute(SQL[name])
            columns = {row["name"] for row in db.execute(SQL["waits_columns"]).fetchall()}
            if "handle" not in columns:
                db.execute(SQL["add_waits_handle"])

    def key(self, queue: str, id: str) -> str:
        return f"{self.records.namespace}steps:{queue}:{id}"

    def _expires(self, now: float) -> float:
        return now + self.records.lifetimes.id

    def steps(self, queue: str, id: str) -> list[StepRecord]:
        with self.records._transaction(0) as db:
            rows = db.execute(
                SQL["read_steps"], {"key": self.key(queue, id), "now": time.time()}
            ).fetchall()
        return [
            StepRecord(
                r["name"], r["occurrence"], bytes(r["result"]), r["started_at"], r["duration"]
            )
            for r in rows
        ]

    def _current(self, db: object, receipt: Receipt, now: float) -> bool:
        lease = self.records.lease_key(receipt.queue, receipt.id)
        row = db.execute(  # type: ignore[attr-defined]
            SQL["lease_current"], {"lease": lease, "token": receipt.token, "now": now}
        ).fetchone()
        return row is not None

    def record_step(self, receipt: Receipt, record: StepRecord) -> bool:
        now = time.time()
        with self.records._transaction(1) as db:
            if not self._current(db, receipt, now):
                return False
            db.execute(SQL["put_step"], self._step_row(receipt, record, now))
        return True

    def _step_row(self, receipt: Receipt, record: StepRecord, now: float) -> dict[str, object]:
        return {
            "key": self.key(receipt.queue, receipt.id),
            "name": record.name,
            "occurrence": record.occurrence,
            "result": record.result,
            "started_at": record.started_at,
            "duration": record.duration,
            "expires": self._expires(now),
        }

    def take_signal(self, receipt: Receipt, name: str, occurrence: int) -> Taken:
        now = time.time()
        key = self.key(receipt.queue, receipt.id)
        with self.records._transaction(1) as db:
            if not self._current(db, receipt, now):
                return Taken(False, None)
            row = db.execute(SQL["first_signal"], {"key": key, "name": name, "now": now}).fetchone()
            if row is None:
                return Taken(True, None)
            payload = bytes(row["payload"])
            db.execute(SQL["drop_signal"], {"seq": row["seq"]})
            record = StepRecord(f"tasuki:signal:{name}", occurrence, payload, now, 0.0)
            db.execute(SQL["put_step"], self._step_row(receipt, record, now))
        return Taken(True, payload)

    def signal(
        self, queue: str, id: str, name: str, payload: bytes
    ) -> tuple[SignalStatus, Wake | None]:
        now = time.time()
        key = self.key(queue, id)
        with self.records._transaction(1) as db:
            live = db.execute(
                SQL["id_live"], {"id": self.records.id_key(queue, id), "now": now}
            ).fetchone()
            if live is None:
                return "unknown", None
            db.execute(
                SQL["put_signal"],
                {"key": key, "name": name, "payload": payload, "expires": self._expires(now)},
            )
            wait = db.execute(SQL["read_wait"], {"key": key}).fetchone()
            if (
                wait is None
                or wait["state"] not in ("pending", "waiting")
                or wait["signal"] != name
                or not wait["entry"]
                or wait["until"] <= now  # its delayed copy is visible: it wakes the message
            ):
                return "delivered", None
            db.execute(
                SQL["set_wait"],
                {
                    "key": key,
                    "seq": wait["seq"],
                    "was": wait["state"],
                    "state": "answered",
                    "entry": wait["entry"],
                },
            )
        return "delivered", Wake(wait["seq"], wait["url"], wait["entry"], wait["handle"])

    def resent(self, queue: str, id: str, seq: int) -> None:
        with self.records._transaction(1) as db:
            db.execute(
                SQL["set_wait"],
                {
                    "key": self.key(queue, id),
                    "seq": seq,
                    "was": "answered",
                    "state": "resent",
                    "entry": "",
                },
            )

    def unhidden(self, queue: str, id: str, seq: int) -> None:
        with self.records._transaction(1) as db:
            db.execute(
                SQL["set_wait"],
                {
                    "key": self.key(queue, id),
                    "seq": seq,
                    "was": "answered",
                    "state": "ended",
                    "entry": "",
                },
            )

    def suspend(
        self, receipt: Receipt, signal: str, until: float, url: str, entry: str
    ) -> int | None:
        now = time.time()
        key = self.key(receipt.queue, receipt.id)
        with self.records._transaction(1) as db:
            if not self._current(db, receipt, now):
                return None
            if signal:
                stored = db.execute(
                    SQL["first_signal"], {"key": key, "name": signal, "now": now}
                ).fetchone()
                if stored is not None:
                    return 0
            row = db.execute(
                SQL["put_wait"],
                {
                    "key": key,
                    "signal": signal,
                    "until": until,
                    "url": url,
                    "entry": entry if signal else "",
                    "expires": max(self._expires(now), until + 3600),
                },
            ).fetchone()
        return int(row["seq"])

    def placed(self, waits: Sequence[tuple[str, str, int]]) -> None:
        if not waits:
            return
        with self.records._transaction(len(waits)) as db:
            for queue, id, seq in waits:
                db.execute(SQL["placed"], {"key": self.key(queue, id), "seq": seq})

    def void(self, waits: Sequence[tuple[str, str, int]]) -> None:
        if not waits:
            return
        with self.records._transaction(len(waits)) as db:
            for queue, id, seq in waits:
                db.execute(
                    SQL["set_wait"],
                    {
                        "key": self.key(queue, id),
                        "seq": seq,
                        "was": "pending",
                        "state": "void",
                        "entry": "",
                    },
                )

    def waiting(self, queue: str, id: str) -> Waiting | None:
        with self.records._transaction(0) as db:
            row = db.execute(SQL["read_wait"], {"key": self.key(queue, id)}).fetchone()
        if row is None or row["state"] != "waiting":
            return None
        return Waiting(row["signal"], row["until"])

    def admit(self, copies: Sequence[CopyCheck]) -> list[Verdict]:
        if not copies:
            return []
        now = time.time()
        out: list[Verdict] = []
        with self.records._transaction(len(copies)) as db:
            for copy in copies:
                key = self.key(copy.queue, copy.id)
                wait = db.execute(SQL["read_wait"], {"key": key}).fetchone()
                if wait is None or wait["seq"] < copy.seq:
                    out.append(Verdict(True))
                elif wait["seq"] > copy.seq and wait["state"] in ("pending", "void"):
                    # A later wait no copy carries: this copy is the message's own.
                    db.execute(
                        SQL["set_wait"],
                        {
                            "key": key,
                            "seq": wait["seq"],
                            "was": "pending",
                            "state": "void",
                            "entry": "",
                        },
                    )
                    out.append(Verdict(True))
                elif wait["seq"] > copy.seq or wait["state"] == "resent":
                    out.append(Verdict(False))
                elif (
                    copy.handle and wait["state"] in ("pending", "waiting") and wait["until"] > now
                ):
                    db.execute(
                        SQL["put_handle"], {"key": key, "seq": copy.seq, "handle": copy.handle}
                    )
                    out.append(Verdict(False, wait["until"]))
                else:
                    if copy.due and wait["state"] in ("pending", "waiting"):
                        db.execute(
                            SQL["set_wait"],
                            {
                                "key": key,
                                "seq": copy.seq,
                                "was": wait["state"],
                                "state": "ended",
                                "entry": "",
                            },
                        )
                    out.append(Verdict(True))
        return out

    def hidden(self, url: str) -> int:
        with self.records._transaction(0) as db:
            row = db.execute(SQL["count_hidden"], {"url": url, "now": time.time()}).fetchone()
        return int(row[0])

    def drop(self, messages: Sequence[tuple[str, str]]) -> list[Hidden]:
        if not messages:
            return []
        now = time.time()
        hidden: list[Hidden] = []
        with self.records._transaction(len(messages)) as db:
            for queue, id in messages:
                key = {"key": self.key(queue, id)}
                db.execute(SQL["drop_steps"], key)
                db.execute(SQL["drop_signals"], key)
                wait = db.execute(SQL["read_wait"], key).fetchone()
                if wait is not None and wait["handle"] and wait["state"] in LIVE_WAITS:
                    hidden.append(Hidden(wait["url"], wait["handle"]))
                db.execute(SQL["end_wait"], key)
            self._drops += len(messages)
            if self._drops >= SWEEP_EVERY:
                self._drops = 0
                for name in ("sweep_steps", "sweep_signals", "sweep_waits"):
                    db.execute(SQL[name], {"now": now})
        return hidden
