"""The execution record, kept apart from the backend: one JSON line per event.

A job appends to $TASUKI_CHAOS_LOG with O_APPEND, one write per line, so lines from many
processes never interleave, and a process killed mid-job leaves whole lines only. Each
line names the message, its attempt and fencing token, the process and the worker it
belongs to ($TASUKI_CHAOS_WORKER, inherited by a worker's child processes), and the time.
Besides a job's start and end, the file holds each lease a worker took (its `received`
event, which may come well before the run: a message taken ahead waits for a free
thread or child process), each lease extension with its new expiry, lost leases, the
stalls the sampler measured and the workers' own probe readings.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

import tasuki


def record(event: str, n: int, **fields: object) -> None:
    """A job's own start or end."""
    ctx = tasuki.current()
    note(
        event,
        n=n,
        id=ctx.message.id,
        attempt=ctx.attempt,
        fence=ctx.fencing_token,
        token=ctx.message.lease.token if ctx.message.lease else "",
        **fields,
    )


def note(event: str, **fields: object) -> None:
    """Any line of the record, stamped with its process, worker and time."""
    line = {
        "event": event,
        "pid": os.getpid(),
        "worker": os.environ.get("TASUKI_CHAOS_WORKER", "?"),
        "t": time.time(),
        **fields,
    }
    fd = os.open(os.environ["TASUKI_CHAOS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, orjson.dumps(line) + b"\n")
    finally:
        os.close(fd)


@dataclass
class Execution:
    """One run of one message: its start record, and its end record if it got there."""

    n: int
    id: str
    attempt: int
    fence: int
    worker: str
    pid: int
    started: float
    ended: float | None = None
    should_stop: bool = False
    stop_reason: str = ""
    got: list[int] | None = None  # what a chord's `gather` was given


class Records(list[dict[str, Any]]):
    """The parsed lines of a record, and how many whole lines did not parse.

    One write per line should make an unparsable line impossible; if one shows up, it may
    be a run's start, so the checker reports the count and the run fails on any.
    """

    unparsable: int = 0


def read(log: Path) -> Records:
    out = Records()
    if not log.exists():
        return out
    data = log.read_bytes()
    # A line without its newline yet is a write still under way (the runner reads while
    # workers append): it is neither a record nor a broken one.
    whole = data[: data.rfind(b"\n") + 1]
    for line in whole.splitlines():
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            out.unparsable += 1
    return out


def executions(log: Path | Records) -> dict[int, list[Execution]]:
    """Executions per message number, in start order; an end joins its start by fence."""
    runs: dict[int, list[Execution]] = {}
    open_: dict[tuple[str, int, int], Execution] = {}
    for r in read(log) if isinstance(log, Path) else log:
        if r["event"] not in ("start", "end"):
            continue
        key = (r["id"], r["fence"], r["pid"])
        if r["event"] == "start":
            e = Execution(r["n"], r["id"], r["attempt"], r["fence"], r["worker"], r["pid"], r["t"])
            e.got = r.get("got")
            runs.setdefault(r["n"], []).append(e)
            open_[key] = e
        elif r["event"] == "end" and key in open_:
            e = open_.pop(key)
            e.ended = r["t"]
            e.should_stop = bool(r.get("should_stop"))
            e.stop_reason = str(r.get("stop_reason") or "")
    for list_ in runs.values():
        list_.sort(key=lambda e: e.started)
    return runs


@dataclass
class Stall:
    """A worker process that could not run for a while, measured from outside it by the
    sampler (`tests.chaos.sampler`): stopped (`T`), in uninterruptible sleep (`D`), or
    runnable and waiting for a CPU (`runq`, `waited` seconds of it, kernel-accounted)."""

    worker: str
    pid: int
    start: float
    end: float
    kind: str = "runq"
    waited: float = 0.0

    @property
    def length(self) -> float:
        """How long it could not run: the kernel's run-queue wait, or the span stopped."""
        return self.waited if self.kind == "runq" else self.end - self.start


@dataclass
class Probe:
    """A late wake-up measured *inside* a worker (its probe thread): the process got no
    CPU or the thread no GIL. Printed for diagnosis; it explains nothing, since a worker
    whose own code holds the GIL would measure the stall it caused."""

    worker: str
    start: float
    end: float


@dataclass
class KeeperNote:
    """What a worker's lease keeper saw: an extension made late, or a lease lost."""

    event: str  # "late" or "lost"
    worker: str
    id: str
    fence: int
    t: float
    lag: float = 0.0


def stalls(records: Records) -> list[Stall]:
    return [
        Stall(r["worker"], r["pid"], r["from"], r["t"], r["kind"], r.get("waited", 0.0))
        for r in records
        if r["event"] == "stall"
    ]


def probes(records: Records) -> list[Probe]:
    return [Probe(r["worker"], r["from"], r["t"]) for r in records if r["event"] == "probe"]


def leases(records: Records) -> dict[str, list[tuple[float, int, str]]]:
    """When each message was leased, per message id: (time, attempt, worker), in time
    order, from the workers' `received` events (a lease taken ahead of its run too)."""
    out: dict[str, list[tuple[float, int, str]]] = {}
    for r in records:
        if r["event"] == "leased":
            out.setdefault(r["id"], []).append((r["t"], r["attempt"], r["worker"]))
    for taken in out.values():
        taken.sort()
    return out


def lease_expiries(records: Records) -> dict[tuple[str, int], float]:
    """The last known expiry of each lease (message id, fencing token) a keeper extended."""
    out: dict[tuple[str, int], float] = {}
    for r in records:
        if r["event"] == "extended":
            key = (r["id"], r["fence"])
            out[key] = max(out.get(key, 0.0), r["expires"])
    return out


def lease_floors(records: Records) -> dict[tuple[str, int], float]:
    """The earliest each lease a keeper extended can lapse: one lease from when its
    keeper last asked (a lower bound, where `lease_expiries` gives an upper one)."""
    out: dict[tuple[str, int], float] = {}
    for r in records:
        if r["event"] == "extended" and r.get("floor") is not None:
            key = (r["id"], r["fence"])
            out[key] = max(out.get(key, 0.0), r["floor"])
    return out


def keeper_notes(records: Records, late: float) -> list[KeeperNote]:
    """Extensions made `late` seconds or more after they were due, and leases lost."""
    return [
        KeeperNote(
            "late" if r["event"] == "extended" else "lost",
            r["worker"],
            r["id"],
            r["fence"],
            r["t"],
            r.get("lag", 0.0),
        )
        for r in records
        if r["event"] == "lost" or (r["event"] == "extended" and r["lag"] >= late)
    ]
